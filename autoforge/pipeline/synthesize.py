"""Stage 2 over the warehouse: tool sets -> environments (state schema + checked tool code).

``load`` reads the tool sets and their specs, :func:`synthesize_one` is the per-environment unit
(a Prefect task or a worker process runs it; it builds its own LLM client), :func:`persist_results`
writes every environment, tool, rejection and LLM call in one transaction.

What a failure leaves behind:

* **One environment raises** (anything but ``KeyboardInterrupt``/``SystemExit``): it becomes that
  environment's failure with its reason (:func:`autoforge.envs.synthesis.failed_environment`, a
  row with the tool set's *failed* id and an ``environment_error`` rejection); the others are
  written; the run is ``failed``.
* **The stage itself raises** (an interrupt, the write failing): the LLM calls already made —
  those of finished environments and of the one in progress — are written with the run row
  (``failed``) before the exception goes on, so what was paid for is never lost. The LLM backend
  reads the warehouse's ``llm_calls`` as its response cache (:func:`load_llm_cache`): a re-run
  sends no request that was answered before, and the calls it records are new rows (``cached``),
  never a second copy of an old one (ids are unique).
* **A re-run never makes an environment worse.** Re-running on a synthesized environment is an
  upsert: the same tool set, state schema and tool sources give the same ``env_id`` and
  ``code_id`` values, so the new rows replace the stored ones. The one exception, the *keep rule*: when
  the warehouse holds an environment with the same ``env_id`` that accepted **more** tools than
  this run's result, that result is not written (neither the environment, nor its tools, rules
  or rejections; its LLM calls are). Same ``env_id`` means the same code, so a worse verdict
  comes from the surroundings (``AUTOFORGE_TOOL_TIMEOUT=-1``, a sandbox that cannot start, an
  overloaded machine), never from the code. The environment is reported in ``kept`` with the
  reason, the run is ``failed`` and the summary's ``status`` says so.
* **Every tool rejected for a sandbox reason** (``SYSTEMIC_REASONS``: sandbox_error, timeout,
  memory_limit, check_error) with no better row stored: the failed environment is written (nothing better
  exists) and the run is ``failed`` (:attr:`SynthesisResult.problem`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from pydantic import Field

from autoforge.dags.graph import build_graph
from autoforge.domain.keys import is_key_param, key_fields, required_params
from autoforge.domain.tool_kinds import in_tasks
from autoforge.domain.world_checks import FINDING_KINDS
from autoforge.domain.world_checks import counts as finding_counts
from autoforge.domain.world_checks import state_findings
from autoforge.dags.sample import unreachable_writes
from autoforge.envs.smoke import describe
from autoforge.envs.synthesis import (
    SynthesisResult,
    acceptance_table,
    failed_environment,
    select_toolsets,
    synthesize_environment,
    toolset_specs,
)
from autoforge.errors import ConfigError
from autoforge.llm.messages import clip
from autoforge.llm.record import MemoryRecorder, stamped
from autoforge.pipeline.common import TOOLSET_IDS_HELP, StageParams, given, ids_clause, persist
from autoforge.pipeline.parallel import map_envs
from autoforge.types import EnvironmentRecord, LLMCall, PolicyDoc, Run, ToolSet, ToolSpec, WorldCheck
from autoforge.warehouse import query, read_records, reading, table_exists

STAGE = "synthesize"


class SynthesizeParams(StageParams):
    """Parameters of a synthesis (flow ``synthesize-environments``, ``autoforge synthesize``, the factory)."""

    env: str | None = Field(None, description="only this tool set (by name); None = all")
    backend: str = Field("offline", description='"offline" (templates, no network) or "openai" (LLM code with bounded repair)')
    max_envs: int | None = Field(None, description="at most this many tool sets, in name order (quick runs)")
    toolset_ids: list[str] | None = Field(None, description=TOOLSET_IDS_HELP)

    def run_row(self, batch_id: str | None = None) -> Run:
        scope = {} if self.toolset_ids is None else {"toolset_ids": sorted(self.toolset_ids)}  # unscoped: the id it had
        return Run.make(STAGE, {"env": self.env, "backend": self.backend, "max_envs": self.max_envs, **scope}, batch_id)


def load(warehouse: str | None, params: SynthesizeParams) -> list[tuple[ToolSet, list[ToolSpec], list[PolicyDoc]]]:
    """The tool sets to synthesize (all, those of ``toolset_ids``, or ``env`` among them; at most
    ``max_envs``), each with its specs in order and its policy documents."""
    if not table_exists(warehouse, "toolsets"):
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    toolsets = read_records(warehouse, ToolSet, order_by="name")
    if params.toolset_ids is not None:
        scope = set(params.toolset_ids)
        toolsets = [t for t in toolsets if t.toolset_id in scope]
        if not toolsets:
            raise ConfigError("none of the tool sets to synthesize is in the warehouse: ingest their docs first "
                              "(`autoforge ingest PATH`, or give PATH to `autoforge synthesize`)")
    toolsets = select_toolsets(toolsets, params.env)
    if params.max_envs is not None:
        if params.max_envs < 1:
            raise ConfigError(f"max_envs must be at least 1, got {params.max_envs}")
        toolsets = toolsets[:params.max_envs]
    if not toolsets:
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    wanted = {tid for t in toolsets for tid in t.tool_ids}
    names = {t.name for t in toolsets}
    specs = [s for s in read_records(warehouse, ToolSpec) if s.tool_id in wanted or s.toolset in names]
    policies = read_records(warehouse, PolicyDoc) if table_exists(warehouse, "policy_docs") else []
    return [(ts, mine, toolset_policies(ts, policies)) for ts in toolsets if (mine := toolset_specs(ts, specs))]


def toolset_policies(toolset: ToolSet, policies: list[PolicyDoc]) -> list[PolicyDoc]:
    """The policy documents that govern ``toolset``: those linked to its id, else (older rows) to its name."""
    mine = [p for p in policies if p.toolset_id == toolset.toolset_id]
    return mine or [p for p in policies if p.toolset == toolset.name and p.toolset_id is None]


def make_client(backend: str, settings: Any = None, *, cache: Any = None, recorder: MemoryRecorder | None = None):
    """The LLM client for ``backend`` with an in-memory call recorder (drained into the result) and
    ``cache`` (the warehouse's, :func:`load_llm_cache`; None: no cache)."""
    from autoforge.llm import get_client

    recorder = recorder if recorder is not None else MemoryRecorder()
    return get_client(settings, backend=backend, recorder=recorder, cache=cache), recorder


def load_cache(warehouse: str | None, backend: str) -> Any:
    """The LLM response cache for ``backend`` from the warehouse's ``llm_calls``; None offline."""
    if backend in (None, "", "offline"):
        return None
    from autoforge.pipeline.llm_cache import load_llm_cache

    return load_llm_cache(warehouse)


def synthesize_one(toolset: ToolSet, specs: list[ToolSpec], backend: str = "offline", run_id: str | None = None,
                   settings: Any = None, *, cache: Any = None, recorder: MemoryRecorder | None = None,
                   policies: list[PolicyDoc] | None = None) -> SynthesisResult:
    """One environment with its own client (answering from ``cache`` where it can). Whatever the
    synthesis raises (``Exception``) is this environment's failure; its LLM calls are in the result
    either way. ``recorder``: where the client records, so a caller can still drain the calls of an
    environment that was interrupted (:func:`run` does)."""
    client, recorder = make_client(backend, settings, cache=cache, recorder=recorder)
    try:
        result = with_reachability(synthesize_environment(toolset, specs, client=client, run_id=run_id, settings=settings,
                                                          policies=policies))
    except Exception as exc:  # noqa: BLE001 - one broken environment must not sink the stage
        result = failed_environment(toolset, getattr(client, "name", backend), exc, run_id)
    result.llm_calls = stamped(recorder.drain(), run_id)
    return result


def with_reachability(result: SynthesisResult) -> SynthesisResult:
    """The environment record with its linkage check: the accepted write tools, those no read
    tool leads to in the offline tool graph (stage 3 builds the same graph), and those a read
    leads to only through state edges (the read shows what they change; no output feeds them)."""
    env, accepted = result.environment, result.accepted
    graph = build_graph(env, accepted)
    unreachable = unreachable_writes(graph, accepted)
    data_only = graph.model_copy(update={"edges": [e for e in graph.edges if e.kind == "data"]})
    by_state = sorted(set(unreachable_writes(data_only, accepted)) - set(unreachable))
    keys = key_fields(env)
    by_name = {t.name: t for t in accepted}
    result.environment = env.model_copy(update={
        "n_write_tools": sum(t.effect == "write" and in_tasks(t.kind) for t in accepted),  # a hand-off is no task's write
        "writes_unreachable": unreachable,
        "writes_by_state": by_state,
        "writes_standalone": [n for n in unreachable if not any(is_key_param(p, keys) for p in required_params(by_name[n]))]})
    return result


def finish_run(run: Run, results: list[SynthesisResult], failed: bool = False, kept: dict[str, str] | None = None,
               world_findings: int = 0) -> Run:
    """The run row: ``failed`` when a unit was lost (``failed``), a result was kept back (``kept``)
    or a result has a :attr:`~SynthesisResult.problem`; ``world_findings``: the sample states'
    world-check findings written (they never fail the run)."""
    envs = [r.environment for r in results]
    kept = kept or {}
    problems = sum(r.problem is not None for r in results)
    return run.finish(
        "failed" if failed or kept or problems else "completed",
        environments=len(envs),
        ready=sum(e.status == "ready" for e in envs),
        partial=sum(e.status == "partial" for e in envs),
        failed=sum(e.status == "failed" for e in envs),
        tools=sum(e.n_tools for e in envs),
        tools_accepted=sum(e.n_tools_accepted for e in envs),
        rejections=sum(len(r.rejections) for r in results),
        problems=problems,
        kept=len(kept),
        world_findings=world_findings,
    )


def kept_back(warehouse: str | None, results: list[SynthesisResult]) -> dict[str, str]:
    """The keep rule (module docstring): env_id -> why, for each result whose env_id the warehouse
    holds with more accepted tools. Those results must not be written."""
    if not results or not table_exists(warehouse, "environments"):
        return {}
    where, params = ids_clause("env_id", [r.environment.env_id for r in results])
    stored = {e.env_id: e for e in read_records(warehouse, EnvironmentRecord, where, params)}
    out: dict[str, str] = {}
    for r in results:
        new, old = r.environment, stored.get(r.environment.env_id)
        if old is not None and old.n_tools_accepted > new.n_tools_accepted:
            why = "; ".join(f"{t.name}: {clip(t.reason, 200)}" for t in r.tools if t.status == "rejected")[:1500]
            out[new.env_id] = (
                f"environment {new.name} ({new.env_id}): this run accepted {new.n_tools_accepted}/{new.n_tools} tools of "
                f"the same code the warehouse holds as {old.status} with {old.n_tools_accepted}/{old.n_tools} accepted, "
                f"so the stored rows were kept and this result was not written. Same code, worse verdict: the "
                f"checks' surroundings changed (settings such as AUTOFORGE_TOOL_TIMEOUT / AUTOFORGE_TOOL_MEMORY_MB, "
                f"the sandbox, the machine); fix them and re-run. Rejected: {why or '-'}")
    return out


def world_checks(env: EnvironmentRecord, run_id: str | None = None) -> list[WorldCheck]:
    """The world checks of ``env``'s sample state (:func:`autoforge.domain.world_checks.state_findings`)
    as ``world_checks`` rows; none for a failed environment (it has no usable state). Findings do not
    discard an environment: its tasks that hold them are rejected at verification."""
    if env.status == "failed":
        return []
    return [WorldCheck.of(env.env_id, None, f, run_id) for f in state_findings(env.state_schema, env.sample_state)]


def persist_results(warehouse: str | None, results: list[SynthesisResult], run: Run, *, failed: bool = False
                    ) -> tuple[Run, dict[str, int], dict[str, str]]:
    """The stage's ONE write under the keep rule: every result but those :func:`kept_back` with the
    world checks of its sample state, the LLM calls of all of them, and the finished run row.
    Returns (run, rows written per table, kept)."""
    kept = kept_back(warehouse, results)
    written_results = [r for r in results if r.environment.env_id not in kept]
    checks = [w for r in written_results for w in world_checks(r.environment, run.run_id)]
    run = finish_run(run, results, failed, kept, world_findings=len(checks))
    calls = [c for r in results if r.environment.env_id in kept for c in r.llm_calls]
    written = persist(warehouse, written_results, run, extra=[*calls, *checks])
    return run, written, kept


def save_calls(warehouse: str | None, calls: list[LLMCall], run: Run, exc: BaseException) -> None:
    """After the stage raised ``exc``: write ``calls`` (paid for) with the run row, ``failed``. If
    even that fails, the reason is added to ``exc`` as a note (``exc`` is what the caller re-raises)."""
    failed = run.finish("failed", error=describe(exc), llm_calls_saved=len(calls))
    try:
        persist(warehouse, [], failed, extra=calls)
    except Exception as again:  # noqa: BLE001 - the original exception is the one to report
        exc.add_note(f"the {len(calls)} LLM calls of this synthesize run could not be saved either: {again}")


def summary(results: list[SynthesisResult], run: Run, written: dict[str, int] | None = None,
            kept: dict[str, str] | None = None) -> dict[str, Any]:
    """``status``: the run's (``failed`` when an environment raised, was kept back or every tool
    failed for a sandbox reason; ``problems`` says which and why)."""
    kept = kept or {}
    problems = [{"env": r.environment.name, "env_id": r.environment.env_id,
                 "problem": kept.get(r.environment.env_id) or r.problem}
                for r in results if r.environment.env_id in kept or r.problem]
    return {
        "run_id": run.run_id,
        "status": run.status,
        "counts": dict(run.counts),
        "environments": [{**r.summary(), "kept": r.environment.env_id in kept,
                          "world_checks": world_counts(r.environment)} for r in results],
        "table": acceptance_table(results),
        "written": written or {},
        "problems": problems,
    }


def world_counts(env: EnvironmentRecord) -> dict[str, int]:
    """``env``'s sample-state findings per kind (:func:`world_checks`), the kinds with any."""
    return {k: n for k, n in finding_counts(world_checks(env)).items() if n}


def run(warehouse: str | None, params: SynthesizeParams | None = None, *, batch_id: str | None = None,
        settings: Any = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect. Returns ``{"run_id", "counts", "environments", "table", "written"}``."""
    params = params or SynthesizeParams(**fields)
    with reading(warehouse):  # one connection for the load's questions
        todo = load(warehouse, params)
        cache = load_cache(warehouse, params.backend)
    row = params.run_row(batch_id)
    recorder = MemoryRecorder()  # the environment in progress records here; synthesize_one drains it
    results: list[SynthesisResult] = []
    online = params.backend not in (None, "", "offline")
    try:
        if online:  # here, one by one: the calls of an interrupted unit are in `recorder`, saved below
            for ts, specs, policies in todo:
                results.append(synthesize_one(ts, specs, params.backend, row.run_id, settings, cache=cache,
                                              recorder=recorder, policies=policies))
        else:  # nothing is paid for: the units may run in worker processes (map_envs)
            results.extend(map_envs([partial(synthesize_one, ts, specs, params.backend, row.run_id, settings,
                                             policies=policies) for ts, specs, policies in todo],
                                    [len(specs) for _, specs, _ in todo]))
        row, written, kept = persist_results(warehouse, results, row)
    except BaseException as exc:  # an interrupt, or the write itself: keep what was paid for, then re-raise
        save_calls(warehouse, [c for r in results for c in r.llm_calls] + stamped(recorder.drain(), row.run_id), row, exc)
        raise
    return summary(results, row, written, kept)


def run_synthesis(warehouse: str | None, env: str | None = None, backend: str | None = None, *,
                  batch_id: str | None = None, max_envs: int | None = None, settings: Any = None,
                  paths: list[str] | None = None, all_toolsets: bool = False) -> dict[str, Any]:
    """Synthesize environments for the tool sets in the warehouse and store the results (None: the
    :class:`SynthesizeParams` default). ``paths``: ingest these tool docs first (an ingest run; the
    same docs give the same rows) and synthesize only the tool sets they define, or every tool set
    in the warehouse with ``all_toolsets``. The summary's ``ingest`` is that ingest's summary."""
    scope: list[str] | None = None
    ingested = None
    if paths:
        from autoforge.pipeline import ingest

        ingested = ingest.run(warehouse, ingest.IngestParams(paths=[str(p) for p in paths]), batch_id=batch_id)
        if not all_toolsets:
            scope = [t["toolset_id"] for t in ingested["toolsets"]]
            if not scope:
                raise ConfigError("the docs define no tool set, so there is nothing to synthesize: "
                                  + ("; ".join(ingested["errors"][:3]) or "no tool was found in them"))
    out = run(warehouse, SynthesizeParams(**given(env=env, backend=backend, max_envs=max_envs, toolset_ids=scope)),
              batch_id=batch_id, settings=settings)
    return {**out, "ingest": ingested} if ingested is not None else out


def environment_checks(warehouse: str | None, env_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_environment_checks`` (acceptance, state or not, write tools reachable from a
    read, rules found / enforced / probed), for these environments or all."""
    rows = query(warehouse, "SELECT * FROM v_environment_checks ORDER BY name", read_only_check=False)
    return [r for r in rows if env_ids is None or r["env_id"] in set(env_ids)]


WORLD_KINDS_SAMPLE = ("dangling_reference", "nested_reference", "placeholder", "empty_container", "type_mismatch",
                      "format_mismatch")  # the sample_* columns of v_world_checks (a state has no writes)


def world_check_rows(warehouse: str | None, env_ids: list[str] | None = None,
                     names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_world_checks`` (per environment: its sample state's findings per kind, its
    tasks' findings per kind, tasks with findings, rejected, and verified with a rejecting one),
    for these environments (by id or by name) or all; each with ``sample_kinds`` and
    ``task_kinds``: the kinds found, as ``{kind: n}``."""
    if not table_exists(warehouse, "world_checks"):
        return []
    rows = query(warehouse, "SELECT * FROM v_world_checks ORDER BY name, env_id", read_only_check=False)
    out = []
    for r in rows:
        if (env_ids is not None and r["env_id"] not in set(env_ids)) or (names is not None and r["name"] not in set(names)):
            continue
        sample = {k: r[f"sample_{k}"] for k in WORLD_KINDS_SAMPLE if r[f"sample_{k}"]}
        tasks = {k: r[f"tasks_{k}"] for k in FINDING_KINDS if r[f"tasks_{k}"]}
        out.append({**r, "sample_kinds": sample, "task_kinds": tasks})
    return out

