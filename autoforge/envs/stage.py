"""The synthesis stage over a warehouse: read tool sets, synthesize, write once.

The CLI (``autoforge synthesize``) calls :func:`run_synthesis`; the Prefect flow
(``flows/synthesize.py``) calls the same pieces — :func:`load_inputs`,
:func:`synthesize_one` per environment (one task each), :func:`persist` once — so the
flow stays a thin recipe. DuckDB has one writer (DESIGN.md "Warehouse rules"): results are
returned as records and written in ONE transaction at the end.
"""

from __future__ import annotations

from typing import Any

from autoforge.envs.synthesis import SynthesisResult, acceptance_table, select_toolsets, synthesize_environment, toolset_specs
from autoforge.errors import ConfigError
from autoforge.types import Run, ToolSet, ToolSpec

STAGE = "synthesize"


def load_inputs(warehouse: str | None, env: str | None = None, max_envs: int | None = None) -> tuple[list[ToolSet], list[ToolSpec]]:
    """Tool sets to synthesize (all, or ``env``; at most ``max_envs``) and their tool specs."""
    from autoforge.warehouse import read_records, table_exists

    if not table_exists(warehouse, "toolsets"):
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    toolsets = select_toolsets(read_records(warehouse, ToolSet, order_by="name"), env)
    if max_envs is not None:
        if max_envs < 1:
            raise ConfigError(f"max_envs must be at least 1, got {max_envs}")
        toolsets = toolsets[:max_envs]
    if not toolsets:
        raise ConfigError("the warehouse has no tool sets yet: run `autoforge ingest` first")
    wanted = {tid for t in toolsets for tid in t.tool_ids}
    names = {t.name for t in toolsets}
    specs = [s for s in read_records(warehouse, ToolSpec) if s.tool_id in wanted or s.toolset in names]
    return toolsets, specs


def make_client(backend: str, settings: Any = None):
    """The LLM client for ``backend`` with an in-memory call recorder (drained into the results)."""
    from autoforge.llm import MemoryRecorder, get_client

    recorder = MemoryRecorder()
    return get_client(settings, backend=backend, recorder=recorder), recorder


def synthesize_one(toolset: ToolSet, specs: list[ToolSpec], backend: str = "offline", run_id: str | None = None,
                   settings: Any = None) -> SynthesisResult:
    """One environment with its own client (a Prefect task or a worker process can run this)."""
    client, recorder = make_client(backend, settings)
    result = synthesize_environment(toolset, specs, client=client, run_id=run_id, settings=settings)
    result.llm_calls = [c.model_copy(update={"run_id": c.run_id or run_id}) for c in recorder.drain()]
    return result


def finish_run(run: Run, results: list[SynthesisResult]) -> Run:
    envs = [r.environment for r in results]
    return run.finish(
        environments=len(envs),
        ready=sum(e.status == "ready" for e in envs),
        partial=sum(e.status == "partial" for e in envs),
        failed=sum(e.status == "failed" for e in envs),
        tools=sum(e.n_tools for e in envs),
        tools_accepted=sum(e.n_tools_accepted for e in envs),
        rejections=sum(len(r.rejections) for r in results),
    )


def persist(warehouse: str | None, results: list[SynthesisResult], run: Run) -> dict[str, int]:
    """Write every environment, tool, rejection and LLM call in one transaction."""
    from autoforge.warehouse import write_records

    records = [rec for r in results for rec in r.records()]
    return write_records(warehouse, records, run=run)


def summary(results: list[SynthesisResult], run: Run, written: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "counts": dict(run.counts),
        "environments": [r.summary() for r in results],
        "table": acceptance_table(results),
        "written": written or {},
    }


def run_synthesis(warehouse: str | None, env: str | None = None, backend: str = "offline", *,
                  batch_id: str | None = None, max_envs: int | None = None, settings: Any = None) -> dict[str, Any]:
    """Synthesize environments for the tool sets in the warehouse and store the results.

    Returns ``{"run_id", "counts", "environments": [per-env summary], "table", "written"}``."""
    toolsets, specs = load_inputs(warehouse, env, max_envs)
    run = Run.make(STAGE, {"env": env, "backend": backend, "max_envs": max_envs}, batch_id)
    results = [synthesize_one(ts, toolset_specs(ts, specs), backend, run.run_id, settings)
               for ts in toolsets if toolset_specs(ts, specs)]
    run = finish_run(run, results)
    written = persist(warehouse, results, run)
    return summary(results, run, written)
