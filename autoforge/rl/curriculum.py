"""Training on tasks that teach (issue 34): pass rates per task before ERPO, and the learnable filter.

A task the policy always solves, or never does, gives a group of rollouts with one reward: its
advantages are all zero and dynamic sampling drops it, so an ERPO step spent on it updates
nothing. Before ERPO (after SFT) the driver (:func:`autoforge.rl.run.train_curated`) plays each
train task ``k`` times as ERPO plays it (:func:`estimate_pass_rates`, through a ``rollout_fn``
built like ERPO's), keeps those whose pass rate is strictly between 0 and 1
(:func:`select_learnable`; every task when fewer than a batch are), stores one
:class:`autoforge.types.TaskPassRate` row per task (:func:`pass_rate_records`; the held-out
evaluations add theirs, :func:`eval_pass_rate_records`) and writes the kept ids to
``<checkpoint_dir>/learnable.json`` so a run resumed inside ERPO trains on the same list
(:func:`write_learnable`, :func:`read_learnable`). The views ``v_learnable_tasks`` and
``v_curriculum`` (sql/091, sql/092) read the rows per environment and per tool.

Nothing here imports torch; a ``rollout_fn`` is whatever :func:`autoforge.rl.agent.make_rollout_fn` returns.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from autoforge.types import Episode, Task, TaskDag, TaskPassRate

LEARNABLE_FILE = "learnable.json"
CHUNK_TASKS = 32  # tasks per rollout_fn call while estimating (progress is reported after each)


@dataclass
class PassRate:
    """One task's estimate: ``n_episodes`` rollouts played of ``k`` asked, ``n_pass`` with reward 1.0."""

    task_id: str
    env_id: str
    k: int
    n_episodes: int = 0
    n_pass: int = 0
    n_invalid: int = 0

    @property
    def rate(self) -> float:
        return self.n_pass / self.n_episodes if self.n_episodes else 0.0

    @property
    def learnable(self) -> bool:
        return 0.0 < self.rate < 1.0


def task_tools(task: Task, dags: dict[str, TaskDag] | None = None) -> list[str]:
    """The task's gold tool names, sorted: its gold calls and its DAG's tool nodes (a boundary task's
    forbidden write is a DAG node, not a gold call)."""
    names = {c.name for c in task.gold_calls}
    dag = (dags or {}).get(task.dag_id)
    if dag is not None:
        names |= {n.tool for n in dag.nodes if n.kind == "tool" and n.tool}
    return sorted(names)


def estimate_pass_rates(policy: Any, tasks: Sequence[Task], rollout_fn: Callable, k: int, *,
                        progress: Callable[[int, int], None] | None = None,
                        chunk: int = CHUNK_TASKS) -> dict[str, PassRate]:
    """``k`` rollouts of every task through ``rollout_fn(policy, tasks, k)``, counted per task.

    A rollout passes when its reward is 1.0; one that is not valid (judge-flagged or unscored) is
    counted in ``n_invalid`` (and in the rate as what it scored). ``progress(tasks_done, total)``
    after each chunk of ``chunk`` tasks."""
    out = {t.task_id: PassRate(t.task_id, t.env_id, k) for t in tasks}
    tasks = list(tasks)
    for i in range(0, len(tasks), chunk):
        part = tasks[i:i + chunk]
        for tr in rollout_fn(policy, part, k):
            est = out.get(tr.task_id)
            if est is None:
                continue
            est.n_episodes += 1
            est.n_pass += tr.reward == 1.0
            est.n_invalid += not tr.valid
        if progress is not None:
            progress(min(i + chunk, len(tasks)), len(tasks))
    return out


def select_learnable(tasks: Sequence[Task], rates: dict[str, PassRate], min_tasks: int,
                     enabled: bool = True) -> tuple[list[Task], bool]:
    """``(tasks ERPO trains on, fell back)``: the estimated tasks with 0 < rate < 1, in ``tasks``'
    order; every task of ``tasks`` (fell back = True) when fewer than ``min_tasks`` (a batch) are.
    A task without an estimate is not kept. ``enabled`` False: every task, no fallback."""
    if not enabled:
        return list(tasks), False
    kept = [t for t in tasks if t.task_id in rates and rates[t.task_id].learnable]
    if len(kept) < max(1, min_tasks):
        return list(tasks), True
    return kept, False


def pass_rate_records(train_run_id: str, rates: dict[str, PassRate], tasks_by_id: dict[str, Task],
                      dags: dict[str, TaskDag], kept: set[str], *, point: str = "sft", source: str = "estimate",
                      checkpoint: str | None = None, run_id: str | None = None) -> list[TaskPassRate]:
    """One ``TaskPassRate`` row per task of ``rates`` (source "estimate": a train task before ERPO)."""
    return [TaskPassRate(train_run_id=train_run_id, point=point, source=source, checkpoint=checkpoint,
                         task_id=r.task_id, env_id=r.env_id, k=r.k, n_episodes=r.n_episodes, n_pass=r.n_pass,
                         n_invalid=r.n_invalid, pass_rate=r.rate, learnable=r.learnable, kept=r.task_id in kept,
                         tools=task_tools(tasks_by_id[r.task_id], dags), run_id=run_id)
            for r in rates.values()]


def eval_pass_rate_records(train_run_id: str, point: str, episodes: Sequence[Episode], tasks: Sequence[Task],
                           dags: dict[str, TaskDag], k: int, *, checkpoint: str | None = None,
                           run_id: str | None = None) -> list[TaskPassRate]:
    """One ``TaskPassRate`` row (source "eval") per held-out task of an evaluation's episodes
    (``k`` = its trials; an unscored episode counts as invalid and as a failure)."""
    rates = {t.task_id: PassRate(t.task_id, t.env_id, k) for t in tasks}
    for e in episodes:
        est = rates.get(e.task_id)
        if est is None:
            continue
        est.n_episodes += 1
        est.n_pass += e.reward == 1.0
        est.n_invalid += e.reward is None or bool(e.judge_flag)
    return pass_rate_records(train_run_id, rates, {t.task_id: t for t in tasks}, dags, set(), point=point,
                             source="eval", checkpoint=checkpoint, run_id=run_id)


def summarize(rates: dict[str, PassRate], kept: set[str], env_names: dict[str, str] | None = None) -> dict[str, dict]:
    """Per environment (by name where known): ``{"tasks", "learnable", "always", "never", "kept", "mean_pass_rate"}``."""
    env_names = env_names or {}
    by_env: dict[str, list[PassRate]] = defaultdict(list)
    for r in rates.values():
        by_env[r.env_id].append(r)
    out = {}
    for env, rs in sorted(by_env.items()):
        out[env_names.get(env, env)] = {
            "tasks": len(rs), "learnable": sum(r.learnable for r in rs), "always": sum(r.rate >= 1.0 for r in rs),
            "never": sum(r.rate <= 0.0 for r in rs), "kept": sum(r.task_id in kept for r in rs),
            "mean_pass_rate": round(sum(r.rate for r in rs) / len(rs), 4)}
    return out


def summary_message(per_env: dict[str, dict], n_kept: int, n_train: int, fallback: bool, enabled: bool) -> str:
    """One line for the driver's progress: learnable tasks per environment and what ERPO trains on."""
    envs = "; ".join(f"{env}: {s['learnable']}/{s['tasks']} learnable ({s['always']} always, {s['never']} never solved)"
                     for env, s in per_env.items())
    if not enabled:
        then = f"ERPO on all {n_train} train tasks (learnable_filter off)"
    elif fallback:
        then = f"too few learnable for a batch: ERPO falls back to all {n_train} train tasks"
    else:
        then = f"ERPO on the {n_kept} learnable of {n_train} train tasks"
    return f"{envs}; {then}"


# --------------------------------------------------------------------------- learnable.json (resume)


def write_learnable(checkpoint_dir: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``<checkpoint_dir>/learnable.json`` all or nothing (a temporary file renamed into place)."""
    from autoforge import atomic

    return atomic.write_text(Path(checkpoint_dir) / LEARNABLE_FILE, json.dumps(payload, indent=1))


def read_learnable(checkpoint_dir: str | Path, train_run_id: str) -> dict[str, Any] | None:
    """The ``learnable.json`` of this training run (its ``task_ids`` are what ERPO trains on), or None
    when there is none, it belongs to another run, or it cannot be read."""
    path = Path(checkpoint_dir) / LEARNABLE_FILE
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(payload, dict) or payload.get("train_run_id") != train_run_id \
            or not isinstance(payload.get("task_ids"), list):
        return None
    return payload


def learnable_payload(train_run_id: str, kept: Sequence[Task], fallback: bool, per_env: dict[str, dict], *,
                      enabled: bool, checkpoint: str | None, k: int, n_estimated: int, episodes: int,
                      wall_s: float) -> dict[str, Any]:
    """What ``learnable.json`` holds and what the driver returns as ``learnable``."""
    return {"train_run_id": train_run_id, "checkpoint": checkpoint, "k": k, "filter": enabled, "fallback": fallback,
            "estimated": n_estimated, "kept": len(kept), "episodes": episodes, "wall_s": round(wall_s, 2),
            "per_env": per_env, "task_ids": [t.task_id for t in kept], "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                                time.gmtime())}
