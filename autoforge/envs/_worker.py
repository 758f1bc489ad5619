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
    ["reset", state]           -> ["ok", {name: load_error_or_null}]   a new state
    ["call", name, args]       -> [kind, output, error, rolled_back]   kind: ok | tool_error | invalid_arguments | crashed | memory_limit
    ["state"]                  -> ["ok", state]
    ["hash"]                   -> ["ok", sha256 of canonical JSON]  /  ["error", msg]

Calls are all-or-nothing. The worker keeps the committed state as JSON bytes, one piece per
top-level entry (collection), beside the live object the tools mutate. After a call that
returned a value, the state is encoded strictly (:func:`encode`: JSON types only, string keys,
finite floats, integers in the signed 64-bit range, valid Unicode); the entries whose bytes
changed are committed and rebuilt from their bytes, so what a call changed is a plain JSON
value afterwards (no tuples, aliases or references a tool kept into it; an entry whose bytes
did not change keeps its objects, which encode to the same JSON). A call that returned
``error(...)``, raised, returned a non-JSON value or left one in the state is undone: the
changed entries are rebuilt from the committed bytes (``rolled_back`` says whether the tool
had changed anything). ``get_state`` sends the committed bytes and the hash is computed from
them, so both always describe the same state. Every call also runs in fresh module globals
(the module code is executed again, ~0.5 us), so a module-level ``CALLS = []`` or a default
argument cannot carry anything from one call to the next. Timeouts and the memory limit kill
the worker; the parent rebuilds the state by replaying the calls that succeeded since the reset.

Containment set up here before the first request (the parent adds the wall-clock timeout):
RLIMIT_AS (address space = what the interpreter uses now + MEMORY_MB), RLIMIT_CPU (raised per
call so each call gets at least CPU_S+1 s; SIGXCPU ends a loop even if the parent is gone),
RLIMIT_CORE 0, RLIMIT_NOFILE 0 (no new files or sockets), RLIMIT_NPROC 0, a scrubbed
environment (the parent passes none of its variables), cwd ``/``, and, when started as root,
uid/gid ``nobody``. After a MemoryError the worker answers and exits, so a fresh one replaces it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import marshal
import math
import os
import re
import resource
import struct
import sys
import time
from typing import Any

from autoforge.envs import sandbox

try:  # orjson is ~5x faster than json; every call's frames go through these two functions
    import orjson

    def dumps(obj: Any) -> bytes:
        """Encode a frame of our own (names, messages, sources); values from tools go through :func:`encode`."""
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:
            return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8", "backslashreplace")

    def loads(data: bytes) -> Any:
        return orjson.loads(data)

except ImportError:  # pragma: no cover - orjson ships with prefect
    orjson = None

    def dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8", "backslashreplace")

    def loads(data: bytes) -> Any:
        return json.loads(data)


HEADER = struct.Struct("<I")
MAX_FRAME = 256 * 1024 * 1024  # replies larger than this are refused (an observation, not a dump)

# --------------------------------------------------------------------------- values at the boundary
#
# What crosses the pipe (arguments, outputs, the state) must be JSON that both ends decode to
# the same value. orjson alone is not enough: it writes NaN and infinity as ``null``, and an
# integer it cannot write makes ``dumps`` fall back to ``json``, whose output orjson then reads
# back as a float. :func:`encode` refuses all of that, with the path of the offending value.

INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1  # signed 64-bit: what orjson, DuckDB's BIGINT and most JSON readers keep
MAX_DEPTH = 254  # levels below the top: orjson refuses 255 nested containers
if orjson is not None:
    _STRICT = orjson.OPT_PASSTHROUGH_DATETIME  # state and arguments: a datetime is an error, not a string
    _OUTPUT = orjson.OPT_NON_STR_KEYS  # outputs: {1: x} -> {"1": x} and datetimes -> ISO text, as before


class NotJSON(ValueError):
    """A value that cannot cross the sandbox boundary as JSON; the message names where and why."""


def _all_finite(value: Any, keys: bool = False) -> bool:
    """False when a float in ``value`` (and with ``keys``, a float key) is NaN or infinite
    (orjson would have written ``null``)."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is dict:
            if keys:
                push(v)
            push(v.values())
        elif t is list:
            push(v)
        elif t is float:
            if v - v:  # 0.0 for every finite float, NaN otherwise
                return False
        elif t is str or t is int or t is bool or v is None:
            continue
        elif isinstance(v, dict):
            if keys:
                push(v)
            push(v.values())
        elif isinstance(v, (list, tuple)):
            push(v)
        elif isinstance(v, float) and v - v:
            return False
    return True


_FLOAT_CODES = (0x67, 0xE7)  # marshal's TYPE_BINARY_FLOAT ('g'), without and with FLAG_REF


def _finite(value: Any, keys: bool = False) -> bool:
    """:func:`_all_finite`, fast. marshal (C, ~2x orjson's time) writes every float as a type
    byte and its 8 IEEE bytes, little-endian; NaN and infinity have an all-ones exponent, so
    their last two bytes are >= 0xF0 and 0x7F/0xFF. Only a candidate (rare: a few ints have such
    bytes), a value marshal cannot write (a dict subclass) or many candidates go to the walk."""
    try:
        data = marshal.dumps(value)
    except (ValueError, TypeError):
        return _all_finite(value, keys)
    budget = 32
    for last in (b"\x7f", b"\xff"):
        i = data.find(last, 8)
        while i != -1:
            if data[i - 1] >= 0xF0 and data[i - 8] in _FLOAT_CODES:
                return _all_finite(value, keys)  # a non-finite float, or bytes that look like one
            budget -= 1
            if not budget:
                return _all_finite(value, keys)
            i = data.find(last, i + 1)
    return True


def _show(value: Any, n: int = 40) -> str:
    """A short repr that cannot fail (a huge int has no repr past 4300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return text if len(text) <= n else text[: n - 3] + "..."


_HINTS = {"set": "use sorted(...) to make a list", "frozenset": "use sorted(...) to make a list",
          "Decimal": "use float(x) or str(x)", "date": "store x.isoformat()", "datetime": "store x.isoformat()",
          "time": "store x.isoformat()", "timedelta": "store a number of days or seconds",
          "function": "return data, not a function", "bytes": "use a string"}


def describe_problem(value: Any, where: str, *, output: bool = False) -> str:
    """Where ``value`` stops being JSON and why (the message of :class:`NotJSON`)."""
    found = _find_problem(value, where, output)
    return found or f"{where} is not JSON (nested too deeply, or it contains itself)"


def _find_problem(value: Any, where: str, output: bool) -> str | None:
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        v, path, depth = stack.pop()
        if len(path) > 160:
            path = path[:80] + "..." + path[-60:]
        if depth > MAX_DEPTH:
            return f"{path} is nested more than {MAX_DEPTH} levels deep (or contains itself)"
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                return (f"{path} is a string with an unpaired surrogate {v[e.start]!r}, which is not valid "
                        "Unicode: build text from real characters")
        elif isinstance(v, int):
            if not INT_MIN <= v <= INT_MAX:
                return (f"{path} is {_show(v)}, outside the 64-bit range JSON numbers keep exactly here "
                        "(-2**63 .. 2**63-1): store it as a string, or round it")
        elif isinstance(v, float):
            if v - v:
                return (f"{path} is {v!r}, which is not a JSON number (NaN and infinity are not JSON): "
                        "use None or a finite number")
        elif isinstance(v, dict):
            children = []
            for k, x in v.items():
                if not isinstance(k, str) and (not output or not (k is None or isinstance(k, (int, float)))):
                    return (f"{path} has the key {_show(k)} ({type(k).__name__}); JSON object keys are "
                            "strings: use str(key)")
                if output and isinstance(k, int) and not isinstance(k, bool) and not INT_MIN <= k <= INT_MAX:
                    return f"{path} has the key {_show(k)}, outside the 64-bit range: use str(key)"
                if isinstance(k, float) and k - k:
                    return f"{path} has the key {k!r}, which is not a JSON number: use str(key)"
                children.append((k, f"{path} key {_show(k)}", depth + 1))
                children.append((x, f"{path}[{_show(k)}]", depth + 1))
            clash = _key_clash(v) if output else None
            if clash:
                return clash.replace("{path}", path)
            stack.extend(reversed(children))
        elif isinstance(v, (list, tuple)):
            stack.extend(reversed([(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]))
        elif output and isinstance(v, (_dt.date, _dt.time)):
            continue  # orjson writes ISO text, as it always has for outputs
        else:
            kind = type(v).__name__
            hint = _HINTS.get(kind, "use dict, list, str, int, float, bool or None")
            return f"{path} is a {kind}, which is not JSON: {hint}"
    return None


def _key_clash(d: dict) -> str | None:
    """Two keys of an output dict that become the same JSON key (``1`` and ``"1"``, ``True`` and
    ``"true"``): the JSON would hold the key twice and a reader keep only one of them."""
    if all(type(k) is str for k in d):
        return None
    seen: dict[str, Any] = {}
    for k in d:
        text = k if isinstance(k, str) else _json_key(k)
        if text in seen:
            return (f"{{path}} has the keys {_show(seen[text])} and {_show(k)}, which both become the JSON key "
                    f"{text!r}: keep one of them")
        seen[text] = k
    return None


def _json_key(k: Any) -> str:
    if orjson is None:  # pragma: no cover
        return json.dumps(k) if k is None or isinstance(k, bool) else str(k)
    try:
        return next(iter(orjson.loads(orjson.dumps({k: 0}, option=_OUTPUT))))
    except TypeError:
        return repr(k)


def _try_encode(value: Any, output: bool, *, finite: bool = True) -> bytes | None:
    """:func:`encode` without the diagnosis: None when ``value`` is not JSON (``finite=False``:
    the caller checks for NaN and infinity itself)."""
    if orjson is None:  # pragma: no cover
        if _find_problem(value, "", output) is not None:
            return None
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError, RecursionError):
            return None
    try:
        data = orjson.dumps(value, option=_STRICT)
    except TypeError:  # orjson.JSONEncodeError: a type, key, integer, surrogate or depth it refuses
        # An output may still use number keys and datetimes, if no two keys become one.
        if not output or _find_problem(value, "", output) is not None:
            return None
        try:
            data = orjson.dumps(value, option=_OUTPUT)
        except TypeError:
            return None
    if finite and b"null" in data and not _finite(value, output):  # NaN and infinity come out as null
        return None
    if _int_too_big(data, value, output):
        return None
    return data


_LONG_DIGITS = re.compile(rb"\d{19}")  # an integer outside the signed 64-bit range has 19 digits or more


def _int_too_big(data: bytes, value: Any, output: bool) -> bool:
    """``value`` (encoded as ``data``) holds an integer outside the signed 64-bit range: orjson
    writes up to 2**64-1, so bytes with a 19-digit run are walked exactly."""
    return _LONG_DIGITS.search(data) is not None and _find_problem(value, "", output) is not None


def encode(value: Any, where: str, *, output: bool = False) -> bytes:
    """``value`` as JSON bytes both sides decode to the same thing, else :class:`NotJSON`.

    JSON types only (tuples as lists, dict subclasses as dicts), string keys (``output=True``
    also takes int/float/bool/None keys and datetimes, written as text), finite floats,
    integers in ``INT_MIN..INT_MAX``, valid Unicode, at most ``MAX_DEPTH`` levels.
    """
    data = _try_encode(value, output)
    if data is None:
        raise NotJSON(describe_problem(value, where, output=output))
    return data


def canonical_hash(state: Any) -> str:
    """Same bytes as :func:`autoforge.types.state_hash`, but a non-JSON value is an error."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _text(message: str) -> str:
    """``message`` with unpaired surrogates escaped (a tool's exception text can hold them)."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


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
        self.state: dict = {}  # the live state the tools mutate
        self.parts: dict[str, bytes] = {}  # the committed state: each top-level entry as JSON bytes
        self.null_parts: set[str] = set()  # the committed entries whose JSON holds a null
        self._snap: bytes | None = b"{}"  # the committed state as one JSON document (built on demand)
        self.cpu_soft = resource.getrlimit(resource.RLIMIT_CPU)[0]

    # ------------------------------------------------------------------ the committed state
    @property
    def snap(self) -> bytes:
        """The committed state as JSON: what ``get_state`` sends and the hash is computed from."""
        if self._snap is None:
            self._snap = b"{" + b",".join(dumps(k) + b":" + v for k, v in self.parts.items()) + b"}"
        return self._snap

    def _set_committed(self, parts: dict[str, bytes], nulls: set[str], snap: bytes | None = None) -> None:
        self.parts, self.null_parts, self._snap = parts, nulls, snap

    def _check(self, state: dict) -> tuple[dict[str, bytes] | None, list[str], set[str]]:
        """``(parts, changed, nulls)`` for the live ``state``: each top-level entry (collection) as
        strict JSON (see :func:`encode`; None when one is not JSON), the entries that differ from
        the committed ones, and the entries whose JSON holds a null. Per entry, so a call that
        writes one collection rebuilds only that one; NaN and infinity (which orjson writes as
        null, even over a null) are looked for only in entries that hold a null."""
        committed = self.parts
        if orjson is None:  # pragma: no cover
            parts = {k: _try_encode(v, False) for k, v in state.items()}
            if any(v is None for v in parts.values()) or any(type(k) is not str for k in parts):
                return None, [], set()
            return parts, [k for k, v in parts.items() if committed.get(k) != v], set()
        dump, option = orjson.dumps, _STRICT
        try:
            parts = {k: dump(v, option=option) for k, v in state.items()}
        except TypeError:  # a type, key, integer, surrogate or depth orjson refuses
            return None, [], set()
        if parts == committed:  # the usual case (a read): only a NaN written over a null is left to find
            if self.null_parts and not _finite([state[k] for k in self.null_parts]):
                return None, [], set()
            return parts, [], self.null_parts
        changed = [k for k, v in parts.items() if committed.get(k) != v]
        if changed and any(type(k) is not str or (k not in committed and _try_encode(k, False) is None)
                           for k in changed):
            return None, [], set()  # a top-level key that is not a string, or not valid Unicode
        if any(_int_too_big(parts[k], state[k], False) for k in changed):
            return None, [], set()
        nulls = {k for k in changed if b"null" in parts[k]}
        nulls.update(k for k in self.null_parts if k in parts and k not in nulls and committed[k] == parts[k])
        if nulls and not _finite([state[k] for k in nulls]):
            return None, [], set()
        if len(parts) != len(committed):
            changed.append("")  # an entry was removed
        return parts, changed, nulls

    # ------------------------------------------------------------------ requests
    def load(self, sources: dict[str, Any]) -> list:
        self.codes, self.binders, self.load_errors = {}, {}, {}
        self.state = {}
        self._set_committed({}, set(), b"{}")
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
                self.load_errors[name] = _text(f"{type(e).__name__}: {e}")
        for name, (code, fname, arg_map) in self.codes.items():  # run each module once: errors, signatures
            self._arm_cpu()
            try:
                fn = sandbox.load_tool(code, fname)
            except BaseException as e:  # noqa: BLE001
                self.load_errors[name] = _describe(e)
                continue
            self.binders[name] = sandbox.ArgBinder(fn, arg_map)
        return ["ok", self.load_errors]

    def reset(self, state: Any) -> list:
        if type(state) is not dict:
            return ["error", f"the state must be a JSON object, not {type(state).__name__}"]
        self._set_committed({}, set())
        parts, _, nulls = self._check(state)  # decoded from the parent's JSON: cannot fail
        if parts is None:
            return ["error", f"the state is not JSON: {describe_problem(state, 'state')}"]
        self.state = state
        self._set_committed(parts, nulls)
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
        self._arm_cpu()
        try:
            fn = sandbox.load_tool(code, fname)  # fresh module globals: nothing survives a call
            out = fn(state, **binder.bind(args))
        except MemoryError:
            raise
        except BaseException as e:  # noqa: BLE001 - a raising tool is a bug, reported as 'crashed'
            return self._undo("crashed", None, _describe(e))
        try:
            out_bytes = encode(out, "output", output=True)
        except NotJSON as e:
            return self._undo("crashed", None, f"output is not JSON-serialisable: {e}")
        if len(out_bytes) > MAX_FRAME - 4096:
            return self._undo("crashed", None, f"the output is {len(out_bytes)} bytes; the limit is {MAX_FRAME}")
        if isinstance(out, dict) and "error" in out:  # an OrderedDict(error=...) reads as error(...) too
            return self._undo("tool_error", out_bytes, _text(str(out["error"])))
        parts, changed, nulls = self._check(state)
        if parts is None:
            return self._undo("crashed", None, "the tool left a non-JSON value in the state: "
                                               f"{describe_problem(state, 'state')} (the call was undone)")
        if changed:
            self._set_committed(parts, nulls)
        self._rebuild()
        return b'["ok",' + out_bytes + b",null,false]"

    def _rebuild(self) -> None:
        """The live state becomes a fresh decode of the committed JSON, in its key order, after
        every call: a Counter or defaultdict put in place of a dict, a tuple for a list, or two
        entries made one object encode to the same bytes, and must not outlive the call."""
        self.state = {k: loads(v) for k, v in self.parts.items()}

    def _undo(self, kind: str, out_bytes: bytes | None, error: str) -> bytes:
        """A failed call's reply, after putting the committed state back."""
        changed = self.restore()
        return b"".join((b"[", dumps(kind), b",", out_bytes or b"null", b",", dumps(_text(error)), b",",
                         b"true" if changed else b"false", b"]"))

    def restore(self) -> bool:
        """Make the live state the committed one again; True when the failed call had changed it."""
        parts, changed, _ = self._check(self.state)
        self._rebuild()
        return parts is None or bool(changed)

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
    return _text(f"{type(e).__name__}: {detail}{where}")


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
                reply = b'["ok",' + worker.snap + b"]"
            elif op == "hash":
                reply = ["ok", canonical_hash(loads(worker.snap))]
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
