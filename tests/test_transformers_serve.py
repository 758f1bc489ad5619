"""``autoforge eval --agent openai:MODEL --user llm:MODEL`` against a real ``transformers serve`` on 127.0.0.1.

The served model is AutoForge's tiny policy (autoforge.rl.policy.build_tiny_policy: local BPE + a 1-layer Llama),
taught by a few SFT steps (autoforge.rl.trainer.sft) one gold-style turn pair of the mock shop's cancel task: a
find_user_id_by_email call, then "Done". Its chat template is the Hermes one of autoforge.rl.chat; the server
parses the <tool_call> blocks into native OpenAI ``tool_calls`` because the model directory's tokenizer carries
the response template autoforge.integrations.trl.add_response_template writes (a Llama model gets none from the
server's own per-architecture fallbacks). Nothing here is a stub: the agent and the user are the OpenAI client
talking to transformers' server, which generates with the model.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_rollout_support import make_env, make_tools, tasks_and_dags

from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import InjectionPlan, flip_roles, user_prompt
from autoforge.types import Episode, LLMCall, Message, ToolCall
from autoforge.warehouse import read_records, write_records

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
FINAL = "Done: your request has been completed."
THANKS = "Great, thanks! ###STOP###"


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    """The mock shop's three curated tasks; only task_cancel is in the train split (what the eval plays)."""
    from autoforge.warehouse import apply_migrations

    path = str(tmp_path_factory.mktemp("serve") / "wh.duckdb")
    apply_migrations(path)
    tasks, dags = tasks_and_dags()
    tasks = [t.model_copy(update={"split": "train" if t.task_id == "task_cancel" else "test"}) for t in tasks]
    write_records(path, [make_env(), *make_tools(), *dags.values(), *tasks])
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """The tiny policy after 50 SFT steps on one dialogue: [request] -> find_user_id_by_email -> [result] -> FINAL
    (the agent's side) and -> THANKS (the simulated user's side)."""
    from autoforge.envs.runtime import Environment
    from autoforge.integrations.trl import add_response_template
    from autoforge.rl.checkpoint import save_model_dir
    from autoforge.rl.config import TrainConfig
    from autoforge.rl.policy import build_tiny_policy, encode_episode, load_policy
    from autoforge.rl.trainer import set_seed, sft

    root = tmp_path_factory.mktemp("policy")
    tools = make_tools()
    schemas = tool_schemas(tools)  # what `autoforge eval` hands the agent (the mock warehouse has no tool specs)
    task = next(t for t in tasks_and_dags()[0] if t.task_id == "task_cancel")
    call = ToolCall(name="find_user_id_by_email", arguments={"email": task.user_facts["email"]}, id="call_1_0")
    with Environment(tools, env_id=task.env_id) as env:
        env.reset(task.initial_state)
        observation = env.call(call.name, call.arguments).to_text()
    dialogue = [Message(role="system", content=DEFAULT_SYSTEM_PROMPT), Message(role="user", content=task.request),
                Message(role="assistant", content="", tool_calls=[call]),
                Message(role="tool", content=observation, tool_call_id=call.id, name=call.name),
                Message(role="assistant", content=FINAL)]
    # ... and the simulated user's side as LLMUser renders it (its prompt, the dialogue with roles flipped): it thanks
    # the agent and stops. Without it the model rambles as the user until the server's 1,024-token default.
    user_side = [Message(role="system", content=user_prompt(task, InjectionPlan(), random.Random(0))),
                 *[Message(**m) for m in flip_roles(dialogue)], Message(role="assistant", content=THANKS)]
    corpus = [json.dumps(schemas), DEFAULT_SYSTEM_PROMPT] * 10 + [m.content for m in dialogue + user_side] * 10
    policy = load_policy(build_tiny_policy(root / "init", corpus, vocab_size=3000, hidden_size=64, num_layers=1,
                                           num_heads=4, max_positions=4096), device="cpu")
    cfg = TrainConfig(device="cpu", seed=0, sft_epochs=50, sft_lr=6e-3, sft_batch_size=2, micro_batch_size=2,
                      sft_schedule="constant", checkpoint_dir=str(root / "ck"), checkpoint_every=10**9)
    set_seed(0)
    examples = [encode_episode(policy.tokenizer, dialogue, schemas), encode_episode(policy.tokenizer, user_side)]
    history = sft(policy, examples, cfg)
    assert history[-1]["loss"] < 0.1, history[-1]
    policy.model.eval()
    out = save_model_dir(root / "served", policy.model, policy.tokenizer)
    return str(add_response_template(out))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    """``transformers serve MODEL_DIR`` on a free 127.0.0.1 port (stopped after the module)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with open(log, "w") as fh:
        proc = subprocess.Popen([str(BIN / "transformers"), "serve", model_dir, "--host", "127.0.0.1", "--port",
                                 str(port), "--device", "cpu", "--dtype", "float32"], stdout=fh,
                                stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not come up (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield url + "/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_eval_through_transformers_serve_with_native_tool_calls(wh, model_dir, server, monkeypatch, capsys):
    from autoforge.cli import main

    monkeypatch.setenv("AUTOFORGE_OPENAI_BASE_URL", server)
    monkeypatch.setenv("AUTOFORGE_OPENAI_API_KEY", "EMPTY")
    monkeypatch.setenv("AUTOFORGE_LLM_TIMEOUT", "300")  # a loaded CI machine: CPU generation can be slow
    capsys.readouterr()
    rc = main(["eval", "--warehouse", wh, "--agent", f"openai:{model_dir}", "--user", f"llm:{model_dir}",
               "--split", "train", "--max-turns", "3", "--concurrency", "1", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.out[-2000:] + out.err[-3000:]
    summary = json.loads(out.out[out.out.index("{"):])
    assert summary["agent"] == f"openai:{model_dir}" and summary["user_sim"] == f"llm:{model_dir}"
    assert summary["n_episodes"] == 1 and summary["n_unscored"] == 0

    # The transcript: the model's call came back as a native tool call and ran in the sandbox
    (ep,) = read_records(wh, Episode, where="eval_id = :e", params={"e": summary["eval_id"]})
    assert ep.task_id == "task_cancel" and ep.reward == 0.0  # a read only: the order is not cancelled
    first = ep.messages[2]
    assert first.role == "assistant" and [c.name for c in first.tool_calls] == ["find_user_id_by_email"]
    assert first.tool_calls[0].arguments == {"email": "ava.chen@example.com"}
    assert "<tool_call>" not in first.content  # parsed by the server, not by AutoForge's Hermes fallback
    tool_msg = ep.messages[3]
    assert tool_msg.role == "tool" and json.loads(tool_msg.content) == {"user_id": "U0001"}
    assert tool_msg.tool_call_id == first.tool_calls[0].id
    # turn 2: the model answers in text (the server re-renders turn 1 as a whole, so the words may differ a little
    # from the trained FINAL); then the LLM user, generated by the same server, ends the episode
    second = ep.messages[4]
    assert second.role == "assistant" and second.content.startswith("Done") and not second.tool_calls
    assert ep.messages[5].role == "user" and "###STOP###" in ep.messages[5].content
    assert ep.termination == "user_stop" and len(ep.messages) == 6

    # llm_calls: every request of the agent and the user, with the server's answer
    calls = read_records(wh, LLMCall, where="run_id = :r", params={"r": summary["run_id"]})
    calls = calls or read_records(wh, LLMCall, where="model = :m", params={"m": model_dir})
    by_step = {s: [c for c in calls if c.step == s] for s in ("agent", "user_sim")}
    assert by_step["agent"] and by_step["user_sim"], sorted({c.step for c in calls})
    assert all(c.outcome == "ok" and c.backend == "openai" and c.model == model_dir for c in calls)
    assert all(c.tokens_in and c.tokens_out and c.latency_ms > 0 for c in calls)
    native = by_step["agent"][0] if by_step["agent"][0].response["tool_calls"] else next(
        c for c in by_step["agent"] if c.response["tool_calls"])
    assert native.response["finish_reason"] == "tool_calls"
    assert native.response["tool_calls"][0]["name"] == "find_user_id_by_email"
    assert native.prompt[-1]["role"] == "user" and native.prompt[0]["content"] == DEFAULT_SYSTEM_PROMPT
    user_call = by_step["user_sim"][0]
    assert user_call.prompt[0]["role"] == "system" and "simulating a user" in user_call.prompt[0]["content"]
    print("\nllm_calls through transformers serve: " + "; ".join(
        f"{c.step} in={c.tokens_in} out={c.tokens_out} {c.latency_ms:.0f} ms"
        for c in sorted(calls, key=lambda c: c.created_at)))
