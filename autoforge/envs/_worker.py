"""The sandbox worker: a child process that holds an environment's compiled tools and one state.

Started by :mod:`autoforge.envs._worker_client` as
``python -m autoforge.envs._worker RFD WFD MEMORY_MB CPU_S``. It speaks length-prefixed JSON
frames on two inherited pipes (never stdin/stdout). Only a call's name and arguments and its
observation cross the pipe; the state stays here between calls.

Requests -> replies:
    ["load", {name: source | [source, function_name, arg_map]}]
                               -> ["ok", {name: load_error_or_null}]   compile (already checked) code;
                                  ``name`` is the public tool name, ``function_name`` the Python
                                  function (default: ``name``), ``arg_map`` public -> Python argument names
    ["reset", state]           -> ["ok", {name: load_error_or_null}]   fresh module globals + state
    ["call", name, args]       -> [kind, output, error]                kind: ok | tool_error | invalid_arguments | crashed | memory_limit
    ["state"]                  -> ["ok", state]  /  ["error", msg]
    ["hash"]                   -> ["ok", sha256 of canonical JSON]  /  ["error", msg]

Containment set up here before the first request (the parent adds the wall-clock timeout):
RLIMIT_AS (address space = what the interpreter uses now + MEMORY_MB), RLIMIT_CPU (raised per
call so each call gets at least CPU_S+1 s; SIGXCPU ends a loop even if the parent is gone),
RLIMIT_CORE 0, RLIMIT_NOFILE 0 (no new files or sockets), RLIMIT_NPROC 0, a scrubbed
environment (the parent passes none of its variables), cwd ``/``, and, when started as root,
uid/gid ``nobody``. After a MemoryError the worker answers and exits, so a fresh one replaces it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import struct
import sys
import time
from typing import Any

from autoforge.envs import sandbox

try:  # orjson is ~5x faster than json; every call's frames go through these two functions
    import orjson

    def dumps(obj: Any) -> bytes:
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()

    def loads(data: bytes) -> Any:
        return orjson.loads(data)

except ImportError:  # pragma: no cover - orjson ships with prefect

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode()

    def loads(data: bytes) -> Any:
        return json.loads(data)


HEADER = struct.Struct("<I")
MAX_FRAME = 256 * 1024 * 1024  # replies larger than this are refused (an observation, not a dump)


def canonical_hash(state: Any) -> str:
    """Same bytes as :func:`autoforge.types.state_hash`, but a non-JSON value is an error."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write(fd: int, payload: bytes) -> None:
    if len(payload) > MAX_FRAME:
        payload = dumps(["crashed", None, f"reply is {len(payload)} bytes; the limit is {MAX_FRAME}"])
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _set_limits(memory_mb: int) -> None:
    try:
        with open("/proc/self/statm") as f:
            vm_now = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - no /proc (not Linux): assume a typical interpreter
        vm_now = 64 * 1024 * 1024
    cap = vm_now + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    for limit in (resource.RLIMIT_CORE, resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC):
        try:
            resource.setrlimit(limit, (0, 0))
        except (ValueError, OSError):  # pragma: no cover - platform without this limit
            pass


def _drop_root() -> None:
    if os.getuid() == 0:
        nobody = 65534
        os.setgroups([])
        os.setgid(nobody)
        os.setuid(nobody)


class Worker:
    def __init__(self, cpu_s: float):
        self.cpu_s = cpu_s
        self.codes: dict[str, tuple[Any, str, dict]] = {}  # public name -> (code, function name, arg map)
        self.compiled: dict[tuple[str, str], Any] = {}
        self.binders: dict[str, sandbox.ArgBinder] = {}
        self.load_errors: dict[str, str | None] = {}
        self.fns: dict[str, Any] = {}
        self.state: dict = {}
        self.cpu_soft = resource.getrlimit(resource.RLIMIT_CPU)[0]

    # ------------------------------------------------------------------ requests
    def load(self, sources: dict[str, Any]) -> list:
        self.codes, self.binders, self.load_errors, self.fns, self.state = {}, {}, {}, {}, {}
        for name, entry in sources.items():
            try:
                source, fname, arg_map = (entry, name, {}) if isinstance(entry, str) else entry
                key = (fname, source)
                if key not in self.compiled:  # a pooled worker sees the same tools again and again
                    if len(self.compiled) >= 4096:
                        self.compiled.clear()
                    self.compiled[key] = sandbox.compile_tool(source, fname)
                self.codes[name] = (self.compiled[key], fname, dict(arg_map or {}))
                self.load_errors[name] = None
            except Exception as e:  # noqa: BLE001 - reported to the parent
                self.load_errors[name] = f"{type(e).__name__}: {e}"
        return ["ok", self._instantiate()]

    def _instantiate(self) -> dict:
        """Fresh module globals for every tool: nothing a call leaves in them survives a reset."""
        fns = {}
        for name, (code, fname, arg_map) in self.codes.items():
            self._arm_cpu()
            try:
                fn = sandbox.load_tool(code, fname)
            except BaseException as e:  # noqa: BLE001
                self.load_errors[name] = f"{type(e).__name__}: {e}"
                continue
            fns[name] = fn
            if name not in self.binders:
                self.binders[name] = sandbox.ArgBinder(fn, arg_map)
        self.fns = fns
        return self.load_errors

    def reset(self, state: dict) -> list:
        self.state = state
        return ["ok", self._instantiate()]

    def call(self, name: str, args: dict) -> list:
        fn = self.fns.get(name)
        if fn is None:
            why = self.load_errors.get(name) or "not loaded"
            return ["crashed", None, f"tool {name!r} failed to load: {why}"]
        binder = self.binders[name]
        problem = binder.problem(args, name)
        if problem is not None:
            return ["invalid_arguments", None, problem]
        self._arm_cpu()
        try:
            out = fn(self.state, **binder.bind(args))
        except MemoryError:
            raise
        except BaseException as e:  # noqa: BLE001 - a raising tool is a bug, reported as 'crashed'
            return ["crashed", None, _describe(e)]
        if type(out) is dict and "error" in out:
            return ["tool_error", out, str(out["error"])]
        return ["ok", out, None]

    def _arm_cpu(self) -> None:
        """Keep at least cpu_s + 1 CPU seconds of headroom below RLIMIT_CPU's soft limit."""
        used = time.process_time()
        if self.cpu_soft == resource.RLIM_INFINITY or self.cpu_soft - used < self.cpu_s + 1:
            self.cpu_soft = int(math.ceil(used + 2 * self.cpu_s)) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (self.cpu_soft, resource.RLIM_INFINITY))


def _describe(e: BaseException) -> str:
    line = None
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<tool:"):
            line = tb.tb_lineno
        tb = tb.tb_next
    where = f" (line {line})" if line else ""
    return f"{type(e).__name__}: {e}{where}"


class _Reader:
    """Buffered frame reader: one ``read`` syscall per small request instead of two."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""

    def frame(self) -> bytes | None:
        buf = self.buf
        while len(buf) < HEADER.size:
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            buf += chunk
        end = HEADER.size + HEADER.unpack_from(buf)[0]
        if len(buf) < end:
            rest = _read_exact(self.fd, end - len(buf))
            if rest is None:
                return None
            buf += rest
        self.buf = buf[end:]
        return buf[HEADER.size:end]


def serve(rfd: int, wfd: int, worker: Worker) -> None:
    _write(wfd, dumps(["ready", os.getpid()]))
    reader = _Reader(rfd)
    while True:
        body = reader.frame()
        if body is None:
            return
        retire, op = False, None
        try:
            msg = loads(body)
            op = msg[0]
            if op == "call":
                reply = worker.call(msg[1], msg[2])
            elif op == "reset":
                reply = worker.reset(msg[1])
            elif op == "load":
                reply = worker.load(msg[1])
            elif op == "state":
                reply = ["ok", worker.state]
            elif op == "hash":
                try:
                    reply = ["ok", canonical_hash(worker.state)]
                except (TypeError, ValueError, RecursionError) as e:
                    reply = ["error", f"state holds a non-JSON value: {type(e).__name__}: {e}"]
            else:
                reply = ["error", f"unknown request {op!r}"]
        except MemoryError:
            reply, retire = ["memory_limit", None, "MemoryError: the tool exceeded its memory limit"], True
        except BaseException as e:  # noqa: BLE001
            reply = ["error", _describe(e)]
        try:
            payload = dumps(reply)
        except MemoryError:
            payload, retire = dumps(["memory_limit", None, "MemoryError while encoding the reply"]), True
        except (TypeError, ValueError, OverflowError, RecursionError) as e:
            why = f"{type(e).__name__}: {e}"
            if op == "call":  # the tool returned something that is not JSON
                payload = dumps(["crashed", None, f"output is not JSON-serialisable: {why}"])
            else:  # a tool left a non-JSON value in the state
                payload = dumps(["error", f"state holds a non-JSON value: {why}"])
        _write(wfd, payload)
        if retire:
            return


def main(argv: list[str]) -> None:
    rfd, wfd, memory_mb, cpu_s = int(argv[0]), int(argv[1]), int(argv[2]), float(argv[3])
    os.chdir("/")
    worker = Worker(cpu_s)
    _set_limits(memory_mb)
    _drop_root()
    serve(rfd, wfd, worker)


if __name__ == "__main__":
    main(sys.argv[1:])
