"""Stage 1 flow: tool documentation -> tool_docs, tool_specs, toolsets (DESIGN.md "Ingest").

A thin recipe over :func:`autoforge.tooldocs.ingest_paths`: parse (pure, one coarse task),
then persist everything in one transaction through the single writer
(:func:`autoforge.warehouse.write_records`), then publish a table artifact with per-tool-set
counts. Runs against an ephemeral Prefect server when no ``PREFECT_API_URL`` is set.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from autoforge.pipeline import ingest_finished, ingest_plan
from autoforge.tooldocs import IngestResult, ingest_paths
from autoforge.types import Run


@task(name="parse-tool-docs", cache_policy=NO_CACHE)
def parse_tool_docs(paths: list[str], run_id: str) -> IngestResult:
    return ingest_paths(paths, run_id=run_id)


@task(name="persist-ingest", cache_policy=NO_CACHE)
def persist_ingest(result: IngestResult, run: Run, warehouse: str | None) -> dict[str, int]:
    from autoforge.warehouse import write_records

    return write_records(warehouse, [*result.records(), *result.rejections(run.run_id)], run=run)


def toolset_rows(result: IngestResult) -> list[dict]:
    """Per-tool-set counts for the artifact (and the summary)."""
    rows = []
    for ts in result.toolsets:
        specs = [s for s in result.specs if s.toolset == ts.name]
        rows.append({
            "toolset": ts.name,
            "docs": len(ts.doc_ids),
            "tools": ts.n_tools,
            "read": sum(s.effect == "read" for s in specs),
            "write": sum(s.effect == "write" for s in specs),
            "unknown": sum(s.effect == "unknown" for s in specs),
        })
    return rows


@flow(name="ingest-tool-docs", flow_run_name="ingest-bundled{bundled}", log_prints=True)
def ingest_tool_docs(
    paths: list[str] | None = None,
    bundled: bool = False,
    warehouse: str | None = None,
    batch_id: str | None = None,
) -> dict:
    """Ingest tool documentation into the warehouse.

    paths: files or folders of tool docs (a folder = one tool set; a folder of folders = one per subfolder).
    bundled: also ingest the corpus shipped with the package (10+ domains).
    warehouse: DuckDB file or SQLAlchemy URL (default: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb).
    batch_id: the factory batch this run belongs to (lineage); None when run on its own.
    """
    logger = get_run_logger()
    all_paths, run = ingest_plan(paths, bundled, batch_id)
    result = parse_tool_docs(all_paths, run.run_id)
    for error in result.errors:
        logger.warning("rejected: %s", error)
    counts = result.counts()
    run = ingest_finished(run, result)
    written = persist_ingest(quote(result), run, warehouse)
    rows = toolset_rows(result)
    create_table_artifact(
        key="ingest-toolsets",
        table=rows or [{"toolset": "(none)", "docs": 0, "tools": 0, "read": 0, "write": 0, "unknown": 0}],
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
