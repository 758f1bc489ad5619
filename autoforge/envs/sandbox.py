"""What generated tool code may do: the static checks and the namespace it runs in.

The paper (arXiv 2512.22857, Sec. 3.1) has an LLM write one Python function per tool over the
environment state and accepts the code only after checks; it does not say which. Ours are two
layers, and this module with :mod:`autoforge.envs.static_checks` is the first (the second,
process isolation with time and memory limits, is :mod:`autoforge.envs.runtime`):

1. :func:`~autoforge.envs.static_checks.check_source` — a static allow-list over the syntax
   tree (:mod:`autoforge.envs.static_checks`, from the lists here). It parses; every node
   type is on an allow-list; every name read is bound in the source, an allowed builtin or an
   injected helper; every attribute is on an allow-list built from the public methods of the
   value types tool code can reach (str, dict, list, datetime, Decimal, re.Match, ...); and
   the code compiles.
2. :func:`make_globals` — the namespace: a reduced ``__builtins__`` and an importer that
   hands out *proxies* of the allowed modules (only their listed functions and constants,
   never a module object, so ``json.decoder.re...`` chains do not exist).

The tool-code convention (what the code generator emits and what the checks enforce)
------------------------------------------------------------------------------------
- The source defines exactly one top-level function named ``ToolCode.function_name`` (the
  tool's public name when that is a usable identifier, else a sanitised one from
  :func:`autoforge.envs.pynames.function_name`: ``orders.get`` -> ``orders_get``); its first
  parameter is ``state`` (``{collection: {record_id: record}}``), then keyword parameters
  for the tool's JSON-Schema arguments, named as ``ToolCode.arg_map`` says where the public
  name is not a usable identifier (``order-id`` -> ``order_id``, ``from`` -> ``from_``,
  ``state`` -> ``state_``; :func:`autoforge.envs.pynames.argument_names`); the runtime renames
  the arguments of each call (:class:`ArgBinder`). Defaults for the optional ones; a mutable
  default such as ``[]``, ``dict()`` or ``set()`` is rejected (use None and build it inside).
  Helper functions, imports and constant assignments may also appear at top level; nothing
  else (no loops or calls as statements there).
- It mutates ``state`` in place for writes and returns a JSON-serialisable value. A failed
  precondition *returns* ``{"error": "..."}`` (``error(msg)``); an exception is a bug.
- Deterministic: no randomness, no clock (``now``/``today``/``utcnow``/``timestamp`` are
  rejected), no I/O, no state kept between calls (``global``/``nonlocal`` rejected; the
  sandbox runs the module code again for every call, so a module-level ``CALLS = []`` starts
  empty each time: data that must last belongs in ``state``). Output that depends on memory
  addresses (``repr`` of a function) or on string-hash order (iterating a ``set`` of strings)
  fails the determinism check, which runs the tool in two fresh processes with different
  hash seeds: sort instead.
- All or nothing: a call that returns ``error(...)`` or raises leaves the state as it was
  (the runtime undoes its writes), and so does one that returns or stores a value that is not
  JSON: NaN/infinity, an integer beyond 64 bits, a set, a date object, a non-string key.
- Injected names: ``NOW`` ("2025-01-15T10:00:00"), ``TODAY`` ("2025-01-15"),
  ``next_id(state, collection, prefix, width=4)``, ``add_days(date_str, n)``,
  ``copy(value)`` (deep copy; also ``copy.deepcopy``/``copy.copy``), ``error(msg)``.
- Allowed imports (``import x``, ``from x import y``): math, re, json, datetime, copy,
  itertools, functools, collections, string, decimal, typing, and
  ``from __future__ import annotations``. Annotations are stripped before compiling, so
  any annotation is accepted and none is evaluated.
- Builtins: :data:`SAFE_BUILTIN_NAMES`. Not available: open, exec, eval, compile, globals,
  locals, vars, getattr/setattr/delattr/hasattr, __import__, input, print (I/O: return the
  value instead), type, object, super, id, hash, dir, breakpoint, help, exit, bytes,
  bytearray, memoryview.
- Syntax not allowed: classes, async, ``yield``, ``with``, ``global``/``nonlocal``,
  decorators, ``match`` class patterns, ``except*``, attribute assignment, any name or
  attribute starting with ``__`` and any attribute starting with ``_``; ``str.format`` only
  on a literal whose fields have no ``.``/``[`` (use f-strings).

Why not RestrictedPython: measured on a typical tool it slows the tool body by ~70% (every
subscript, attribute and iteration goes through a guard hook), it needs eight guard hooks
configured by hand, and its attribute policy is a block-list (no leading ``_`` plus a few
names) where ours is an allow-list. Neither gives time or memory limits; those need a
separate process anyway (``runtime``).
"""

from __future__ import annotations

import builtins
import collections
import copy as _copy_module
import datetime as _dt
import decimal
import functools
import itertools
import json
import math
import re
import string
import types
import typing
from typing import Any, Callable

from autoforge.domain.ids import UUID_TEXT, uuid_for
from autoforge.errors import UnsafeCodeError

# --------------------------------------------------------------------------- injected helpers

NOW = "2025-01-15T10:00:00"  # the fixed clock every environment sees (determinism)
TODAY = "2025-01-15"


def next_id(state: dict, collection: str, prefix: str, width: int = 4) -> str:
    """The next id of ``collection``: one past the largest ``prefix<digits>`` id in use.

    ``next_id(state, "orders", "O")`` with ids O0001..O0003 -> ``"O0004"``; an empty or
    missing collection gives ``"O0001"``; a collection keyed by UUIDs gets the UUID of its next
    record number (:func:`~autoforge.domain.ids.uuid_for`). Derived from state only, so replays agree.
    """
    records = state.get(collection) if isinstance(state, dict) else None
    top = 0
    if isinstance(records, dict) and records and all(isinstance(k, str) and UUID_TEXT.fullmatch(k) for k in records):
        n = len(records) + 1  # a collection keyed by UUIDs (the docs' style) gets a new UUID
        while uuid_for(collection, n) in records:
            n += 1
        return uuid_for(collection, n)
    if isinstance(records, dict):
        n = len(prefix)
        for key in records:
            if isinstance(key, str) and key.startswith(prefix) and key[n:].isdigit():
                top = max(top, int(key[n:]))
    return f"{prefix}{str(top + 1).zfill(width)}"


def add_days(date_str: str, n: int) -> str:
    """``add_days("2025-01-30", 3)`` -> ``"2025-02-02"``; a datetime string keeps its time part."""
    text = str(date_str)
    if len(text) <= 10:
        return (_dt.date.fromisoformat(text) + _dt.timedelta(days=n)).isoformat()
    return (_dt.datetime.fromisoformat(text) + _dt.timedelta(days=n)).isoformat()


def error(msg: Any) -> dict:
    """The well-formed failure observation: ``{"error": msg}``."""
    return {"error": str(msg)}


def _json_copy(value: Any) -> Any:
    """Deep copy of a JSON value (dict/list/scalars), ~5x faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return _copy_module.deepcopy(value)


class _CopyHelper:
    """``copy(x)`` deep-copies; ``copy.deepcopy(x)`` and ``copy.copy(x)`` work as in the module."""

    __slots__ = ()

    def __call__(self, value: Any) -> Any:
        return _json_copy(value)

    def deepcopy(self, value: Any) -> Any:
        return _json_copy(value)

    def copy(self, value: Any) -> Any:
        return _copy_module.copy(value)


copy = _CopyHelper()

HELPERS: dict[str, Any] = {
    "NOW": NOW,
    "TODAY": TODAY,
    "next_id": next_id,
    "add_days": add_days,
    "copy": copy,
    "error": error,
}

# --------------------------------------------------------------------------- modules and builtins


def _proxy(module: Any, names: list[str]) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{n: getattr(module, n) for n in names})


_CLOCK_ATTRS = {"now", "today", "utcnow", "timestamp", "fromtimestamp", "astimezone", "ctime"}

MODULES: dict[str, Any] = {
    "math": _proxy(math, [n for n in dir(math) if not n.startswith("_")]),
    "re": _proxy(re, ["compile", "search", "match", "fullmatch", "split", "findall", "finditer", "sub",
                      "subn", "escape", "error", "IGNORECASE", "I", "MULTILINE", "M", "DOTALL", "S",
                      "VERBOSE", "X", "ASCII", "A"]),
    "json": _proxy(json, ["dumps", "loads", "JSONDecodeError"]),
    "datetime": _proxy(_dt, ["date", "datetime", "time", "timedelta", "timezone", "MINYEAR", "MAXYEAR"]),
    "copy": copy,
    "itertools": _proxy(itertools, [n for n in dir(itertools) if not n.startswith("_")]),
    "functools": _proxy(functools, ["reduce", "partial", "cmp_to_key"]),
    "collections": _proxy(collections, ["Counter", "defaultdict", "OrderedDict", "deque", "ChainMap"]),
    "string": _proxy(string, ["ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits",
                              "hexdigits", "octdigits", "punctuation", "printable", "whitespace",
                              "capwords"]),
    "decimal": _proxy(decimal, ["Decimal", "InvalidOperation", "DivisionByZero"]
                      + [n for n in dir(decimal) if n.startswith("ROUND_")]),
    "typing": _proxy(typing, ["Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "Iterable",
                              "Sequence", "Mapping", "Literal"]),
}

SAFE_BUILTIN_NAMES = (
    "abs all any bool chr dict divmod enumerate filter float format frozenset int isinstance iter "
    "len list map max min next ord pow range repr reversed round set slice sorted str sum tuple zip "
    "bin hex oct callable "
    "Exception ValueError KeyError TypeError IndexError ZeroDivisionError ArithmeticError "
    "LookupError StopIteration RuntimeError NotImplementedError OverflowError AssertionError"
).split()

FORBIDDEN_NAMES: dict[str, str] = {
    **{n: "no dynamic code" for n in ("exec", "eval", "compile")},
    **{n: "no interpreter introspection" for n in ("globals", "locals", "vars", "dir", "type", "object",
                                                   "super", "id", "hash", "classmethod",
                                                   "staticmethod", "property", "memoryview")},
    **{n: "no dynamic attribute access: use record['key'] or record.get('key')"
       for n in ("getattr", "setattr", "delattr", "hasattr")},
    **{n: "no I/O: return the value instead" for n in ("open", "input", "print", "breakpoint", "help",
                                                       "exit", "quit")},
    "bytes": "not needed for JSON state", "bytearray": "not needed for JSON state",
}


def _safe_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
    if level != 0 or name not in MODULES:
        raise ImportError(f"import of {name!r} is not allowed in tool code")
    return MODULES[name]


SAFE_BUILTINS: dict[str, Any] = {n: getattr(builtins, n) for n in SAFE_BUILTIN_NAMES}
SAFE_BUILTINS["__import__"] = _safe_import  # only reached by import statements (dunder names are rejected)


def module_exports(module: str) -> set[str]:
    """The names tool code can take from an allowed module."""
    proxy = MODULES[module]
    return {"deepcopy", "copy"} if proxy is copy else set(vars(proxy))


def make_globals() -> dict[str, Any]:
    """A fresh module namespace for one tool: safe builtins, helpers, nothing else."""
    return {"__builtins__": SAFE_BUILTINS, "__name__": "autoforge_tool", **HELPERS}


# --------------------------------------------------------------------------- attribute allow-list


def _public(obj: Any) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


_VALUE_TYPES = [str, dict, list, tuple, set, frozenset, int, float, bool, range, slice,
                type({}.keys()), type({}.values()), type({}.items()),
                _dt.date, _dt.datetime, _dt.time, _dt.timedelta, _dt.timezone, decimal.Decimal,
                collections.Counter, collections.defaultdict, collections.OrderedDict,
                collections.deque, collections.ChainMap, re.Pattern, re.Match, Exception]
BLOCKED_ATTRIBUTES: dict[str, str] = {
    **{a: "the clock is not allowed: use NOW / TODAY" for a in _CLOCK_ATTRS},
    "format_map": "use an f-string",
    "mro": "no interpreter introspection",
}
ALLOWED_ATTRIBUTES: frozenset[str] = frozenset(
    set().union(*(_public(t) for t in _VALUE_TYPES), *(module_exports(m) for m in MODULES)) - set(BLOCKED_ATTRIBUTES)
)


def load_tool(code: types.CodeType, name: str) -> Callable[..., Any]:
    """Run the module code in a fresh namespace and return the tool function (the sandbox worker
    does this for every call, ~0.5 us, so nothing a call leaves in module globals survives it)."""
    namespace = make_globals()
    exec(code, namespace)  # noqa: S102 - checked code, restricted builtins
    fn = namespace.get(name)
    if not callable(fn):
        raise UnsafeCodeError(f"tool {name!r}: the module does not define function {name!r}")
    return fn


# --------------------------------------------------------------------------- argument binding


class ArgBinder:
    """Binds a call's public arguments to the tool function's Python parameters.

    ``arg_map`` (``ToolCode.arg_map``) maps public argument names to parameter names where they
    differ (``{"order-id": "order_id", "from": "from_"}``). Built once per loaded function:
    which public names it accepts, which it requires, whether it takes ``**kwargs`` (unmapped
    public names go there unchanged). :meth:`problem` names unexpected or missing arguments in
    public names; :meth:`bind` renames. Without renames (the usual case) ``bind`` returns the
    arguments as they are.
    """

    __slots__ = ("to_py", "accepted", "required", "varkw", "identity", "shadow")

    def __init__(self, fn: Callable[..., Any], arg_map: dict[str, str] | None = None):
        c = fn.__code__
        names = c.co_varnames[: c.co_argcount + c.co_kwonlyargcount]
        positional = names[: c.co_argcount]
        n_pos_defaults = len(fn.__defaults__ or ())
        required = set(positional[1: len(positional) - n_pos_defaults])
        kwdefaults = fn.__kwdefaults__ or {}
        required |= {n for n in names[c.co_argcount:] if n not in kwdefaults}
        inverse = {py: pub for pub, py in (arg_map or {}).items()}
        self.to_py = {inverse.get(py, py): py for py in names[1:]}
        self.accepted = frozenset(self.to_py)
        self.required = frozenset(inverse.get(py, py) for py in required)
        self.varkw = bool(c.co_flags & 0x08)
        self.identity = all(pub == py for pub, py in self.to_py.items())
        self.shadow = frozenset(py for pub, py in self.to_py.items() if pub != py)  # Python names, not public ones

    def problem(self, args: dict, name: str = "the tool") -> str | None:
        """None when the call fits the signature, else what is wrong (public names)."""
        if (not self.varkw and not self.accepted.issuperset(args)) or (self.shadow and not self.shadow.isdisjoint(args)):
            extra = sorted((set(args) - self.accepted) if not self.varkw else (set(args) & self.shadow))
            return f"unexpected argument(s) {extra} for {name} (it accepts: {sorted(self.accepted)})"
        if not self.required.issubset(args):
            return f"missing required argument(s) {sorted(self.required - set(args))} for {name}"
        return None

    def bind(self, args: dict) -> dict:
        if self.identity:
            return args
        to_py = self.to_py
        return {to_py.get(k, k): v for k, v in args.items()}
