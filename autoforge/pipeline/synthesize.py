"""Stage 2 over the warehouse: tool sets -> environments (state schema + checked tool code).

``load`` reads the tool sets and their specs, :func:`synthesize_one` is the per-environment unit
(a Prefect task or a worker process runs it; it builds its own LLM client), :func:`persist`
writes every environment, tool, rejection and LLM call in one transaction.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from autoforge.dags.graph import build_graph, is_key_param, key_fields, required_params
from autoforge.dags.sample import unreachable_writes
from autoforge.envs.synthesis import SynthesisResult, acceptance_table, select_toolsets, synthesize_environment, toolset_specs
from autoforge.errors import ConfigError
from autoforge.pipeline.common import StageParams, persist
from autoforge.types import Run, ToolSet, ToolSpec
from autoforge.warehouse import query, read_records, table_exists

STAGE = "synthesize"


class SynthesizeParams(StageParams):
    """Parameters of a synthesis (flow ``synthesize-environments``, ``autoforge synthesize``, the factory)."""

    env: str | None = Field(None, description="only this tool set (by name); None = all")
    backend: str = Field("offline", description='"offline" (templates, no network) or "openai" (LLM code with bounded repair)')
    max_envs: int | None = Field(None, description="at most this many tool sets, in name order (quick runs)")

    def run_row(self, batch_id: str | None = None) -> Run:
        return Run.make(STAGE, {"env": self.env, "backend": self.backend, "max_envs": self.max_envs}, batch_id)


def load(warehouse: str | None, params: SynthesizeParams) -> list[tuple[ToolSet, list[ToolSpec]]]:
    """The tool sets to synthesize (all, or ``env``; at most ``max_envs``), each with its specs in order."""
    if not table_exists(warehouse, "toolsets"):
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    toolsets = select_toolsets(read_records(warehouse, ToolSet, order_by="name"), params.env)
    if params.max_envs is not None:
        if params.max_envs < 1:
            raise ConfigError(f"max_envs must be at least 1, got {params.max_envs}")
        toolsets = toolsets[:params.max_envs]
    if not toolsets:
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    wanted = {tid for t in toolsets for tid in t.tool_ids}
    names = {t.name for t in toolsets}
    specs = [s for s in read_records(warehouse, ToolSpec) if s.tool_id in wanted or s.toolset in names]
    return [(ts, mine) for ts in toolsets if (mine := toolset_specs(ts, specs))]


def make_client(backend: str, settings: Any = None):
    """The LLM client for ``backend`` with an in-memory call recorder (drained into the result)."""
    from autoforge.llm import MemoryRecorder, get_client

    recorder = MemoryRecorder()
    return get_client(settings, backend=backend, recorder=recorder), recorder


def synthesize_one(toolset: ToolSet, specs: list[ToolSpec], backend: str = "offline", run_id: str | None = None,
                   settings: Any = None) -> SynthesisResult:
    """One environment with its own client."""
    client, recorder = make_client(backend, settings)
    result = synthesize_environment(toolset, specs, client=client, run_id=run_id, settings=settings)
    result.llm_calls = [c.model_copy(update={"run_id": c.run_id or run_id}) for c in recorder.drain()]
    return with_reachability(result)


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
        "n_write_tools": sum(t.effect == "write" for t in accepted),
        "writes_unreachable": unreachable,
        "writes_by_state": by_state,
        "writes_standalone": [n for n in unreachable if not any(is_key_param(p, keys) for p in required_params(by_name[n]))]})
    return result


def finish_run(run: Run, results: list[SynthesisResult], failed: bool = False) -> Run:
    envs = [r.environment for r in results]
    return run.finish(
        "failed" if failed else "completed",
        environments=len(envs),
        ready=sum(e.status == "ready" for e in envs),
        partial=sum(e.status == "partial" for e in envs),
        failed=sum(e.status == "failed" for e in envs),
        tools=sum(e.n_tools for e in envs),
        tools_accepted=sum(e.n_tools_accepted for e in envs),
        rejections=sum(len(r.rejections) for r in results),
    )


def summary(results: list[SynthesisResult], run: Run, written: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "counts": dict(run.counts),
        "environments": [r.summary() for r in results],
        "table": acceptance_table(results),
        "written": written or {},
    }


def run(warehouse: str | None, params: SynthesizeParams | None = None, *, batch_id: str | None = None,
        settings: Any = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect. Returns ``{"run_id", "counts", "environments", "table", "written"}``."""
    params = params or SynthesizeParams(**fields)
    todo = load(warehouse, params)
    row = params.run_row(batch_id)
    results = [synthesize_one(ts, specs, params.backend, row.run_id, settings) for ts, specs in todo]
    row = finish_run(row, results)
    written = persist(warehouse, results, row)
    return summary(results, row, written)


def run_synthesis(warehouse: str | None, env: str | None = None, backend: str = "offline", *,
                  batch_id: str | None = None, max_envs: int | None = None, settings: Any = None) -> dict[str, Any]:
    """Synthesize environments for the tool sets in the warehouse and store the results."""
    return run(warehouse, SynthesizeParams(env=env, backend=backend, max_envs=max_envs), batch_id=batch_id, settings=settings)


def environment_checks(warehouse: str | None, env_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_environment_checks`` (acceptance, state or not, write tools reachable from a
    read, rules found / enforced / probed), for these environments or all."""
    rows = query(warehouse, "SELECT * FROM v_environment_checks ORDER BY name", read_only_check=False)
    return [r for r in rows if env_ids is None or r["env_id"] in set(env_ids)]
