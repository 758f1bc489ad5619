"""The shipped base checkpoint (autoforge/rl/base.py), `autoforge base-checkpoint`, the demo's
before/after line, and the ERPO knobs the multi-environment benchmark needs (env_weights,
per-environment advantage scale / masked / dropped metrics)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from autoforge.rl.base import BASE_DIR, BaseSpec, build_base_checkpoint, ensure_base_checkpoint, read_manifest, weights_sha256

TINY = BaseSpec(vocab_size=400, hidden_size=32, num_layers=1, num_heads=2, steps=3, batch_size=4, micro_batch_size=2,
                max_positions=1024)


@pytest.mark.slow
def test_base_checkpoint_is_reproducible_and_loadable(tmp_path):
    a = build_base_checkpoint(tmp_path / "a", TINY)
    b = build_base_checkpoint(tmp_path / "b", TINY)
    assert a["weights_sha256"] == b["weights_sha256"] == weights_sha256(tmp_path / "a")
    assert a["spec"] == TINY.model_dump() and a["final_loss"] is not None
    # the tokenizer is the same too (trained on the bundled docs only, deterministically)
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()
    other = build_base_checkpoint(tmp_path / "c", TINY.model_copy(update={"seed": 1}))
    assert other["weights_sha256"] != a["weights_sha256"]  # the seed matters: the hash is of the weights

    from autoforge.rl.policy import load_policy

    pol = load_policy(tmp_path / "a", device="cpu")
    assert pol.tokenizer.chat_template and pol.model.config.hidden_size == 32


@pytest.mark.slow
def test_ensure_base_checkpoint_builds_when_absent_and_says_so(tmp_path):
    said: list[str] = []
    p = ensure_base_checkpoint(tmp_path / "base", TINY, say=said.append)
    assert (p / "model.safetensors").is_file() and read_manifest(p)["spec"] == TINY.model_dump()
    assert "absent" in said[0] and "min on one CPU core" in said[0] and "built in" in said[1]
    said.clear()
    assert ensure_base_checkpoint(tmp_path / "base", TINY, say=said.append) == p and said == []  # there: used as is
    ensure_base_checkpoint(tmp_path / "base", TINY.model_copy(update={"steps": 2}), say=said.append)
    assert "another spec" in said[0]


def test_shipped_base_checkpoint_matches_its_manifest():
    man = read_manifest(BASE_DIR)
    if man is None:
        pytest.skip("no shipped base checkpoint (autoforge base-checkpoint builds it)")
    assert man["spec"] == BaseSpec().model_dump(), "BaseSpec's defaults changed: rebuild with `autoforge base-checkpoint`"
    assert weights_sha256(BASE_DIR) == man["weights_sha256"]
    size = sum(f.stat().st_size for f in BASE_DIR.iterdir())
    assert size < 8 * 1024 * 1024, f"the shipped checkpoint is {size / 2**20:.1f} MB; keep it a few MB"


@pytest.mark.slow
def test_base_checkpoint_command_check(tmp_path, capsys):
    from autoforge.cli import main

    out = tmp_path / "base"
    build_base_checkpoint(out, TINY)
    assert main(["base-checkpoint", "--out", str(out), "--check"]) == 0
    assert "identical" in capsys.readouterr().out
    man = json.loads((out / "base_manifest.json").read_text())
    man["weights_sha256"] = "0" * 64
    (out / "base_manifest.json").write_text(json.dumps(man))
    assert main(["base-checkpoint", "--out", str(out), "--check"]) == 1
    assert main(["base-checkpoint", "--out", str(tmp_path / "none"), "--check"]) != 0


def test_base_checkpoint_command_toolbox_share(tmp_path, capsys, monkeypatch):
    import pytest

    import autoforge.rl.base as base
    from autoforge.cli import main

    seen = {}

    def fake_build(out, spec, progress=None):
        seen["spec"] = spec
        return {"build_s": 0.0, "parameters": 1, "heldout_recall_exact": 0.0, "weights_sha256": "x"}

    monkeypatch.setattr(base, "build_base_checkpoint", fake_build)
    assert main(["base-checkpoint", "--out", str(tmp_path / "b"), "--toolbox", "0.5", "--steps", "2"]) == 0
    assert seen["spec"].toolbox == 0.5 and seen["spec"].steps == 2
    with pytest.raises(SystemExit):
        main(["base-checkpoint", "--toolbox", "1.5"])
    assert "share from 0 to 1" in capsys.readouterr().err


def test_demo_headline_says_before_after_tasks_envs_steps():
    from autoforge.pipeline.train import demo_headline
    from autoforge.rl.config import TrainConfig

    out = {"evals": {"start": {"success_rate": 0.0, "n_tasks": 12}, "sft": {"success_rate": 0.25, "n_tasks": 12},
                     "end": {"success_rate": 1 / 3, "n_tasks": 12}},
           "history": [{"phase": "sft"}] * 30 + [{"phase": "erpo"}] * 3 + [{"phase": "erpo", "skipped": 1.0}],
           "data": {"environments": ["e1", "e2", "e3"]}}
    line = demo_headline(out, TrainConfig())
    assert line == ("held-out pass^1 on 12 tasks in 3 environments: before 0.000 -> after SFT 0.250 -> after ERPO 0.333 "
                    "(30 SFT steps, 4 ERPO steps, 3 of them updated the weights)")


# --------------------------------------------------------------------------- ERPO knobs for many environments


def _tasks():
    return [{"task_id": f"a{i}", "env_id": "A"} for i in range(30)] + [{"task_id": f"b{i}", "env_id": "B"} for i in range(6)]


def test_sample_tasks_env_weights():
    from autoforge.rl.trainer import sample_tasks

    tasks = _tasks()
    assert sample_tasks(tasks, 8, 3) == random.Random(3).sample(tasks, 8)  # no weights: the uniform sample as before
    assert sample_tasks(tasks, 8, 3, {"A": 1, "B": 1}) == sample_tasks(tasks, 8, 3, {"A": 1, "B": 1})  # seeded
    share_b = sum(t["env_id"] == "B" for s in range(300) for t in sample_tasks(tasks, 6, s, {"A": 1, "B": 1})) / 1800
    uniform_b = sum(t["env_id"] == "B" for s in range(300) for t in sample_tasks(tasks, 6, s)) / 1800
    assert 0.4 < share_b < 0.6 and uniform_b < 0.25  # equal weights: half the batch each, whatever the task counts
    assert all(t["env_id"] == "A" for t in sample_tasks(tasks, 10, 0, {"B": 0}))
    assert len({t["task_id"] for t in sample_tasks(tasks, 36, 0, {"A": 2})}) == 36  # without replacement


def test_env_weights_config_and_names():
    from autoforge.errors import ConfigError
    from autoforge.rl.config import TrainConfig
    from autoforge.rl.data import CuratedData
    from autoforge.rl.run import resolve_env_weights
    from autoforge.types import Task

    with pytest.raises(ConfigError, match="env_weights"):
        TrainConfig.from_dict({"env_weights": {"retail": -1}})

    def task(tid, env):
        return Task(task_id=tid, env_id=env, dag_id="d", request="r", user_facts={}, initial_state={}, gold_state={},
                    gold_state_hash="h", gold_calls=[], n_tool_calls=1, dag_depth=1, n_reasoning_nodes=0, n_requirements=0)

    data = CuratedData(train=[task("t1", "env_1"), task("t2", "env_2")], test=[], dags={}, tools_by_env={})
    cfg = TrainConfig(env_weights={"retail": 2, "env_2": 0.5})
    assert resolve_env_weights(cfg, data, {"env_1": "retail", "env_2": "hr"}) == {"env_1": 2.0, "env_2": 0.5}
    with pytest.raises(ConfigError, match="retail \\(env_1\\)"):
        resolve_env_weights(TrainConfig(env_weights={"airline": 1}), data, {"env_1": "retail", "env_2": "hr"})
    assert resolve_env_weights(TrainConfig(), data) is None


def test_erpo_step_logs_advantage_scale_masked_dropped_per_environment(tmp_path):
    from autoforge.rl.erpo import advantages_with_info
    from autoforge.rl.config import TrainConfig
    from autoforge.rl.trainer import env_group_metrics
    from autoforge.rl.trajectory import Trajectory

    # env A: task a0 rewards 1,0,1,0 (std .5), a1 all 1 (dropped); env B: b0 1,0,0,0 with one masked rollout
    spec = [("a0", "A", r, True) for r in (1, 0, 1, 0)] + [("a1", "A", 1, True)] * 4 + \
           [("b0", "B", 1, True), ("b0", "B", 0, True), ("b0", "B", 0, True), ("b0", "B", 1, False)]
    trajs = [Trajectory(t, e, [1, 2], [0, 1], [0.0, 0.0], float(r), valid=v) for t, e, r, v in spec]
    for level in ("env", "task"):
        cfg = TrainConfig(advantage_level=level)
        info = advantages_with_info([t.reward for t in trajs], [t.task_id for t in trajs], [t.env_id for t in trajs],
                                    [t.valid for t in trajs], level)
        m = env_group_metrics(trajs, info, cfg)
        assert m["adv_scale/A"] == pytest.approx(0.5)  # one kept task in A: env std = its task std
        assert m["adv_scale/B"] == pytest.approx((2 / 9) ** 0.5)  # b0's valid rewards 1, 0, 0
        assert m["dropped_frac/A"] == 0.5 and m["dropped_frac/B"] == 0.0
        assert m["masked_frac/B"] == 0.25 and m["masked_frac/A"] == 0.0
    m = env_group_metrics(trajs, info, TrainConfig(mask_user_errors=False))
    assert m["masked_frac/B"] == 0.0
