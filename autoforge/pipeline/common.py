"""What every stage runner shares: the selection of environments, the stage's one write, the run row.

Each stage module of :mod:`autoforge.pipeline` has the same four parts — a pydantic params model
(used by the flow, the CLI and the library path alike, so the three cannot drift), ``load`` (what
the stage reads from the warehouse), a per-environment unit that calls the pure stage function,
and :func:`persist` (ONE transaction: DuckDB has one writer). Stage packages never import the
warehouse; this package is the only one that reads or writes it.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ConfigError
from autoforge.settings import BACKENDS
from autoforge.types import EnvironmentRecord, Run, ToolCode, utcnow
from autoforge.pipeline.corpus import accepted_tools, ids_clause
from autoforge.warehouse import read_records, table_exists, write_records

TOOLSET_IDS_HELP = ("only the environments of these tool sets (toolset ids; a factory batch sets the ids of "
                    "the tool sets its docs define); None = every tool set in the warehouse")
TASKS_PER_ENV = 110  # candidate tasks per environment: the one default of FactoryParams, SampleParams, GenerateParams


class StageParams(BaseModel):
    """Base of every stage's parameters: unknown fields are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class EnvSelection(StageParams):
    """Which environments a stage works on."""

    env: str | None = Field(None, description="only this environment (tool-set name); None = every usable one")
    env_ids: list[str] = Field(default_factory=list, description="only these environment ids (empty = no filter)")
    max_envs: int | None = Field(None, description="at most this many environments, in name order (quick runs)")
    toolset_ids: list[str] | None = Field(None, description=TOOLSET_IDS_HELP)

    def selection(self) -> dict[str, Any]:
        """The selection as it is recorded in the run row (``toolset_ids`` only when set, so an
        unscoped run keeps the run id it had before the field existed)."""
        scope = {} if self.toolset_ids is None else {"toolset_ids": sorted(self.toolset_ids)}
        return {"env": self.env, "env_ids": sorted(self.env_ids), "max_envs": self.max_envs, **scope}


def given(**fields: Any) -> dict[str, Any]:
    """The fields a caller set (None: leave the params model's default), for the ``run_*`` shortcuts."""
    return {k: v for k, v in fields.items() if v is not None}


class HasRecords(Protocol):
    def records(self) -> list[Any]: ...


def persist(warehouse: str | None, results: Iterable[HasRecords], run: Run, *, extra: Iterable[Any] = ()) -> dict[str, int]:
    """The stage's ONE write: every record of every environment's result, ``extra`` records (e.g.
    the LLM calls of a result that is not written), and the run row."""
    return write_records(warehouse, [*(rec for res in results for rec in res.records()), *extra], run=run)


def finish(run: Run, counts: dict[str, Any], failed: bool = False) -> Run:
    """The run row once the stage is done (``failed`` when an environment's unit raised)."""
    return run.model_copy(update={"status": "failed" if failed else "completed", "counts": counts, "finished_at": utcnow()})


def client_for(backend: str | None) -> Any:
    """None for the offline backend, else the configured LLM client (AUTOFORGE_OPENAI_*) with an
    in-memory recorder that the stage units drain into their results."""
    if backend in (None, "", "offline"):
        return None
    from autoforge.llm import MemoryRecorder, get_client

    return get_client(backend=backend, recorder=MemoryRecorder())


def by_env(items: Iterable[Any]) -> dict[str, list[Any]]:
    """Records grouped by their ``env_id``."""
    out: dict[str, list[Any]] = {}
    for x in items:
        out.setdefault(x.env_id, []).append(x)
    return out


def load_environments(warehouse: str | None, sel: EnvSelection) -> tuple[list[EnvironmentRecord], list[ToolCode]]:
    """Usable environments (ready or partial) of the selection, in name order, and their accepted tools."""
    if not table_exists(warehouse, "environments"):
        raise ConfigError("the warehouse has no environments yet: run `autoforge synthesize` (or `autoforge factory`) first")
    where, params = ids_clause("env_id", sel.env_ids)
    conds = [x for x in [where, "status IN ('ready', 'partial')"] if x]
    if sel.toolset_ids is not None:
        scope, scope_params = ids_clause("toolset_id", sel.toolset_ids, prefix="t")
        conds.append(scope or "FALSE")  # an empty scope selects nothing, never everything
        params.update(scope_params)
    if sel.env is not None:
        conds.append("name = :env_name")
        params["env_name"] = sel.env
    envs = read_records(warehouse, EnvironmentRecord, " AND ".join(conds), params, order_by="name, env_id")
    if sel.env is not None and not envs:
        names = sorted({e.name for e in read_records(warehouse, EnvironmentRecord)})
        raise ConfigError(f"no usable environment named {sel.env!r}; environments in the warehouse: {names or 'none'}")
    if sel.max_envs is not None:
        envs = envs[:sel.max_envs]
    return envs, accepted_tools(warehouse, [e.env_id for e in envs])
