"""What the stage flows share: their task runner (one thread per core) and their single persistence task.

Stage tasks are CPU-bound (the GIL, plus one sandbox worker process per open environment), so
more threads than cores only adds contention. Override per run with
``AUTOFORGE_STAGE_WORKERS``; for a cluster, swap in a Dask/Ray runner (README "Running on Prefect").
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from autoforge.pipeline.common import persist
from autoforge.settings import check_param, check_walk_lengths, get_settings, setting
from autoforge.types import Run


def stage_task_runner() -> ThreadPoolTaskRunner:
    workers = setting("stage_workers") or os.cpu_count() or 1  # AUTOFORGE_STAGE_WORKERS, checked
    return ThreadPoolTaskRunner(max_workers=max(1, workers))


def check_flow_inputs(**params: Any) -> None:
    """Before a stage flow reads or writes anything: every AUTOFORGE_* setting, and each numeric
    parameter given (None = its default) within its range (:data:`autoforge.settings.PARAMS`)."""
    get_settings()
    for name, value in params.items():
        if value is not None:
            check_param(name, value)
    if params.get("min_len") is not None and params.get("max_len") is not None:
        check_walk_lengths(params["min_len"], params["max_len"])


@task(name="persist-stage", task_run_name="persist-{run.stage}", cache_policy=NO_CACHE)
def persist_stage(results: list[Any], run: Run, warehouse: str | None) -> dict[str, int]:
    """The stage's ONE write (DuckDB's single writer): every record of every environment's result, and the run."""
    return persist(warehouse, results, run)


def gather(items: Sequence[Any], futures: Sequence[Any], what: Callable[[Any], str]) -> list[Any]:
    """Each future's result; one broken environment is logged and left out, it does not sink the batch."""
    logger = get_run_logger()
    out = []
    for item, fut in zip(items, futures):
        try:
            out.append(fut.result())
        except Exception as exc:  # noqa: BLE001 - one broken environment must not sink the batch
            logger.error("%s failed: %s", what(item), exc)
    return out
