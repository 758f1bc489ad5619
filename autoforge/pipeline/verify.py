"""Stage 5 over the warehouse: replay and check every generated task, mark it verified or rejected.

``load`` reads the tasks still ``generated`` (all with ``recheck``), their DAGs and tools, and the
duplicate keys of tasks verified earlier; :func:`run_one` calls :func:`autoforge.tasks.verify.verify_env`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from autoforge.envs.interface import EnvFactory
from autoforge.pipeline.common import EnvSelection, by_env, finish, ids_clause, load_environments, persist
from autoforge.pipeline.generate import load_dags
from autoforge.tasks.generate import StageResult, blueprint_key, duplicate_key, stage_counts
from autoforge.tasks.verify import verify_env
from autoforge.types import EnvironmentRecord, Run, Task, TaskDag, ToolCode
from autoforge.warehouse import read_records

STAGE = "verify"


class VerifyParams(EnvSelection):
    """Parameters of stage 5 (flow ``verify-tasks``, the CLI's factory, the library path)."""

    recheck: bool = Field(False, description="check every task again, verified ones included")

    def run_row(self, batch_id: str | None = None) -> Run:
        return Run.make(STAGE, {**self.selection(), "recheck": self.recheck}, batch_id)


@dataclass
class VerifyInputs:
    envs: list[EnvironmentRecord]
    tools: dict[str, list[ToolCode]]
    dags: dict[str, list[TaskDag]] = field(default_factory=dict)
    tasks: dict[str, list[Task]] = field(default_factory=dict)
    existing_keys: dict[str, str] = field(default_factory=dict)  # duplicate keys of verified tasks -> their ids
    blueprints: dict[str, dict[str, int]] = field(default_factory=dict)  # env -> blueprint key -> verified tasks of it

    def only(self, env: EnvironmentRecord) -> "VerifyInputs":
        """What one environment's unit needs (a task runner ships this, not the whole stage's inputs)."""
        return VerifyInputs([env], {env.env_id: self.tools.get(env.env_id, [])}, {env.env_id: self.dags.get(env.env_id, [])},
                            {env.env_id: self.tasks.get(env.env_id, [])}, self.existing_keys,
                            {env.env_id: self.blueprints.get(env.env_id, {})})

    def todo(self) -> list[EnvironmentRecord]:
        """The environments with tasks to check."""
        return [e for e in self.envs if self.tasks.get(e.env_id)]


def load(warehouse: str | None, params: VerifyParams) -> VerifyInputs:
    envs, tools = load_environments(warehouse, params)
    out = VerifyInputs(envs, by_env(tools))
    ids = [e.env_id for e in envs]
    if not ids:
        return out
    where, qp = ids_clause("env_id", ids)
    out.dags = by_env(load_dags(warehouse, ids))
    tasks = read_records(warehouse, Task, where, qp)
    dag_by_id = {d.dag_id: d for ds in out.dags.values() for d in ds}
    out.tasks = by_env(t for t in tasks if params.recheck or t.status == "generated")
    if not params.recheck:
        done = [t for t in tasks if t.status == "verified" and t.dag_id in dag_by_id]
        out.existing_keys = {duplicate_key(t, dag_by_id[t.dag_id]): t.task_id for t in done}
        for t in done:
            box = out.blueprints.setdefault(t.env_id, {})
            key = blueprint_key(t.env_id, dag_by_id[t.dag_id])
            box[key] = box.get(key, 0) + 1
    return out


def run_one(env: EnvironmentRecord, inp: VerifyInputs, run_id: str, *, env_factory: EnvFactory | None = None) -> StageResult:
    """One environment's tasks."""
    return verify_env(env, inp.tools.get(env.env_id, []), inp.tasks.get(env.env_id, []), inp.dags.get(env.env_id, []),
                      existing=inp.existing_keys, blueprints=inp.blueprints.get(env.env_id), env_factory=env_factory,
                      run_id=run_id)


def run(warehouse: str | None, params: VerifyParams | None = None, *, batch_id: str | None = None,
        env_factory: EnvFactory | None = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect; returns its counts."""
    params = params or VerifyParams(**fields)
    row = params.run_row(batch_id)
    t0 = time.perf_counter()
    inp = load(warehouse, params)
    results = [run_one(e, inp, row.run_id, env_factory=env_factory) for e in inp.todo()]
    counts = stage_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(row, counts))
    return counts


def run_verify(warehouse: str | None, *, batch_id: str | None = None, env_factory: EnvFactory | None = None,
               **fields: Any) -> dict[str, Any]:
    """Stage 5 over the warehouse (``fields``: any of :class:`VerifyParams`)."""
    return run(warehouse, VerifyParams(**fields), batch_id=batch_id, env_factory=env_factory)
