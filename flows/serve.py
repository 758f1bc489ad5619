"""`autoforge serve`: every deployment of ``deployments/prefect.yaml``, with its schedule, from ONE process.

The laptop alternative to work pools + workers (README "Running on Prefect"): no work pool,
no worker, no ``prefect deploy`` — ``prefect.serve`` registers each deployment with the
Prefect server (``PREFECT_API_URL``; an ephemeral one when unset) and runs its flow runs as
subprocesses of this process, scheduled or triggered from the UI / API.

Names, descriptions, tags, default parameters and schedules come from the same
``deployments:`` list that ``prefect deploy --all`` reads, so the two ways of running stay
identical. Work pools, pull steps and job variables in that file are for workers and are
ignored here.
"""

from __future__ import annotations

import datetime as dt
import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autoforge.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
PREFECT_FILE = REPO / "deployments" / "prefect.yaml"


@dataclass
class DeploymentSpec:
    """One entry of the ``deployments:`` list of prefect.yaml."""

    name: str
    entrypoint: str  # "flows/factory.py:factory", relative to the repository root
    description: str = ""
    tags: list[str] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)
    schedules: list[dict[str, Any]] = field(default_factory=list)
    work_pool: str | None = None
    concurrency_limit: int | None = None
    enforce_parameter_schema: bool = True

    @property
    def module(self) -> str:
        """``flows/factory.py:factory`` -> ``flows.factory``."""
        path = self.entrypoint.split(":", 1)[0]
        return path[:-3].replace("/", ".") if path.endswith(".py") else path

    @property
    def function(self) -> str:
        return self.entrypoint.split(":", 1)[1]


def load_specs(prefect_file: str | Path | None = None, names: list[str] | None = None) -> list[DeploymentSpec]:
    """The deployments of ``prefect_file`` (default deployments/prefect.yaml), optionally only ``names``."""
    path = Path(prefect_file) if prefect_file else PREFECT_FILE
    if not path.exists():
        raise ConfigError(f"deployment file {path} does not exist (expected deployments/prefect.yaml in the checkout)")
    doc = yaml.safe_load(path.read_text()) or {}
    specs = []
    for entry in doc.get("deployments") or []:
        pool = entry.get("work_pool") or {}
        specs.append(DeploymentSpec(
            name=entry["name"],
            entrypoint=entry["entrypoint"],
            description=" ".join(str(entry.get("description") or "").split()),
            tags=list(entry.get("tags") or []),
            parameters=dict(entry.get("parameters") or {}),
            schedules=[dict(s) for s in entry.get("schedules") or []],
            work_pool=pool.get("name") if isinstance(pool, dict) else pool,
            concurrency_limit=entry.get("concurrency_limit"),
            enforce_parameter_schema=bool(entry.get("enforce_parameter_schema", True)),
        ))
    if names:
        known = {s.name for s in specs}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"unknown deployment(s) {', '.join(unknown)}; {path.name} defines: {', '.join(sorted(known))}")
        specs = [s for s in specs if s.name in names]
    return specs


def load_flow(spec: DeploymentSpec):
    """Import the flow object of an entrypoint (as a module, so it works from any directory)."""
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"deployment {spec.name!r}: cannot import {spec.module} ({exc}); "
                          f"fix the entrypoint {spec.entrypoint!r} in deployments/prefect.yaml") from exc
    try:
        return getattr(module, spec.function)
    except AttributeError as exc:
        raise ConfigError(f"deployment {spec.name!r}: {spec.module} has no flow {spec.function!r}") from exc


def flow_parameters(flow: Any) -> set[str]:
    return set(inspect.signature(flow.fn).parameters)


def to_schedule(entry: dict[str, Any]):
    """A prefect.yaml schedule entry (cron / interval / rrule + timezone, active, parameters) -> Schedule."""
    from prefect.schedules import Cron, Interval, RRule

    common = {k: entry[k] for k in ("timezone", "active", "parameters", "slug") if entry.get(k) is not None}
    if "cron" in entry:
        return Cron(entry["cron"], day_or=entry.get("day_or", True), **common)
    if "interval" in entry:
        return Interval(dt.timedelta(seconds=float(entry["interval"])), **common)
    if "rrule" in entry:
        return RRule(entry["rrule"], **common)
    raise ConfigError(f"schedule {entry} needs one of cron, interval, rrule")


def build_deployments(
    warehouse: str | None = None,
    names: list[str] | None = None,
    *,
    schedules: bool = True,
    parameters: dict[str, Any] | None = None,
    prefect_file: str | Path | None = None,
    skip_missing: bool = False,
) -> list[Any]:
    """RunnerDeployments for every entry (or ``names``), parameters and schedules from the YAML.

    warehouse: put this warehouse into every flow that takes one (default: each flow's own default,
        i.e. AUTOFORGE_WAREHOUSE or ./autoforge.duckdb in the serving process's directory).
    schedules: False registers the deployments without their schedules (trigger-only).
    parameters: extra default parameters, applied to every flow whose signature has that name.
    skip_missing: leave out entries whose flow module does not exist (instead of raising).
    """
    from prefect.deployments.runner import EntrypointType

    out = []
    for spec in load_specs(prefect_file, names):
        try:
            flow = load_flow(spec)
        except ConfigError:
            if skip_missing:
                continue
            raise
        accepted = flow_parameters(flow)
        params = dict(spec.parameters)
        for key, value in {**(parameters or {}), **({"warehouse": warehouse} if warehouse else {})}.items():
            if key in accepted:
                params[key] = value
        unknown = sorted(set(params) - accepted)
        if unknown:
            raise ConfigError(f"deployment {spec.name!r}: flow {spec.function} has no parameter(s) {', '.join(unknown)}; "
                              f"it takes {', '.join(sorted(accepted))} (fix deployments/prefect.yaml)")
        out.append(flow.to_deployment(
            name=spec.name,
            description=spec.description or None,
            tags=spec.tags,
            parameters=params,
            schedules=[to_schedule(s) for s in spec.schedules] if schedules else None,
            concurrency_limit=spec.concurrency_limit,
            enforce_parameter_schema=spec.enforce_parameter_schema,
            entrypoint_type=EntrypointType.MODULE_PATH,
        ))
    return out


def serve_all(
    warehouse: str | None = None,
    limit: int | None = None,
    names: list[str] | None = None,
    *,
    schedules: bool = True,
    parameters: dict[str, Any] | None = None,
    prefect_file: str | Path | None = None,
    skip_missing: bool = False,
) -> None:
    """Serve every deployment of deployments/prefect.yaml from this process until interrupted.

    warehouse: the warehouse every flow writes to (default: each flow's default).
    limit: at most this many flow runs at once in this process (None: no limit). DuckDB has one
        writer, so concurrent runs against one file queue on its lock; 1 serializes them.
    names: only these deployments (e.g. ["factory"]); default all.
    schedules / parameters / prefect_file / skip_missing: see :func:`build_deployments`.
    """
    from prefect import serve

    deployments = build_deployments(warehouse, names, schedules=schedules, parameters=parameters,
                                    prefect_file=prefect_file, skip_missing=skip_missing)
    if not deployments:
        raise ConfigError("no deployments to serve (check names / deployments/prefect.yaml)")
    serve(*deployments, limit=limit)


if __name__ == "__main__":  # python -m flows.serve [name ...]
    import sys

    serve_all(names=sys.argv[1:] or None)
