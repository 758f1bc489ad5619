"""The sandbox worker: a child process that holds an environment's compiled tools and one state.

Started by :mod:`autoforge.envs._worker_client` as
``python -m autoforge.envs._worker RFD WFD MEMORY_MB CPU_S``. It speaks length-prefixed JSON
frames on two inherited pipes (never stdin/stdout). Only a call's name and arguments and its
observation cross the pipe; the state stays here between calls. This module is the loop and the
containment; the frames and strict JSON are :mod:`autoforge.envs.wire`, the committed state
:mod:`autoforge.envs.worker_state` and its hash :mod:`autoforge.envs.state_hash`.

Requests -> replies:
    ["load", {name: source | [source, function_name, arg_map]}]
                               -> ["ok", {name: load_error_or_null}]   compile (already checked) code;
                                  ``name`` is the public tool name, ``function_name`` the Python
                                  function (default: ``name``), ``arg_map`` public -> Python argument names
    ["reset", key, state]      -> ["ok", {name: load_error_or_null}]   start from ``state``, kept as ``key``
    ["reset", key]             -> ["ok", ...] / ["missing", key]      start from the resident state ``key``
    ["call", name, args]       -> [kind, output, error, rolled_back]   kind: ok | tool_error | invalid_arguments | crashed | memory_limit
    ["call", name, args, true] -> the same reply, then a second frame ["ok", state]: the state after the call
                                  (a gold run reads it after every call: one round trip instead of two); no
                                  second frame when the worker retires (memory_limit, "retired")
    ["state"]                  -> ["ok", state]
    ["hash"]                   -> ["ok", "h2:..."]   the state hash (autoforge.types.state_hash), kept up to date

The state a task starts from stays RESIDENT (a few, keyed by the sha256 of their JSON, which the
parent computes): sent once per task, not per episode. The committed state is JSON bytes per
record of each dict-valued top-level entry (collection), shared with the resident state until an
episode changes it (copy on write), with a digest per record whose sum is the state hash.

Calls are all-or-nothing. The tools see each collection as a
:class:`~autoforge.envs.worker_state.Records` dict whose records are decoded from the committed
bytes when first read in a call; after the call the records it read or wrote (all of them after
a scan) are encoded strictly (:func:`~autoforge.envs.wire.encode`: JSON types only, string
keys, finite floats, integers in the signed 64-bit range, valid Unicode), the changed ones are
committed and their digests replaced, and every record handed out becomes a placeholder again,
so what a call changed is a plain JSON value afterwards (no tuples, aliases or references a
tool kept into it). A call that returned ``error(...)``, raised, returned a non-JSON value or
left one in the state is undone the same way, without committing (``rolled_back`` says whether
the tool had changed anything). A reset puts back only the records the episode changed.
``get_state`` sends the committed bytes and the hash is the committed digests' sum, so both
always describe the same state. Every call also runs in fresh module globals (the module code
is executed again, ~0.5 us), so a module-level ``CALLS = []`` or a default argument cannot
carry anything from one call to the next. Timeouts and the memory limit kill the worker; the
parent rebuilds the state by replaying the calls that succeeded since the reset.

Containment set up here before the first request (the parent adds the wall-clock timeout):
RLIMIT_AS (address space = what the interpreter uses now + MEMORY_MB), RLIMIT_CPU (raised per
call so each call gets at least CPU_S+1 s; SIGXCPU ends a loop even if the parent is gone),
RLIMIT_CORE 0, RLIMIT_NOFILE 0 (no new files or sockets), RLIMIT_NPROC 0, a scrubbed
environment (the parent passes none of its variables), cwd ``/``, and, when started as root,
uid/gid ``nobody``. After a MemoryError the worker answers and exits, so a fresh one replaces it.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from typing import Any

from autoforge.envs import guards as rule_engine, sandbox, static_checks
from autoforge.envs.state_hash import hash_text, value_digest
from autoforge.envs.wire import describe_problem, dumps, encode, FrameReader, loads, MAX_FRAME, NotJSON, safe_text, show, write_frame
from autoforge.envs.worker_state import key_ok, MISSING, Resident, RESIDENT_BYTES, RESIDENT_STATES, StoredCollection, StoredValue, value_bytes


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


def _stored_bytes(e: Any) -> bytes:
    """A stored entry's JSON bytes, in its key order (what a replaced entry is compared by)."""
    return e.blob() if type(e) is StoredCollection else e.data


class Worker:
    def __init__(self, cpu_s: float):
        self.cpu_s = cpu_s
        self.codes: dict[str, tuple[Any, str, dict]] = {}  # public name -> (code, function name, arg map)
        self.guards: dict[str, list[dict]] = {}  # public name -> its runtime rules (autoforge.envs.guards)
        self.compiled: dict[tuple[str, str], Any] = {}
        self.binders: dict[str, sandbox.ArgBinder] = {}
        self.load_errors: dict[str, str | None] = {}
        self.resident: dict[str, Resident] = {}  # key -> initial state, least recently used first
        self.resident_bytes = RESIDENT_BYTES  # main() lowers it to an eighth of the memory limit
        self.base: Resident | None = None  # the resident state the episode started from
        self.entries: dict[str, StoredCollection | StoredValue] = {}  # the committed state, entry by entry, in order
        self.state: dict = {}  # what the tools get: entry name -> its live value (Records for a dict)
        self.total = 0  # the hash sum of the committed state
        self.changed: set[str] = set()  # entries that differ from the base state
        self.cpu_soft = resource.getrlimit(resource.RLIMIT_CPU)[0]

    # ------------------------------------------------------------------ the committed state
    @property
    def snap(self) -> bytes:
        """The committed state as JSON: what ``get_state`` sends."""
        return b"{" + b",".join(dumps(n) + b":" + (e.blob() if type(e) is StoredCollection else e.data)
                                for n, e in self.entries.items()) + b"}"

    def _use(self, entries: dict) -> None:
        self.entries = entries
        self.state = {n: e.live for n, e in entries.items()}

    def _settle(self, keep: bool) -> tuple[bool, str | None]:
        """After a call: find what it changed, then commit that (``keep`` and all of it JSON) or put
        the committed state back. Returns (it changed something, why the state is not JSON)."""
        state, entries = self.state, self.entries
        top_same = len(state) == len(entries) and all(state.get(n, MISSING) is e.live for n, e in entries.items()) \
            and list(state) == list(entries)
        found: dict[str, Any] = {}  # name -> (changes, reorder) | ("val", bytes) ; only what changed
        problem = None
        new_entries = None if top_same else {}  # not the same entries: one was added, removed, replaced or moved
        for n, v in state.items():
            e = entries.get(n)
            if e is not None and v is e.live:
                got = self._examine(e)
                if isinstance(got, str):
                    problem = got
                    break
                if got is not None:
                    found[n] = got
                if new_entries is not None:
                    new_entries[n] = e
                continue
            if e is None and not key_ok(n):
                problem = describe_problem({n: None}, "state")
                break
            built = self._build(n, v)
            if isinstance(built, str):
                problem = built
                break
            new_entries[n] = built
        # entries replaced by equal ones (a collection assigned the value it held) change nothing
        replaced = new_entries is not None and not (list(new_entries) == list(entries) and all(
            new_entries[n] is entries[n] or _stored_bytes(new_entries[n]) == _stored_bytes(entries[n]) for n in entries))
        changed = bool(found) or replaced or problem is not None
        if keep and problem is None:
            for n, got in found.items():
                e = entries[n]
                if type(e) is StoredCollection:
                    e.apply(*got)
                else:
                    e.data, e.term = got[1], value_digest(n, loads(got[1]))
                self.changed.add(n)
            if new_entries is not None:
                for n, e in new_entries.items():
                    if entries.get(n) is not e:
                        self.changed.add(n)
                self.changed.update(n for n in entries if n not in new_entries)
                self.changed.add("")  # the entries themselves changed: a reset rebuilds all
                entries = new_entries
            if found or new_entries is not None:
                self.total = sum(e.term for e in entries.values())
        for e in entries.values():  # live values are the committed ones again, decoded afresh when read
            if type(e) is StoredCollection:
                live = e.live
                if (live.scan or live.edit or problem is not None or new_entries is not None
                        or (e.name in found and found[e.name][1])):  # else only what the call touched
                    e.refill()
                elif live.seen:
                    e.refill(live.seen)
            else:
                e.live = loads(e.data)
        self._use(entries)
        return changed, problem

    def _examine(self, e: "StoredCollection | StoredValue") -> Any:
        if type(e) is StoredCollection:
            got = e.examine()
            if isinstance(got, str) or got[0] or got[1]:
                return got
            return None
        data = value_bytes(e.live)
        if data is None:
            return describe_problem(e.live, f"state[{show(e.name)}]")
        return ("val", data) if data != e.data else None

    def _build(self, name: str, value: Any) -> "StoredCollection | StoredValue | str":
        """A new top-level entry from what a tool put there (a plain value afterwards)."""
        data = value_bytes(value)
        if data is None:
            return describe_problem(value, f"state[{show(name)}]")
        plain = loads(data)
        if isinstance(value, dict):
            return StoredCollection.build(name, plain).fork()
        return StoredValue.build(name, plain, data)

    # ------------------------------------------------------------------ requests
    def load(self, sources: dict[str, Any]) -> list:
        self.codes, self.binders, self.load_errors, self.guards = {}, {}, {}, {}
        self.base, self.changed, self.total = None, set(), 0
        self._use({})
        for name, entry in sources.items():
            try:
                source, fname, arg_map, *rest = (entry, name, {}) if isinstance(entry, str) else entry
                if rest and rest[0]:
                    self.guards[name] = [g for g in rest[0] if isinstance(g, dict)]
                key = (fname, source)
                if key not in self.compiled:  # a pooled worker sees the same tools again and again
                    if len(self.compiled) >= 4096:
                        self.compiled.clear()
                    self.compiled[key] = static_checks.compile_tool(source, fname)
                self.codes[name] = (self.compiled[key], fname, dict(arg_map or {}))
                self.load_errors[name] = None
            except Exception as e:  # noqa: BLE001 - reported to the parent
                self.load_errors[name] = safe_text(f"{type(e).__name__}: {e}")
        for name, (code, fname, arg_map) in self.codes.items():  # run each module once: errors, signatures
            self._arm_cpu()
            try:
                fn = sandbox.load_tool(code, fname)
            except BaseException as e:  # noqa: BLE001
                self.load_errors[name] = _describe(e)
                continue
            self.binders[name] = sandbox.ArgBinder(fn, arg_map)
        return ["ok", self.load_errors]

    def reset(self, key: Any, state: Any = MISSING, size: int = 0) -> list:
        """Start from the resident state ``key``; ``state`` (its JSON decoded) when it is not resident."""
        res = self.resident.pop(key, None) if type(key) is str else None
        if res is None:
            if state is MISSING:
                return ["missing", key]
            if type(state) is not dict:
                return ["error", f"the state must be a JSON object, not {type(state).__name__}"]
            res = Resident(state, size)
        self.resident[key] = res  # most recently used last
        while len(self.resident) > 1 and (len(self.resident) > RESIDENT_STATES or
                                          sum(r.size for r in self.resident.values()) > self.resident_bytes):
            del self.resident[next(iter(self.resident))]
        if res is self.base and "" not in self.changed:
            if self.changed:  # put back only the records the episode changed
                entries = self.entries
                for n in self.changed:
                    e, base = entries[n], res.entries[n]
                    if type(e) is not StoredCollection or not e.revert(base):
                        entries[n] = base.fork()
                self._use(entries)
        else:
            self._use({n: e.fork() for n, e in res.entries.items()})
        self.base, self.total, self.changed = res, res.total, set()
        return ["ok", self.load_errors]

    def call(self, name: str, args: dict) -> bytes | list:
        """Run one call, all or nothing: the reply frame (bytes) or a reply to encode."""
        binder = self.binders.get(name)
        if binder is None:
            why = self.load_errors.get(name) or "not loaded"
            return ["crashed", None, f"tool {name!r} failed to load: {why}", False]
        problem = binder.problem(args, name)
        if problem is not None:
            return ["invalid_arguments", None, problem, False]
        code, fname, _ = self.codes[name]
        state = self.state
        guards = self.guards.get(name)
        if guards:  # the rules the call must keep, before any code runs
            refused = rule_engine.refusal(guards, state, args)
            if refused is not None:
                return self._undo("tool_error", encode({"error": refused[1]}, "output", output=True), refused[1],
                                  rule_id=refused[0])
        self._arm_cpu()
        try:
            fn = sandbox.load_tool(code, fname)  # fresh module globals: nothing survives a call
            out = fn(state, **binder.bind(args))
        except MemoryError:
            raise
        except BaseException as e:  # noqa: BLE001 - a raising tool is a bug, reported as 'crashed'
            return self._undo("crashed", None, _describe(e))
        del fn, state
        try:
            out_bytes = encode(out, "output", output=True)
        except NotJSON as e:
            return self._undo("crashed", None, f"output is not JSON-serialisable: {e}")
        if len(out_bytes) > MAX_FRAME - 4096:
            return self._undo("crashed", None, f"the output is {len(out_bytes)} bytes; the limit is {MAX_FRAME}")
        if isinstance(out, dict) and "error" in out:  # an OrderedDict(error=...) reads as error(...) too
            return self._undo("tool_error", out_bytes, safe_text(str(out["error"])))
        del out
        if guards:
            rule_engine.after_call(guards, self.state, args)  # count_limit counters
        _, problem = self._settle(keep=True)
        if problem is not None:
            return b"".join((b'["crashed",null,', dumps(safe_text("the tool left a non-JSON value in the state: "
                                                                f"{problem} (the call was undone)")), b",true]"))
        return b'["ok",' + out_bytes + b",null,false]"

    def _undo(self, kind: str, out_bytes: bytes | None, error: str, rule_id: str | None = None) -> bytes:
        """A failed call's reply, after putting the committed state back (``rule_id``: the rule that refused it)."""
        changed = self.restore()
        tail = b"," + dumps(rule_id) if rule_id else b""
        return b"".join((b"[", dumps(kind), b",", out_bytes or b"null", b",", dumps(safe_text(error)), b",",
                         b"true" if changed else b"false", tail, b"]"))

    def restore(self) -> bool:
        """Make the live state the committed one again; True when the failed call had changed it."""
        return self._settle(keep=False)[0]

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
    try:
        detail = str(e)
    except Exception:  # noqa: BLE001 - e.g. ValueError(10**5000): its text cannot be built
        detail = "<the exception's message could not be turned into text>"
    if len(detail) > 2000:
        detail = detail[:1997] + "..."
    return safe_text(f"{type(e).__name__}: {detail}{where}")


def serve(rfd: int, wfd: int, worker: Worker) -> None:
    write_frame(wfd, dumps(["ready", os.getpid()]))
    reader = FrameReader(rfd)
    while True:
        body = reader.frame()
        if body is None:
            return
        retire, op, then_state = False, None, False
        try:
            msg = loads(body)
            op = msg[0]
            if op == "call":
                then_state = len(msg) > 3 and msg[3] is True
                reply = worker.call(msg[1], msg[2])
            elif op == "reset":
                reply = worker.reset(*msg[1:3], size=len(body))
            elif op == "load":
                reply = worker.load(msg[1])
            elif op == "state":
                reply = b'["ok",' + worker.snap + b"]"
            elif op == "hash":
                reply = ["ok", hash_text(worker.total)]
            else:
                reply = ["error", f"unknown request {op!r}"]
        except MemoryError:
            reply, retire = ["memory_limit", None, "MemoryError: the tool exceeded its memory limit"], True
        except BaseException as e:  # noqa: BLE001 - our own failure, not the tool's
            reply = ["error", f"the sandbox worker failed on {op!r}: {_describe(e)}"]
            if op == "call":  # a call must still be all or nothing; if that fails too, start afresh
                try:
                    reply = ["crashed", None, reply[1], worker.restore()]
                except BaseException:  # noqa: BLE001
                    reply, retire = ["crashed", None, reply[1], True, "retired"], True
        try:
            payload = reply if isinstance(reply, bytes) else dumps(reply)
        except MemoryError:
            payload, retire = dumps(["memory_limit", None, "MemoryError while encoding the reply"]), True
        write_frame(wfd, payload)
        if retire:
            return
        if then_state:
            try:
                state = b'["ok",' + worker.snap + b"]"
            except MemoryError:
                state = dumps(["error", "MemoryError while encoding the state"])
            write_frame(wfd, state)


def main(argv: list[str]) -> None:
    rfd, wfd, memory_mb, cpu_s = int(argv[0]), int(argv[1]), int(argv[2]), float(argv[3])
    os.chdir("/")
    worker = Worker(cpu_s)
    worker.resident_bytes = min(RESIDENT_BYTES, memory_mb * 1024 * 1024 // 8)  # resident states' JSON
    _set_limits(memory_mb)
    _drop_root()
    serve(rfd, wfd, worker)


if __name__ == "__main__":
    main(sys.argv[1:])
