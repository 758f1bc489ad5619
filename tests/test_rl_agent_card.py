"""agent.json: every checkpoint records how its training run played and evaluated the policy, and
``autoforge eval --agent hf:CKPT --recorded-tasks`` reproduces that evaluation exactly (issue 34)."""

from __future__ import annotations

import json

import pytest

from autoforge.errors import ConfigError
from autoforge.pipeline.evaluate import EvalParams, recorded_params, recorded_tools
from autoforge.rl.agent_card import AGENT_CARD, AgentCard, read_agent_card, write_agent_card
from autoforge.rl.config import TrainConfig
from autoforge.warehouse import query

from test_rl_run import ENV, one_thread, wh  # noqa: F401  (the same one-environment factory and one torch thread)


def _card(**kw) -> dict:
    base = dict(format="autoforge-agent", version=1, train_run_id="train-x", system_prompt="You are ...",
                tool_schema="brief", prompt_tools="used", tools={"env-a": ["find_user"]}, max_new_tokens=80,
                max_turns=6, max_episode_tokens=300, temperature=0.0, trials=1, seed=3, concurrency=8,
                eval_task_ids=["t1", "t2"])
    base.update(kw)
    return base


def test_a_tiny_run_is_evaluated_again_by_the_eval_command_with_the_same_numbers(wh, tmp_path, capsys, monkeypatch):
    """A tiny training run (SFT + 1 ERPO step, brief tool schema, only the used tools, seed 3, 6-turn limit:
    nothing the eval defaults would pick), then `autoforge eval --agent hf:<final checkpoint> --recorded-tasks`:
    the same tasks, per-environment and overall pass^1 and terminations as the run's own end-of-run
    evaluation, and token for token the same episodes (what the policy read and what it wrote)."""
    from autoforge.cli import main
    from autoforge.pipeline.train import run_training
    from autoforge.rl.agent import HFAgent

    seqs: dict[tuple[str, str, int], list[int]] = {}  # (agent name, task, episode seed) -> the episode's token ids
    act = HFAgent.act

    def recording_act(self, messages):
        turn = act(self, messages)
        seqs[(self.name, self.ctx.task_id, self.ctx.seed)] = list(self.builder.token_ids)
        return turn

    monkeypatch.setattr(HFAgent, "act", recording_act)
    ckdir = tmp_path / "ckpt"
    cfg = TrainConfig(tiny_vocab_size=600, tiny_hidden_size=32, tiny_num_layers=2, tiny_num_heads=2, device="cpu",
                      envs=[ENV], max_tool_calls=3, prompt_tools="used", tool_schema="brief", max_train_tasks=6,
                      max_eval_tasks=5, tasks_per_batch=2, rollouts_per_task=2, max_turns=6, max_new_tokens=16,
                      max_episode_tokens=60, steps=1, lr=1e-2, micro_batch_size=4, sft_epochs=1, sft_batch_size=4,
                      sft_max_examples=8, checkpoint_dir=str(ckdir), checkpoint_every=1, eval_at=["end"],
                      rollout_concurrency=3, seed=3, torch_threads=1)
    out = run_training(wh, cfg, out_dir=tmp_path / "out")
    final = out["checkpoint"]
    assert final and final.endswith("erpo-000001")

    # every checkpoint folder holds the run's card, stamped with its own phase and step
    folders = sorted(p for p in ckdir.iterdir() if p.is_dir() and p.name.split("-")[0] in ("sft", "erpo"))
    assert [p.name.split("-")[0] for p in folders] == ["erpo", "sft"]
    for folder in folders:
        card = json.loads((folder / AGENT_CARD).read_text())
        assert card["checkpoint"] == {"phase": folder.name.split("-")[0], "step": int(folder.name.split("-")[1])}
        assert card["train_run_id"] == out["train_run_id"]
        assert (card["tool_schema"], card["prompt_tools"], card["max_new_tokens"], card["max_turns"],
                card["max_episode_tokens"], card["seed"], card["concurrency"]) == ("brief", "used", 16, 6, 60, 3, 3)
        assert (card["user"], card["user_error_rate"], card["judge"], card["judged_rules"]) == ("offline", 0.0, "none",
                                                                                                True)
        assert len(card["eval_task_ids"]) == out["data"]["test_tasks"] >= 2
    assert not list(ckdir.glob("**/.agent.json.tmp"))
    card = read_agent_card(final)
    tools = query(wh, "SELECT count(*) AS n FROM tool_code WHERE status = 'accepted'")[0]["n"]
    assert 0 < sum(len(v) for v in card.tools.values()) < tools  # only the tools the run's tasks use

    assert main(["eval", "--warehouse", wh, "--agent", f"hf:{final}", "--recorded-tasks", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    end = out["evals"]["end"]
    assert summary["n_tasks"] == end["n_tasks"] and summary["n_episodes"] == end["n_episodes"]
    assert summary["success_rate"] == end["success_rate"]
    per_env = {r["env_id"]: r["pass_hat_k"] for r in summary["results"] if r["k"] == 1 and r["env_id"]}
    assert per_env == end["per_env"] and per_env
    assert summary["terminations"] == end["terminations"]
    assert summary["agent_card"]["applied"]["seed"] == 3 and summary["agent_card"]["explicit"] == []
    assert summary["agent_card"]["recorded_tasks"] == end["n_tasks"]

    # the same episodes, token for token: the same prompt (system, tools shown), decoding, user and limits
    def episodes(agent: str) -> dict:
        return {(k[1], k[2]): v for k, v in seqs.items() if k[0] == agent}

    trained, again = episodes(f"hf:{out['train_run_id']}:end"), episodes(f"hf:{final}")
    assert len(trained) == end["n_episodes"] and again == trained

    # as a plain model (the eval defaults: all tools as full JSON Schemas) the policy reads another prompt
    seqs.clear()
    assert main(["eval", "--warehouse", wh, "--agent", f"hf:{final}", "--no-agent-card", "--recorded-tasks"]) == 2
    assert "agent_card is off" in capsys.readouterr().err
    assert main(["eval", "--warehouse", wh, "--agent", f"hf:{final}", "--no-agent-card", "--split", "test",
                 "--limit", "1", "--seed", "3", "--max-turns", "1", "--max-new-tokens", "4", "--json"]) == 0
    assert "agent_card" not in json.loads(capsys.readouterr().out)
    [(key, plain)] = [((k[1], k[2]), v) for k, v in seqs.items()]
    assert len(plain) > len(trained[key])  # every tool of the environment, in full: a longer prompt

    # a flag given on the command line wins over the card; the rest still comes from it
    assert main(["eval", "--warehouse", wh, "--agent", f"hf:{final}", "--recorded-tasks", "--max-turns", "1",
                 "--limit", "1"]) == 0
    text = capsys.readouterr().out
    assert "from the command line: max_turns" in text and "tool_schema=brief" in text and "agent.json" in text


def test_recorded_params_fill_only_the_fields_not_set_explicitly():
    card = AgentCard.model_validate(_card())
    p, applied = recorded_params(EvalParams(agent="hf:x", trials=2, tool_schema="full"), card)
    assert (p.trials, p.tool_schema) == (2, "full")  # explicit: kept
    assert (p.max_turns, p.max_tokens, p.max_new_tokens, p.seed, p.judge, p.concurrency) == (6, 300, 80, 3, "none", 8)
    assert "trials" not in applied and applied["max_tokens"] == 300
    from autoforge.types import ToolCode

    def tool(name, env):
        return ToolCode(code_id=f"c-{name}", tool_id=f"t-{name}", env_id=env, name=name, source="", status="accepted")

    by_env = {"env-a": [tool("find_user", "env-a"), tool("delete_user", "env-a")], "env-b": [tool("x", "env-b")]}
    shown = recorded_tools(by_env, card)
    assert [t.name for t in shown["env-a"]] == ["find_user"] and [t.name for t in shown["env-b"]] == ["x"]


@pytest.mark.parametrize("text, says", [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps(_card(max_turns=0)), "field 'max_turns'"),
    (json.dumps({k: v for k, v in _card().items() if k != "eval_task_ids"}), "field 'eval_task_ids'"),
    (json.dumps(_card(tool_schema="tiny")), "field 'tool_schema'"),
    (json.dumps(_card(version=99)), "newer"),
])
def test_a_malformed_card_is_one_line_naming_the_file(tmp_path, text, says):
    (tmp_path / AGENT_CARD).write_text(text)
    with pytest.raises(ConfigError) as err:
        read_agent_card(tmp_path)
    msg = str(err.value)
    assert says in msg and str(tmp_path / AGENT_CARD) in msg and "\n" not in msg


def test_a_card_is_written_atomically_and_a_plain_model_dir_has_none(tmp_path):
    assert read_agent_card(tmp_path) is None
    write_agent_card(tmp_path / "ck", _card())
    assert read_agent_card(tmp_path / "ck").seed == 3
    assert [p.name for p in (tmp_path / "ck").iterdir()] == [AGENT_CARD]


def test_recorded_tasks_need_a_card(wh, tmp_path):
    from autoforge.pipeline.evaluate import run_eval

    with pytest.raises(ConfigError, match="recorded_tasks .* needs an hf:<checkpoint> agent"):
        run_eval(wh, agent="oracle", recorded_tasks=True)
    (tmp_path / AGENT_CARD).write_text("{oops")
    with pytest.raises(ConfigError, match="not JSON"):
        run_eval(wh, agent=f"hf:{tmp_path}", recorded_tasks=True)
    write_agent_card(tmp_path, _card())
    with pytest.raises(ConfigError, match="2 of the 2 held-out tasks .* are not curated tasks of this warehouse"):
        run_eval(wh, agent=f"hf:{tmp_path}", recorded_tasks=True)


def test_the_demo_prints_a_ready_to_paste_eval_command():
    from autoforge.cli.demo import eval_command

    assert eval_command("autoforge", None, "runs/demo/checkpoints/erpo-000004") == \
        "autoforge eval --agent hf:runs/demo/checkpoints/erpo-000004 --recorded-tasks"
    assert eval_command(".venv/bin/autoforge", "my wh.duckdb", "runs/x y/erpo-000004") == \
        ".venv/bin/autoforge eval --warehouse 'my wh.duckdb' --agent 'hf:runs/x y/erpo-000004' --recorded-tasks"
