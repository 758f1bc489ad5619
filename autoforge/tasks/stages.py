"""Stage runners over the warehouse: sample (graphs, walks, merges, DAGs), generate, verify.

Each runner reads its inputs with ``read_records``, runs the per-environment library
function (:func:`sample_env`, :func:`generate_env`, :func:`verify_env` — the units a Prefect
flow fans out), and persists everything with ONE ``write_records`` call (DuckDB has one
writer). Ids are content hashes and the run id is a hash of (stage, batch, params), so a
re-run with the same seed upserts the same rows and adds none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from autoforge.dags.build import DagKnobs, build_dags
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import StartRule, sample_sequences
from autoforge.tasks.execute import EnvFactory
from autoforge.tasks.generate import TEST_FRACTION, duplicate_key, generate_tasks
from autoforge.tasks.verify import verify_tasks
from autoforge.types import (EnvironmentRecord, LLMCall, Rejection, Run, Task, TaskDag, ToolCode, ToolGraph, ToolSequence,
                             VerificationResult, content_id, utcnow)


@dataclass
class SampleResult:
    env_id: str
    graph: ToolGraph
    sequences: list[ToolSequence]
    dags: list[TaskDag]
    rejections: list[Rejection]
    llm_calls: list[LLMCall] = field(default_factory=list)  # online backend: every call, for the warehouse

    def records(self) -> list[Any]:
        return [self.graph, *self.sequences, *self.dags, *self.rejections, *self.llm_calls]

    def row(self, name: str = "") -> dict[str, Any]:
        return {"environment": name or self.env_id, "edges": len(self.graph.edges),
                "walks": sum(s.source == "walk" for s in self.sequences),
                "merged": sum(s.source == "merge" for s in self.sequences), "dags": len(self.dags),
                "rejected": len(self.rejections)}


@dataclass
class StageResult:
    """What one environment gave a generate or verify stage."""

    env_id: str
    tasks: list[Task] = field(default_factory=list)
    results: list[VerificationResult] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    attempts: int = 0
    llm_calls: list[LLMCall] = field(default_factory=list)  # online backend: every call, for the warehouse

    def records(self) -> list[Any]:
        return [*self.tasks, *self.results, *self.rejections, *self.llm_calls]


def run_record(stage: str, batch_id: str | None, params: dict[str, Any]) -> Run:
    return Run.make(stage, params, batch_id)


def finish(run: Run, counts: dict[str, Any], failed: bool = False) -> Run:
    return run.model_copy(update={"status": "failed" if failed else "completed", "counts": counts, "finished_at": utcnow()})


# --------------------------------------------------------------------------- per environment


def sample_env(env: EnvironmentRecord, tools: list[ToolCode], seed: int, *, walks: int = 40, merges: int = 40,
               min_len: int = 2, max_len: int = 5, start: StartRule = "lookup", dag_variants: int = 2,
               client: Any = None, knobs: DagKnobs | None = None, run_id: str | None = None) -> SampleResult:
    """Graph -> walks + merges -> DAGs for one environment (paper Sec. 3.2)."""
    mine = [t for t in tools if t.env_id == env.env_id and t.status == "accepted"]
    graph = build_graph(env, mine, client, run_id=run_id)
    seqs = sample_sequences(graph, mine, walks, seed, min_len=min_len, max_len=max_len, start=start, n_merged=merges, env=env)
    seqs = [s.model_copy(update={"run_id": run_id}) for s in seqs]
    dags, rejections = build_dags(graph, seqs, mine, env, seed=seed, variants=dag_variants, knobs=knobs, run_id=run_id)
    if not seqs:
        rejections.append(Rejection(rejection_id=content_id("rej", "sample", env.env_id, "no_sequence"), stage="sample",
                                    item_id=env.env_id, reason="no_sequence",
                                    detail=f"no walk of {min_len}..{max_len} tools ending in a write (start={start})",
                                    run_id=run_id))
    return SampleResult(env.env_id, graph, seqs, dags, rejections, drain_calls(client, run_id))


def generate_env(env: EnvironmentRecord, tools: list[ToolCode], dags: list[TaskDag], seed: int, *, tasks_per_env: int = 120,
                 attempts_per_task: int = 4, env_factory: EnvFactory | None = None, client: Any = None,
                 skip_ids: set[str] | None = None, test_fraction: float = TEST_FRACTION, batch_id: str | None = None,
                 run_id: str | None = None) -> StageResult:
    tasks, rejections = generate_tasks(env, tools, dags, seed, n_tasks=tasks_per_env,
                                       max_attempts=tasks_per_env * attempts_per_task, env_factory=env_factory, client=client,
                                       test_fraction=test_fraction, skip_ids=skip_ids, batch_id=batch_id, run_id=run_id)
    return StageResult(env.env_id, tasks=tasks, rejections=rejections, attempts=len(tasks) + len(rejections),
                       llm_calls=drain_calls(client, run_id))


def verify_env(env: EnvironmentRecord, tools: list[ToolCode], tasks: list[Task], dags: list[TaskDag], *,
               existing: dict[str, str] | None = None, env_factory: EnvFactory | None = None,
               run_id: str | None = None) -> StageResult:
    out, results, rejections = verify_tasks(env, tools, tasks, dags, existing=existing, env_factory=env_factory, run_id=run_id)
    return StageResult(env.env_id, tasks=out, results=results, rejections=rejections, attempts=len(tasks))


# --------------------------------------------------------------------------- warehouse readers


def _ids_clause(column: str, ids: Iterable[str] | None) -> tuple[str | None, dict]:
    ids = sorted(set(ids or []))
    if not ids:
        return None, {}
    names = [f"i{k}" for k in range(len(ids))]
    return f"{column} IN ({', '.join(':' + n for n in names)})", dict(zip(names, ids))


def load_environments(warehouse: str | None, env_ids: Iterable[str] | None = None, *, env: str | None = None,
                      max_envs: int | None = None) -> tuple[list[EnvironmentRecord], list[ToolCode]]:
    """Usable environments (ready or partial; only ``env`` by name / ``env_ids`` when given, at most
    ``max_envs`` in name order) and their accepted tools."""
    from autoforge.errors import ConfigError
    from autoforge.warehouse.store import read_records

    where, params = _ids_clause("env_id", env_ids)
    conds = [x for x in [where, "status IN ('ready', 'partial')"] if x]
    if env is not None:
        conds.append("name = :env_name")
        params["env_name"] = env
    envs = read_records(warehouse, EnvironmentRecord, " AND ".join(conds), params, order_by="name, env_id")
    if env is not None and not envs:
        names = sorted({e.name for e in read_records(warehouse, EnvironmentRecord)})
        raise ConfigError(f"no usable environment named {env!r}; environments in the warehouse: {names or 'none'}")
    if max_envs is not None:
        envs = envs[:max_envs]
    twhere, tparams = _ids_clause("env_id", [e.env_id for e in envs])
    tools = read_records(warehouse, ToolCode, " AND ".join(x for x in [twhere, "status = 'accepted'"] if x), tparams) if envs else []
    return envs, tools


def _by_env(items: Iterable[Any]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for x in items:
        out.setdefault(x.env_id, []).append(x)
    return out


# --------------------------------------------------------------------------- stage inputs and outputs


@dataclass
class StageInputs:
    """What a stage reads: environments, their accepted tools, DAGs, tasks, and lookups for re-runs."""

    envs: list[EnvironmentRecord]
    tools: dict[str, list[ToolCode]]
    dags: dict[str, list[TaskDag]] = field(default_factory=dict)
    tasks: dict[str, list[Task]] = field(default_factory=dict)
    existing_ids: set[str] = field(default_factory=set)  # generate: task ids already stored
    existing_keys: dict[str, str] = field(default_factory=dict)  # verify: duplicate keys of verified tasks


def load_dags(warehouse: str | None, env_ids: list[str]) -> list[TaskDag]:
    """The stored DAGs of these environments."""
    from autoforge.warehouse.store import read_records

    where, params = _ids_clause("env_id", env_ids)
    return read_records(warehouse, TaskDag, where, params) if where else []


def load_inputs(warehouse: str | None, stage: str, *, env: str | None = None, env_ids: Iterable[str] | None = None,
                max_envs: int | None = None, recheck: bool = False) -> StageInputs:
    """Inputs of ``stage`` (sample | generate | verify) from the warehouse."""
    from autoforge.warehouse.store import query, read_records

    envs, tools = load_environments(warehouse, env_ids, env=env, max_envs=max_envs)
    out = StageInputs(envs=envs, tools=_by_env(tools))
    ids = [e.env_id for e in envs]
    if stage == "sample" or not ids:
        return out
    where, params = _ids_clause("env_id", ids)
    out.dags = _by_env(load_dags(warehouse, ids))
    if stage == "generate":
        out.existing_ids = {r["task_id"] for r in query(warehouse, f"SELECT task_id FROM tasks WHERE {where}", params,
                                                        read_only_check=False)}
    elif stage == "verify":
        tasks = read_records(warehouse, Task, where, params)
        dag_by_id = {d.dag_id: d for ds in out.dags.values() for d in ds}
        out.tasks = _by_env(t for t in tasks if recheck or t.status == "generated")
        if not recheck:
            out.existing_keys = {duplicate_key(t, dag_by_id[t.dag_id]): t.task_id for t in tasks
                                 if t.status == "verified" and t.dag_id in dag_by_id}
    else:
        from autoforge.errors import ConfigError

        raise ConfigError(f"unknown stage {stage!r}; valid: sample, generate, verify")
    return out


def persist(warehouse: str | None, results: list[Any], run: Run) -> dict[str, int]:
    """ONE write_records call for a whole stage (DuckDB's single writer)."""
    from autoforge.warehouse.store import write_records

    return write_records(warehouse, [r for res in results for r in res.records()], run)


def client_for(backend: str | None) -> Any:
    """None for the offline backend, else the configured LLM client (AUTOFORGE_OPENAI_*)."""
    if backend in (None, "", "offline"):
        return None
    from autoforge.llm import MemoryRecorder, get_client

    return get_client(backend=backend, recorder=MemoryRecorder())


def drain_calls(client: Any, run_id: str | None) -> list[LLMCall]:
    """The LLM calls ``client`` recorded since the last drain, stamped with the run (persisted with the stage)."""
    drain = getattr(getattr(client, "recorder", None), "drain", None)
    if drain is None:
        return []
    return [c.model_copy(update={"run_id": c.run_id or run_id}) for c in drain()]


# --------------------------------------------------------------------------- stage runners (no Prefect)


def run_sample(warehouse: str | None, seed: int = 0, *, env: str | None = None, env_ids: Iterable[str] | None = None,
               max_envs: int | None = None, walks: int = 40, merges: int = 40, min_len: int = 2, max_len: int = 5,
               start: StartRule = "lookup", dag_variants: int = 2, client: Any = None,
               batch_id: str | None = None) -> dict[str, Any]:
    """Stage 3 over the warehouse: one graph, the sequences and the DAGs of every usable environment."""
    params = {"seed": seed, "env": env, "env_ids": sorted(env_ids or []), "max_envs": max_envs, "walks": walks,
              "merges": merges, "min_len": min_len, "max_len": max_len, "start": start, "dag_variants": dag_variants,
              "method": getattr(client, "name", "offline") if client is not None else "offline"}
    run = run_record("sample", batch_id, params)
    t0 = time.perf_counter()
    inp = load_inputs(warehouse, "sample", env=env, env_ids=env_ids, max_envs=max_envs)
    results = [sample_env(e, inp.tools.get(e.env_id, []), seed, walks=walks, merges=merges, min_len=min_len,
                          max_len=max_len, start=start, dag_variants=dag_variants, client=client, run_id=run.run_id)
               for e in inp.envs]
    counts = sample_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(run, counts))
    return counts


def sample_counts(results: list[SampleResult], seconds: float) -> dict[str, Any]:
    return {"environments": len(results), "in": sum(len(r.sequences) for r in results),
            "out": len({d.seq_id for r in results for d in r.dags}), "dags": sum(len(r.dags) for r in results),
            "rejected": sum(len(r.rejections) for r in results), "seconds": round(seconds, 3)}


def run_generate(warehouse: str | None, seed: int = 0, *, env: str | None = None, env_ids: Iterable[str] | None = None,
                 max_envs: int | None = None, tasks_per_env: int = 120, attempts_per_task: int = 4,
                 env_factory: EnvFactory | None = None, client: Any = None, test_fraction: float = TEST_FRACTION,
                 batch_id: str | None = None) -> dict[str, Any]:
    """Stage 4 over the warehouse: tasks from the stored DAGs (task ids already stored are left as they are)."""
    params = {"seed": seed, "env": env, "env_ids": sorted(env_ids or []), "max_envs": max_envs,
              "tasks_per_env": tasks_per_env, "attempts_per_task": attempts_per_task, "test_fraction": test_fraction}
    run = run_record("generate", batch_id, params)
    t0 = time.perf_counter()
    inp = load_inputs(warehouse, "generate", env=env, env_ids=env_ids, max_envs=max_envs)
    results = [generate_env(e, inp.tools.get(e.env_id, []), inp.dags.get(e.env_id, []), seed, tasks_per_env=tasks_per_env,
                            attempts_per_task=attempts_per_task, env_factory=env_factory, client=client,
                            skip_ids=inp.existing_ids, test_fraction=test_fraction, batch_id=batch_id, run_id=run.run_id)
               for e in inp.envs]
    counts = stage_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(run, counts))
    return counts


def stage_counts(results: list[StageResult], seconds: float) -> dict[str, Any]:
    verified = sum(1 for r in results for t in r.tasks if t.status == "verified")
    verifying = any(r.results for r in results)
    return {"environments": len(results), "in": sum(r.attempts for r in results),
            "out": verified if verifying else sum(len(r.tasks) for r in results),
            "tasks": sum(len(r.tasks) for r in results), "verified": verified,
            "rejected": sum(len(r.rejections) for r in results), "seconds": round(seconds, 3)}


def run_verify(warehouse: str | None, *, env: str | None = None, env_ids: Iterable[str] | None = None,
               max_envs: int | None = None, env_factory: EnvFactory | None = None, recheck: bool = False,
               batch_id: str | None = None) -> dict[str, Any]:
    """Stage 5 over the warehouse: verify every task still ``generated`` (every task with ``recheck``)."""
    params = {"env": env, "env_ids": sorted(env_ids or []), "max_envs": max_envs, "recheck": recheck}
    run = run_record("verify", batch_id, params)
    t0 = time.perf_counter()
    inp = load_inputs(warehouse, "verify", env=env, env_ids=env_ids, max_envs=max_envs, recheck=recheck)
    results = [verify_env(e, inp.tools.get(e.env_id, []), inp.tasks[e.env_id], inp.dags.get(e.env_id, []),
                          existing=inp.existing_keys, env_factory=env_factory, run_id=run.run_id)
               for e in inp.envs if inp.tasks.get(e.env_id)]
    counts = stage_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(run, counts))
    return counts
