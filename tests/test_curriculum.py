"""Training on tasks that teach (issue 34): pass rates before ERPO, the learnable filter, its
views (v_learnable_tasks, v_curriculum) on PostgreSQL, learnable.json. The tiny run through the
warehouse (rows stored, views, a resumed run on the same list) is in tests/test_rl_run.py (its factory
fixture)."""

from __future__ import annotations

import json

import pytest

from autoforge.rl import curriculum
from autoforge.rl.config import TrainConfig
from autoforge.rl.trajectory import Trajectory
from autoforge.types import Task, TaskPassRate
from autoforge.warehouse import query


def _task(i: int, env: str = "e1", tools=("get_a",)) -> Task:
    from autoforge.types import ToolCall

    return Task(task_id=f"t{i}", env_id=env, dag_id=f"d{i}", request="r", user_facts={}, initial_state={},
                gold_state={}, gold_state_hash="h", gold_calls=[ToolCall(name=n) for n in tools], n_tool_calls=len(tools),
                dag_depth=1, n_reasoning_nodes=0, n_requirements=1)


def _rates(passes: dict[str, tuple[int, int]]) -> dict[str, curriculum.PassRate]:
    return {tid: curriculum.PassRate(tid, "e1", n, n_episodes=n, n_pass=p) for tid, (p, n) in passes.items()}


def test_the_filter_keeps_tasks_strictly_between_0_and_1_and_falls_back_when_too_few():
    tasks = [_task(i) for i in range(6)]
    rates = _rates({"t0": (0, 4), "t1": (1, 4), "t2": (4, 4), "t3": (3, 4), "t4": (2, 4)})  # t5: not estimated
    kept, fallback = curriculum.select_learnable(tasks, rates, min_tasks=3)
    assert [t.task_id for t in kept] == ["t1", "t3", "t4"] and not fallback  # in the tasks' order
    kept, fallback = curriculum.select_learnable(tasks, rates, min_tasks=4)  # fewer learnable than a batch
    assert kept == tasks and fallback
    kept, fallback = curriculum.select_learnable(tasks, _rates({"t0": (0, 4)}), min_tasks=1)  # none learnable
    assert kept == tasks and fallback
    kept, fallback = curriculum.select_learnable(tasks, rates, min_tasks=3, enabled=False)
    assert kept == tasks and not fallback
    assert not curriculum.PassRate("x", "e", 4).learnable and curriculum.PassRate("x", "e", 4).rate == 0.0  # none played
    per_env = curriculum.summarize(rates, {"t1", "t3", "t4"}, {"e1": "shop"})
    assert per_env == {"shop": {"tasks": 5, "learnable": 3, "always": 1, "never": 1, "kept": 3,
                                "mean_pass_rate": round((0 + .25 + 1 + .75 + .5) / 5, 4)}}
    msg = curriculum.summary_message(per_env, 6, 6, True, True)
    assert "shop: 3/5 learnable (1 always, 1 never solved)" in msg and "falls back to all 6" in msg


def test_estimates_count_passes_and_invalid_rollouts_per_task_in_chunks():
    tasks = [_task(i) for i in range(5)]
    calls, seen = [], []

    def rollout_fn(policy, part, n):
        calls.append(([t.task_id for t in part], n))
        out = []
        for t in part:
            for trial in range(n):
                i = int(t.task_id[1:])
                if i == 4 and trial == 0:
                    continue  # crashed before the agent's first turn: no trajectory
                out.append(Trajectory(t.task_id, t.env_id, [1, 2], [0, 1], [0.0, -1.0], float(trial < i),
                                      valid=trial != 1))
        return out

    rates = curriculum.estimate_pass_rates(None, tasks, rollout_fn, 3, chunk=2,
                                           progress=lambda d, n: seen.append((d, n)))
    assert calls == [(["t0", "t1"], 3), (["t2", "t3"], 3), (["t4"], 3)] and seen == [(2, 5), (4, 5), (5, 5)]
    assert [(r.n_episodes, r.n_pass, r.n_invalid) for r in rates.values()] == [(3, 0, 1), (3, 1, 1), (3, 2, 1),
                                                                              (3, 3, 1), (2, 2, 1)]
    assert [r.learnable for r in rates.values()] == [False, True, True, False, False]


def test_learnable_json_is_written_whole_and_read_back_only_for_its_run(tmp_path):
    payload = curriculum.learnable_payload("train_a", [_task(1), _task(3)], False, {}, enabled=True,
                                           checkpoint="sft-000004", k=4, n_estimated=6, episodes=24, wall_s=1.234)
    path = curriculum.write_learnable(tmp_path / "ckpt", payload)
    assert path.name == "learnable.json" and not list(path.parent.glob(".*tmp"))
    back = curriculum.read_learnable(tmp_path / "ckpt", "train_a")
    assert back["task_ids"] == ["t1", "t3"] and back["wall_s"] == 1.23 and back["checkpoint"] == "sft-000004"
    assert curriculum.read_learnable(tmp_path / "ckpt", "train_b") is None  # another run's list
    assert curriculum.read_learnable(tmp_path / "none", "train_a") is None
    path.write_text("{not json")
    assert curriculum.read_learnable(tmp_path / "ckpt", "train_a") is None


def test_config_knobs_have_defaults_and_bounds():
    cfg = TrainConfig()
    assert (cfg.pass_rate_samples, cfg.pass_rate_max_tasks, cfg.learnable_filter) == (4, None, True)
    with pytest.raises(Exception):
        TrainConfig(pass_rate_samples=-1)
    with pytest.raises(Exception):
        TrainConfig(pass_rate_max_tasks=0)



def test_train_uses_the_tasks_before_erpo_returns(tmp_path):
    from autoforge.errors import ConfigError
    from autoforge.rl.policy import build_tiny_policy, load_policy
    from autoforge.rl.synthetic import make_synthetic_rollout_fn, synthetic_tasks
    from autoforge.rl.trainer import train

    base = build_tiny_policy(tmp_path / "tiny", [f"update record R{i} status {i % 4}" for i in range(100)],
                             vocab_size=400, hidden_size=16, num_layers=1, num_heads=2)
    tasks = synthetic_tasks()
    inner, seen = make_synthetic_rollout_fn(max_new_tokens=4), []

    def rollout_fn(policy, batch, n):
        seen.extend(t["task_id"] for t in batch)
        return inner(policy, batch, n)

    cfg = TrainConfig(steps=2, tasks_per_batch=2, rollouts_per_task=2, max_new_tokens=4, device="cpu", sft_epochs=0,
                      checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, seed=3)
    subset = tasks[:2]
    train(load_policy(base, device="cpu"), tasks, rollout_fn, cfg, before_erpo=lambda pol: subset)
    assert seen and set(seen) <= {t["task_id"] for t in subset}  # ERPO sampled from the returned tasks only
    cfg2 = cfg.model_copy(update={"checkpoint_dir": str(tmp_path / "ckpt2")})
    with pytest.raises(ConfigError, match="empty task list"):
        train(load_policy(base, device="cpu"), tasks, rollout_fn, cfg2, before_erpo=lambda pol: [])

@pytest.mark.slow  # starts a PostgreSQL server (skipped where none can be started)
def test_the_views_give_the_same_rows_on_postgres(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from pg_server import PgServer, unavailable

    from autoforge.warehouse import apply_migrations, write_records

    if unavailable():
        pytest.skip(unavailable())
    rows = [TaskPassRate(train_run_id="train_x", point=p, source=s, task_id=f"t{i}", env_id=f"e{i % 2}", k=4,
                         n_episodes=4, n_pass=(i * 3 + len(p)) % 5, n_invalid=i % 2, pass_rate=((i * 3 + len(p)) % 5) / 4,
                         learnable=0 < (i * 3 + len(p)) % 5 < 4, kept=i % 3 == 0, tools=["a", "b"][: 1 + i % 2])
            for i in range(6) for p, s in (("sft", "estimate"), ("end", "eval"))]
    rows = [r.model_copy(update={"pass_rate": min(r.pass_rate, 1.0), "n_pass": min(r.n_pass, 4)}) for r in rows]
    with PgServer() as pg:
        url = pg.create_database("curriculum")
        duck = str(tmp_path / "w.duckdb")
        for wh in (duck, url):
            apply_migrations(wh)
            write_records(wh, rows)
        for view in ("v_learnable_tasks", "v_curriculum"):
            got = [sorted(json.dumps(r, sort_keys=True, default=str)
                          for r in query(wh, f"SELECT * FROM {view}", read_only_check=False)) for wh in (duck, url)]
            assert got[0] == got[1] and got[0], view
