"""Stage 5 over the warehouse: replay and check every generated task, mark it verified or rejected.

``load`` reads the tasks still ``generated`` (all with ``recheck``), their DAGs and tools, and the
duplicate and blueprint keys of tasks verified earlier, and the tools' descriptions (the ``world``
check reads what a write may change); :func:`run_one` calls :func:`autoforge.tasks.verify.verify_env`,
whose result also holds the ``world_checks`` rows of the tasks it rejected.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import Field

from autoforge.envs.interface import EnvFactory
from autoforge.pipeline.corpus import judged_rules
from autoforge.pipeline.common import EnvSelection, by_env, finish, ids_clause, load_environments, persist
from autoforge.pipeline.parallel import map_envs
from autoforge.tasks.generate import StageResult, blueprint_key, duplicate_key, stage_counts
from autoforge.tasks.verify import verify_env
from autoforge.types import EnvironmentRecord, Run, Task, TaskDag, ToolCode, ToolSpec
from autoforge.warehouse import column_exists, query, read_records, reading

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
    dags: dict[str, list[TaskDag]] = field(default_factory=dict)  # the DAGs of the tasks to check
    tasks: dict[str, list[Task]] = field(default_factory=dict)
    existing_keys: dict[str, dict[str, str]] = field(default_factory=dict)  # env -> duplicate key of a verified task -> its id
    blueprints: dict[str, dict[str, int]] = field(default_factory=dict)  # env -> blueprint key -> verified tasks of it
    descriptions: dict[str, dict[str, str]] = field(default_factory=dict)  # env -> tool name -> documented description
    judged: dict[str, list[dict]] = field(default_factory=dict)  # env -> its judged rules (tasks.rules.judged_checks)

    def only(self, env: EnvironmentRecord) -> "VerifyInputs":
        """What one environment's unit needs (a task runner ships this, not the whole stage's inputs)."""
        e = env.env_id
        return VerifyInputs([env], {e: self.tools.get(e, [])}, {e: self.dags.get(e, [])}, {e: self.tasks.get(e, [])},
                            {e: self.existing_keys.get(e, {})}, {e: self.blueprints.get(e, {})},
                            {e: self.descriptions.get(e, {})}, {e: self.judged.get(e, [])})

    def todo(self) -> list[EnvironmentRecord]:
        """The environments with tasks to check."""
        return [e for e in self.envs if self.tasks.get(e.env_id)]


def load(warehouse: str | None, params: VerifyParams) -> VerifyInputs:
    """What the stage reads grows with the tasks to check, not with the warehouse: those tasks, their
    DAGs, and two keys per verified task (sql/081), so a batch into a warehouse of 100k tasks reads
    ~100k short strings instead of every stored task's states."""
    envs, tools = load_environments(warehouse, params)
    out = VerifyInputs(envs, by_env(tools))
    ids = [e.env_id for e in envs]
    if not ids:
        return out
    envs_in, qp = ids_clause("env_id", ids)
    todo = envs_in if params.recheck else f"{envs_in} AND status = 'generated'"
    out.tasks = by_env(read_records(warehouse, Task, todo, qp))
    dags_of = f"dag_id IN (SELECT dag_id FROM tasks WHERE {todo})"
    if not params.recheck:
        keyed = column_exists(warehouse, "tasks", "duplicate_key")
        done = f"{envs_in} AND status = 'verified'"
        if keyed:
            for r in query(warehouse, f"SELECT task_id, env_id, duplicate_key, blueprint_key FROM tasks WHERE {done} "
                                      "AND duplicate_key IS NOT NULL ORDER BY task_id", qp, read_only_check=False):
                _add_verified(out, r["env_id"], r["task_id"], r["duplicate_key"], r["blueprint_key"])
        legacy = f"{done} AND duplicate_key IS NULL" if keyed else done  # verified before sql/081: derive the keys
        old = read_records(warehouse, Task, legacy, qp)
        if old:
            old_dags = {d.dag_id: d for d in read_records(warehouse, TaskDag, f"{envs_in} AND dag_id IN "
                                                          f"(SELECT dag_id FROM tasks WHERE {legacy})", qp)}
            for t in old:
                if (d := old_dags.get(t.dag_id)) is not None:
                    _add_verified(out, t.env_id, t.task_id, duplicate_key(t, d), blueprint_key(t.env_id, d))
    out.dags = by_env(read_records(warehouse, TaskDag, f"{envs_in} AND {dags_of}", qp))
    out.descriptions = _descriptions(warehouse, [t for e in out.todo() for t in out.tools.get(e.env_id, [])])
    out.judged = judged_rules(warehouse, [e.env_id for e in out.todo()])
    return out


def _descriptions(warehouse: str | None, tools: list[ToolCode]) -> dict[str, dict[str, str]]:
    """env -> tool name -> the tool's documented description (what the world check reads a write may
    change), for the accepted tools of the environments with tasks to check."""
    if not tools:
        return {}
    where, qp = ids_clause("tool_id", sorted({t.tool_id for t in tools}))
    text = {s.tool_id: s.description for s in read_records(warehouse, ToolSpec, where, qp)}
    out: dict[str, dict[str, str]] = {}
    for t in tools:
        out.setdefault(t.env_id, {})[t.name] = text.get(t.tool_id, "")
    return out


def _add_verified(out: VerifyInputs, env_id: str, task_id: str, dup: str, blueprint: str) -> None:
    out.existing_keys.setdefault(env_id, {})[dup] = task_id  # task-id order, the last holder wins (as before)
    box = out.blueprints.setdefault(env_id, {})
    box[blueprint] = box.get(blueprint, 0) + 1


def run_one(env: EnvironmentRecord, inp: VerifyInputs, run_id: str, *, env_factory: EnvFactory | None = None) -> StageResult:
    """One environment's tasks."""
    return verify_env(env, inp.tools.get(env.env_id, []), inp.tasks.get(env.env_id, []), inp.dags.get(env.env_id, []),
                      existing=inp.existing_keys.get(env.env_id), blueprints=inp.blueprints.get(env.env_id), env_factory=env_factory,
                      run_id=run_id, descriptions=inp.descriptions.get(env.env_id), judged=inp.judged.get(env.env_id))


def run(warehouse: str | None, params: VerifyParams | None = None, *, batch_id: str | None = None,
        env_factory: EnvFactory | None = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect; returns its counts."""
    params = params or VerifyParams(**fields)
    row = params.run_row(batch_id)
    t0 = time.perf_counter()
    with reading(warehouse):  # one connection for the load's questions
        inp = load(warehouse, params)
    todo = inp.todo()
    results = map_envs([partial(run_one, e, inp.only(e), row.run_id, env_factory=env_factory) for e in todo],
                       [len(inp.tasks.get(e.env_id, [])) for e in todo], local=env_factory is not None)
    counts = stage_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(row, counts))
    return counts


def run_verify(warehouse: str | None, *, batch_id: str | None = None, env_factory: EnvFactory | None = None,
               **fields: Any) -> dict[str, Any]:
    """Stage 5 over the warehouse (``fields``: any of :class:`VerifyParams`)."""
    return run(warehouse, VerifyParams(**fields), batch_id=batch_id, env_factory=env_factory)
