"""What the stage flows share: the task runner they fan out on, the fan-out itself, and their single persistence task.

**Task runners, chosen per run.** Every stage flow and the factory take ``task_runner`` (``thread``,
``process`` or ``dask``) and ``dask_address`` parameters (``autoforge factory --task-runner``,
``AUTOFORGE_TASK_RUNNER`` / ``AUTOFORGE_DASK_ADDRESS``; a parameter beats the setting). The runner
is not fixed in ``@flow(task_runner=...)``: :func:`stage_runner` builds it when the flow runs and
:func:`fan_out` submits one task per environment to it (what ``task.submit`` does with the flow's
own runner), so the same deployment runs on threads, a process pool or a Dask cluster.

- ``thread``: Prefect's ``ThreadPoolTaskRunner`` in the flow process (the default). No start-up
  cost, and the workers' warm caches (sandbox worker pool, compiled tool code) serve every stage;
  the stage work shares the GIL with Prefect's threads, but most of it waits on sandbox worker
  processes, so two threads still overlap (figures: flows/factory.py).
- ``process``: Prefect's ``ProcessPoolTaskRunner`` (spawned worker processes; each runs Prefect's
  task engine and the unit of work, no GIL shared with the flow). A worker that dies breaks the
  pool (``BrokenProcessPool``): the stage's other environments fail too.
- ``dask``: ``prefect_dask.DaskTaskRunner`` over ``distributed``: a ``LocalCluster`` of worker
  processes (one thread each, on 127.0.0.1) started for the run, or the scheduler at
  ``dask_address`` (``tcp://host:8786``). A worker that dies is restarted by its nanny and Dask
  runs its task again; when Dask gives up (``KilledWorker``) the flow submits that environment's
  task once more (the tasks' ``retries=1``). Workers elsewhere need this checkout importable
  (``autoforge`` and ``flows``); the flow's ``AUTOFORGE_*`` variables are set on every worker
  (a worker plugin) and Prefect's settings travel with each task.

Workers: ``AUTOFORGE_STAGE_WORKERS`` (default: the CPU cores) threads, processes or local Dask
workers. The factory opens ONE runner for all its stages (:func:`shared_runner`: one process pool,
one local cluster, started once) and its stage subflows use it. Whatever the runner, results come
back to the flow process and ONE persistence task per stage writes them (DuckDB's single writer).
Units of work take and return pydantic records, which pickle.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from typing import Any, Iterator, Sequence

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import MissingContextError
from prefect.task_runners import ProcessPoolTaskRunner, TaskRunner, ThreadPoolTaskRunner
from pydantic import BaseModel

from autoforge.errors import ConfigError
from autoforge.pipeline.common import persist
from autoforge.settings import (PARAMS, TASK_RUNNERS, VARS, check_param, check_walk_lengths, get_settings, setting,
                                worker_environ)
from autoforge.types import Run

STAGE_DEFAULT = "thread"  # a stage flow run on its own: no pool or cluster to start for one stage
FACTORY_DEFAULT = "thread"  # the factory: measured fastest here, see flows/factory.py (why, figures)
LOST_WORKER = {"KilledWorker", "BrokenProcessPool", "CommClosedError", "FutureCancelledError"}

_SHARED: contextvars.ContextVar[tuple[tuple[str, str | None], TaskRunner] | None] = contextvars.ContextVar(
    "autoforge_shared_runner", default=None)


def choose_runner(task_runner: str | None, dask_address: str | None, default: str = STAGE_DEFAULT) -> tuple[str, str | None]:
    """(runner, scheduler address) of a run: the parameters, else AUTOFORGE_TASK_RUNNER /
    AUTOFORGE_DASK_ADDRESS, else ``default``. A ``dask_address`` alone means ``dask``."""
    if dask_address is not None:
        why = VARS["dask_address"].problem(dask_address.strip())
        if why:
            raise ConfigError(f"dask_address {dask_address!r} is {why}: give the scheduler's address, e.g. "
                              f"tcp://127.0.0.1:8786 (--dask-address / AUTOFORGE_DASK_ADDRESS), or leave it unset for a "
                              f"local cluster")
        dask_address = dask_address.strip()
        if task_runner is None:
            task_runner = "dask"
    kind = (task_runner or setting("task_runner") or default).strip().lower()
    if kind not in TASK_RUNNERS:
        raise ConfigError(f"task_runner {task_runner!r} is unknown; choose one of {', '.join(TASK_RUNNERS)} "
                          f"(--task-runner / AUTOFORGE_TASK_RUNNER)")
    if dask_address is not None and kind != "dask":
        raise ConfigError(f"dask_address {dask_address!r} needs task_runner 'dask', not {kind!r}: drop one of the two "
                          f"(--task-runner dask --dask-address ADDR)")
    return kind, (dask_address or setting("dask_address")) if kind == "dask" else None


def stage_workers() -> int:
    return max(1, setting("stage_workers") or os.cpu_count() or 1)  # AUTOFORGE_STAGE_WORKERS, checked


def stage_task_runner(kind: str = "thread", address: str | None = None) -> TaskRunner:
    """A fresh (not yet started) Prefect task runner of this kind."""
    workers = stage_workers()
    if kind == "thread":
        return ThreadPoolTaskRunner(max_workers=workers)
    if kind == "process":
        return ProcessPoolTaskRunner(max_workers=workers)
    from prefect_dask import DaskTaskRunner

    if address:
        return DaskTaskRunner(address=address)
    return DaskTaskRunner(cluster_class="distributed.LocalCluster", cluster_kwargs={
        "n_workers": workers, "threads_per_worker": 1, "processes": True, "host": "127.0.0.1",
        "dashboard_address": None, "scheduler_port": 0})


def _environ_plugin(environ: dict[str, str]) -> Any:
    """A Dask worker plugin that sets the flow's ``AUTOFORGE_*`` variables on every worker of the
    cluster (workers started later too), so a worker on another machine reads the same settings."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class AutoforgeEnviron(WorkerPlugin):
        name = "autoforge-environ"

        def __init__(self, environ: dict[str, str]):
            self.environ = dict(environ)

        def setup(self, worker: Any) -> None:
            os.environ.update(self.environ)

    return AutoforgeEnviron(environ)


@contextlib.contextmanager
def _api_for_workers(kind: str) -> Iterator[None]:
    """Worker processes report to the flow's Prefect API. With no PREFECT_API_URL the flow runs on an
    ephemeral server in a subprocess of its own: name it to the workers (in the settings a process
    runner exports and a Dask task carries), or each worker would start an ephemeral server of its own
    (15-20 s each, and task runs that the flow's server never sees)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if kind == "thread" or PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the running ephemeral server (one per process)
    if server.server_process is None:
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield


@contextlib.contextmanager
def stage_runner(kind: str, address: str | None) -> Iterator[TaskRunner]:
    """The started runner of a stage run: the factory's shared one when it is of the same kind, else a
    new one for this run (started here, shut down on exit)."""
    shared = _SHARED.get()
    if shared is not None and shared[0] == (kind, address):
        yield shared[1]
        return
    runner = stage_task_runner(kind, address)
    try:
        with _api_for_workers(kind), runner:
            if kind == "dask":
                runner.client.register_plugin(_environ_plugin(worker_environ()), name="autoforge-environ")
            yield runner
    except OSError as exc:
        if kind == "dask" and address:
            raise ConfigError(f"cannot reach the Dask scheduler at {address} ({exc}); start one (`dask scheduler`, "
                              f"workers with `dask worker {address}`) or leave dask_address unset for a local "
                              f"cluster") from exc
        raise


@contextlib.contextmanager
def shared_runner(kind: str, address: str | None) -> Iterator[TaskRunner]:
    """One runner for every stage of a factory run: the process pool or local cluster starts once."""
    with stage_runner(kind, address) as runner:
        token = _SHARED.set(((kind, address), runner))
        try:
            yield runner
        finally:
            _SHARED.reset(token)


class Packed:
    """A large task input sent as it is. Prefect's ``quote`` is a tuple, which Dask rebuilds as a plain
    tuple on the way to a worker (the task then gets ``(records,)``); this box is an opaque object
    that neither Prefect (looking for futures) nor Dask (looking for keys) walks into."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __getstate__(self) -> tuple[Any]:
        return (self.value,)  # never falsy: pickle skips __setstate__ for a falsy state (a None cache)

    def __setstate__(self, state: tuple[Any]) -> None:
        self.value = state[0]


def unpack(value: Any) -> Any:
    """What a stage task does with each input it may get :class:`Packed`."""
    return value.value if isinstance(value, Packed) else value


def lost_worker(exc: BaseException) -> bool:
    """The process running the task died (killed, out of memory), as opposed to the task failing."""
    return any(type(e).__name__ in LOST_WORKER for e in (exc, exc.__cause__, exc.__context__) if e is not None)


def _logger() -> Any:
    try:
        return get_run_logger()
    except MissingContextError:  # called outside a flow run (tests): plain logging
        return logging.getLogger("flows")


def fan_out(runner: TaskRunner, stage_task: Any, calls: Sequence[dict[str, Any]], labels: Sequence[str]) -> list[Any]:
    """Submit ``stage_task`` once per parameter dict, return the results in order. A failed
    environment is logged and left out (it does not sink the batch); one whose worker was lost is
    submitted again up to the task's ``retries`` (Prefect's own retry dies with the worker)."""
    logger = _logger()
    futures = [runner.submit(stage_task, dict(params)) for params in calls]
    out = []
    for label, params, fut in zip(labels, calls, futures):
        for attempt in range(stage_task.retries + 1):
            try:
                out.append(fut.result())
                break
            except Exception as exc:  # noqa: BLE001 - one broken environment must not sink the batch
                if lost_worker(exc) and attempt < stage_task.retries:
                    logger.warning("%s: its worker was lost (%s: %s); running it again", label, type(exc).__name__, exc)
                    fut = runner.submit(stage_task, dict(params))
                    continue
                logger.error("%s failed: %s", label, exc)
                break
    return out


def check_flow_inputs(params: BaseModel | None = None) -> None:
    """Before a stage flow reads or writes anything: every AUTOFORGE_* setting, and each numeric field
    of ``params`` that is set (None = its default) within its range (:data:`autoforge.settings.PARAMS`)."""
    get_settings()
    values = params.model_dump() if params is not None else {}
    for name, value in values.items():
        if name in PARAMS and value is not None:
            check_param(name, value)
    if values.get("min_len") is not None and values.get("max_len") is not None:
        check_walk_lengths(values["min_len"], values["max_len"])


@task(name="persist-stage", task_run_name="persist-{run.stage}", cache_policy=NO_CACHE)
def persist_stage(results: list[Any], run: Run, warehouse: str | None) -> dict[str, int]:
    """The stage's ONE write (DuckDB's single writer): every record of every environment's result, and the run."""
    return persist(warehouse, results, run)
