"""Stage runners over a warehouse: read inputs, call the pure stage functions, write the results
through the single writer (one transaction per stage). The CLI calls these directly; the
Prefect flows in ``flows/`` call the same pure functions with Prefect's fan-out and retries.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ConfigError
from autoforge.types import Run, content_id
from autoforge.warehouse import write_records


def ingest_plan(paths: list[str | Path] | None, bundled: bool, batch_id: str | None = None) -> tuple[list[str], Run]:
    """The files to read and the run row of an ingest (shared by ``run_ingest`` and the ``ingest_tool_docs`` flow)."""
    from autoforge.tooldocs.ingest import bundled_corpus_path

    given = [str(p) for p in (paths or [])]
    all_paths = given + ([str(bundled_corpus_path())] if bundled else [])
    if not all_paths:
        raise ConfigError("nothing to ingest: give paths (files or folders of tool docs) or set bundled=true")
    return all_paths, Run.make("ingest", {"paths": given, "bundled": bundled}, batch_id)


def ingest_finished(run: Run, result: Any) -> Run:
    """The ingest run row with its counts, once the documents are parsed."""
    c = result.counts()
    return run.finish(docs_in=c["docs"], docs_rejected=c["rejected"], toolsets=c["toolsets"], tools=c["tools"])


def run_ingest(
    warehouse: str | None,
    paths: list[str | Path] | None = None,
    bundled: bool = False,
    batch_id: str | None = None,
) -> dict[str, Any]:
    """Ingest tool documentation into ``tool_docs``, ``tool_specs`` and ``toolsets``."""
    from autoforge.tooldocs.ingest import ingest_paths

    all_paths, run = ingest_plan(paths, bundled, batch_id)
    result = ingest_paths(all_paths, run_id=run.run_id)
    run = ingest_finished(run, result)
    write_records(warehouse, [*result.records(), *result.rejections(run.run_id)], run=run)
    return {
        "run_id": run.run_id,
        "n_toolsets": len(result.toolsets),
        "n_tools": len(result.specs),
        "n_rejected": result.counts()["rejected"],
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
        if self.warehouse is not None:
            if not self.warehouse.strip():
                raise ConfigError("warehouse is an empty string: give a DuckDB file path or SQLAlchemy URL, or leave it "
                                  "unset for the default (AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)")
            if "://" not in self.warehouse and Path(self.warehouse).expanduser().is_dir():
                raise ConfigError(f"warehouse {self.warehouse!r} is a directory: give a file path inside it, "
                                  f"e.g. {str(Path(self.warehouse) / 'autoforge.duckdb')!r}")
        if self.env is not None:
            known = self.known_environments()
            if self.env not in known:
                raise ConfigError(f"unknown environment {self.env!r}; valid environments: {', '.join(sorted(known))}")

    def known_environments(self) -> set[str]:
        """Tool-set names this batch can produce: those in its tool docs plus those already in the warehouse."""
        from autoforge.tooldocs.ingest import bundled_corpus_path, ingest_paths
        from autoforge.warehouse import query, table_exists
        from autoforge.warehouse.engine import duckdb_path, resolve_url

        paths = [*self.paths, *([str(bundled_corpus_path())] if self.bundled else [])]
        names = {t.name for t in ingest_paths(paths).toolsets}
        db = duckdb_path(resolve_url(self.warehouse))
        if (db is None or db.exists()) and table_exists(self.warehouse, "toolsets"):
            names |= {r["name"] for r in query(self.warehouse, "SELECT name FROM toolsets", read_only_check=False)}
        return names


BACKENDS = ("offline", "openai")
STAGES = ("ingest", "synthesize", "sample", "generate", "verify")


def batch_id_for(params: FactoryParams) -> str:
    """Same parameters -> same batch id -> re-running adds no rows."""
    return content_id("batch", params.model_dump(exclude={"warehouse"}))


def funnel_rows(warehouse: str | None) -> list[dict]:
    """The factory's yield per stage (v_stage_funnel), for summaries and artifacts."""
    from autoforge.warehouse import query, table_exists

    if not table_exists(warehouse, "v_stage_funnel"):
        return []
    return query(warehouse, "SELECT * FROM v_stage_funnel", read_only_check=False)


def run_factory(params: FactoryParams | None = None, progress: Callable[[str, dict], None] | None = None, **kw: Any) -> dict:
    """The whole factory without Prefect: ingest -> synthesize -> sample -> generate -> verify.

    Same stages, same batch id and same rows as the ``factory`` flow; used by ``autoforge factory
    --no-prefect``, the benchmarks and the tests. ``progress(stage, counts)`` is called after each stage.
    """
    from autoforge.envs.stage import run_synthesis
    from autoforge.tasks.stages import client_for, run_generate, run_sample, run_verify

    params = params or FactoryParams(**kw)
    params.validate_for_run()
    wh, batch = params.warehouse, batch_id_for(params)
    stages: dict[str, dict] = {}
    report = progress or (lambda stage, counts: None)
    t0 = time.perf_counter()

    def timed(name: str, fn: Callable[[], dict]) -> None:
        t = time.perf_counter()
        out = fn()
        counts = out.get("counts", out)
        stages[name] = {**counts, "seconds": round(time.perf_counter() - t, 3)}
        report(name, stages[name])

    timed("ingest", lambda: run_ingest(wh, paths=params.paths, bundled=params.bundled, batch_id=batch))
    timed("synthesize", lambda: run_synthesis(wh, env=params.env, backend=params.backend, batch_id=batch,
                                              max_envs=params.max_envs))
    client = client_for(params.backend)
    timed("sample", lambda: run_sample(wh, params.seed, env=params.env, max_envs=params.max_envs, client=client,
                                       batch_id=batch))
    timed("generate", lambda: run_generate(wh, params.seed, env=params.env, max_envs=params.max_envs,
                                           tasks_per_env=params.tasks_per_env, client=client, batch_id=batch))
    timed("verify", lambda: run_verify(wh, env=params.env, max_envs=params.max_envs, batch_id=batch))
    return {"batch_id": batch, "stages": stages, "seconds": round(time.perf_counter() - t0, 3),
            "funnel": funnel_rows(wh)}
