"""The training driver on a real (small) factory warehouse: ERPO through the real episode engine,
TrainingRun/TrainingStep rows, curve and before/after table, resume after a kill."""

from __future__ import annotations

import contextlib
import json
import math

import pytest
import torch

from autoforge.errors import ConfigError
from autoforge.rl.config import TrainConfig
from autoforge.pipeline.train import load_curated, run_training
from autoforge.rl.data import gold_episodes, sft_examples
from autoforge.rl.trainer import policy_from_config, train
from autoforge.warehouse import query

ENV = "hr"


@contextlib.contextmanager
def one_torch_thread():
    """One torch thread inside the block; the count before it restored after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def one_thread():
    """One torch thread: several times faster for a tiny model on a loaded 2-core machine; restored after."""
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    """One environment of the bundled corpus through the whole offline factory (~5 s)."""
    from autoforge.pipeline import run_factory

    path = str(tmp_path_factory.mktemp("wh") / "factory.duckdb")
    run_factory(warehouse=path, env=ENV, tasks_per_env=60)
    return path


def _cfg(tmp_path, **kw) -> TrainConfig:
    base = dict(tiny_vocab_size=600, tiny_hidden_size=32, tiny_num_layers=2, tiny_num_heads=2, device="cpu",
                envs=[ENV], max_tool_calls=3, prompt_tools="used", max_train_tasks=6, max_eval_tasks=2,
                tasks_per_batch=2, rollouts_per_task=2, max_turns=2, max_new_tokens=12, max_episode_tokens=24,
                steps=2, lr=1e-2, micro_batch_size=4, sft_epochs=1, sft_batch_size=4, sft_max_examples=4,
                checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, eval_at=["start", "end"],
                rollout_concurrency=4, seed=1, torch_threads=1)
    base.update(kw)
    return TrainConfig(**base)


def test_curated_data_comes_through_the_view_with_filters(wh, tmp_path):
    cfg = _cfg(tmp_path, max_train_tasks=None, max_eval_tasks=None)
    data = load_curated(wh, cfg)
    rows = query(wh, "SELECT task_id, split FROM v_curated_tasks WHERE env_name = :e AND n_tool_calls <= 3", {"e": ENV})
    assert {t.task_id for t in data.train} == {r["task_id"] for r in rows if r["split"] == "train"}
    assert {t.task_id for t in data.test} == {r["task_id"] for r in rows if r["split"] == "test"}
    assert not {t.task_id for t in data.train} & {t.task_id for t in data.test}  # held out
    # prompt_tools="used": only tools some selected task calls
    used = {c.name for t in data.train + data.test for c in t.gold_calls}
    used |= {n.tool for t in data.train + data.test if t.kind == "boundary"  # and the write a boundary task asks for
             for n in data.dags[t.dag_id].nodes if n.kind == "tool"}
    assert {c.name for tools in data.tools_by_env.values() for c in tools} == used
    with pytest.raises(ConfigError, match="no curated train tasks"):
        load_curated(wh, _cfg(tmp_path, envs=["no_such_env"]))


def test_gold_replays_become_agent_only_sft_examples(wh, tmp_path):
    cfg = _cfg(tmp_path)
    data = load_curated(wh, cfg)
    gold = gold_episodes(data)
    assert len(gold) == len(data.train) and all(e.reward == 1.0 for e in gold)  # the oracle solves every curated task
    pol = policy_from_config(cfg, [e.messages[1].content for e in gold] * 5)
    ex = sft_examples(pol.tokenizer, gold, data.schemas())
    tok = pol.tokenizer
    for (ids, mask), ep in zip(ex, gold):
        trained = tok.decode([i for i, m in zip(ids, mask) if m])
        # every assistant turn is trained on, tool calls included; tool output and user turns never are
        for m in ep.messages:
            if m.role == "assistant":
                for c in m.tool_calls or []:
                    assert json.dumps(c.name) in trained
            if m.role in ("tool", "user") and len(m.content) > 12:
                assert m.content not in trained
        assert trained.count("<|im_end|>") == sum(m.role == "assistant" for m in ep.messages)


def test_two_erpo_steps_through_the_real_episode_engine(wh, tmp_path):
    from autoforge.rl.agent import make_rollout_fn
    from autoforge.rollout.engine import EpisodeConfig
    from autoforge.rollout.judge import RuleJudge
    from autoforge.rollout.users import ErrorRates

    cfg = _cfg(tmp_path, sft_epochs=0, user_error_rate=0.5)
    data = load_curated(wh, cfg)
    pol = policy_from_config(cfg, [t.request for t in data.train] * 5)
    before = {n: p.detach().clone() for n, p in pol.model.named_parameters()}
    real = make_rollout_fn(data.dags, data.tools_by_env, error_rates=ErrorRates.uniform(cfg.user_error_rate),
                           judge=RuleJudge(), config=EpisodeConfig(max_turns=cfg.max_turns, max_tokens=24),
                           max_new_tokens=cfg.max_new_tokens, concurrency=4, seed=1)
    seen = []

    def rollout_fn(policy, tasks, n):
        trajs = real(policy, tasks, n)
        seen.extend(trajs)
        # An untrained policy never solves a task, so every group would be dropped and nothing updated.
        # Relabel rewards by trial (what a half-competent policy gives) to exercise the update on the
        # engine's real token ids, masks, log-probs and judge verdicts.
        for t in trajs:
            t.reward = float(t.metadata["trial"] % 2)
        return trajs

    logged = []
    train(pol, data.train, rollout_fn, cfg, log_fn=lambda s, ph, m: logged.append((s, ph, m)))
    assert [(s, ph) for s, ph, _ in logged] == [(1, "erpo"), (2, "erpo")]
    # the base batch of each step, plus what dynamic sampling refilled (a group whose episodes were all
    # masked for a simulated-user error has no mixed rewards; how many depends on the tasks drawn)
    assert len(seen) == 2 * cfg.tasks_per_batch * cfg.rollouts_per_task + sum(m["extra_rollouts"] for _, _, m in logged)
    for t in seen:  # real episodes: a chat prompt with the tools, agent tokens masked in, nothing else
        assert t.n_generated > 0 and t.loss_mask[0] == 0
        assert pol.tokenizer.decode(t.token_ids[:10]).startswith("<|im_start|>system")
        assert all(lp == 0.0 for lp, m in zip(t.old_logprobs, t.loss_mask) if not m)
    for _, _, m in logged:
        assert math.isfinite(m["loss"]) and m["gen_tokens"] > 0
        assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-3)  # token-in/token-out: recomputed == recorded
    for n, p in pol.model.named_parameters():
        assert not torch.equal(before[n], p.detach()), f"{n} did not change"


def test_run_training_stores_metrics_curve_table_and_resumes_after_a_kill(wh, tmp_path):
    cfg = _cfg(tmp_path, steps=3, copy_warmup_steps=2, copy_warmup_batch_size=2)
    events = []

    def killer(phase, step, total, metrics):
        events.append((phase, step))
        if phase == "erpo" and step == 2:
            raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        run_training(wh, cfg, progress=killer, out_dir=tmp_path / "out")
    runs = query(wh, "SELECT train_run_id, status FROM training_runs")
    assert [r["status"] for r in runs] == ["failed"]
    assert any(ph == "eval:start" and s > 0 for ph, s in events) and ("erpo", 1) in events
    # the copy warm-up ran after the first evaluation and before SFT
    order = [ph for ph, _ in events]
    assert order.index("eval:start") < order.index("warmup") < order.index("sft")

    events2 = []
    out = run_training(wh, cfg, progress=lambda ph, s, tot, m: events2.append((ph, s)), out_dir=tmp_path / "out")
    # killed during step 2 (before its checkpoint): resumes from step 1's checkpoint; SFT and step 1 are not redone
    assert out["resumed_from"] and out["resumed_from"].endswith("erpo-000001")
    assert [e for e in events2 if e[0] in ("sft", "erpo")] == [("erpo", 2), ("erpo", 3)]
    assert not any(ph == "eval:start" for ph, _ in events2)  # read back from evals.json
    assert not any(ph == "warmup" for ph, _ in events2) and out["warmup"] == {}  # in the checkpoint's weights
    rid = out["train_run_id"]
    assert query(wh, "SELECT status FROM training_runs WHERE train_run_id = :r", {"r": rid})[0]["status"] == "completed"
    steps = query(wh, "SELECT phase, step, metrics FROM training_steps WHERE train_run_id = :r ORDER BY phase, step",
                  {"r": rid})
    assert [(s["phase"], s["step"]) for s in steps if s["phase"] == "erpo"] == [("erpo", 1), ("erpo", 2), ("erpo", 3)]
    assert any(s["phase"] == "sft" for s in steps)
    last = [s for s in steps if s["phase"] == "erpo"][-1]["metrics"]
    m = json.loads(last) if isinstance(last, str) else last
    assert {"reward_mean", "masked_frac", "dropped_tasks", "rollout_s", "gen_tokens"} <= set(m)
    assert [r["point"] for r in out["table"]] == ["before training", "after ERPO"]
    assert out["table"][0]["tasks"] == out["data"]["test_tasks"] >= 1 and "| pass^1 |" in out["table_markdown"]
    assert (tmp_path / "out" / "learning_curve.png").stat().st_size > 1000
    assert (tmp_path / "out" / "before_after.md").read_text().startswith("| point")
    ev = query(wh, "SELECT count(*) AS n FROM eval_results WHERE agent LIKE :a", {"a": f"hf:{rid}:%"})
    assert ev[0]["n"] >= 2  # before and after, overall + per environment

    with pytest.raises(ConfigError, match="different config"):
        run_training(wh, _cfg(tmp_path, steps=3, lr=5e-3), out_dir=tmp_path / "out")


def test_value_substitution_keeps_dialogues_consistent_and_forces_copying(wh, tmp_path):
    """Augmented gold replays: no original id/email/name is left, every call value is still in the context."""
    from autoforge.rl.augment import _copyable, _string_leaves, augmented_episodes

    cfg = _cfg(tmp_path, max_train_tasks=None)
    data = load_curated(wh, cfg)
    gold = gold_episodes(data)
    aug = augmented_episodes(gold, data.train, copies=2, seed=3)
    assert len(aug) == 2 * len(gold)
    assert [a.model_dump() for a in aug] == [a.model_dump() for a in augmented_episodes(gold, data.train, 2, seed=3)]
    by_id = {t.task_id: t for t in data.train}
    n_changed = 0
    for a in aug:
        orig = next(g for g in gold if a.episode_id.startswith(g.episode_id))
        old = {v for _, v in _string_leaves(by_id[a.task_id].user_facts) if _copyable(v)}
        text = "\n".join(m.content for m in a.messages) + json.dumps(
            [c.arguments for m in a.messages for c in (m.tool_calls or [])])
        left = [v for v in old if len(v) > 3 and (f'"{v}"' in text or f" {v}\n" in text)]
        assert not left, (a.episode_id, left, text[:3000])
        # the structure is the gold one: same roles, same tools called
        assert [m.role for m in a.messages] == [m.role for m in orig.messages]
        assert [c.name for m in a.messages for c in (m.tool_calls or [])] == \
               [c.name for m in orig.messages for c in (m.tool_calls or [])]
        # every string a call copies was in the context before the call, as in the original
        seen, seen_orig = "", ""
        for m, mo in zip(a.messages, orig.messages):
            for c, co in zip(m.tool_calls or [], mo.tool_calls or []):
                for (_, v), (_, vo) in zip(_string_leaves(c.arguments), _string_leaves(co.arguments)):
                    if _copyable(vo) and vo in seen_orig:
                        assert v in seen, (v, c.name)
                        n_changed += v != vo
            seen += m.content + "\n"
            seen_orig += mo.content + "\n"
    assert n_changed > 0


def test_demo_config_trains_the_short_tasks_of_the_top_environments_from_the_base(wh, tmp_path):
    from autoforge.pipeline.train import DEMO_MAX_CALLS, demo_config, demo_envs
    from autoforge.rl.base import BASE_DIR

    rows = demo_envs(wh)
    assert [r["env_name"] for r in rows] == [ENV] and rows[0]["train"] > 0
    cfg = demo_config(wh, tmp_path)
    assert cfg.model_path == str(BASE_DIR) and cfg.envs == [ENV] and cfg.user_error_rate == 0.2
    assert cfg.eval_at == ["start", "sft", "end"] and cfg.steps == 16
    # ERPO trains on the learnable tasks of a pass-rate estimate, each step refilled to 4 mixed groups
    assert cfg.pass_rate_samples == 4 and cfg.pass_rate_max_tasks == 64 and cfg.refill_max_rollouts == 2.0
    data = load_curated(wh, cfg)
    assert data.train and all(t.n_tool_calls <= DEMO_MAX_CALLS and t.n_reasoning_nodes == 0 for t in data.train + data.test)


def _json_value(v):
    return json.loads(v) if isinstance(v, str) else v  # a JSON column as DuckDB gives it back (parsed) or as text


def test_pass_rates_are_stored_the_filter_is_used_and_a_resumed_run_keeps_its_list(wh, tmp_path, monkeypatch):
    """A tiny policy solves nothing, so the estimate's rewards are relabelled per task (two tasks
    mixed, one always solved, the rest never): ERPO must train on the two mixed ones only, before
    and after a kill, and the views count them per environment and per tool."""
    from autoforge.rl import curriculum, trainer

    cfg = _cfg(tmp_path, steps=3, pass_rate_samples=2)
    train_ids = sorted(t.task_id for t in load_curated(wh, cfg).train)
    assert len(train_ids) == 6
    mixed, always = set(train_ids[:2]), train_ids[2]
    real = curriculum.estimate_pass_rates

    def relabelled(policy, tasks, rollout_fn, k, **kw):
        def fn(pol, part, n):
            trajs = rollout_fn(pol, part, n)
            for t in trajs:
                t.reward = float(t.task_id == always or (t.task_id in mixed and t.metadata["trial"] % 2 == 0))
            return trajs
        return real(policy, tasks, fn, k, **kw)

    monkeypatch.setattr(curriculum, "estimate_pass_rates", relabelled)
    trained_on = []
    real_erpo = trainer.train_erpo

    def spy(policy, tasks, *a, **kw):
        trained_on.append(sorted(t.task_id for t in tasks))
        return real_erpo(policy, tasks, *a, **kw)

    monkeypatch.setattr(trainer, "train_erpo", spy)
    events = []

    def killer(phase, step, total, metrics):
        events.append((phase, step, metrics))
        if phase == "erpo" and step == 2:
            raise KeyboardInterrupt("killed")

    with pytest.raises(KeyboardInterrupt):
        run_training(wh, cfg, progress=killer, out_dir=tmp_path / "out")
    assert trained_on == [sorted(mixed)]
    done = [m for ph, s, m in events if ph == "learnable" and "message" in m and "learnable" in m]
    assert len(done) == 1 and done[0]["kept"] == 2 and not done[0]["fallback"]
    assert done[0]["learnable"] == {ENV: {"tasks": 6, "learnable": 2, "always": 1, "never": 3, "kept": 2,
                                          "mean_pass_rate": round(2 / 6, 4)}}
    saved = json.loads((tmp_path / "ckpt" / "learnable.json").read_text())
    assert sorted(saved["task_ids"]) == sorted(mixed) and saved["episodes"] == 12 and saved["checkpoint"].startswith("sft-")

    events.clear()
    out = run_training(wh, cfg, progress=lambda ph, s, tot, m: events.append((ph, s, m)), out_dir=tmp_path / "out")
    assert out["resumed_from"].endswith("erpo-000001")
    assert not any(ph == "learnable" for ph, _, _ in events)  # not estimated again
    assert trained_on == [sorted(mixed), sorted(mixed)]  # the resumed ERPO trains on the same list
    assert out["learnable"]["kept"] == 2 and out["learnable"]["per_env"][ENV]["learnable"] == 2
    rid = out["train_run_id"]
    run = query(wh, "SELECT config FROM training_runs WHERE train_run_id = :r", {"r": rid})[0]["config"]
    run = _json_value(run)
    assert run["learnable"]["kept"] == 2

    rows = query(wh, "SELECT point, source, task_id, k, n_episodes, n_pass, pass_rate, learnable, kept, tools "
                     "FROM task_pass_rates WHERE train_run_id = :r", {"r": rid})
    est = {r["task_id"]: r for r in rows if r["source"] == "estimate"}
    assert set(est) == set(train_ids) and {r["point"] for r in est.values()} == {"sft"}
    assert all(r["k"] == 2 and r["n_episodes"] == 2 for r in est.values())
    assert {t for t, r in est.items() if r["learnable"]} == mixed == {t for t, r in est.items() if r["kept"]}
    assert est[always]["pass_rate"] == 1.0 and all(_json_value(r["tools"]) for r in est.values())
    evals = [r for r in rows if r["source"] == "eval"]
    n_test = out["data"]["test_tasks"]
    assert sorted(r["point"] for r in evals) == sorted(["start"] * n_test + ["end"] * n_test)
    assert all(r["k"] == cfg.eval_trials for r in evals)

    view = query(wh, "SELECT * FROM v_learnable_tasks WHERE train_run_id = :r AND source = 'estimate'", {"r": rid})
    assert len(view) == 1
    v = view[0]
    assert (v["env_name"], v["point"], v["tasks"], v["learnable"], v["always_solved"], v["never_solved"], v["kept"],
            v["episodes"]) == (ENV, "sft", 6, 2, 1, 3, 2, 12)
    assert v["mean_pass_rate"] == pytest.approx(2 / 6) and v["checkpoint"].startswith("sft-")
    assert {r["point"] for r in query(wh, "SELECT point FROM v_learnable_tasks WHERE train_run_id = :r "
                                          "AND source = 'eval'", {"r": rid})} == {"start", "end"}

    cur = query(wh, "SELECT * FROM v_curriculum WHERE train_run_id = :r AND source = 'estimate'", {"r": rid})
    by_tool: dict[str, list[str]] = {}
    for t, r in est.items():
        for tool in _json_value(r["tools"]):
            by_tool.setdefault(tool, []).append(t)
    assert {r["tool"] for r in cur} == set(by_tool) and all(r["env_name"] == ENV for r in cur)
    for r in cur:
        ts = by_tool[r["tool"]]
        assert r["tasks"] == len(ts)
        assert r["mean_pass_rate"] == pytest.approx(sum(est[t]["pass_rate"] for t in ts) / len(ts))
        assert r["learnable_share"] == pytest.approx(sum(t in mixed for t in ts) / len(ts))


def test_erpo_unseen_tasks_are_kept_out_of_sft_and_are_what_erpo_draws_from(wh, tmp_path, monkeypatch):
    """``erpo_unseen_tasks``: a seeded sample of the train tasks is kept out of SFT (gold replays and their
    value-substituted copies); the pass-rate estimate and ERPO play only those."""
    from autoforge.rl import curriculum, run as run_mod, trainer

    cfg = _cfg(tmp_path, steps=1, pass_rate_samples=1, erpo_unseen_tasks=3, sft_max_examples=None,
               learnable_filter=False)
    train_ids = sorted(t.task_id for t in load_curated(wh, cfg).train)
    sft_ids, estimated, trained_on = set(), [], []
    real_examples, real_estimate, real_erpo = run_mod.sft_examples, curriculum.estimate_pass_rates, trainer.train_erpo

    def examples_spy(tokenizer, episodes, *a, **kw):
        sft_ids.update(e.task_id for e in episodes)
        return real_examples(tokenizer, episodes, *a, **kw)

    def estimate_spy(policy, tasks, *a, **kw):
        estimated.extend(t.task_id for t in tasks)
        return real_estimate(policy, tasks, *a, **kw)

    def erpo_spy(policy, tasks, *a, **kw):
        trained_on.extend(t.task_id for t in tasks)
        return real_erpo(policy, tasks, *a, **kw)

    monkeypatch.setattr(run_mod, "sft_examples", examples_spy)
    monkeypatch.setattr(curriculum, "estimate_pass_rates", estimate_spy)
    monkeypatch.setattr(trainer, "train_erpo", erpo_spy)
    out = run_training(wh, cfg, out_dir=tmp_path / "out")
    unseen = set(estimated)
    assert out["erpo_unseen_tasks"] == 3 and len(unseen) == 3 and unseen <= set(train_ids)
    assert sft_ids == set(train_ids) - unseen  # SFT saw the other three only, copies included
    assert trained_on and set(trained_on) == unseen
    # the same seed keeps the same tasks apart; half the train tasks at most
    assert run_mod.unseen_ids(load_curated(wh, cfg), cfg) == unseen
    assert len(run_mod.unseen_ids(load_curated(wh, cfg), cfg.model_copy(update={"erpo_unseen_tasks": 50}))) == 3
    assert run_mod.unseen_ids(load_curated(wh, cfg), cfg.model_copy(update={"steps": 0})) == set()
