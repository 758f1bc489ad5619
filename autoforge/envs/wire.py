"""The sandbox's wire: frames between the parent and the worker, and strict JSON at the boundary.

Frames are length-prefixed (:data:`HEADER`, at most :data:`MAX_FRAME` bytes) JSON on two pipes
(:func:`write_frame`, :class:`FrameReader`). What crosses (arguments, outputs, the state) must be
JSON that both ends decode to the same value: :func:`encode` refuses anything else with the
path of the offending value (:class:`NotJSON`).
"""

from __future__ import annotations

import datetime as _dt
import json
import marshal
import os
import re
import struct
from typing import Any

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
    STRICT = orjson.OPT_PASSTHROUGH_DATETIME  # state and arguments: a datetime is an error, not a string
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


def is_finite(value: Any, keys: bool = False) -> bool:
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


def show(value: Any, n: int = 40) -> str:
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
                return (f"{path} is {show(v)}, outside the 64-bit range JSON numbers keep exactly here "
                        "(-2**63 .. 2**63-1): store it as a string, or round it")
        elif isinstance(v, float):
            if v - v:
                return (f"{path} is {v!r}, which is not a JSON number (NaN and infinity are not JSON): "
                        "use None or a finite number")
        elif isinstance(v, dict):
            children = []
            for k, x in v.items():
                if not isinstance(k, str) and (not output or not (k is None or isinstance(k, (int, float)))):
                    return (f"{path} has the key {show(k)} ({type(k).__name__}); JSON object keys are "
                            "strings: use str(key)")
                if output and isinstance(k, int) and not isinstance(k, bool) and not INT_MIN <= k <= INT_MAX:
                    return f"{path} has the key {show(k)}, outside the 64-bit range: use str(key)"
                if isinstance(k, float) and k - k:
                    return f"{path} has the key {k!r}, which is not a JSON number: use str(key)"
                children.append((k, f"{path} key {show(k)}", depth + 1))
                children.append((x, f"{path}[{show(k)}]", depth + 1))
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
            return (f"{{path}} has the keys {show(seen[text])} and {show(k)}, which both become the JSON key "
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


def try_encode(value: Any, output: bool, *, finite: bool = True) -> bytes | None:
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
        data = orjson.dumps(value, option=STRICT)
    except TypeError:  # orjson.JSONEncodeError: a type, key, integer, surrogate or depth it refuses
        # An output may still use number keys and datetimes, if no two keys become one.
        if not output or _find_problem(value, "", output) is not None:
            return None
        try:
            data = orjson.dumps(value, option=_OUTPUT)
        except TypeError:
            return None
    if finite and b"null" in data and not is_finite(value, output):  # NaN and infinity come out as null
        return None
    if int_too_big(data, value, output):
        return None
    return data


_LONG_DIGITS = re.compile(rb"\d{19}")  # an integer outside the signed 64-bit range has 19 digits or more


def int_too_big(data: bytes, value: Any, output: bool) -> bool:
    """``value`` (encoded as ``data``) holds an integer outside the signed 64-bit range: orjson
    writes up to 2**64-1, so bytes with a 19-digit run are walked exactly."""
    return _LONG_DIGITS.search(data) is not None and _find_problem(value, "", output) is not None


def encode(value: Any, where: str, *, output: bool = False) -> bytes:
    """``value`` as JSON bytes both sides decode to the same thing, else :class:`NotJSON`.

    JSON types only (tuples as lists, dict subclasses as dicts), string keys (``output=True``
    also takes int/float/bool/None keys and datetimes, written as text), finite floats,
    integers in ``INT_MIN..INT_MAX``, valid Unicode, at most ``MAX_DEPTH`` levels.
    """
    data = try_encode(value, output)
    if data is None:
        raise NotJSON(describe_problem(value, where, output=output))
    return data


def state_bytes(state: Any) -> bytes | None:
    """The JSON of a state the parent is about to reset to, or None when it may not be JSON (then
    :func:`encode` says why). Equal bytes mean an equal state: NaN, which orjson writes as null,
    is looked for wherever a null is."""
    try:
        data = orjson.dumps(state, option=STRICT)
    except TypeError:
        return None
    if b"null" in data and not is_finite(state):
        return None
    return data


def safe_text(message: str) -> str:
    """``message`` with unpaired surrogates escaped (a tool's exception text can hold them)."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def write_frame(fd: int, payload: bytes) -> None:
    if len(payload) > MAX_FRAME:
        payload = dumps(["crashed", None, f"reply is {len(payload)} bytes; the limit is {MAX_FRAME}"])
    view = memoryview(HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
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
            rest = read_exact(self.fd, end - len(buf))
            if rest is None:
                return None
            buf += rest
        self.buf = buf[end:]
        return buf[HEADER.size:end]
