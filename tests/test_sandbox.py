"""Static layer of the sandbox: check_source, the restricted namespace, the injected helpers."""

from __future__ import annotations

import pytest
from mock_domain import SOURCES, mock_state

from autoforge.envs import sandbox, static_checks
from autoforge.envs.runtime import run_direct
from autoforge.envs.sandbox import add_days, copy, error, next_id
from autoforge.envs.static_checks import check_source
from autoforge.errors import UnsafeCodeError


def wrap(body: str, name: str = "t") -> str:
    """A tool whose body is ``body`` (indented), so the tool-shape rules are satisfied."""
    return f"def {name}(state):\n    " + body.replace("\n", "\n    ") + "\n    return 1\n"


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_mock_domain_tools_pass_the_checks(name):
    check_source(SOURCES[name], name)


# Each attack from the issue, rejected before any code runs, with line:col and the reason.
ATTACKS = [
    ("import os", "line 2:5", "import of 'os' is not allowed"),
    ("from os import path", "line 2:5", "import from 'os' is not allowed"),
    ("__import__('os')", "line 2:5", "'__import__' is not allowed"),
    ("open('/etc/passwd').read()", "line 2:5", "'open' is not allowed: no I/O"),
    ("x = ().__class__.__base__.__subclasses__()", "line 2:9", "attribute '__class__' is not allowed"),
    ("f = lambda: 1\ng = getattr(f, '__globals__')", "line 3:9", "'getattr' is not allowed"),
    ("exec('import os')", "line 2:5", "'exec' is not allowed"),
    ("eval('1')", "line 2:5", "'eval' is not allowed"),
    ("compile('1', 'x', 'eval')", "line 2:5", "'compile' is not allowed"),
    ("g = globals()", "line 2:9", "'globals' is not allowed"),
    ("v = vars()", "line 2:9", "'vars' is not allowed"),
    ("t = type(state)", "line 2:9", "'type' is not allowed"),
    ("b = __builtins__", "line 2:9", "'__builtins__' is not allowed"),
    ("x = (i for i in []).gi_frame.f_back", "line 2:9", "attribute 'gi_frame' is not available"),
    ("x = '{0.__class__}'.format(1)", "line 2:9", "format fields may not reach attributes"),
    ("x = str.format('{}', 1)", "line 2:9", "str.format is only allowed directly on a string literal"),
    ("import json\nx = json.decoder", "line 3:9", "attribute 'decoder' is not available"),
    ("from json import decoder", "line 2:5", "json.decoder is not available"),
    ("import datetime\nx = datetime.datetime.now()", "line 3:9", "the clock is not allowed"),
    ("print(state)", "line 2:5", "'print' is not allowed"),
    ("global X", "line 2:5", "global state persists between calls"),
    ("class A:\n    pass", "line 2:5", "classes are not allowed"),
    ("yield 1", "line 2:5", "generator functions are not allowed"),
    ("with state as s:\n    pass", "line 2:5", "context managers are not allowed"),
    ("state.x = 1", "line 2:5", "assigning attribute 'x' is not allowed"),
    ("try:\n    pass\nexcept:\n    pass", "line 4:5", "bare 'except:' is not allowed"),
    ("def g(a=[]):\n    return a", "line 2:13", "mutable default argument"),
    ("x = undefined_name + 1", "line 2:9", "name 'undefined_name' is not defined"),
    ("x = bytearray(20 * 2**30)", "line 2:9", "'bytearray' is not allowed"),
    ("x = state._private", "line 2:9", "attribute '_private' is not allowed"),
]


@pytest.mark.parametrize("body,where,reason", ATTACKS, ids=[a[0].split("\n")[-1][:40] for a in ATTACKS])
def test_static_check_rejects(body, where, reason):
    with pytest.raises(UnsafeCodeError) as info:
        check_source(wrap(body), "t")
    msg = str(info.value)
    assert where in msg and reason in msg, msg
    assert info.value.reason and info.value.line >= 2  # structured fields for repair prompts


@pytest.mark.parametrize("source,reason", [
    ("x = 1\n", "exactly one top-level function named 't' (found 0)"),
    ("def t(s):\n    return 1\n", "first parameter of t() must be 'state'"),
    ("def t(state):\n    return 1\ndef t(state):\n    return 2\n", "(found 2)"),
    ("def t(state):\n    return 1\nwhile True:\n    pass\n", "top-level While is not allowed"),
    ("def t(state):\n    return 1\nt(3)\n", "top-level Expr is not allowed"),
    ("def t(state):\n    return 1\nt = 3\n", "rebinds the tool function"),
    ("def t(state:\n", "line 1:6: syntax error"),
    ("def t(state):\n    break\n", "does not compile"),
    ("def d(f):\n    return f\n@d\ndef t(state):\n    return 1\n", "decorators are not allowed"),
    ("async def t(state):\n    return 1\n", "async code is not allowed"),
    ("x" * (static_checks.MAX_SOURCE_CHARS + 1), "the limit is"),
])
def test_tool_shape_rules(source, reason):
    with pytest.raises(UnsafeCodeError, match=None) as info:
        check_source(source, "t")
    assert reason in str(info.value), str(info.value)


def test_allowed_constructs_pass():
    src = '''
from __future__ import annotations
import re
import math as m
from datetime import date, timedelta
from collections import Counter
from typing import Optional
from decimal import Decimal, ROUND_HALF_UP

PATTERN = re.compile(r"^O\\d{4}$")
LIMIT: int = 3

def _total(order):
    return sum(i["price"] * i["qty"] for i in order.get("items", []))

def t(state, order_id: str, note: Optional[str] = None, *, tags=None) -> dict:
    if not PATTERN.match(order_id):
        return error("bad id")
    d = date.fromisoformat(TODAY) + timedelta(days=2)
    counts = Counter(o["status"] for o in state.get("orders", {}).values())
    match note:
        case None:
            label = "none"
        case str(s) if s:
            label = s.upper()
        case _:
            label = ""
    try:
        v = int(order_id[1:])
    except ValueError as e:
        return error(str(e))
    price = Decimal("1.005").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return {"d": d.isoformat(), "n": m.ceil(v / LIMIT), "c": dict(counts), "l": label,
            "p": str(price), "f": "{}-{:>3}".format(v, label), "tags": sorted(tags or [])}
'''
    check_source(src, "t")
    state = {"orders": {"O0001": {"status": "pending"}}}
    out = run_direct(src, "t", state, {"order_id": "O0012", "note": "hi"})
    assert out == {"d": "2025-01-17", "n": 4, "c": {"pending": 1}, "l": "HI", "p": "1.01", "f": "12- HI",
                   "tags": []}


def test_namespace_is_a_second_layer():
    """Code that skipped the static check still meets restricted builtins and module proxies."""
    def run(body):
        code = static_checks.compile_tool(wrap(body), "t")
        return sandbox.load_tool(code, "t")({})

    with pytest.raises(ImportError, match="not allowed"):
        run("import os")
    with pytest.raises(NameError):
        run("open('/etc/passwd')")
    with pytest.raises(NameError):
        run("getattr(1, 'real')")
    with pytest.raises(AttributeError):  # proxies hold only the listed names, never submodules
        run("import json\njson.decoder")
    ns = sandbox.make_globals()
    assert set(ns["__builtins__"]) == set(sandbox.SAFE_BUILTIN_NAMES) | {"__import__"}


def test_helpers():
    state = mock_state()
    assert next_id(state, "orders", "O") == "O0004"
    assert next_id(state, "missing", "X", width=3) == "X001"
    assert next_id({"orders": {"O0009": {}, "legacy": {}, "OX": {}}}, "orders", "O") == "O0010"
    assert add_days("2025-01-30", 3) == "2025-02-02"
    assert add_days("2025-01-15T10:00:00", -15) == "2024-12-31T10:00:00"
    assert error("nope") == {"error": "nope"}
    value = {"a": [1, {"b": 2}]}
    dup = copy(value)
    assert dup == value and dup["a"][1] is not value["a"][1]
    assert copy.deepcopy(value) == value and copy.copy(value)["a"] is value["a"]
    assert sandbox.NOW == "2025-01-15T10:00:00" and sandbox.TODAY == "2025-01-15"


def test_run_direct_mutates_in_place_and_checks_first():
    state = mock_state()
    out = run_direct(SOURCES["cancel_order"], "cancel_order", state, {"order_id": "O0001", "reason": "x"})
    assert out == {"order_id": "O0001", "status": "cancelled"}
    assert state["orders"]["O0001"]["status"] == "cancelled"
    with pytest.raises(UnsafeCodeError):
        run_direct(wrap("import os"), "t", {}, {})


class _Cycle:
    """Cyclic garbage with a finalizer: the collector runs Python code (a chance to switch threads) while
    the syntax tree of another thread is being built."""

    def __init__(self):
        self.me = self

    def __del__(self):
        sum(range(200))


def test_threads_parse_and_compile_tools_at_once():
    """Episode threads open environments at once, so tool code is parsed and compiled from several threads.
    CPython 3.11's syntax-tree conversion keeps one recursion counter per interpreter: without the module's
    lock this raised "SystemError: AST constructor recursion depth mismatch" (an unscored episode in CI)."""
    import gc
    import sys
    import threading

    source = "\n".join(f"def f{i}(state, a):\n    if a > {i}:\n        return [x for x in range(a) if x % 3 == {i % 3}]\n"
                       f"    return {{'k': (a, {i})}}" for i in range(40))
    errors: list[str] = []

    def hammer() -> None:
        for i in range(60):
            junk = [_Cycle() for _ in range(20)]
            del junk
            try:
                static_checks.compile_tool(static_checks.parse_tool(source + f"\nz = {i}", "f0"), "f0")
            except SystemError as e:
                errors.append(str(e))
                return

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 2, 2)
    try:
        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert not errors, errors[:3]
