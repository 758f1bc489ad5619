"""TRL over AutoForge environments (autoforge.integrations.trl): tools as methods with the tools' JSON schemas,
reset / get_reward / user-error masking, ERPO's advantages inside TRL, and two real GRPOTrainer steps."""

from __future__ import annotations

import inspect
import json
import math
import os
import time

import pytest
import torch

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
pytest.importorskip("trl")

from transformers.utils import get_json_schema  # noqa: E402

from autoforge import dialogue as D  # noqa: E402
from autoforge.errors import ConfigError  # noqa: E402
from autoforge.integrations.rows import task_rows  # noqa: E402
from autoforge.integrations.trl import (TRL_SYSTEM_PROMPT, USER_TOOL, ERPOTrainer, TRLEnvironments,  # noqa: E402
                                        add_response_template, batch_advantages)
from autoforge.rl.erpo import compute_advantages  # noqa: E402
from autoforge.rollout.users import ErrorRates  # noqa: E402
from autoforge.types import Task  # noqa: E402
from autoforge.warehouse import read_records  # noqa: E402


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    """Two bundled environments (airline, banking) through the whole factory: curated tasks of both."""
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.warehouse import apply_migrations

    path = str(tmp_path_factory.mktemp("trl") / "wh.duckdb")
    apply_migrations(path)
    run_factory(FactoryParams(max_envs=2, tasks_per_env=6, seed=0, warehouse=path))
    return path


@pytest.fixture(scope="module")
def rows(wh):
    rows = task_rows(wh, system_prompt=TRL_SYSTEM_PROMPT)
    assert len({r.env_name for r in rows}) == 2, "the fixture needs curated tasks of two environments"
    return rows


def _task(wh, task_id) -> Task:
    return read_records(wh, Task, where="task_id = :t", params={"t": task_id})[0]


def test_tools_are_methods_with_the_tools_json_schema(wh, rows):
    envs = TRLEnvironments(wh, rows)
    try:
        for name, cls in envs.factories.items():
            schemas = next(r.tools for r in rows if r.env_name == name)
            # What TRL exposes: the public functions of the class, minus reset / get_reward
            members = {n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")}
            assert members == {s["function"]["name"] for s in schemas} | {"reset", "get_reward", USER_TOOL}
            n_exact = 0
            for s in schemas:
                want = s["function"]
                got = get_json_schema(getattr(cls, want["name"]))["function"]  # how transformers renders the tool
                assert got["name"] == want["name"]
                assert got["description"] == " ".join(want["description"].split())
                params = want["parameters"]
                assert set(got["parameters"]["properties"]) == set(params.get("properties", {}))
                assert set(got["parameters"].get("required", [])) == set(params.get("required", []))
                for p, sub in params.get("properties", {}).items():
                    seen = dict(got["parameters"]["properties"][p])
                    desc = seen.pop("description")
                    bare = {k: v for k, v in sub.items() if k != "description"}
                    if seen == bare:  # the type hint says all of it (types, enums, arrays)
                        n_exact += 1
                        assert "JSON Schema:" not in desc
                    else:  # pattern, format, bounds, nested objects: the schema travels in the description
                        assert json.loads(desc.split(" JSON Schema: ", 1)[1]) == bare
            assert n_exact > 0
        # the enum of airline's cancel_reservation is a real JSON-schema enum, not prose
        cancel = get_json_schema(envs.factories["airline"].cancel_reservation)["function"]["parameters"]
        assert cancel["properties"]["reason"]["enum"] == ["change of plan", "airline cancelled flight", "other"]
    finally:
        envs.close()


def test_reset_gold_calls_reward_and_user_error_masking(wh, rows):
    envs = TRLEnvironments(wh, rows)
    try:
        row = next(r for r in rows if r.env_name == "airline" and r.kind == "state")
        task = _task(wh, row.task_id)
        env = envs.factories["airline"]()
        ds_row = next(x for x in envs.dataset() if x["task_id"] == row.task_id)
        # the dataset's user turn is empty: reset supplies the opening request (TRL appends it)
        assert ds_row["prompt"][-1] == {"role": "user", "content": ""}
        assert env.reset(**ds_row) == row.request
        # a task_rows / --format hf row already ends with the request: reset does not repeat it
        assert env.reset(task_id=row.task_id, prompt=[m.model_dump() for m in row.prompt]) is None
        assert env.get_reward() == 0.0  # nothing done: the state is not S*
        for call in task.gold_calls:  # TRL calls tools as keyword arguments
            out = getattr(env, call.name)(**call.arguments)
            assert "error" not in json.loads(out), out
        assert env.get_reward() == 1.0 and env.last_reward_info["state_match"] is True
        env.reset(**ds_row)  # a fresh copy of the initial state
        assert env.get_reward() == 0.0
        # a bad call is an observation, never an exception
        assert "invalid arguments" in json.loads(env.cancel_reservation(reservation_id="nope", reason="other"))["error"]
        with pytest.raises(ConfigError, match="not one of its"):
            env.reset(task_id="task_unknown")
    finally:
        envs.close()

    # The user answers through talk_to_user; an injected wrong fact is flagged by the rule judge -> reward None
    fact_row = next(r for r in rows if r.user_facts)
    key = sorted(fact_row.user_facts)[0]
    masked = TRLEnvironments(wh, rows, user_error_rate=ErrorRates(wrong_fact=1.0))
    try:
        env = masked.factories[fact_row.env_name]()
        env.reset(task_id=fact_row.task_id)
        reply = env.talk_to_user(f"To take care of this I need a few details. Could you please tell me:\n- "
                                 f"{D.fact_words(key)}")
        assert D.fact_words(key) in reply and not D.states_value(reply, fact_row.user_facts[key])
        assert env.get_reward() is None
        info = env.last_reward_info
        assert info["judge"]["flag"] is True and info["judge"]["kind"] == "wrong_fact"
        assert "MEU" in info["unscored_reason"]
        # after the user ends the conversation, tools no longer run
        env.reset(task_id=fact_row.task_id)
        assert D.STOP in env.talk_to_user("All done, your request has been completed.")
        assert "ended the conversation" in json.loads(getattr(env, fact_row.tools[0]["function"]["name"])())["error"]
    finally:
        masked.close()


def test_answer_task_is_scored_on_the_final_message(wh, rows):
    """An answer task: S* == S and the rollout's last assistant text (ERPOTrainer hands it over) states the answer;
    under a plain GRPOTrainer the last message sent through talk_to_user counts."""
    from autoforge.types import GoldAnswer, state_hash
    from autoforge.warehouse import write_records

    base = next(r for r in rows if r.env_name == "banking")
    task = _task(wh, base.task_id)
    answer = task.model_copy(update={  # status generated: not curated, so the other tests' task_rows do not see it
        "task_id": "task_answer_trl", "kind": "answer", "status": "generated", "gold_state": task.initial_state,
        "gold_state_hash": state_hash(task.initial_state), "gold_answer": GoldAnswer(value=1234.5, kind="number")})
    write_records(wh, [answer])
    row = base.model_copy(update={"task_id": answer.task_id, "kind": "answer"})
    envs = TRLEnvironments(wh, [row])
    try:
        env = envs.factories["banking"]()
        env.reset(task_id=row.task_id)
        env._set_final_message("The total comes to 1234.50.")
        assert env.get_reward() == 1.0 and env.last_reward_info["answer_match"] is True
        env._set_final_message("The total comes to 99.")
        assert env.get_reward() == 0.0 and env.last_reward_info["answer_match"] is False
        env.reset(task_id=row.task_id)  # no final message handed over: what it last told the user
        env.talk_to_user("The answer is 1234.5.")
        assert env.get_reward() == 1.0
    finally:
        envs.close()


def test_environments_run_from_a_bundle_with_no_warehouse(wh, rows, tmp_path):
    """TRLEnvironments over an environment bundle (issue 35; the warehouse copy it was written from deleted): the
    same rows, the same tools, and the same rewards as over the warehouse; talk_to_user's schema is the bundle's."""
    import shutil

    from autoforge.integrations.bundle import USER_TOOL_SCHEMA, Bundle, write_bundle

    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(wh, copy)
    write_bundle(str(copy), "v_curated_tasks", tmp_path / "bundle")
    copy.unlink()
    bundle = Bundle.load(tmp_path / "bundle")
    brows = sorted(bundle.task_rows(system_prompt=TRL_SYSTEM_PROMPT), key=lambda r: r.task_id)
    assert [r.model_dump(exclude={"n_checks_passed"}) for r in brows] == \
        [r.model_dump(exclude={"n_checks_passed"}) for r in sorted(rows, key=lambda r: r.task_id)]
    from_wh, from_bundle = TRLEnvironments(wh, rows), TRLEnvironments(bundle, brows)
    try:
        assert from_bundle.factories.keys() == from_wh.factories.keys()
        for name in from_bundle.factories:
            a, b = from_wh.factories[name](), from_bundle.factories[name]()
            seen = get_json_schema(b.talk_to_user)["function"]
            assert {k: v for k, v in seen.items() if k != "return"} == USER_TOOL_SCHEMA["function"]
            for r in [r for r in brows if r.env_name == name][:3]:
                got = []
                for env in (a, b):
                    env.reset(task_id=r.task_id)
                    first = env.get_reward()
                    for call in _task(wh, r.task_id).gold_calls:
                        getattr(env, call.name)(**call.arguments)
                    env._set_final_message(None if r.gold_answer is None else f"It is {r.gold_answer['value']}.")
                    got.append((first, env.get_reward()))
                assert got[0] == got[1], (r.task_id, got)
                assert got[1] == (0.0, 1.0) or r.kind != "state", (r.task_id, got)
    finally:
        from_wh.close()
        from_bundle.close()


def test_batch_advantages_equal_compute_advantages_on_the_worked_example():
    # docs/design.md#worked-example (env A: a1 [1,0,0,1], a2 [1,1,0] + one masked rollout) plus env B: b1 [1,0,0,0].
    # Two reward columns as TRL builds them (one per environment class; NaN where a column does not apply), the
    # masked rollout NaN in both: every column None for it = judge-flagged.
    nan = math.nan
    a = [1, 0, 0, 1, 1, 1, 0, nan]
    b = [1, 0, 0, 0]
    table = torch.tensor([[r, nan] for r in a] + [[nan, r] for r in b])
    tasks = ["a1"] * 4 + ["a2"] * 4 + ["b1"] * 4
    envs = ["A"] * 8 + ["B"] * 4
    adv, kept, info = batch_advantages(table, torch.ones(2), tasks, envs)
    valid = [True] * 7 + [False] + [True] * 4
    want = compute_advantages([0 if math.isnan(x) else x for x in a + b], tasks, envs, valid)
    assert want[7] is None and kept.tolist() == [w is not None for w in want]
    assert adv.tolist() == pytest.approx([0.0 if w is None else w for w in want], rel=1e-6)
    # env A's std is pooled over its 7 valid rewards: sqrt(4/7 * 3/7) = 0.4949 -> a1 success +0.5/0.4949 = +1.0104
    assert info.scale["A"] == pytest.approx(math.sqrt(12) / 7) and adv[0].item() == pytest.approx(1.0104, abs=1e-4)
    # env B has one task: its std is that task's, sqrt(.25 * .75) = 0.4330 -> b1 success +0.75/0.4330 = 1.7321
    assert adv[8].item() == pytest.approx(0.75 / math.sqrt(0.1875), rel=1e-5)
    # dynamic sampling: a task whose rollouts all score the same is dropped (advantage 0, out of the loss)
    adv2, kept2, info2 = batch_advantages(torch.tensor([[1.0], [1.0], [0.0], [1.0]]), torch.ones(1),
                                          ["t1", "t1", "t2", "t2"], ["E"] * 4)
    assert kept2.tolist() == [False, False, True, True] and info2.dropped_tasks == ["t1"]
    assert adv2.tolist() == pytest.approx([0.0, 0.0, -1.0, 1.0], abs=1e-5)  # t2 alone sets the pooled std (0.5)


def test_add_response_template_reads_hermes_tool_calls(tmp_path):
    from autoforge.rl.policy import build_tokenizer

    tok = add_response_template(build_tokenizer(["find the order O0001 of ava@example.com"] * 5, vocab_size=300))
    prefix = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    text = ('<think>look it up</think>\n<tool_call>\n{"name": "get_order", "arguments": {"order_id": "O0001"}}\n'
            '</tool_call><|im_end|>')
    parsed = tok.parse_response(tok(text, add_special_tokens=False)["input_ids"], prefix=prefix)
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "get_order",
                                                                      "arguments": {"order_id": "O0001"}}}]
    assert parsed["content"] == "<think>look it up</think>"  # interleaved thinking stays in the text
    tok.save_pretrained(tmp_path)
    before = (tmp_path / "tokenizer.json").read_bytes()
    cfg = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del cfg["response_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert add_response_template(tmp_path) == tmp_path  # a model directory: only tokenizer_config.json changes
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["response_template"]["fields"]["tool_calls"]
    assert (tmp_path / "tokenizer.json").read_bytes() == before
    tok.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(ConfigError, match="does not render Hermes"):
        add_response_template(tok)


@pytest.mark.slow
def test_erpo_trainer_two_real_trl_steps_over_two_environments(wh, tmp_path):
    from trl import GRPOConfig

    from autoforge.rl.policy import build_tiny_policy, load_policy

    rows = task_rows(wh, split="train", system_prompt=TRL_SYSTEM_PROMPT, tool_schema="compact")
    picked = [r for name in sorted({r.env_name for r in rows}) for r in [x for x in rows if x.env_name == name][:2]]
    assert len({r.env_name for r in picked}) == 2
    corpus = [r.system_prompt + "\n" + r.request + "\n" + json.dumps(r.tools) for r in picked] * 3
    policy = load_policy(build_tiny_policy(tmp_path / "tiny", corpus, vocab_size=2000, hidden_size=64, num_layers=2,
                                           num_heads=4, max_positions=8192), device="cpu")
    envs = TRLEnvironments(wh, picked)

    def length_parity(completions, **_):
        """A stand-in reward with variance (the untrained policy solves nothing), so the advantages are not all 0."""
        return [0.1 * (len(str(c)) % 3) for c in completions]

    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=16, max_tool_calling_iterations=2, learning_rate=1e-3, logging_steps=1,
                      save_strategy="no", report_to="none", use_cpu=True, bf16=False, seed=0,
                      gradient_checkpointing=False, dataloader_num_workers=0)
    trainer = ERPOTrainer(model=policy.model, args=args, processing_class=add_response_template(policy.tokenizer),
                          train_dataset=envs.dataset(), environment_factory=envs.factories,
                          reward_funcs=[length_parity])
    # ERPOTrainer renders the AutoForge tools with their exact schemas (the rows'), talk_to_user from its method
    for name in ("airline", "banking"):
        shown = trainer._env_tools[name]
        row_tools = next(r.tools for r in picked if r.env_name == name)
        assert [t for t in shown if isinstance(t, dict)] == row_tools
        assert [t.__name__ for t in shown if not isinstance(t, dict)] == [USER_TOOL]
    before = {n: p.detach().clone() for n, p in policy.model.named_parameters()}
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        trainer.train()
    finally:
        envs.close()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(h["loss"]) and math.isfinite(h["reward"]) for h in logs)
    # one reward column per AutoForge environment (get_reward), alongside the stand-in
    assert {"rewards/AutoForge_airline/mean", "rewards/AutoForge_banking/mean"} <= set(logs[0])
    assert any(not torch.equal(before[n], p) for n, p in policy.model.named_parameters())
    # ERPO inside TRL: the last batch's advantages are autoforge.rl.erpo.compute_advantages of its rewards
    last = trainer.last_erpo
    table = last["rewards_per_func"]
    valid = (~torch.isnan(table).all(dim=1)).tolist()
    summed = (table * trainer.reward_weights.unsqueeze(0)).nansum(dim=1).tolist()
    rewards = [s if v else 0.0 for s, v in zip(summed, valid)]
    want = compute_advantages(rewards, last["task_ids"], last["env_ids"], valid)
    assert last["advantages"].tolist() == pytest.approx([0.0 if w is None else w for w in want], abs=1e-6)
    assert any(w is not None and w != 0 for w in want)
    print(f"\nTRL 2 steps: loss {[h['loss'] for h in logs]}, grad_norm {[round(h['grad_norm'], 3) for h in logs]}, "
          f"reward {[round(h['reward'], 4) for h in logs]}, "
          f"AutoForge reward {[{k: v for k, v in h.items() if k.startswith('rewards/AutoForge')} for h in logs]}, "
          f"wall {wall:.1f} s, cpu {cpu:.1f} s")
