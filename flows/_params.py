"""A flow's parameters are its stage's params model: each parameter is declared once.

:func:`model_flow` gives a flow body the signature Prefect reads: the fields of a pydantic params
model of :mod:`autoforge.pipeline` (names, types, defaults), then the run parameters the flow
names from :data:`RUN_PARAMS` (warehouse, batch id, task runner). Prefect builds the deployment's
parameter schema (the form in the UI) and validates each call from that signature, and it reads
the ``Args:`` section written here from the fields' descriptions, so the UI shows each field's
help. ``flow_run_name`` templates and ``prefect.yaml`` parameters use these names as they are.
The body is called as ``body(params, **run_params)`` with ``params`` the validated model.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from pydantic import BaseModel


@dataclass(frozen=True)
class RunParam:
    """A flow parameter that is no stage knob: where a run writes and how it runs."""

    annotation: Any
    description: str


RUN_PARAMS: dict[str, RunParam] = {
    "warehouse": RunParam(str | None, "DuckDB file or postgresql:// URL (None: AUTOFORGE_WAREHOUSE, else "
                                      "./autoforge.duckdb)"),
    "batch_id": RunParam(str | None, "the factory batch this run belongs to (lineage); None when run on its own"),
    "task_runner": RunParam(str | None, "thread | process | dask; None: AUTOFORGE_TASK_RUNNER, else thread "
                                        "(flows/_common.py)"),
    "dask_address": RunParam(str | None, "the Dask scheduler (tcp://host:8786) of the dask runner; None: "
                                         "AUTOFORGE_DASK_ADDRESS, else a local cluster"),
}
STAGE_RUN = ("warehouse", "batch_id", "task_runner", "dask_address")  # what every stage flow takes


def model_flow(model: type[BaseModel], *, exclude: Iterable[str] = (), run: Iterable[str] = STAGE_RUN,
               run_help: dict[str, str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a flow body ``body(params: model, **run)``: the result takes ``model``'s fields (less
    ``exclude``) and the ``run`` parameters of :data:`RUN_PARAMS` (``run_help`` rewords one), all
    with defaults, and is what ``@flow`` wraps."""
    skip = set(exclude)
    fields = {n: f for n, f in model.model_fields.items() if n not in skip}
    run = tuple(run)
    unknown = [n for n in run if n not in RUN_PARAMS]
    if unknown:
        raise ValueError(f"unknown run parameter(s) {unknown}; valid: {', '.join(RUN_PARAMS)}")
    help_ = {n: f.description or "" for n, f in fields.items()}
    help_.update({n: (run_help or {}).get(n, RUN_PARAMS[n].description) for n in run if n not in fields})
    sig = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=f.annotation,
                           default=f.get_default(call_default_factory=True)) for n, f in fields.items()]
        + [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=RUN_PARAMS[n].annotation,
                             default=None) for n in run if n not in fields])

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        takes, wants = list(inspect.signature(body).parameters), ["params", *(n for n in run if n not in fields)]
        if takes != wants:
            raise TypeError(f"flow body {body.__name__} takes ({', '.join(takes)}); model_flow calls it with "
                            f"({', '.join(wants)})")

        @functools.wraps(body)
        def fn(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            params = model(**{n: values[n] for n in fields})
            return body(params, **{n: values[n] for n in run if n not in fields})

        fn.__signature__ = sig  # type: ignore[attr-defined]  # what Prefect and inspect.signature read
        fn.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()} | {
            "return": body.__annotations__.get("return", Any)}
        fn.__doc__ = args_doc(body.__doc__, help_)
        return fn

    return decorate


def args_doc(summary: str | None, help_: dict[str, str]) -> str:
    """``summary`` and a Google-style ``Args:`` section (what Prefect parses for the UI's field help)."""
    lines = [inspect.cleandoc(summary or ""), "", "Args:"]
    lines += [f"    {name}: {text}" if text else f"    {name}: (no description)" for name, text in help_.items()]
    return "\n".join(lines).lstrip("\n")
