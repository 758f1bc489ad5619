"""Stage 1 flow: tool documentation -> tool_docs, tool_specs, toolsets.

A thin recipe over :mod:`autoforge.pipeline.ingest`: parse (pure, one coarse task), persist
everything in one transaction, publish a table artifact with per-tool-set counts. Runs against
an ephemeral Prefect server when no ``PREFECT_API_URL`` is set.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import check_flow_inputs, choose_runner, stage_runner
from flows._params import model_flow

from autoforge.pipeline import ingest as stage
from autoforge.tooldocs import IngestResult
from autoforge.types import Run


@task(name="parse-tool-docs", cache_policy=NO_CACHE)
def parse_task(params: stage.IngestParams, run_id: str) -> IngestResult:
    return stage.parse(params, run_id)


@task(name="persist-ingest", cache_policy=NO_CACHE)
def persist_task(result: IngestResult, run: Run, warehouse: str | None) -> dict[str, int]:
    return stage.persist(warehouse, result, run)


@flow(name="ingest-tool-docs", flow_run_name="ingest-bundled{bundled}", log_prints=True)
@model_flow(stage.IngestParams)
def ingest_flow(params: stage.IngestParams, warehouse: str | None, batch_id: str | None, task_runner: str | None,
                dask_address: str | None) -> dict:
    """Ingest tool documentation into the warehouse (parsing runs as one task on the run's task runner)."""
    check_flow_inputs(params)
    runner_kind, address = choose_runner(task_runner, dask_address)
    logger = get_run_logger()
    params.all_paths()  # nothing to ingest: fail before any work
    run = params.run_row(batch_id)
    with stage_runner(runner_kind, address) as runner:  # one task: parsing, on the run's runner
        result = runner.submit(parse_task, {"params": params, "run_id": run.run_id}).result()
    for error in result.errors:
        logger.warning("rejected: %s", error)
    counts = result.counts()
    run = stage.finished(run, result)
    written = persist_task(quote(result), run, warehouse)
    rows = stage.toolset_rows(result)
    create_table_artifact(
        key="ingest-toolsets",
        table=rows or [{"toolset": "(none)", "docs": 0, "policies": 0, "tools": 0, "read": 0, "write": 0, "unknown": 0}],
        description=f"Tool sets ingested by run {run.run_id}: {counts['tools']} tools, {counts['rejected']} rejected documents",
    )
    logger.info("ingested %d tool sets, %d tools; %d documents rejected", counts["toolsets"], counts["tools"], counts["rejected"])
    return {
        "run_id": run.run_id,
        **counts,
        "errors": list(result.errors),
        "needs_llm": list(result.needs_llm),
        "toolsets": rows,
        "written": written,
    }
