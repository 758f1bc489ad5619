"""The parent side of a sandbox worker: spawn it, send a frame, wait with a deadline, kill it.

A :class:`WorkerProcess` is one child (:mod:`autoforge.envs._worker`). :meth:`request` sends one
frame and waits for the reply with ``poll``; past the deadline the child is killed (SIGKILL)
and :class:`WorkerDied` says why (``timeout``, ``memory_limit`` or ``crashed``). The caller
(:class:`autoforge.envs.runtime.Environment`) then starts a fresh one.

Workers are pooled (:func:`take_worker` / :func:`give_worker`): opening an Environment reuses
an idle process. The determinism check runs a tool in two check workers (:func:`check_worker`),
one with another string-hash seed, that never run episodes; they come from a small stock of
never-used ones started ahead (:func:`fresh_worker`) and are retired after a few dozen checks.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from autoforge.envs.wire import HEADER, MAX_FRAME, dumps, loads
from autoforge.errors import SandboxError

# Seconds a fresh worker may take to start (imports) and to load / reset / report state.
# Generous: these are our own steps, and a shared 2-core machine can be slow. Tool calls use
# the environment's ``timeout_s``.
START_TIMEOUT_S = 60.0
ADMIN_TIMEOUT_S = 30.0
# A tool call's deadline is a CPU budget, not a wall-clock one: when the wall-clock deadline
# passes while the worker has used less than half of it in CPU (the machine was busy, the
# worker waited for a core), the deadline moves on by one budget, up to STARVED_WALL_FACTOR
# budgets in all. So a loaded machine does not turn a correct call into a timeout (episode
# rewards stay the same under load), while a loop is still stopped at its budget.
STARVED_WALL_FACTOR = 10
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerDied(SandboxError):
    """The worker was killed or exited during a request. ``kind``: timeout | memory_limit | crashed."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _kill(proc: subprocess.Popen, fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
    if proc.poll() is None:
        try:
            proc.wait(timeout=0.2)  # closing its pipe makes an idle worker exit by itself
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class WorkerProcess:
    """One sandbox worker process. Not thread-safe: one request at a time."""

    def __init__(self, *, memory_mb: int, timeout_s: float, hash_seed: int = 0):
        self.memory_mb = int(memory_mb)
        self.timeout_s = float(timeout_s)
        self.hash_seed = int(hash_seed)  # 0 for every worker that runs episodes: set order agrees across them
        self.role = "episode"  # or "check": runs determinism checks only (check_worker), never an episode
        self.checks = 0  # determinism checks run so far (role "check")
        self.resident: set[str] = set()  # keys of the states sent to it (it may have dropped some since)
        self.bytes_sent = 0  # request bytes written to it (tests count what a reset sends)
        self.last_frame: bytes | None = None  # the last reply, undecoded
        self.state_frame: bytes | None = None  # the state after the last call that asked for it, undecoded
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        env = {"PYTHONHASHSEED": str(self.hash_seed), "PYTHONPATH": _PACKAGE_ROOT, "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "autoforge.envs._worker", str(p2c_r), str(c2p_w),
                 str(self.memory_mb), str(self.timeout_s)],
                pass_fds=(p2c_r, c2p_w), env=env, cwd="/", stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self._w, self._r = p2c_w, c2p_r
        self._fds = [p2c_w, c2p_r]
        self._buf = bytearray()
        self._poll = select.poll()
        self._poll.register(self._r, select.POLLIN | select.POLLHUP | select.POLLERR)
        self._ready = False
        self._stat_fd: int | None = None  # /proc/PID/stat, for the worker's CPU time (cpu_seconds)
        self.dead = False
        self._finalizer = weakref.finalize(self, _kill, self.proc, self._fds)

    @property
    def pid(self) -> int:
        return self.proc.pid

    # ------------------------------------------------------------------ framing
    def cpu_seconds(self) -> float | None:
        """CPU seconds the worker has used so far (Linux ``/proc``); None where that cannot be read."""
        try:
            if self._stat_fd is None:  # opened once (an open per request cost more than the read)
                self._stat_fd = os.open(f"/proc/{self.proc.pid}/stat", os.O_RDONLY)
                self._fds.append(self._stat_fd)
            fields = os.pread(self._stat_fd, 1024, 0).rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15 of stat)
        except (OSError, IndexError, ValueError):
            return None

    def _starved(self, started: tuple[float, float | None], budget: float) -> bool:
        """Past the wall deadline: did the worker use under half its budget in CPU, within the wall cap?"""
        wall0, cpu0 = started
        if cpu0 is None or time.monotonic() - wall0 >= STARVED_WALL_FACTOR * budget:
            return False
        cpu = self.cpu_seconds()
        return cpu is not None and cpu - cpu0 < budget / 2

    def _read_frame(self, deadline: float, started: tuple[float, float | None] | None = None,
                    budget: float = 0.0) -> bytes:
        buf = self._buf
        need = HEADER.size
        while True:
            if len(buf) >= HEADER.size:
                n = HEADER.unpack_from(buf)[0]
                if n > MAX_FRAME:
                    raise self._die("crashed", f"worker sent a {n}-byte frame (limit {MAX_FRAME})")
                need = HEADER.size + n
                if len(buf) >= need:
                    frame = bytes(buf[HEADER.size:need])
                    del buf[:need]
                    return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._poll.poll(max(0, int(remaining * 1000) + 1)):
                if time.monotonic() < deadline:
                    continue
                if started is not None and self._starved(started, budget):
                    deadline += budget
                    continue
                raise self._die("timeout", None)
            chunk = os.read(self._r, max(need - len(buf), 65536))
            if not chunk:
                raise self._die("crashed", None)
            buf += chunk

    def _die(self, kind: str, message: str | None) -> WorkerDied:
        """Kill the worker and explain why it is gone."""
        self.dead = True
        if kind == "timeout":
            self.proc.kill()
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._finalizer()
        if message is None:
            if kind == "timeout":
                message = f"timed out after {self.timeout_s:g} s (the worker was stopped)"
            elif code == -signal.SIGXCPU:
                kind, message = "timeout", f"exceeded its CPU-time limit of about {self.timeout_s:g} s"
            elif code is not None and code < 0:
                message = f"the worker died ({signal.Signals(-code).name}); memory limit {self.memory_mb} MB"
            else:
                message = f"the worker exited unexpectedly (exit code {code})"
        return WorkerDied(kind, message)

    # ------------------------------------------------------------------ requests
    def request(self, payload: bytes, timeout_s: float | None = None, *, then_state: bool = False) -> list:
        """Send one encoded request, return the decoded reply; raise :class:`WorkerDied`. ``then_state``: the
        request is a call that asked for the state after it (:mod:`autoforge.envs._worker`): its second
        frame is kept, undecoded, in ``state_frame`` (None when the worker sent none)."""
        if self.dead:
            raise WorkerDied("crashed", "the worker is gone")
        if not self._ready:
            hello = loads(self._read_frame(time.monotonic() + START_TIMEOUT_S))
            if not (isinstance(hello, list) and hello and hello[0] == "ready"):
                raise self._die("crashed", f"worker sent {hello!r} instead of its ready message")
            self._ready = True
        frame = HEADER.pack(len(payload)) + payload
        self.bytes_sent += len(frame)
        budget = self.timeout_s if timeout_s is None else timeout_s
        started = (time.monotonic(), self.cpu_seconds())
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(self._w, view):]
        except (BrokenPipeError, OSError):
            raise self._die("crashed", None) from None
        self.last_frame = self._read_frame(started[0] + budget, started, budget)  # (Environment keeps state replies)
        reply = loads(self.last_frame)
        self.state_frame = None
        if reply and (reply[0] == "memory_limit" or reply[-1] == "retired"):  # it answers, then exits: reap it
            self.dead = True
            self._finalizer()
        elif then_state:
            self.state_frame = self._read_frame(time.monotonic() + ADMIN_TIMEOUT_S + self.timeout_s)
        return reply

    def admin(self, obj: Any) -> list:
        """A request of our own (load, reset, state, hash): generous deadline, errors raise."""
        reply = self.request(dumps(obj), ADMIN_TIMEOUT_S + self.timeout_s)
        if reply[0] == "error":
            raise SandboxError(f"sandbox worker: {reply[1]}")
        if reply[0] == "memory_limit":
            raise WorkerDied("memory_limit", reply[2])
        return reply

    def close(self) -> None:
        self.dead = True
        self._finalizer()


# --------------------------------------------------------------------------- a small pool

_POOL: list[WorkerProcess] = []
_POOL_LOCK = threading.Lock()
POOL_SIZE = 8  # idle workers kept: enough for one open environment per stage thread


def take_worker(*, memory_mb: int, timeout_s: float) -> WorkerProcess:
    """An idle pooled worker with these limits, or a new one. The caller must send "load" first.

    The most recently returned one first: it holds the initial states the last environment sent
    (its resident states), which the next environment on the same tasks then need not send again."""
    with _POOL_LOCK:
        for i in range(len(_POOL) - 1, -1, -1):
            w = _POOL[i]
            if not w.dead and w.memory_mb == int(memory_mb) and w.timeout_s == float(timeout_s):
                return _POOL.pop(i)
    return WorkerProcess(memory_mb=memory_mb, timeout_s=timeout_s)


def give_worker(worker: WorkerProcess) -> None:
    """Back to its pool: a check worker to the check workers of its kind (until it has run
    :data:`CHECKS_PER_WORKER` checks), an episode worker to the episode pool; a worker with
    another hash seed, or one too many, is stopped instead."""
    with _POOL_LOCK:
        if worker.role == "check":
            worker.checks += 1
            stock = _CHECKERS.setdefault(_kind(worker.memory_mb, worker.timeout_s, worker.hash_seed), [])
            if worker.dead or worker.checks >= CHECKS_PER_WORKER or len(stock) >= CHECK_WORKERS:
                worker.close()
            else:
                stock.append(worker)
        elif worker.dead or worker.hash_seed != 0 or len(_POOL) >= POOL_SIZE:
            worker.close()
        else:
            _POOL.append(worker)


def _kind(memory_mb: int, timeout_s: float, hash_seed: int) -> tuple[int, float, int]:
    return int(memory_mb), float(timeout_s), int(hash_seed)


# --------------------------------------------------------------------------- never-used workers

FRESH_SPARES = 1  # started ahead per (limits, seed): the next determinism check finds them ready
FRESH_KINDS = 4  # distinct (limits, seed) stocks kept; the least recently used one goes first
_FRESH: dict[tuple[int, float, int], list[WorkerProcess]] = {}


def fresh_worker(*, memory_mb: int, timeout_s: float, hash_seed: int = 0) -> WorkerProcess:
    """A worker process that has run nothing yet (its memory layout is its own), string hash seed
    ``hash_seed``. Taken from a stock started ahead, which is topped up at once (the new
    processes start while the caller works)."""
    key = _kind(memory_mb, timeout_s, hash_seed)
    with _POOL_LOCK:
        stock = _FRESH.pop(key, [])
        _FRESH[key] = stock  # most recently used last
        found = None
        while stock and found is None:
            w = stock.pop(0)
            if w.dead or w.proc.poll() is not None:
                w.close()
            else:
                found = w
        while len(stock) < FRESH_SPARES:
            stock.append(WorkerProcess(memory_mb=memory_mb, timeout_s=timeout_s, hash_seed=hash_seed))
        while len(_FRESH) > FRESH_KINDS:
            for w in _FRESH.pop(next(iter(_FRESH))):
                w.close()
    return found or WorkerProcess(memory_mb=memory_mb, timeout_s=timeout_s, hash_seed=hash_seed)


# --------------------------------------------------------------------------- determinism-check workers

CHECK_WORKERS = 8  # idle check workers kept per (limits, seed): one per stage thread
CHECKS_PER_WORKER = 32  # checks one check worker runs before it is retired for a never-used one
_CHECKERS: dict[tuple[int, float, int], list[WorkerProcess]] = {}


def check_worker(*, memory_mb: int, timeout_s: float, hash_seed: int) -> WorkerProcess:
    """A worker that runs determinism checks only, with string hash seed ``hash_seed``: an idle
    one of its kind, else a never-used one (:func:`fresh_worker`). It never runs an episode, and
    each check loads its tool afresh and calls it in a fresh namespace, so a check sees nothing of
    the checks before it; what differs between the two workers of a check is the process (its
    address layout and hash seed), which is what output from ``repr(object())`` or set order
    depends on. Reusing them for up to :data:`CHECKS_PER_WORKER` checks saves two process starts
    (~40 ms each) per check."""
    with _POOL_LOCK:
        stock = _CHECKERS.get(_kind(memory_mb, timeout_s, hash_seed), [])
        while stock:
            w = stock.pop()
            if not w.dead and w.proc.poll() is None:
                return w
            w.close()
    w = fresh_worker(memory_mb=memory_mb, timeout_s=timeout_s, hash_seed=hash_seed)
    w.role = "check"
    return w
