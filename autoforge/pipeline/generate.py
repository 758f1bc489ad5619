"""Stage 4 over the warehouse: task DAGs -> tasks (initial state, gold run, request, hidden facts).

``load`` reads the environments, their accepted tools, their stored DAGs (in a factory batch, those
its sample stage stored) and the task ids already stored (left as they are on a re-run); :func:`run_one` calls :func:`autoforge.tasks.generate.generate_env`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import Field

from autoforge.envs.interface import EnvFactory
from autoforge.pipeline.corpus import judged_rules
from autoforge.pipeline.common import (TASKS_PER_ENV, EnvSelection, by_env, client_for, finish, given, ids_clause,
                                       load_environments, persist)
from autoforge.pipeline.parallel import map_envs
from autoforge.tasks.generate import TEST_FRACTION, StageResult, generate_env, stage_counts
from autoforge.types import EnvironmentRecord, Run, TaskDag, ToolCode
from autoforge.warehouse import query, read_records, reading

STAGE = "generate"


class GenerateParams(EnvSelection):
    """Parameters of stage 4 (flow ``generate-tasks``, the CLI's factory, the library path)."""

    seed: int = Field(0, description="random seed of instantiation (same seed -> same tasks)")
    tasks_per_env: int = Field(TASKS_PER_ENV, description="tasks wanted per environment")
    attempts_per_task: int = Field(4, description="at most tasks_per_env * attempts_per_task instantiations are tried")
    test_fraction: float = Field(TEST_FRACTION, description="share of tasks held out (split from the task id's hash)")
    backend: str = Field("offline", description='"offline" (template requests) or "openai" (the LLM rewrites each request)')
    from_batch: str | None = Field(None, description="only the DAGs that this factory batch's sample stage stored (the factory "
                                                     "sets it, so a batch's memory and time follow the batch, not the "
                                                     "warehouse); None = every stored DAG of the environments")

    def run_row(self, batch_id: str | None = None) -> Run:
        extra = {"from_batch": self.from_batch} if self.from_batch else {}
        return Run.make(STAGE, {"seed": self.seed, **self.selection(), "tasks_per_env": self.tasks_per_env,
                                "attempts_per_task": self.attempts_per_task, "test_fraction": self.test_fraction, **extra},
                        batch_id)


@dataclass
class GenerateInputs:
    envs: list[EnvironmentRecord]
    tools: dict[str, list[ToolCode]]
    dags: dict[str, list[TaskDag]] = field(default_factory=dict)
    existing_ids: set[str] = field(default_factory=set)  # task ids already stored
    judged: dict[str, list[dict]] = field(default_factory=dict)  # env -> its judged rules (tasks.rules.judged_checks)

    def only(self, env: EnvironmentRecord) -> "GenerateInputs":
        """What one environment's unit needs (a task runner ships this, not the whole stage's inputs)."""
        return GenerateInputs([env], {env.env_id: self.tools.get(env.env_id, [])}, {env.env_id: self.dags.get(env.env_id, [])},
                              self.existing_ids, {env.env_id: self.judged.get(env.env_id, [])})


def load_dags(warehouse: str | None, env_ids: list[str], from_batch: str | None = None) -> list[TaskDag]:
    """The stored DAGs of these environments (``from_batch``: only those the batch's sample stage stored;
    DAG ids are content hashes, so a DAG sampled again carries the latest sample run)."""
    where, params = ids_clause("env_id", env_ids)
    if not where:
        return []
    if from_batch:
        where += " AND run_id IN (SELECT run_id FROM runs WHERE stage = 'sample' AND batch_id = :from_batch)"
        params["from_batch"] = from_batch
    return read_records(warehouse, TaskDag, where, params)


def load(warehouse: str | None, params: GenerateParams) -> GenerateInputs:
    envs, tools = load_environments(warehouse, params)
    out = GenerateInputs(envs, by_env(tools))
    ids = [e.env_id for e in envs]
    if ids:
        where, qp = ids_clause("env_id", ids)
        out.dags = by_env(load_dags(warehouse, ids, params.from_batch))
        out.existing_ids = {r["task_id"] for r in query(warehouse, f"SELECT task_id FROM tasks WHERE {where}", qp,
                                                        read_only_check=False)}
        out.judged = judged_rules(warehouse, ids)
    return out


def run_one(env: EnvironmentRecord, inp: GenerateInputs, params: GenerateParams, run_id: str, *, batch_id: str | None = None,
            client: Any = None, env_factory: EnvFactory | None = None) -> StageResult:
    """One environment (``client``: built per unit for an online backend when None)."""
    client = client if client is not None else client_for(params.backend)
    return generate_env(env, inp.tools.get(env.env_id, []), inp.dags.get(env.env_id, []), params.seed,
                        tasks_per_env=params.tasks_per_env, attempts_per_task=params.attempts_per_task,
                        env_factory=env_factory, client=client, skip_ids=inp.existing_ids,
                        test_fraction=params.test_fraction, batch_id=batch_id, run_id=run_id,
                        judged=inp.judged.get(env.env_id))


def run(warehouse: str | None, params: GenerateParams | None = None, *, batch_id: str | None = None, client: Any = None,
        env_factory: EnvFactory | None = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect; returns its counts."""
    params = params or GenerateParams(**fields)
    row = params.run_row(batch_id)
    t0 = time.perf_counter()
    with reading(warehouse):  # one connection for the load's questions
        inp = load(warehouse, params)
    client = client if client is not None else client_for(params.backend)
    results = map_envs([partial(run_one, e, inp.only(e), params, row.run_id, batch_id=batch_id, client=client,
                                env_factory=env_factory) for e in inp.envs],
                       [len(inp.dags.get(e.env_id, [])) for e in inp.envs],
                       local=client is not None or env_factory is not None)  # see map_envs: they stay here
    counts = stage_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(row, counts))
    return counts


def run_generate(warehouse: str | None, seed: int | None = None, *, batch_id: str | None = None, client: Any = None,
                 env_factory: EnvFactory | None = None, **fields: Any) -> dict[str, Any]:
    """Stage 4 over the warehouse (``fields``: any of :class:`GenerateParams`; None: its default)."""
    return run(warehouse, GenerateParams(**given(seed=seed), **fields), batch_id=batch_id, client=client,
               env_factory=env_factory)
