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
    ["reset", key, state]      -> ["ok", {name: load_error_or_null}]   start from ``state``, kept as ``key``
    ["reset", key]             -> ["ok", ...] / ["missing", key]      start from the resident state ``key``
    ["call", name, args]       -> [kind, output, error, rolled_back]   kind: ok | tool_error | invalid_arguments | crashed | memory_limit
    ["state"]                  -> ["ok", state]
    ["hash"]                   -> ["ok", "h2:..."]   the state hash (autoforge.types.state_hash), kept up to date

The state a task starts from stays RESIDENT (a few, keyed by the sha256 of their JSON, which the
parent computes): sent once per task, not per episode. The committed state is JSON bytes per
record of each dict-valued top-level entry (collection), shared with the resident state until an
episode changes it (copy on write), with a digest per record whose sum is the state hash.

Calls are all-or-nothing. The tools see each collection as a :class:`_Records` dict whose
records are decoded from the committed bytes when first read in a call; after the call the
records it read or wrote (all of them after a scan) are encoded strictly (:func:`encode`: JSON
types only, string keys, finite floats, integers in the signed 64-bit range, valid Unicode), the
changed ones are committed and their digests replaced, and every record handed out becomes a
placeholder again, so what a call changed is a plain JSON value afterwards (no tuples, aliases
or references a tool kept into it). A call that returned ``error(...)``, raised, returned a
non-JSON value or left one in the state is undone the same way, without committing
(``rolled_back`` says whether the tool had changed anything). A reset puts back only the records
the episode changed. ``get_state`` sends the committed bytes and the hash is the committed
digests' sum, so both always describe the same state. Every call also runs in fresh module
globals (the module code is executed again, ~0.5 us), so a module-level ``CALLS = []`` or a
default argument cannot carry anything from one call to the next. Timeouts and the memory limit
kill the worker; the parent rebuilds the state by replaying the calls that succeeded since the
reset.

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
import itertools
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


# --------------------------------------------------------------------------- the state hash (version 2)
#
# ``h2:`` + sha256 of the sum, modulo 2**512, of one 512-bit blake2b digest per piece of the
# state: a dict-valued entry (collection) ``name`` contributes ``["d", {name: null}]`` and one
# ``["r", {name: {key: record}}]`` per record, any other entry ``["v", {name: value}]``, each as
# canonical JSON (sorted keys, no whitespace: :func:`autoforge.types.canonical_json`). A sum
# does not depend on order, so equal states have equal hashes whatever their edit history, and
# a call that changes k records updates it with 2k digests. :func:`autoforge.types.state_hash`
# computes the same from a plain dict (tests/test_episode_state.py checks they agree).

try:  # one C encoder made once (json.dumps builds one per call); the state holds JSON values only
    from json.encoder import c_make_encoder as _c_make_encoder
    from json.encoder import encode_basestring as _quote

    _ENCODE = _c_make_encoder(None, None, _quote, None, ":", ",", True, False, True)

    def _canon(obj: Any) -> str:
        return "".join(_ENCODE(obj, 0))
except (ImportError, TypeError):  # pragma: no cover - no C accelerator
    _canon = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
    _quote = json.encoder.py_encode_basestring

HASH_MOD = 1 << 512


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=64).digest(), "big")


def record_digest(name: str, key: str, record: Any) -> int:
    """The digest of ``["r", {name: {key: record}}]`` (keys are strings here)."""
    return _digest('["r",{' + _quote(name) + ":{" + _quote(key) + ":" + _canon(record) + "}}]")


def collection_digest(name: str) -> int:
    return _digest(_canon(["d", {name: None}]))


def value_digest(name: str, value: Any) -> int:
    return _digest(_canon(["v", {name: value}]))


def hash_text(total: int) -> str:
    return "h2:" + hashlib.sha256((total % HASH_MOD).to_bytes(64, "big")).hexdigest()


# --------------------------------------------------------------------------- the committed state
#
# The state a task starts from is sent once and stays RESIDENT (a few, least recently used
# first out, keyed by the parent's hash of its JSON): per dict-valued entry the JSON bytes of
# each record, its digest and the entry's share of the hash. An episode shares those (copy on
# write) and the tools see, per collection, a :class:`_Records` dict whose values are decoded
# from the committed bytes only when read. After a call only the records it read or wrote are
# encoded again and compared; a reset puts back only the collections the episode changed.

RESIDENT_STATES = 8  # initial states kept per worker
RESIDENT_BYTES = 64 * 1024 * 1024  # ... and at most this much JSON of them, and an eighth of the
# worker's memory limit (the current one always stays; in memory a state takes ~2-3x its JSON)


class _Absent:
    """The value of a record nobody has read yet in this call (read it with ``records[key]``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<record not read>"


_ABSENT = _Absent()
_MISSING = object()


def _version_reader() -> Any:
    """A reader of CPython's dict version tag (PEP 509: it changes on every change to a dict), or
    None where it is missing or does not behave so (then every call checks a collection whole).

    Read with ctypes at the field's offset; used only on our own dicts, never by tool code. A
    self-test here checks a write, a removal and a write past a subclass's methods change it and
    a read does not."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    try:
        import ctypes

        offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)
        field = ctypes.c_uint64.from_address

        def version(d: dict) -> int:
            return field(id(d) + offset).value

        class _Probe(dict):
            __slots__ = ("x",)

        for d in ({}, _Probe(a=1)):
            seen = [version(d)]
            d["k"] = 1
            seen.append(version(d))
            _ = d["k"], d.get("k"), len(d), list(dict.values(d))
            seen.append(version(d))
            dict.update(d, {"k": 2})
            seen.append(version(d))
            dict.pop(d, "k")
            seen.append(version(d))
            if not (seen[0] != seen[1] == seen[2] != seen[3] != seen[4]):
                return None
        return version
    except Exception:  # noqa: BLE001 - no ctypes, another layout: check collections whole
        return None


_VERSION = _version_reader()


class _Records(dict):
    """A collection as the tools see it: a dict whose records are decoded on first access.

    Every method that hands out or replaces a record notes its key (``seen``); those that hand out
    all of them decode all (``scan``). ``dict(records)``, ``{**records}``, ``records.copy()``,
    ``copy.copy`` and ``json.dumps`` go through them too (``__iter__`` is overridden, which sends
    CPython's dict merge through ``keys()`` and ``[]``). A call that reaches the dict's storage
    some other way (``dict.get(records, k)``) sees placeholders, not records; what it writes there
    is still found (:meth:`_Col.examine` checks the whole key set and every value's kind)."""

    __slots__ = ("col", "seen", "scan", "edit", "tag", "past")

    def _mark(self) -> None:
        """Before we change the storage: was it changed since we last did (``past``: by a tool
        reaching it past our methods)?"""
        if _VERSION is not None and _VERSION(self) != self.tag:
            self.past = True

    def _marked(self) -> None:
        if _VERSION is not None:
            self.tag = _VERSION(self)

    def _fill(self, key: Any) -> Any:
        value = loads(self.col.vals[key])
        self._mark()
        dict.__setitem__(self, key, value)
        self._marked()
        self.seen.add(key)
        return value

    def _all(self) -> None:
        if self.scan:
            return
        self.scan = True
        missing = [k for k, v in dict.items(self) if v is _ABSENT]
        if missing:
            fresh = loads(self.col.blob()) if len(missing) > 8 else None
            self._mark()
            for k in missing:
                dict.__setitem__(self, k, fresh[k] if fresh is not None else loads(self.col.vals[k]))
            self._marked()

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        return self._fill(key) if value is _ABSENT else value

    def get(self, key, default=None):
        value = dict.get(self, key, _MISSING)
        if value is _MISSING:
            return default
        return self._fill(key) if value is _ABSENT else value

    def setdefault(self, key, default=None):
        if dict.__contains__(self, key):
            return self[key]
        self[key] = default
        return default

    def __setitem__(self, key, value):
        self.seen.add(key)
        self._mark()
        dict.__setitem__(self, key, value)
        self._marked()

    def __delitem__(self, key):
        self._mark()
        dict.__delitem__(self, key)
        self._marked()
        self.seen.add(key)
        self.edit = True

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        if not dict.__len__(self):
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self):
        self.seen.update(dict.keys(self))
        self.edit = True
        self._mark()
        dict.clear(self)
        self._marked()

    def __ior__(self, other):
        self.update(other)
        return self

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = dict(other)
        out.update(self.items())
        return out

    def values(self):
        self._all()
        return dict.values(self)

    def items(self):
        self._all()
        return dict.items(self)

    def copy(self):
        self._all()
        return dict(dict.items(self))

    def __iter__(self):
        return dict.__iter__(self)

    def __eq__(self, other):
        self._all()
        if isinstance(other, _Records):
            other._all()
        return dict.__eq__(self, other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self):
        self._all()
        return dict.__repr__(self)

    def __reduce_ex__(self, protocol):
        return dict, (self.copy(),)

    @classmethod
    def fromkeys(cls, keys, value=None):
        return dict.fromkeys(keys, value)


def _materialize(value: Any) -> bool:
    """Decode every placeholder in the collections ``value`` holds (a tool put a collection, or
    something holding one, into the state or its output); True when there was one."""
    stack, found, visited = [value], False, set()
    while stack:
        v = stack.pop()
        if not isinstance(v, (dict, list, tuple)) or id(v) in visited:
            continue
        visited.add(id(v))  # a value that contains itself is walked once
        if isinstance(v, _Records):
            v._all()
            found = True
        stack.extend(dict.values(v) if isinstance(v, dict) else v)
    return found


def _strict_bytes(value: Any, depth: int) -> bytes | None:
    """``value``'s strict JSON (see :func:`encode`; None when it is not JSON), nested ``depth``
    levels below the top of the state, so the depth limit is the state's."""
    for attempt in (0, 1):
        try:
            data = orjson.dumps([[value]] if depth == 2 else [value], option=_STRICT)[depth:-depth]
            break
        except TypeError:
            if attempt or not _materialize(value):
                return None
    if b"null" in data and not _finite(value):
        return None
    if _int_too_big(data, value, False):
        return None
    return data


def _record_bytes(value: Any) -> bytes | None:
    return _strict_bytes(value, 2)


def _value_bytes(value: Any) -> bytes | None:
    return _strict_bytes(value, 1)


def _key_ok(key: Any) -> bool:
    return type(key) is str and _try_encode(key, False) is not None


class _Col:
    """A dict-valued entry of the committed state: ``vals`` (record key -> JSON bytes, in the
    state's order; a resident entry's is never changed, a live one has its own), ``kps`` / ``digs``
    (key -> its JSON and a colon / its digest, the resident state's) with this episode's
    additions and changes in ``kpx`` / ``dd`` (None: removed), ``term`` (its share of the hash
    sum) and ``live`` (what the tools see)."""

    __slots__ = ("name", "vals", "kps", "kpx", "digs", "dd", "term", "_blob", "own", "live", "moved")

    @classmethod
    def build(cls, name: str, value: dict, data: bytes | None = None) -> "_Col":
        col = cls()
        col.name, col.own, col.live = name, True, None
        col.vals = {k: orjson.dumps(v) for k, v in value.items()}
        col.kps = {k: orjson.dumps(k) + b":" for k in value}
        col.digs = {k: record_digest(name, k, v) for k, v in value.items()}
        col.kpx, col.dd, col.moved = {}, {}, False
        col.term = collection_digest(name) + sum(col.digs.values())
        col._blob = data
        return col

    def fork(self) -> "_Col":
        """A live copy: its own ``vals`` (a reset undoes the episode's changes in it, so it is copied
        once per state, not per episode); ``kps`` and ``digs`` stay shared, changes go to ``kpx``/``dd``."""
        col = _Col()
        col.name, col.vals, col.kps, col.digs, col.term, col._blob = (
            self.name, dict(self.vals), self.kps, self.digs, self.term, self._blob)
        col.own, col.live, col.kpx, col.dd, col.moved = True, None, {}, {}, False
        col.refill()
        return col

    def revert(self, base: "_Col") -> bool:
        """Back to ``base`` (the resident entry this one was forked from) by putting back only the
        records the episode changed; False when records were removed or moved (fork again)."""
        if self.moved or self.live is None or not self.own:
            return False
        live, vals, bvals = self.live, self.vals, base.vals
        for k in self.dd:
            if k in bvals:
                vals[k] = bvals[k]
                dict.__setitem__(live, k, _ABSENT)
            else:
                vals.pop(k, None)
                dict.pop(live, k, None)
        self.kpx, self.dd, self.term, self._blob = {}, {}, base.term, base._blob
        live.seen, live.scan, live.edit, live.past = set(), False, False, False
        live._marked()
        return True

    def blob(self) -> bytes:
        if self._blob is None:
            kp, kpx = self.kps.get, self.kpx
            self._blob = b"{" + b",".join([(kp(k) or kpx[k]) + v for k, v in self.vals.items()]) + b"}"
        return self._blob

    def refill(self, keys: Any = None) -> None:
        """Make ``live`` the committed records again (all, or only ``keys`` when the key set and
        order did not change)."""
        live = self.live
        if live is None:
            live = self.live = _Records()
            live.col = self
        elif keys is not None:  # the records a call read, wrote or added (none removed)
            vals = self.vals
            for k in keys:
                if k in vals:
                    dict.__setitem__(live, k, _ABSENT)
                else:
                    dict.pop(live, k, None)
            live.seen, live.scan, live.edit, live.past = set(), False, False, False
            live._marked()
            return
        else:
            dict.clear(live)
        dict.update(live, dict.fromkeys(self.vals, _ABSENT))
        live.seen, live.scan, live.edit, live.past = set(), False, False, False
        live._marked()

    def examine(self) -> tuple[list, bool] | str:
        """What the last call changed: ``(changes, structural)``, ``changes`` a list of ``(key,
        JSON bytes, or None when removed)`` and ``structural`` whether keys were added, removed or
        moved; or a message when a record is not JSON. Looks at the records the call read or wrote
        (all of them after a scan); the key set, the key order and which values are still
        placeholders are checked as a whole (C-speed), so a write that bypassed our methods is
        found too and then every record that is not a placeholder is looked at."""
        live, vals = self.live, self.vals
        seen = live.seen
        keys: Any = None
        structural = live.edit
        if live.scan:
            try:
                whole = orjson.dumps(live, option=_STRICT)
            except TypeError:
                whole = None
            if whole is not None and whole == self.blob():
                if b"null" in whole and not _finite(list(dict.values(live))):
                    return f"state[{_show(self.name)}] holds NaN or infinity, which are not JSON: use None"
                return [], False
        elif _VERSION is not None and not live.past and _VERSION(live) == live.tag:
            # nothing reached the storage past our methods: the seen records are all that changed
            if not seen:
                return [], False
            keys = seen  # structural: a record was removed (added ones come last, in order)
        else:
            n = dict.__len__(live)
            absent = list(dict.values(live)).count(_ABSENT)
            real = added = 0
            for k in seen:
                v = dict.get(live, k, _MISSING)
                if v is _MISSING:
                    structural = structural or k in vals
                    continue
                if k not in vals:
                    added += 1
                if v is not _ABSENT:
                    real += 1
            if n - absent == real:  # every value we did not hand out is still a placeholder
                if structural:  # a record removed (or put back): the key set may have any order
                    if (dict.keys(live) ^ vals.keys()) <= seen:
                        keys = seen
                elif n == len(vals) + added and list(itertools.islice(dict.keys(live), len(vals))) == list(vals):
                    keys = seen  # the committed keys in their order, then the added ones
            if keys is not None and not keys:
                return [], False
        if keys is None:  # everything that is not a placeholder, and the key set
            structural = True
            keys = [k for k, v in dict.items(live) if v is not _ABSENT]
            keys += list(vals.keys() - dict.keys(live))
            keys += [k for k in dict.keys(live) - vals.keys() if dict.get(live, k) is _ABSENT]
        changes = []
        for k in keys:
            value = dict.get(live, k, _MISSING)
            if value is _MISSING:
                if k in vals:
                    changes.append((k, None))
                continue
            if value is _ABSENT:
                if k in vals:
                    continue
                return f"state[{_show(self.name)}][{_show(k)}] is a placeholder, not a record"
            data = _record_bytes(value)
            if data is None:
                return describe_problem(value, f"state[{_show(self.name)}][{_show(k)}]")
            if k not in vals and not _key_ok(k):
                return describe_problem({k: None}, f"state[{_show(self.name)}]")
            if vals.get(k) != data:
                changes.append((k, data))
        if structural and not changes and list(dict.keys(live)) == list(vals):
            structural = False
        return changes, structural

    def apply(self, changes: list, reorder: bool) -> int:
        """Commit ``changes``; returns the change of ``term``."""
        vals, kps, kpx, digs, dd, name = self.vals, self.kps, self.kpx, self.digs, self.dd, self.name
        delta = 0
        if not reorder and len(changes) > 1:  # records added: in the order the tool added them
            tail = {k: i for i, k in enumerate(itertools.islice(dict.keys(self.live), len(vals), None))}
            changes = sorted(changes, key=lambda c: tail.get(c[0], -1))
        for k, data in changes:
            old = dd[k] if k in dd else digs.get(k)
            if old is not None:
                delta -= old
            if data is None:
                del vals[k]
                dd[k] = None
            else:
                vals[k] = data
                if k not in kps and k not in kpx:
                    kpx[k] = orjson.dumps(k) + b":"
                new = dd[k] = record_digest(name, k, loads(data))
                delta += new
        if reorder:
            order = list(dict.keys(self.live))
            if order != list(vals):
                self.vals = {k: vals[k] for k in order}
            self.moved = True
        self.term += delta
        self._blob = None
        return delta


class _Val:
    """A top-level entry that is not a dict: one JSON value, decoded afresh after every call."""

    __slots__ = ("name", "data", "term", "live")

    @classmethod
    def build(cls, name: str, value: Any, data: bytes) -> "_Val":
        v = cls()
        v.name, v.data, v.term, v.live = name, data, value_digest(name, value), loads(data)
        return v

    def fork(self) -> "_Val":
        v = _Val()
        v.name, v.data, v.term, v.live = self.name, self.data, self.term, loads(self.data)
        return v


class _Resident:
    """An initial state kept in the worker: its entries (in order) and its hash sum."""

    __slots__ = ("entries", "total", "size")

    def __init__(self, state: dict, size: int):
        self.entries = {}
        for name, value in state.items():
            if type(value) is dict:
                self.entries[name] = _Col.build(name, value)
            else:
                self.entries[name] = _Val.build(name, value, orjson.dumps(value))
        self.total = sum(e.term for e in self.entries.values())
        self.size = size


def state_bytes(state: Any) -> bytes | None:
    """The JSON of a state the parent is about to reset to, or None when it may not be JSON (then
    :func:`encode` says why). Equal bytes mean an equal state: NaN, which orjson writes as null,
    is looked for wherever a null is."""
    try:
        data = orjson.dumps(state, option=_STRICT)
    except TypeError:
        return None
    if b"null" in data and not _finite(state):
        return None
    return data


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
        self.resident: dict[str, _Resident] = {}  # key -> initial state, least recently used first
        self.resident_bytes = RESIDENT_BYTES  # main() lowers it to an eighth of the memory limit
        self.base: _Resident | None = None  # the resident state the episode started from
        self.entries: dict[str, _Col | _Val] = {}  # the committed state, entry by entry, in order
        self.state: dict = {}  # what the tools get: entry name -> its live value (_Records for a dict)
        self.total = 0  # the hash sum of the committed state
        self.changed: set[str] = set()  # entries that differ from the base state
        self.cpu_soft = resource.getrlimit(resource.RLIMIT_CPU)[0]

    # ------------------------------------------------------------------ the committed state
    @property
    def snap(self) -> bytes:
        """The committed state as JSON: what ``get_state`` sends."""
        return b"{" + b",".join(dumps(n) + b":" + (e.blob() if type(e) is _Col else e.data)
                                for n, e in self.entries.items()) + b"}"

    def _use(self, entries: dict) -> None:
        self.entries = entries
        self.state = {n: e.live for n, e in entries.items()}

    def _settle(self, keep: bool) -> tuple[bool, str | None]:
        """After a call: find what it changed, then commit that (``keep`` and all of it JSON) or put
        the committed state back. Returns (it changed something, why the state is not JSON)."""
        state, entries = self.state, self.entries
        top_same = len(state) == len(entries) and all(state.get(n, _MISSING) is e.live for n, e in entries.items()) \
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
            if e is None and not _key_ok(n):
                problem = describe_problem({n: None}, "state")
                break
            built = self._build(n, v)
            if isinstance(built, str):
                problem = built
                break
            new_entries[n] = built
        changed = bool(found) or new_entries is not None or problem is not None
        if keep and problem is None:
            for n, got in found.items():
                e = entries[n]
                if type(e) is _Col:
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
            if type(e) is _Col:
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

    def _examine(self, e: "_Col | _Val") -> Any:
        if type(e) is _Col:
            got = e.examine()
            if isinstance(got, str) or got[0] or got[1]:
                return got
            return None
        data = _value_bytes(e.live)
        if data is None:
            return describe_problem(e.live, f"state[{_show(e.name)}]")
        return ("val", data) if data != e.data else None

    def _build(self, name: str, value: Any) -> "_Col | _Val | str":
        """A new top-level entry from what a tool put there (a plain value afterwards)."""
        data = _value_bytes(value)
        if data is None:
            return describe_problem(value, f"state[{_show(name)}]")
        plain = loads(data)
        if isinstance(value, dict):
            return _Col.build(name, plain).fork()
        return _Val.build(name, plain, data)

    # ------------------------------------------------------------------ requests
    def load(self, sources: dict[str, Any]) -> list:
        self.codes, self.binders, self.load_errors = {}, {}, {}
        self.base, self.changed, self.total = None, set(), 0
        self._use({})
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

    def reset(self, key: Any, state: Any = _MISSING, size: int = 0) -> list:
        """Start from the resident state ``key``; ``state`` (its JSON decoded) when it is not resident."""
        res = self.resident.pop(key, None) if type(key) is str else None
        if res is None:
            if state is _MISSING:
                return ["missing", key]
            if type(state) is not dict:
                return ["error", f"the state must be a JSON object, not {type(state).__name__}"]
            res = _Resident(state, size)
        self.resident[key] = res  # most recently used last
        while len(self.resident) > 1 and (len(self.resident) > RESIDENT_STATES or
                                          sum(r.size for r in self.resident.values()) > self.resident_bytes):
            del self.resident[next(iter(self.resident))]
        if res is self.base and "" not in self.changed:
            if self.changed:  # put back only the records the episode changed
                entries = self.entries
                for n in self.changed:
                    e, base = entries[n], res.entries[n]
                    if type(e) is not _Col or not e.revert(base):
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
            return self._undo("tool_error", out_bytes, _text(str(out["error"])))
        del out
        _, problem = self._settle(keep=True)
        if problem is not None:
            return b"".join((b'["crashed",null,', dumps(_text("the tool left a non-JSON value in the state: "
                                                                f"{problem} (the call was undone)")), b",true]"))
        return b'["ok",' + out_bytes + b",null,false]"

    def _undo(self, kind: str, out_bytes: bytes | None, error: str) -> bytes:
        """A failed call's reply, after putting the committed state back."""
        changed = self.restore()
        return b"".join((b"[", dumps(kind), b",", out_bytes or b"null", b",", dumps(_text(error)), b",",
                         b"true" if changed else b"false", b"]"))

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
        _write(wfd, payload)
        if retire:
            return


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
