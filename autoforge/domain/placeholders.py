"""Placeholders: values that are a documentation hint, not a value (``YYYY-MM-DD``, ``string``, ``<id>``).

A description's format hint ("the date, YYYY-MM-DD"), its type name or an "e.g." phrase can leak
into synthesized state or task arguments as if it were data. :func:`placeholder_reason` says why
one value is such a placeholder (None when it is a value); :func:`find_placeholders` walks a
nested value and names every placeholder with its path. Only whole values are judged: an email
on ``example.com`` or a sentence that mentions "sample" is data.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterable, Iterator

# Date and time format templates: only format tokens and separators, with two date or time tokens
_FORMAT = re.compile(r"(?:YYYY|YY|MM|DD|HH|hh|mm|SS|ss|SSS|sss|[Tt]|Z|[+±]|[-/:. ,_])+")
_FORMAT_TOKEN = re.compile(r"YYYY|DD|HH|hh|MM|mm|SS|ss")
# JSON Schema / programming type names; words that are also common data ("number", "date", "list", a "double"
# room, a "float") are left out
_TYPE_NAMES = {"string", "str", "integer", "int", "boolean", "bool", "object", "array", "dict", "date-time"}
# filler words ("todo" and "bar" are left out: a task status, a venue)
_FILLER = {"example", "sample", "foo", "baz", "foobar", "tbd", "tba", "placeholder", "lorem ipsum",
           "changeme", "dummy", "your value", "value here", "..."}
_EXAMPLE_PREFIX = re.compile(r"(?:e\.\s?g\.|eg\.|for example|for instance|example:|sample:)", re.IGNORECASE)
_ANGLE = re.compile(r"<[^<>]{2,60}>|\{\{?[A-Za-z_][\w -]{0,40}\}?\}|\[[A-Z_][A-Z0-9_ ]{1,40}\]")
_XS = re.compile(r"[Xx]{3,}(?:[-_ .][Xx]{2,})*|[#*]{3,}")


def placeholder_reason(value: Any) -> str | None:
    """Why ``value`` is a placeholder rather than a value, or None. Strings only: numbers,
    booleans and containers are never judged here (see :func:`find_placeholders` for empties)."""
    if not isinstance(value, str):
        return None
    return _string_reason(value)


@lru_cache(maxsize=65536)  # every string of every task's initial state is judged; most recur across tasks
def _string_reason(value: str) -> str | None:
    s = value.strip()
    if not s:
        return None
    low = s.lower()
    if _FORMAT.fullmatch(s) and (len(_FORMAT_TOKEN.findall(s)) >= 2 or s == "YYYY"):
        return f"a format template ({s!r})"
    if low in _TYPE_NAMES:
        return f"a type name ({s!r})"
    if low in _FILLER:
        return f"a filler word ({s!r})"
    if _EXAMPLE_PREFIX.match(s):
        return f"an example phrase ({s[:40]!r})"
    if _ANGLE.fullmatch(s):
        return f"a template slot ({s[:40]!r})"
    if _XS.fullmatch(s):
        return f"a masked filler ({s[:40]!r})"
    return None


def find_placeholders(value: Any, path: str = "", *, required: Iterable[str] = (),
                      allowed: Iterable[Any] = ()) -> Iterator[tuple[str, str]]:
    """Every ``(path, reason)`` of a placeholder in ``value`` (dicts and lists walked; paths like
    ``orders.O1.date`` and ``items[0]``). Keys named in ``required`` (top level only) must also
    not be empty: ``""``, ``{}`` or ``[]`` there is a placeholder too. Strings in ``allowed`` (a
    documented enum, where ``"string"`` may be a real choice) are values."""
    req = set(required)
    ok = frozenset(a for a in allowed if isinstance(a, str))
    yield from _walk(value, path, req, ok)


def _walk(value: Any, path: str, req: set, ok: frozenset) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if k in req and (v == "" or v == {} or v == []) and isinstance(v, (str, dict, list)):
                yield sub, f"empty ({v!r}) for a required field"
                continue
            yield from _walk(v, sub, set(), ok)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]", set(), ok)
    elif value not in ok:
        why = placeholder_reason(value)
        if why:
            yield path, why
