"""Stage runners over a warehouse: read inputs, call the pure stage functions, write the results
through the single writer (one transaction per stage). The CLI calls these directly; the
Prefect flows in ``flows/`` call the same pure functions with Prefect's fan-out and retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoforge.types import Rejection, Run, content_id
from autoforge.warehouse import write_records


def run_ingest(
    warehouse: str | None,
    paths: list[str | Path] | None = None,
    bundled: bool = False,
    batch_id: str | None = None,
) -> dict[str, Any]:
    """Ingest tool documentation into ``tool_docs``, ``tool_specs`` and ``toolsets``."""
    from autoforge.tooldocs.ingest import bundled_corpus_path, ingest_paths

    all_paths = [str(p) for p in (paths or [])]
    if bundled:
        all_paths.append(str(bundled_corpus_path()))
    run = Run.make("ingest", {"paths": all_paths}, batch_id)
    result = ingest_paths(all_paths, run_id=run.run_id)
    rejected = [d for d in result.docs if d.status == "rejected"]
    rejections = [
        Rejection(
            rejection_id=content_id("rej", "ingest", d.doc_id, d.error),
            stage="ingest",
            item_id=d.doc_id,
            reason=_reason_category(d.error or "rejected"),
            detail=d.error,
            run_id=run.run_id,
        )
        for d in rejected
    ]
    run = run.finish(
        docs_in=len(result.docs),
        docs_rejected=len(rejected),
        toolsets=len(result.toolsets),
        tools=len(result.specs),
    )
    write_records(warehouse, [*result.docs, *result.specs, *result.toolsets, *rejections], run=run)
    return {
        "run_id": run.run_id,
        "n_toolsets": len(result.toolsets),
        "n_tools": len(result.specs),
        "n_rejected": len(rejected),
        "errors": list(result.errors),
        "toolsets": [{"toolset": t.name, "tools": t.n_tools, "docs": len(t.doc_ids)} for t in result.toolsets],
    }


def _reason_category(message: str) -> str:
    """The reason part of 'file at location: reason', shortened to a category for the funnel view."""
    reason = message.rsplit(": ", 1)[-1].strip()
    return reason[:60]
