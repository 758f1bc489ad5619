"""The factory without Prefect: ingest -> synthesize -> sample -> generate -> verify, one batch.

:class:`FactoryParams` is the one description of a batch: the ``factory`` flow, ``autoforge
factory`` and :func:`run_factory` all build each stage's parameters from it
(:meth:`FactoryParams.stage_params`), so the flow path and the library path build the same run
ids and store the same rows. The batch id is a hash of the parameters: re-running a batch
upserts the same rows and adds none.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from pydantic import Field, PrivateAttr

from autoforge.dags.sequences import START_RULES
from autoforge.errors import ConfigError
from autoforge.pipeline import generate, ingest, sample, synthesize, verify
from autoforge.pipeline.common import BACKENDS, TASKS_PER_ENV, StageParams, client_for
from autoforge.pipeline.corpus import funnel_rows
from autoforge.pipeline.parallel import shared_pool, workers_for
from autoforge.types import content_id
from autoforge.warehouse import query, reading

STAGES = ("ingest", "synthesize", "sample", "generate", "verify")


class FactoryParams(StageParams):
    """Parameters of one factory batch (the same fields as the ``factory`` flow's parameters)."""

    backend: str = Field("offline", description='"offline" (rules, no network) or "openai" (AUTOFORGE_OPENAI_*)')
    tasks_per_env: int = Field(TASKS_PER_ENV, description="candidate tasks generated per environment before verification")
    seed: int = Field(0, description="random seed of walks, merges and instantiation; same seed -> same batch")
    env: str | None = Field(None, description="only this environment (tool-set name); None = all")
    paths: list[str] = Field(default_factory=list, description="tool docs to ingest (files or folders)")
    bundled: bool = Field(True, description="also ingest the bundled corpus")
    policy: list[str] = ingest.IngestParams.model_fields["policy"]
    max_envs: int | None = Field(None, description="cap on environments processed (quick runs)")
    start: str = Field("auto", description="walk start rule: auto | lookup | read | entry | any (see SampleParams)")
    min_len: int = Field(2, description="shortest walk, in tool calls")
    max_len: int = Field(5, description="longest walk, in tool calls")
    walks: int | None = Field(None, description="walks (and merges) per environment; None: max(40, 2 * tasks_per_env // 3)")
    attempts_per_task: int = Field(4, description="instantiation attempts per wanted task")
    all_dags: bool = Field(False, description="generate from every stored DAG of the environments, not only those this "
                                              "batch sampled (a top-up of environments sampled before: the demo's second "
                                              "batch); the default keeps a batch's memory and time independent of the "
                                              "warehouse")
    all_toolsets: bool = Field(False, description="synthesize, sample, generate and verify every tool set in the "
                                                   "warehouse; the default works on the tool sets this batch's docs "
                                                   "define (paths, and the bundled corpus when bundled) and leaves the "
                                                   "others untouched")
    warehouse: str | None = Field(None, description="DuckDB file or postgresql:// URL (default: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)")
    _docs: Any = PrivateAttr(None)  # the parsed docs (IngestResult), read once per params object

    def batch_id(self) -> str:
        """Same parameters -> same batch id -> re-running adds no rows (a flag at its default is left
        out, so the ids of batches from before it existed stay the same)."""
        defaults = {name for name in ("all_dags", "all_toolsets", "policy") if not getattr(self, name)}
        return content_id("batch", self.model_dump(exclude={"warehouse"} | defaults))

    def docs(self) -> Any:
        """This batch's tool docs, parsed (pure: nothing is written; the ingest stage parses them again)."""
        if self._docs is None:
            from autoforge.tooldocs.ingest import ingest_paths

            params = self.ingest_params()
            self._docs = ingest_paths(params.all_paths(), policies=params.policy_files())
        return self._docs

    def ingest_params(self) -> ingest.IngestParams:
        return ingest.IngestParams(paths=self.paths, bundled=self.bundled, policy=self.policy)

    def scope(self) -> list[str] | None:
        """The toolset ids the later stages work on: those of this batch's docs; None with
        ``all_toolsets`` (every tool set in the warehouse)."""
        return None if self.all_toolsets else sorted(t.toolset_id for t in self.docs().toolsets)

    def stage_params(self) -> dict[str, StageParams]:
        """Each stage's parameters for this batch: the single place they are derived."""
        sel = {"env": self.env, "max_envs": self.max_envs, "toolset_ids": self.scope()}
        return {
            "ingest": self.ingest_params(),
            "synthesize": synthesize.SynthesizeParams(backend=self.backend, **sel),
            "sample": sample.SampleParams(seed=self.seed, tasks_per_env=self.tasks_per_env, backend=self.backend,
                                          start=self.start, min_len=self.min_len, max_len=self.max_len, walks=self.walks,
                                          **sel),
            "generate": generate.GenerateParams(seed=self.seed, tasks_per_env=self.tasks_per_env, backend=self.backend,
                                                attempts_per_task=self.attempts_per_task,
                                                from_batch=None if self.all_dags else self.batch_id(), **sel),
            "verify": verify.VerifyParams(**sel),
        }

    def validate_for_run(self) -> None:
        """Fail fast, with what to change, on parameters that cannot work (e.g. typed into the Prefect UI)."""
        from autoforge.settings import check_param, check_walk_lengths, get_settings

        settings = get_settings()  # a bad AUTOFORGE_* setting stops the batch before anything is written
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend {self.backend!r} is unknown; choose one of {', '.join(BACKENDS)}")
        for name in ("tasks_per_env", "max_envs", "seed", "min_len", "max_len", "walks", "attempts_per_task"):
            if getattr(self, name) is not None:
                check_param(name, getattr(self, name))
        if self.start not in ("auto", *START_RULES):
            raise ConfigError(f"start rule {self.start!r} is unknown; choose one of auto, {', '.join(START_RULES)}")
        check_walk_lengths(self.min_len, self.max_len)
        if not self.paths and not self.bundled:
            raise ConfigError("nothing to ingest: give paths (files or folders of tool docs) or set bundled=true")
        for p in self.paths:
            if not Path(p).exists():
                raise ConfigError(f"tool-doc path {p!r} does not exist (paths are read on the machine running the flow)")
        self.ingest_params().policy_files()  # a missing or non-text policy file
        if self.backend == "openai" and not settings.openai_base_url:
            raise ConfigError("backend 'openai' needs AUTOFORGE_OPENAI_BASE_URL (and AUTOFORGE_OPENAI_MODEL) set")
        if self.warehouse is not None:
            if not self.warehouse.strip():
                raise ConfigError("warehouse is an empty string: give a DuckDB file path or postgresql:// URL, or leave it "
                                  "unset for the default (AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)")
            if "://" not in self.warehouse and Path(self.warehouse).expanduser().is_dir():
                raise ConfigError(f"warehouse {self.warehouse!r} is a directory: give a file path inside it, "
                                  f"e.g. {str(Path(self.warehouse) / 'autoforge.duckdb')!r}")
        if not self.all_toolsets and not self.docs().toolsets:
            errors = "; ".join(self.docs().errors[:3]) or "no tool was found in them"
            raise ConfigError(f"the docs define no tool set, so the batch has nothing to work on: {errors}")
        if self.env is not None:
            known = self.known_environments()
            if self.env not in known:
                where = "" if self.all_toolsets else (" (the tool sets of this batch's docs; --all / all_toolsets "
                                                      "chooses among every tool set in the warehouse)")
                raise ConfigError(f"unknown environment {self.env!r}; valid environments{where}: "
                                  f"{', '.join(sorted(known))}")

    def known_environments(self) -> set[str]:
        """Tool-set names this batch can produce: those in its tool docs, plus, with ``all_toolsets``,
        those already in the warehouse."""
        from autoforge.warehouse import query, table_exists
        from autoforge.warehouse.engine import duckdb_path, resolve_url

        names = {t.name for t in self.docs().toolsets}
        if not self.all_toolsets:
            return names
        db = duckdb_path(resolve_url(self.warehouse))
        if (db is None or db.exists()) and table_exists(self.warehouse, "toolsets"):
            names |= {r["name"] for r in query(self.warehouse, "SELECT name FROM toolsets", read_only_check=False)}
        return names


def run_factory(params: FactoryParams | None = None, progress: Callable[[str, dict], None] | None = None, **kw: Any) -> dict:
    """The whole factory without Prefect; used by ``autoforge factory --no-prefect``, the benchmarks
    and the tests. ``progress(stage, counts)`` is called after each stage. Each stage runs its
    environments in ``AUTOFORGE_STAGE_WORKERS`` worker processes, one pool for the whole run
    (:mod:`autoforge.pipeline.parallel`; the rows do not depend on it)."""
    params = params or FactoryParams(**kw)
    params.validate_for_run()
    wh, batch = params.warehouse, params.batch_id()
    sp = params.stage_params()
    stages: dict[str, dict] = {}
    report = progress or (lambda stage, counts: None)
    t0 = time.perf_counter()

    def timed(name: str, fn: Callable[[], dict]) -> None:
        t = time.perf_counter()
        out = fn()
        counts = out.get("counts", out)
        stages[name] = {**counts, "seconds": round(time.perf_counter() - t, 3)}
        report(name, stages[name])

    client = client_for(params.backend)
    synthesized: list[str] = []

    def synthesize_stage() -> dict:
        out = synthesize.run(wh, sp["synthesize"], batch_id=batch)
        synthesized.extend(e["env"] for e in out["environments"])
        return out

    with shared_pool() as pool:  # the stages' worker processes (AUTOFORGE_STAGE_WORKERS) start once
        if params.backend == "offline" and params.env is None:  # (online units stay here: parallel.map_envs)
            n_envs = len(params.docs().toolsets) if not params.all_toolsets else 2
            pool.warm(workers_for(min(n_envs, params.max_envs or n_envs)))
        timed("ingest", lambda: ingest.run(wh, sp["ingest"], batch_id=batch))
        timed("synthesize", synthesize_stage)
        timed("sample", lambda: sample.run(wh, sp["sample"], batch_id=batch, client=client))
        timed("generate", lambda: generate.run(wh, sp["generate"], batch_id=batch, client=client))
        timed("verify", lambda: verify.run(wh, sp["verify"], batch_id=batch))
    with reading(wh):
        funnel = funnel_rows(wh)
    return {"batch_id": batch, "stages": stages, "seconds": round(time.perf_counter() - t0, 3),
            "funnel": funnel, "environments": synthesized}


EMPTY_EXIT_CODE = 3  # `autoforge factory`: an environment the batch was asked for yields no verified task


def environment_yield(warehouse: str | None, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_environment_funnel`` (per environment: edges, sequences, DAGs, tasks generated
    and verified, top drop reasons, and ``why_empty`` when nothing was verified), for ``names`` or all,
    each with ``advice``: what to change in the doc when nothing was verified (:mod:`autoforge.pipeline.advice`)."""
    from autoforge.pipeline.advice import environment_advice

    rows = query(warehouse, "SELECT * FROM v_environment_funnel ORDER BY name", read_only_check=False)
    return [{**r, "advice": environment_advice(warehouse, r)} for r in rows if names is None or r["name"] in set(names)]


def environment_quality(warehouse: str | None, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_environment_quality`` (per environment: verified tasks, distinct gold sequences,
    write tools used / reachable, median calls, reasoning share, start rules, quality drops)."""
    rows = query(warehouse, "SELECT * FROM v_environment_quality ORDER BY name", read_only_check=False)
    return [r for r in rows if names is None or r["name"] in set(names)]


def empty_environments(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The environments of ``rows`` that yield no verified task."""
    return [r for r in rows if not r["n_verified"]]
