"""Stage 7 over the warehouse: curated tasks in; TrainingRun / TrainingStep rows, evaluation
episodes and eval_results, checkpoints, a learning curve and a before/after table out.

``run_training(warehouse, config)`` reads the curated tasks through ``v_curated_tasks``
(:func:`load_curated`: train split trained on, test split held out) and the successful
episodes already stored (:func:`stored_successes`), then runs the pure training driver
:func:`autoforge.rl.run.train_curated`, storing every record it hands over as it comes (a
TrainingStep per optimizer step; the TrainingRun row when the run starts, fails or completes).
``autoforge train``, the ``train-erpo`` Prefect flow and ``autoforge demo``
(:func:`demo_training`) call it. :class:`autoforge.rl.config.TrainConfig` is the one
description of a run: the CLI's ``--config``/``--set`` and the flow's ``config``/``overrides``
both go through :func:`train_config`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from autoforge.errors import ConfigError
from autoforge.pipeline.evaluate import env_names, load_eval_inputs
from autoforge.rl.config import TrainConfig
from autoforge.rl.data import CuratedData, curated_data, sample_ids
from autoforge.rl.run import Progress, as_config, train_curated
from autoforge.types import Episode, Task
from autoforge.warehouse import query, read_records, table_exists, write_records

__all__ = ["TrainConfig", "demo_config", "demo_training", "load_curated", "run_training", "stored_successes",
           "train_config"]


def train_config(config: TrainConfig | str | Path | dict | None = None, overrides: dict | None = None,
                 where: str = "overrides") -> TrainConfig:
    """The run's TrainConfig: ``config`` (a TrainConfig, a dict, a YAML/JSON file or None for the
    defaults) with the fields in ``overrides`` replaced (values may be strings, as typed on a command
    line); ``where`` names the overrides in errors (``--set`` for the CLI)."""
    cfg = as_config(config)
    return cfg.with_overrides(overrides, where=where) if overrides else cfg


# --------------------------------------------------------------------------- reads


def curated_task_ids(warehouse: str | None, cfg: TrainConfig, split: str) -> list[str]:
    """Task ids from v_curated_tasks matching the config's filters (sorted, deterministic)."""
    where, params = ["split = :split"], {"split": split}
    for col, op, val in (("n_tool_calls", ">=", cfg.min_tool_calls), ("n_tool_calls", "<=", cfg.max_tool_calls),
                         ("n_reasoning_nodes", "<=", cfg.max_reasoning_nodes)):
        if val is not None:
            key = f"p{len(params)}"
            where.append(f"{col} {op} :{key}")
            params[key] = val
    if cfg.envs:
        names = ", ".join(f":e{i}" for i in range(len(cfg.envs)))
        where.append(f"(env_id IN ({names}) OR env_name IN ({names}))")
        params.update({f"e{i}": e for i, e in enumerate(cfg.envs)})
    rows = query(warehouse, f"SELECT task_id FROM v_curated_tasks WHERE {' AND '.join(where)} ORDER BY task_id", params,
                 read_only_check=False)  # fixed SQL built here (on PostgreSQL the user-SQL path refuses a superuser)
    return [r["task_id"] for r in rows]


def load_curated(warehouse: str | None, cfg: TrainConfig) -> CuratedData:
    """Train/test tasks through ``v_curated_tasks``, their DAGs, accepted tool code and specs."""
    train_ids = sample_ids(curated_task_ids(warehouse, cfg, "train"), cfg.max_train_tasks, cfg.seed, "train")
    test_ids = sample_ids(curated_task_ids(warehouse, cfg, "test"), cfg.max_eval_tasks, cfg.seed, "test")
    if not train_ids:
        raise ConfigError(
            f"no curated train tasks in {warehouse or 'the default warehouse'} match the config (envs={cfg.envs}, "
            f"tool calls {cfg.min_tool_calls}..{cfg.max_tool_calls}, reasoning nodes <= {cfg.max_reasoning_nodes}); "
            "run `autoforge factory` first or relax the filters")
    tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(warehouse, task_ids=set(train_ids) | set(test_ids))
    return curated_data(tasks, train_ids, test_ids, dags, tools_by_env, specs_by_env, cfg)


def stored_successes(warehouse: str | None, tasks: list[Task]) -> list[Episode]:
    """Successful, unflagged episodes of ``tasks`` already in the warehouse (not the oracle's)."""
    if not tasks or not table_exists(warehouse, "episodes"):
        return []
    ids = {t.task_id for t in tasks}
    eps = read_records(warehouse, Episode, where="reward = 1.0 AND coalesce(judge_flag, FALSE) = FALSE "
                                                  "AND agent <> 'oracle'")
    return [e for e in eps if e.task_id in ids and e.messages]


# --------------------------------------------------------------------------- the stage


def run_training(warehouse: str | None, config: TrainConfig | str | Path | dict | None = None, *,
                 progress: Progress | None = None, run_id: str | None = None,
                 out_dir: str | Path | None = None) -> dict[str, Any]:
    """Train a policy on the warehouse's curated tasks and store its records; resumable.

    ``config``: a TrainConfig, a dict of its fields, or a YAML/JSON file. ``out_dir`` receives
    ``learning_curve.png`` and ``before_after.md`` (default: ``cfg.checkpoint_dir``). Returns
    what :func:`autoforge.rl.run.train_curated` returns (``train_run_id``, ``evals``, ``table``,
    ``table_markdown``, ``curve``, ``history``, ``timings``, ``throughput``, ``data``, ...).
    """
    cfg = as_config(config)
    t = time.perf_counter()
    data = load_curated(warehouse, cfg)
    load_s = time.perf_counter() - t
    extra = stored_successes(warehouse, data.train) if cfg.sft_epochs > 0 and cfg.sft_successful_rollouts else []
    out = train_curated(data, cfg, extra_sft_episodes=extra, env_names=env_names(warehouse),
                        on_records=lambda records: write_records(warehouse, records), progress=progress,
                        run_id=run_id, out_dir=out_dir)
    out["timings"] = {"load_s": round(load_s, 2), **out["timings"]}
    return out


# --------------------------------------------------------------------------- the demo's short run


def demo_config(warehouse: str | None, out_dir: str | Path, steps: int = 2) -> TrainConfig:
    """A run sized for ``autoforge demo`` (well under 2 minutes on 2 CPU cores): the shortest tasks,
    a very small policy, a few held-out tasks, SFT then ``steps`` ERPO steps."""
    # the shortest tasks, but enough of them: the smallest tool-call cap giving >= 16 train and >= 4 held-out tasks
    rows = query(warehouse, "SELECT n_tool_calls AS n, sum(CASE WHEN split = 'train' THEN 1 ELSE 0 END) AS tr, "
                            "sum(CASE WHEN split = 'test' THEN 1 ELSE 0 END) AS te FROM v_curated_tasks "
                            "GROUP BY n_tool_calls ORDER BY n_tool_calls")
    shortest, tr, te = None, 0, 0
    for r in rows:
        tr, te, shortest = tr + int(r["tr"]), te + int(r["te"]), int(r["n"])
        if tr >= 16 and te >= 4:
            break
    return TrainConfig(
        tiny_vocab_size=1024, tiny_hidden_size=64, tiny_num_layers=2, tiny_num_heads=4, tiny_max_positions=4096,
        device="cpu", seed=0, max_tool_calls=shortest, prompt_tools="used", tool_schema="compact", max_train_tasks=16,
        max_eval_tasks=6,
        tasks_per_batch=2, rollouts_per_task=4, max_turns=4, max_new_tokens=48, max_episode_tokens=160,
        steps=steps, lr=1e-3, sft_epochs=2, sft_lr=3e-3, sft_batch_size=4, sft_max_examples=16, micro_batch_size=4,
        user_error_rate=0.2, eval_at=["start", "end"], rollout_concurrency=8, torch_threads=1,
        checkpoint_dir=str(Path(out_dir) / "checkpoints"), checkpoint_every=max(steps, 1))


def demo_training(warehouse: str | None, out_dir: str | Path, steps: int = 2,
                  progress: Progress | None = None) -> dict[str, Any]:
    """The demo's short ERPO run (SFT cold start, ``steps`` ERPO steps, held-out pass^1 before/after)."""
    cfg = demo_config(warehouse, out_dir, steps)
    return run_training(warehouse, cfg, progress=progress, out_dir=out_dir)
