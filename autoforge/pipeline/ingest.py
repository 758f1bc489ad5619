"""Stage 1 over the warehouse: tool documentation -> ``tool_docs``, ``tool_specs``, ``toolsets``, ``policy_docs``.

Parsing is pure (:func:`autoforge.tooldocs.ingest_paths`); this module plans the run (which
files, which run row), and writes the parsed records and the rejected documents in one transaction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from autoforge.errors import ConfigError
from autoforge.pipeline.common import StageParams, given
from autoforge.tooldocs.ingest import IngestResult, bundled_corpus_path, ingest_paths
from autoforge.types import Run
from autoforge.warehouse import write_records

STAGE = "ingest"


class IngestParams(StageParams):
    """Parameters of an ingest (flow ``ingest-tool-docs``, ``autoforge ingest``, the factory)."""

    paths: list[str] = Field(default_factory=list, description="files or folders of tool docs (a folder = one tool set)")
    bundled: bool = Field(False, description="also ingest the corpus shipped with the package")
    policy: list[str] = Field(default_factory=list, description="policy documents (Markdown or text files): one inside "
                              "a folder of paths belongs to that tool set, one elsewhere to every tool set of paths; "
                              "a policy.md beside the tool docs is read without being named")

    def policy_files(self) -> list[str]:
        """The ``policy`` files; a missing one, or one not Markdown or text, is a ConfigError."""
        from autoforge.tooldocs.ingest import POLICY_SUFFIXES

        for p in self.policy:
            if not os.path.isfile(p):
                raise ConfigError(f"policy file {p!r} does not exist or is not a file; give a Markdown or text file")
            if Path(p).suffix.lower() not in POLICY_SUFFIXES:
                raise ConfigError(f"policy file {p!r} is not Markdown or text; expected one of "
                                  f"{', '.join(sorted(POLICY_SUFFIXES))}")
        return [str(p) for p in self.policy]

    def all_paths(self) -> list[str]:
        """The paths to read. None at all, or none that exists, is a ConfigError (before anything is written);
        a missing path among existing ones is a rejected entry of the ingest (counted in ``n_rejected``)."""
        out = [str(p) for p in self.paths] + ([str(bundled_corpus_path())] if self.bundled else [])
        if not out:
            raise ConfigError("nothing to ingest: give paths (files or folders of tool docs) or set bundled=true")
        if not any(os.path.exists(p) for p in out):
            shown = ", ".join(repr(p) for p in out[:5]) + (f" and {len(out) - 5} more" if len(out) > 5 else "")
            raise ConfigError(f"nothing to ingest: no such file or folder: {shown}; check the path(s) "
                              "(they are read on the machine running the ingest)")
        return out

    def run_row(self, batch_id: str | None = None) -> Run:
        policy = {"policy": [str(p) for p in self.policy]} if self.policy else {}  # none: the run id it always had
        return Run.make(STAGE, {"paths": [str(p) for p in self.paths], "bundled": self.bundled, **policy}, batch_id)


def parse(params: IngestParams, run_id: str | None = None) -> IngestResult:
    """Read and parse every document (pure: nothing is written)."""
    return ingest_paths(params.all_paths(), run_id=run_id, policies=params.policy_files())


def finished(run: Run, result: IngestResult) -> Run:
    """The ingest run row with its counts, once the documents are parsed."""
    c = result.counts()
    return run.finish(docs_in=c["docs"], docs_rejected=c["rejected"], toolsets=c["toolsets"], tools=c["tools"])


def persist(warehouse: str | None, result: IngestResult, run: Run) -> dict[str, int]:
    """Documents, specs, tool sets and the rejected documents (with their reasons) in ONE transaction."""
    return write_records(warehouse, [*result.records(), *result.rejections(run.run_id)], run=run)


def toolset_rows(result: IngestResult) -> list[dict]:
    """Per-tool-set counts (flow artifact, CLI table)."""
    rows = []
    for ts in result.toolsets:
        specs = [s for s in result.specs if s.toolset == ts.name]
        rows.append({"toolset": ts.name, "docs": len(ts.doc_ids), "policies": result.policy_counts().get(ts.name, 0),
                     "tools": ts.n_tools,
                     "read": sum(s.effect == "read" for s in specs), "write": sum(s.effect == "write" for s in specs),
                     "unknown": sum(s.effect == "unknown" for s in specs)})
    return rows


def summary(run: Run, result: IngestResult) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "n_toolsets": len(result.toolsets),
        "n_tools": len(result.specs),
        "n_rejected": result.counts()["rejected"],
        "n_policies": len(result.policies),
        "errors": list(result.errors),
        "toolsets": [{"toolset": t.name, "tools": t.n_tools, "docs": len(t.doc_ids),
                      "policies": result.policy_counts().get(t.name, 0), "toolset_id": t.toolset_id}
                     for t in result.toolsets],
    }


def run(warehouse: str | None, params: IngestParams | None = None, *, batch_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect: plan, parse, write once."""
    params = params or IngestParams(**fields)
    row = params.run_row(batch_id)
    result = parse(params, row.run_id)
    row = finished(row, result)
    persist(warehouse, result, row)
    return summary(row, result)


def run_ingest(warehouse: str | None, paths: list[str | Path] | None = None, bundled: bool | None = None,
               batch_id: str | None = None, policy: list[str | Path] | None = None) -> dict[str, Any]:
    """Ingest tool documentation (``paths`` and/or the bundled corpus, with the ``policy`` files) into the
    warehouse (None: the :class:`IngestParams` default)."""
    return run(warehouse, IngestParams(paths=[str(p) for p in paths or []], policy=[str(p) for p in policy or []],
                                       **given(bundled=bundled)), batch_id=batch_id)
