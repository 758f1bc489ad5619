"""What generated tool code may do: the static checks and the namespace it runs in.

The paper (arXiv 2512.22857, Sec. 3.1) has an LLM write one Python function per tool over the
environment state and accepts the code only after checks; it does not say which. Ours are
two layers, and this module is the first (the second, process isolation with time and
memory limits, is :mod:`autoforge.envs.runtime`):

1. :func:`check_source` — a static allow-list over the syntax tree. It parses; every node
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

import ast
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

from autoforge.errors import UnsafeCodeError

MAX_SOURCE_CHARS = 100_000
MAX_AST_NODES = 20_000
MAX_AST_DEPTH = 200  # syntax-tree nesting: deeper than any real tool (an elif chain of 150 is fine)

# --------------------------------------------------------------------------- injected helpers

NOW = "2025-01-15T10:00:00"  # the fixed clock every environment sees (determinism)
TODAY = "2025-01-15"


def next_id(state: dict, collection: str, prefix: str, width: int = 4) -> str:
    """The next id of ``collection``: one past the largest ``prefix<digits>`` id in use.

    ``next_id(state, "orders", "O")`` with ids O0001..O0003 -> ``"O0004"``; an empty or
    missing collection gives ``"O0001"``. Derived from state only, so replays agree.
    """
    records = state.get(collection) if isinstance(state, dict) else None
    top = 0
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

# --------------------------------------------------------------------------- static checks

_ALLOWED_NODES = tuple(getattr(ast, n) for n in (
    "Module Expr FunctionDef arguments arg Return Assign AugAssign AnnAssign For While If Raise Try "
    "ExceptHandler Assert Import ImportFrom alias Pass Break Continue Delete BoolOp BinOp UnaryOp "
    "Lambda IfExp Dict Set ListComp SetComp DictComp GeneratorExp comprehension Compare Call keyword "
    "FormattedValue JoinedStr Constant Attribute Subscript Starred Name List Tuple Slice NamedExpr "
    "Load Store Del Match match_case MatchValue MatchSingleton MatchSequence MatchMapping MatchStar "
    "MatchAs MatchOr MatchClass operator boolop unaryop cmpop").split() if hasattr(ast, n))

_NODE_REASONS = {
    "ClassDef": "classes are not allowed: keep records as dicts",
    "AsyncFunctionDef": "async code is not allowed", "Await": "async code is not allowed",
    "AsyncFor": "async code is not allowed", "AsyncWith": "async code is not allowed",
    "Yield": "generator functions are not allowed: return a list",
    "YieldFrom": "generator functions are not allowed: return a list",
    "Global": "global state persists between calls: keep all state in `state`",
    "Nonlocal": "nonlocal is not allowed",
    "With": "context managers are not allowed",
    "TryStar": "except* is not allowed",
}
_TOP_LEVEL = (ast.Expr, ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.AnnAssign)
_MUTABLE_DEFAULTS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)
# Calls whose result is a mutable container or a stateful iterator: as a default it would be
# created once and shared by every call.
_MUTABLE_CALLS = frozenset("dict list set bytearray Counter defaultdict OrderedDict deque ChainMap iter map "
                           "filter zip enumerate reversed count cycle repeat islice chain".split())


def _mutable_default(node: ast.AST) -> bool:
    if isinstance(node, _MUTABLE_DEFAULTS):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return called in _MUTABLE_CALLS
    return False


def _source_text(node: ast.AST, n: int = 40) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - only for a message
        text = type(node).__name__
    return text if len(text) <= n else text[: n - 3] + "..."


def _fail(tool: str, node: ast.AST | None, reason: str) -> UnsafeCodeError:
    line = getattr(node, "lineno", 0)
    col = getattr(node, "col_offset", -1) + 1
    where = f" line {line}:{col}" if node is not None else ""
    err = UnsafeCodeError(f"tool {tool!r}{where}: {reason}")
    err.line, err.col, err.reason = line, col, reason  # type: ignore[attr-defined]
    return err


def _strip_annotations(tree: ast.Module) -> ast.Module:
    """Drop every annotation (never evaluated, never checked): ``x: T = v`` becomes ``x = v`` and
    ``from __future__ import annotations`` goes too. Iterative, so deep code cannot exhaust the stack."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
        for field, value in ast.iter_fields(node):
            if not (isinstance(value, list) and any(isinstance(v, (ast.AnnAssign, ast.ImportFrom)) for v in value)):
                continue
            kept = []
            for stmt in value:
                if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__" and all(
                        a.name == "annotations" for a in stmt.names):
                    continue  # only about annotations, which are gone
                if isinstance(stmt, ast.AnnAssign):
                    stmt = ast.copy_location(ast.Pass() if stmt.value is None else
                                             ast.Assign(targets=[stmt.target], value=stmt.value), stmt)
                kept.append(stmt)
            setattr(node, field, kept)
    return tree


def _depth(tree: ast.AST) -> tuple[int, ast.AST | None]:
    """The nesting depth of ``tree`` and its first node that deep (iterative: no recursion limit)."""
    deepest, where = 0, None
    stack = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        if d > deepest:
            deepest, where = d, node
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest, where


def parse_tool(source: str, name: str) -> ast.Module:
    """Parse and strip annotations (raises :class:`UnsafeCodeError` on a syntax error)."""
    if not isinstance(source, str):
        raise _fail(name, None, "source is not a string")
    if len(source) > MAX_SOURCE_CHARS:
        raise _fail(name, None, f"source is {len(source)} characters; the limit is {MAX_SOURCE_CHARS}")
    try:
        tree = ast.parse(source, filename=f"<tool:{name}>")
    except SyntaxError as e:
        err = _fail(name, None, f"syntax error: {e.msg}")
        err.line, err.col = e.lineno or 0, e.offset or 0  # type: ignore[attr-defined]
        err.args = (f"tool {name!r} line {e.lineno}:{e.offset}: syntax error: {e.msg}",)
        raise err from None
    except (RecursionError, MemoryError) as e:
        raise _fail(name, None, f"source cannot be parsed: it is nested too deeply ({type(e).__name__}); "
                                f"at most {MAX_AST_DEPTH} levels: split long expressions and deep nesting "
                                "into separate statements with intermediate variables") from None
    except ValueError as e:
        raise _fail(name, None, f"source cannot be parsed: {type(e).__name__}: {e}") from None
    depth, node = _depth(tree)
    if depth > MAX_AST_DEPTH:
        raise _fail(name, node, f"code nested {depth} levels deep (syntax-tree levels); at most "
                                f"{MAX_AST_DEPTH}: split long expressions and deep nesting "
                                "into separate statements with intermediate variables")
    return _strip_annotations(tree)


def _bound_names(tree: ast.Module) -> set[str]:
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return bound


def _format_problem(text: str) -> str | None:
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as e:
        return f"bad format string: {e}"
    for _, field, spec, _ in fields:
        if field and ("." in field or "[" in field):
            return "format fields may not reach attributes or items: use an f-string"
        if spec and "{" in spec:
            nested = _format_problem(spec)
            if nested:
                return nested
    return None


def _attribute_problem(attr: str) -> str | None:
    if attr.startswith("_"):
        return f"attribute {attr!r} is not allowed: attributes starting with '_' are reserved"
    if attr in BLOCKED_ATTRIBUTES:
        return f"attribute {attr!r} is not allowed: {BLOCKED_ATTRIBUTES[attr]}"
    if attr not in ALLOWED_ATTRIBUTES:
        return (f"attribute {attr!r} is not available to tool code (records are dicts: use "
                "record['key'] or record.get('key'))")
    return None


def _walk(node: ast.AST, depth: int = 0):
    """Depth-first, in source order, with depth (a deeper node at one position is more specific)."""
    stack = [(node, depth)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        stack.extend(reversed([(child, depth + 1) for child in ast.iter_child_nodes(node)]))


def _node_problems(tree: ast.Module, bound: set[str]):
    """Yield ``(node, depth, reason)`` for every violation of the allow-lists."""
    known = bound | set(SAFE_BUILTIN_NAMES) | set(HELPERS)
    modules = ", ".join(sorted(MODULES))
    vetted_format: set[int] = set()
    for stmt in tree.body:
        kind = type(stmt).__name__
        if not isinstance(stmt, _TOP_LEVEL) or (
                isinstance(stmt, ast.Expr) and not (isinstance(stmt.value, ast.Constant)
                                                    and isinstance(stmt.value.value, str))):
            yield stmt, 0, _NODE_REASONS.get(kind, f"top-level {kind} is not allowed: only imports, function "
                                                   "definitions and constant assignments may be at top level")
    for node, depth in _walk(tree):
        kind = type(node).__name__
        if not isinstance(node, _ALLOWED_NODES):
            yield node, depth, _NODE_REASONS.get(kind, f"{kind} is not allowed in tool code")
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            if isinstance(node, ast.FunctionDef) and node.decorator_list:
                yield node, depth, "decorators are not allowed"
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None and _mutable_default(default):
                    yield default, depth + 2, (f"mutable default argument `{_source_text(default)}`: it would be "
                                               "created once and shared by every call; use None and create "
                                               "it inside (data that must last between calls belongs in `state`)")
        elif isinstance(node, ast.Name):
            if node.id.startswith("__"):
                yield node, depth, f"name {node.id!r} is not allowed: names starting with '__' are reserved"
            elif node.id in FORBIDDEN_NAMES and node.id not in bound:
                yield node, depth, f"{node.id!r} is not allowed: {FORBIDDEN_NAMES[node.id]}"
            elif isinstance(node.ctx, ast.Load) and node.id not in known:
                yield node, depth, (f"name {node.id!r} is not defined (builtins available: "
                                    f"{', '.join(SAFE_BUILTIN_NAMES[:34])}, ...; helpers: {', '.join(HELPERS)})")
        elif isinstance(node, ast.Attribute):
            if not isinstance(node.ctx, ast.Load):
                yield node, depth, (f"assigning attribute {node.attr!r} is not allowed: state is dicts, "
                                    "use record['key'] = value")
            elif node.attr == "format" and id(node) not in vetted_format:
                yield node, depth, "str.format is only allowed directly on a string literal: use an f-string"
            else:
                problem = _attribute_problem(node.attr)
                if problem:
                    yield node, depth, problem
        elif isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Attribute) and func.attr == "format" and isinstance(func.value, ast.Constant)
                    and isinstance(func.value.value, str)):
                problem = _format_problem(func.value.value)
                if problem:
                    yield node, depth + 2, problem  # reported instead of the attribute
                vetted_format.add(id(func))
        elif isinstance(node, ast.MatchClass):
            for attr in node.kwd_attrs:
                problem = _attribute_problem(attr)
                if problem:
                    yield node, depth, problem
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in MODULES:
                    yield node, depth, f"import of {alias.name!r} is not allowed (allowed: {modules})"
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__" and node.level == 0:
                if any(a.name != "annotations" for a in node.names):
                    yield node, depth, "only 'from __future__ import annotations' is allowed"
            elif node.level or node.module not in MODULES:
                yield node, depth, f"import from {node.module!r} is not allowed (allowed: {modules})"
            else:
                exported = module_exports(node.module)
                for alias in node.names:
                    if alias.name not in exported:
                        yield node, depth, (f"{node.module}.{alias.name} is not available (available: "
                                            f"{', '.join(sorted(exported))})")
        elif isinstance(node, ast.ExceptHandler) and node.type is None:
            yield node, depth, "bare 'except:' is not allowed: catch Exception or a specific error"


def _shape_problems(tree: ast.Module, name: str):
    tools = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == name]
    if len(tools) != 1:
        yield None, 0, f"the source must define exactly one top-level function named {name!r} (found {len(tools)})"
        return
    fn = tools[0]
    positional = [*fn.args.posonlyargs, *fn.args.args]
    if not positional or positional[0].arg != "state":
        yield fn, 0, f"the first parameter of {name}() must be 'state'"
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            yield stmt, 0, f"top-level assignment rebinds the tool function {name!r}"


def check_source(source: str, name: str) -> None:
    """Raise :class:`UnsafeCodeError` unless ``source`` follows the tool-code convention and compiles.

    The message is ``tool 'NAME' line L:C: reason`` for the first problem in source order
    (the innermost node at that position), plus how many more were found; the error also
    carries ``.line``, ``.col``, ``.reason`` and ``.problems`` (every message) for repair prompts.
    """
    if not (isinstance(name, str) and name.isidentifier() and not name.startswith("__")):
        raise _fail(str(name), None, "the tool name must be a Python identifier not starting with '__'")
    if (name, source) in _ACCEPTED:  # opening an Environment re-checks its tools: remember passes
        return
    tree = parse_tool(source, name)
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_AST_NODES:
        raise _fail(name, None, f"{n_nodes} syntax nodes; the limit is {MAX_AST_NODES}")
    found = list(_node_problems(tree, _bound_names(tree)))
    if not found:
        found = list(_shape_problems(tree, name))
    if found:
        found.sort(key=lambda p: (getattr(p[0], "lineno", 1 << 30), getattr(p[0], "col_offset", 0), -p[1]))
        node, _, reason = found[0]
        more = len(found) - 1
        err = _fail(name, node, reason + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))
        err.reason = reason  # type: ignore[attr-defined]
        err.problems = [str(_fail(name, n, r)) for n, _, r in found]  # type: ignore[attr-defined]
        raise err
    compile_tool(tree, name)
    if len(_ACCEPTED) >= 8192:
        _ACCEPTED.clear()
    _ACCEPTED.add((name, source))


_ACCEPTED: set[tuple[str, str]] = set()


def compile_tool(source: str | ast.Module, name: str) -> types.CodeType:
    """Compile the (annotation-stripped) module. Does not run the checks: call :func:`check_source` first."""
    tree = parse_tool(source, name) if isinstance(source, str) else source
    try:
        return compile(tree, f"<tool:{name}>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise _fail(name, None, f"does not compile: {type(e).__name__}: {e}") from None


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


# --------------------------------------------------------------------------- direct execution

_DIRECT: dict[tuple[str, str], Callable[..., Any]] = {}


def direct_function(source: str, name: str) -> Callable[..., Any]:
    """The checked tool function ``name`` (the *Python* name) loaded in *this* process (cached).
    Benchmarks and tests only."""
    key = (source, name)
    fn = _DIRECT.get(key)
    if fn is None:
        check_source(source, name)
        fn = _DIRECT[key] = load_tool(compile_tool(source, name), name)
    return fn


def run_direct(source: str, name: str, state: dict, arguments: dict, *, arg_map: dict[str, str] | None = None) -> Any:
    """Call a tool in-process WITHOUT the sandbox: no limits, ``state`` is mutated in place.

    ``name`` is the Python function name (``ToolCode.function_name``); ``arguments`` use the
    public names, renamed by ``arg_map`` (``ToolCode.arg_map``). The baseline of
    ``benchmarks/env_throughput.py`` and a test helper. Never use it on code you have not also
    run through the sandbox: a ``while True`` here hangs the caller.
    """
    fn = direct_function(source, name)
    if arg_map:
        arguments = ArgBinder(fn, arg_map).bind(arguments)
    return fn(state, **arguments)
