"""The static allow-list over tool source: the first layer of :mod:`autoforge.envs.sandbox`.

:func:`check_source` parses the source (at most :data:`MAX_SOURCE_CHARS` characters,
:data:`MAX_AST_NODES` nodes, :data:`MAX_AST_DEPTH` levels); every node type is on an allow-list;
every name read is bound in the source, an allowed builtin or an injected helper; every
attribute is on the allow-list the namespace builds (:data:`~autoforge.envs.sandbox.ALLOWED_ATTRIBUTES`);
the tool-code convention (one top-level function, ``state`` first, no mutable defaults) holds;
and the code compiles (:func:`compile_tool`). The rules themselves are listed in
:mod:`autoforge.envs.sandbox`.
"""

from __future__ import annotations

import ast
import string
import types

from autoforge import pyast
from autoforge.envs.sandbox import (ALLOWED_ATTRIBUTES, BLOCKED_ATTRIBUTES, FORBIDDEN_NAMES, HELPERS, MODULES,
                                    SAFE_BUILTIN_NAMES, module_exports)
from autoforge.errors import UnsafeCodeError

MAX_SOURCE_CHARS = 100_000
MAX_AST_NODES = 20_000
MAX_AST_DEPTH = 200  # syntax-tree nesting: deeper than any real tool (an elif chain of 150 is fine)


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
        tree = pyast.parse(source, filename=f"<tool:{name}>")  # (one thread at a time: pyast)
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
        return pyast.compile_tree(tree, f"<tool:{name}>")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise _fail(name, None, f"does not compile: {type(e).__name__}: {e}") from None
