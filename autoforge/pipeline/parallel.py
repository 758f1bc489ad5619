"""The library path's fan-out: a stage's per-environment units in worker processes, results in order.

Without Prefect (``autoforge factory --no-prefect``, :func:`autoforge.pipeline.run_factory`, a stage
module's ``run``) each stage used to run its environments one after another in the calling
process. :func:`map_envs` runs them in a pool of ``AUTOFORGE_STAGE_WORKERS`` worker processes instead
(default: the usable CPU cores; never more than the environments; 1 = in the calling process, as
before). The rows are the same either way: each unit takes records and returns records, and is
seeded from strings (``random.Random(f"{seed}:{dag_id}:{attempt}")``), never from what ran before
it (``tests/test_parallel_factory.py`` compares the two).

Why processes, and why ``spawn``: the stage work is pure Python (threads would share one GIL); a
fork would copy the parent's threads, its DuckDB connection and its pool of sandbox worker
subprocesses (:mod:`autoforge.envs._worker_client`) in whatever state they are; a forkserver would
start once per process with the environment and working directory of that moment (a test that sets
``AUTOFORGE_TOOL_TIMEOUT`` later would not reach it). A spawned worker starts clean with this
process's current environment; it costs an interpreter and the stage imports (1.4-2.7 s of CPU
each: ``python -c "import autoforge.pipeline.synthesize"``, 2026-12-06, the 2-core host), once per
factory run: :func:`shared_pool` keeps the workers (and their warm sandbox workers) for every stage
of a run. The bundled corpus (11 environments x 110 tasks, ``autoforge factory --no-prefect``) on
that host, runs in the order serial, 2 workers, 2 workers, serial on a frozen copy of the code,
load 1.2-2.1 (another job shared the host): 84.9 / 103.3 s serial, 47.2 / 63.2 s on 2 workers (1.7x
by the medians), 1,207 verified tasks and the same rows each time. The workers only win cores that
are free: beside a job that kept a core busy (load 2.5-3; one pair of runs on the changing working
tree) 2 workers took 93 s, serial 82 s.

What a worker never does: open the warehouse. The parent reads each stage's inputs and ships each
unit only its environment's part (``inp.only(env)``); the results come back and the parent writes
them in the stage's one transaction, as before.

Order and failures: units start largest first (longest-processing-time first, so one big
environment does not finish alone at the end), results come back in the input order. A unit that
raises stops the stage: the other units are cancelled, the workers are stopped, and the exception is
raised here with its own type, message and attributes (the CLI's exit codes depend on the type), the
worker's traceback as its ``__cause__``. When two units fail, the first to finish is the one
raised (serially it would be the first in input order). A worker that dies (killed, out of memory)
raises ``BrokenProcessPool`` with a note on ``AUTOFORGE_STAGE_WORKERS=1``.

A script that calls :func:`~autoforge.pipeline.run_factory` needs the ``if __name__ == "__main__":``
guard every ``spawn`` user needs: a worker imports the main script before it runs a unit (``python
-m autoforge``, the console script, pytest and notebooks are fine as they are).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import multiprocessing
import os
import pickle
import signal
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Iterator, Sequence, TypeVar

from autoforge.settings import setting

T = TypeVar("T")
START_METHOD = "spawn"  # not fork (the parent's threads, DuckDB and sandbox workers), not forkserver (a stale environ)

_SHARED: contextvars.ContextVar["WorkerPool | None"] = contextvars.ContextVar("autoforge_worker_pool", default=None)


def usable_cpus() -> int:
    """The CPU cores this process may run on (its affinity mask, e.g. under ``taskset`` or a container's
    cpuset), else every core."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def workers_for(n_units: int) -> int:
    """Worker processes for ``n_units`` environments: ``AUTOFORGE_STAGE_WORKERS`` (checked; default the usable
    cores), never more than the units, at least 1."""
    return max(1, min(setting("stage_workers") or usable_cpus(), n_units))


class WorkerPool:
    """Spawned worker processes, started on first use and kept until :meth:`close`. The size is fixed
    by the first stage that uses it (in a factory run the first parallel stage has the most
    environments: the later ones work on the usable ones of those)."""

    def __init__(self) -> None:
        self._executor: ProcessPoolExecutor | None = None

    def executor(self, workers: int) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(max_workers=workers, initializer=_worker_init,
                                                 mp_context=multiprocessing.get_context(START_METHOD))
        return self._executor

    def warm(self, workers: int) -> None:
        """Start the workers now and have each import the stage modules, while this process goes on (a
        factory run warms them before its ingest: their ~2 s imports overlap it instead of delaying
        the first parallel stage)."""
        if workers >= 2:
            ex = self.executor(workers)
            for _ in range(workers):
                ex.submit(_warm)

    def close(self, abort: bool = False) -> None:
        """Shut the workers down; ``abort``: now, killing the units they are running (after a failure or
        an interrupt there is nothing to wait for)."""
        ex, self._executor = self._executor, None
        if ex is None:
            return
        if not abort:
            ex.shutdown(wait=True)
            return
        procs = list((getattr(ex, "_processes", None) or {}).values())  # CPython's pid -> process (3.14: terminate_workers)
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: its sandbox workers exit when their pipes close
        for p in procs:
            p.join(timeout=5)


@contextlib.contextmanager
def shared_pool() -> Iterator[WorkerPool]:
    """One pool for every :func:`map_envs` inside (a factory run: the workers start and import once,
    and keep their sandbox workers warm from stage to stage)."""
    pool = WorkerPool()
    token = _SHARED.set(pool)
    failed = True
    try:
        yield pool
        failed = False
    finally:
        _SHARED.reset(token)
        pool.close(abort=failed)


def map_envs(units: Sequence[Callable[[], T]], sizes: Sequence[float] | None = None, *, local: bool = False) -> list[T]:
    """``[unit() for unit in units]``, in worker processes when there are two units or more and
    ``AUTOFORGE_STAGE_WORKERS`` allows more than one; the results in the order of ``units``.

    ``units``: one picklable callable per environment (a ``functools.partial`` of a stage's module-level
    ``run_one`` over records). ``sizes``: each unit's expected work (DAGs, tasks, tools), largest
    started first. ``local``: run them here, one after another, whatever the setting; a stage sets it
    when a unit needs something of this process: an LLM client of an online backend (its recorder, its
    response cache and its rate of requests are this process's) or a caller's ``env_factory`` (a
    closure, often over test doubles), which no worker could share."""
    if local or len(units) < 2 or workers_for(len(units)) < 2:
        return [unit() for unit in units]
    order = sorted(range(len(units)), key=lambda i: -sizes[i]) if sizes is not None else list(range(len(units)))
    shared = _SHARED.get()
    pool = shared if shared is not None else WorkerPool()
    ok = False
    try:
        out = _run(pool.executor(workers_for(len(units))), units, order)
        ok = True
        return out
    finally:
        if shared is None:
            pool.close(abort=not ok)
        elif not ok:
            shared.close(abort=True)  # the next stage (if any) starts fresh workers


def _run(ex: ProcessPoolExecutor, units: Sequence[Callable[[], T]], order: list[int]) -> list[T]:
    futures: dict[Future, int] = {ex.submit(_call, units[i]): i for i in order}
    out: dict[int, T] = {}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=futures.__getitem__):
            try:
                good, value = fut.result()
            except BrokenProcessPool as exc:
                exc.add_note("a worker process died: killed, out of memory, or it ran the calling script again (a "
                             "spawned worker imports the main script: put its work under `if __name__ == "
                             "'__main__':`); AUTOFORGE_STAGE_WORKERS=1 runs the stage in this process")
                raise
            if not good:
                raise _reraised(*value)
            out[futures[fut]] = value
    return [out[i] for i in range(len(units))]


# ----------------------------------------------------------------------------- in the worker


def _worker_init() -> None:
    """Ctrl-C reaches the whole process group: the parent alone handles it (it stops the workers), so a
    worker neither dies with a traceback of its own nor answers an interrupt as a unit's failure."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _warm() -> None:
    """What a worker imports before its first unit (:meth:`WorkerPool.warm`)."""
    for stage in ("synthesize", "sample", "generate", "verify"):
        importlib.import_module(f"autoforge.pipeline.{stage}")


def _call(unit: Callable[[], T]) -> tuple[bool, Any]:
    """``(True, result)``, or ``(False, (the exception pickled, its traceback))``: the exception travels
    as bytes made here, so one the executor could not pickle or rebuild (an ``__init__`` with other
    arguments than its ``args``) does not break the pool."""
    try:
        return True, unit()
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent, which re-raises it
        return False, (_portable(exc), "".join(traceback.format_exception(exc)))


def _portable(exc: BaseException) -> bytes:
    """``exc`` pickled so that the parent gets the same type, message and attributes: as it is when it
    round-trips (most do), else rebuilt without its ``__init__`` (``WorkerDied(kind, message)``,
    ``ToolDocError(reason, path=...)``), else a RuntimeError that names its type (a class the parent
    cannot import)."""
    for make in (lambda: exc, lambda: _Rebuilt(type(exc), exc.args, dict(vars(exc)))):
        try:
            blob = pickle.dumps(make())
            copy = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - try the next form
            continue
        if type(copy) is type(exc) and str(copy) == str(exc):
            return blob
    return pickle.dumps(RuntimeError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"))


class _Rebuilt:
    """Pickles as the exception itself, rebuilt from its class, ``args`` and attributes."""

    def __init__(self, kind: type[BaseException], args: tuple, state: dict[str, Any]):
        self.kind, self.args, self.state = kind, args, state

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (self.kind, self.args, self.state)


def _rebuild(kind: type[BaseException], args: tuple, state: dict[str, Any]) -> BaseException:
    exc = kind.__new__(kind)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class WorkerTraceback(Exception):
    """The traceback of an exception raised in a worker process (its ``__cause__`` here)."""

    def __str__(self) -> str:
        return f"\n\"\"\"\n{self.args[0]}\"\"\"" if self.args else ""


def _reraised(blob: bytes, trace: str) -> BaseException:
    exc = pickle.loads(blob)
    exc.__cause__ = WorkerTraceback(trace)
    return exc
