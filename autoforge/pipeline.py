"""Stage runners over a warehouse: read inputs, call the pure stage functions, write the results
through the single writer (one transaction per stage). The CLI calls these directly; the
Prefect flows in ``flows/`` call the same pure functions with Prefect's fan-out and retries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ConfigError
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
    run = Run.make("ingest", {"paths": [str(p) for p in (paths or [])], "bundled": bundled}, batch_id)
    result = ingest_paths(all_paths, run_id=run.run_id)
    rejected = [d for d in result.docs if d.status == "rejected"]
    rejections = result.rejections(run.run_id)
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


# ----------------------------------------------------------------------------- the factory


class FactoryParams(BaseModel):
    """Parameters of one factory batch (the same fields as the `factory` flow's parameters)."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "offline"
    tasks_per_env: int = 110
    seed: int = 0
    env: str | None = None
    paths: list[str] = Field(default_factory=list)
    bundled: bool = True
    max_envs: int | None = None
    warehouse: str | None = None

    def validate_for_run(self) -> None:
        """Fail fast, with what to change, on parameters that cannot work (e.g. typed into the Prefect UI)."""
        from autoforge.settings import get_settings

        if self.backend not in BACKENDS:
            raise ConfigError(f"backend {self.backend!r} is unknown; choose one of {', '.join(BACKENDS)}")
        if self.tasks_per_env <= 0:
            raise ConfigError(f"tasks_per_env must be a positive number of tasks, got {self.tasks_per_env}")
        if self.max_envs is not None and self.max_envs <= 0:
            raise ConfigError(f"max_envs must be positive or empty (all environments), got {self.max_envs}")
        if self.seed < 0:
            raise ConfigError(f"seed must be >= 0, got {self.seed}")
        if not self.paths and not self.bundled:
            raise ConfigError("nothing to ingest: give paths (files or folders of tool docs) or set bundled=true")
        for p in self.paths:
            if not Path(p).exists():
                raise ConfigError(f"tool-doc path {p!r} does not exist (paths are read on the machine running the flow)")
        if self.backend == "openai" and not get_settings().openai_base_url:
            raise ConfigError("backend 'openai' needs AUTOFORGE_OPENAI_BASE_URL (and AUTOFORGE_OPENAI_MODEL) set")


BACKENDS = ("offline", "openai")


def batch_id_for(params: FactoryParams) -> str:
    """Same parameters -> same batch id -> re-running adds no rows."""
    return content_id("batch", params.model_dump(exclude={"warehouse"}))


def funnel_rows(warehouse: str | None) -> list[dict]:
    """The factory's yield per stage (v_stage_funnel), for summaries and artifacts."""
    from autoforge.warehouse import query, table_exists

    if not table_exists(warehouse, "v_stage_funnel"):
        return []
    return query(warehouse, "SELECT * FROM v_stage_funnel", read_only_check=False)
