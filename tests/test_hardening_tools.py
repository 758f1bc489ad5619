"""Tool calls under an attack battery: each class of problem it found, and a property over all of them.

1. Calls are all or nothing: any failed call (returned error, exception, timeout, memory limit,
   non-JSON output or state, invalid arguments) leaves the state exactly as it was.
2. Nothing survives a call outside ``state``: module-level ``CALLS = []``, mutable defaults,
   stashed references; the determinism check runs a tool in two fresh worker processes with
   different hash seeds, so address- or set-order-dependent output is caught.
3. Values that are not JSON at the boundary (huge ints, NaN/inf, surrogates, sets, dates,
   non-string keys) are the tool's error, never a crash of ``get_state``/``state_hash``; the
   worker's hash and the hash of ``get_state()`` always agree.
4. Schema patterns run in linear time (RE2) or within the call's time limit; catastrophic
   ``re`` inside tool code is stopped by the worker's limits.
5. Deeply nested code and broken schemas give a reason, not RecursionError.
"""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mock_domain import tool_code

from autoforge.envs import _worker_client, checks, runtime, static_checks
from autoforge.envs.checks import check_tool, output_fits
from autoforge.envs.runtime import Environment, Observation, run_direct
from autoforge.errors import ConfigError, UnsafeCodeError
from autoforge.types import state_hash

INITIAL = {"items": {"I1": {"name": "lamp", "qty": 2, "tags": ["a"], "note": None}}, "log": {}}


def assert_unchanged(env: Environment, before: dict) -> None:
    """The state is the one before the call, and both ways of hashing it agree."""
    assert env.get_state() == before
    assert env.state_hash() == state_hash(before) == state_hash(env.get_state())


# --------------------------------------------------------------------------- 1. all or nothing

WRITES = "    state['items']['I1']['qty'] = 99\n    state['items']['I1']['tags'].append('x')\n    del state['log']\n"
FAILING = {
    "returns_error": (WRITES + "    return error('out of stock')\n", "tool_error", "out of stock"),
    "raises": (WRITES + "    raise ValueError('boom')\n", "crashed", "ValueError: boom"),
    "divides_by_zero": (WRITES + "    return 1 / 0\n", "crashed", "ZeroDivisionError"),
    "returns_non_json": (WRITES + "    return {'s': {1, 2}}\n", "crashed", "output['s'] is a set"),
    "stores_non_json": (WRITES + "    state['items']['I1']['when'] = {3}\n    return 1\n", "crashed",
                        "state['items']['I1']['when'] is a set"),
    "times_out": (WRITES + "    while True:\n        pass\n", "timeout", "timed out after 1 s"),
    "hits_memory_limit": (WRITES + "    rows = []\n    while True:\n        rows.append([0] * 100000)\n",
                          "memory_limit", "MemoryError"),
    "mutates_its_arguments": ("    items = args['items']\n    items.append(5)\n    state['items']['I1']['tags'] = items\n"
                              "    return error('no')\n", "tool_error", "no"),
    "clears_then_errors": ("    state['items'].clear()\n    state['new'] = {'a': 1}\n    return {'error': 'nope'}\n",
                           "tool_error", "nope"),
}


@pytest.fixture(scope="module")
def failing_env():
    tools = [tool_code(name, f"def {name}(state, **args):\n{body}") for name, (body, _, _) in FAILING.items()]
    tools.append(tool_code("takes_one", "def takes_one(state, n):\n    state['log']['n'] = n\n    return n\n"))
    tools.append(tool_code("write", "def write(state, key, value):\n    state['log'][key] = value\n    return value\n"))
    with Environment(tools, timeout_s=1.0, memory_mb=150) as env:
        yield env


@pytest.mark.parametrize("name", sorted(FAILING))
def test_a_failed_call_leaves_the_state_exactly_as_it_was(failing_env, name):
    env = failing_env
    env.reset(INITIAL)
    assert env.call("write", {"key": "before", "value": 1}).ok  # a committed write first
    before = env.get_state()
    _, kind, fragment = FAILING[name]
    obs = env.call(name, {"items": [1]})
    assert isinstance(obs, Observation) and not obs.ok and obs.kind == kind, obs
    assert fragment in (obs.error or ""), obs.error
    if kind in ("tool_error", "crashed"):  # undone inside the worker, and it says so
        assert obs.rolled_back
    assert_unchanged(env, before)
    assert env.call("write", {"key": "after", "value": 2}).ok  # the episode goes on from there
    assert env.get_state()["log"] == {"before": 1, "after": 2}


def test_invalid_arguments_change_nothing(failing_env):
    env = failing_env
    env.reset(INITIAL)
    before = env.get_state()
    obs = env.call("takes_one", {"m": 1})
    assert obs.kind == "invalid_arguments" and "unexpected argument(s) ['m']" in obs.error
    assert_unchanged(env, before)


def test_aliases_and_stashed_references_do_not_outlive_a_call():
    src = ("STASH = []\n\ndef alias(state, mode):\n    if mode == 'alias':\n        state['b'] = state['a']\n"
           "        STASH.append(state['a'])\n    elif mode == 'write':\n        state['a']['x'] = 2\n"
           "    else:\n        return len(STASH)\n    return 1\n")
    with Environment([tool_code("alias", src)]) as env:
        env.reset({"a": {"x": 1}})
        assert env.call("alias", {"mode": "alias"}).ok
        assert env.call("alias", {"mode": "write"}).ok
        # Between calls the state is plain JSON: b is a copy of what a was, not the same object.
        assert env.get_state() == {"a": {"x": 2}, "b": {"x": 1}}
        assert env.call("alias", {"mode": "count"}).output == 0  # the module-level stash is gone


# --------------------------------------------------------------------------- 2. no hidden state

@pytest.mark.parametrize("source", [
    "CALLS = []\n\ndef t(state):\n    CALLS.append(1)\n    return len(CALLS)\n",
    "SEEN = dict()\n\ndef t(state):\n    SEEN[len(SEEN)] = 1\n    return len(SEEN)\n",
    "x = set()\n\ndef t(state):\n    x.add(len(x))\n    return len(x)\n",
    "import itertools\nCOUNTER = itertools.count(1)\n\ndef t(state):\n    return next(COUNTER)\n",
    "def make():\n    box = {'n': 0}\n    def inc():\n        box['n'] += 1\n        return box['n']\n    return inc\n"
    "INC = make()\n\ndef t(state):\n    return INC()\n",
])
def test_module_level_bindings_start_afresh_on_every_call(source):
    with Environment([tool_code("t", source)]) as env:
        env.reset({})
        assert [env.call("t").output for _ in range(3)] == [1, 1, 1]


@pytest.mark.parametrize("body,reason", [
    ("def t(state, seen=dict()):\n    return 1\n", "mutable default argument `dict()`"),
    ("def t(state, seen=[]):\n    return 1\n", "mutable default argument `[]`"),
    ("def t(state, seen=set()):\n    return 1\n", "mutable default argument `set()`"),
    ("def t(state, it=iter(range(3))):\n    return 1\n", "mutable default argument `iter(range(3))`"),
    ("N = 0\n\ndef t(state):\n    global N\n    N += 1\n    return N\n", "global state persists between calls"),
    ("def t(state):\n    t.calls = 1\n    return 1\n", "assigning attribute 'calls' is not allowed"),
])
def test_hidden_state_that_is_rejected_statically_says_where_and_what_to_do(body, reason):
    with pytest.raises(UnsafeCodeError) as info:
        static_checks.check_source(body, "t")
    msg = str(info.value)
    assert reason in msg and "line " in msg, msg
    if "default" in reason:
        assert "use None and create it inside" in msg and "`state`" in msg


@pytest.mark.parametrize("expr", [
    "repr(lambda: 0)",                          # a memory address
    "f'{state.get}'",                           # a bound method's address
    "str(copy)",                                # a module-level object's address
    "list({'alpha', 'beta', 'gamma', 'delta', 'epsilon'})",  # set order of strings (hash seed)
])
def test_output_that_depends_on_the_process_is_caught_as_nondeterministic(expr):
    res = check_tool(tool_code("t", f"def t(state):\n    return {expr}\n", status="rejected"), {}, {})
    assert not res.ok and res.reason == "nondeterministic", res.message()
    assert "fresh sandbox process" in res.detail and "sort sets" in res.detail


def test_the_determinism_check_uses_two_check_workers_that_never_run_episodes(monkeypatch):
    taken = []
    real = runtime.check_worker

    def recording(**kw):
        w = real(**kw)
        taken.append((w.pid, w.hash_seed, w.role))
        return w

    monkeypatch.setattr(runtime, "check_worker", recording)
    pooled = {w.pid for w in _worker_client._POOL}
    tool = tool_code("t", "def t(state):\n    return sorted({'b', 'a', 'c'})\n", status="rejected")
    res = check_tool(tool, {}, {})
    assert res.ok and res.output == ["a", "b", "c"]  # sorted: the same in both processes
    assert [seed for _, seed, _ in taken] == list(runtime.DETERMINISM_SEEDS) == [0, 1]
    assert [role for _, _, role in taken] == ["check", "check"]
    assert len({pid for pid, _, _ in taken}) == 2 and not pooled & {pid for pid, _, _ in taken}
    assert not {w.pid for w in _worker_client._POOL} & {pid for pid, _, _ in taken}  # never handed to episodes
    assert all(w.hash_seed == 0 for w in _worker_client._POOL)  # the seed-1 worker never runs episodes


def test_a_check_worker_is_retired_after_its_quota_of_checks(monkeypatch):
    monkeypatch.setattr(_worker_client, "CHECKS_PER_WORKER", 2)
    monkeypatch.setattr(_worker_client, "_CHECKERS", {})  # none idle: the first is a never-used one
    tool = tool_code("t", "def t(state):\n    return 1\n", status="rejected")
    pids = []
    for _ in range(3):
        w = _worker_client.check_worker(memory_mb=512, timeout_s=2.0, hash_seed=1)
        pids.append(w.pid)
        _worker_client.give_worker(w)
    assert pids[0] == pids[1] != pids[2]  # reused once, then a never-used one
    assert check_tool(tool, {}, {}).ok


# --------------------------------------------------------------------------- 3. JSON at the boundary

@pytest.mark.parametrize("stmt,fragment", [
    ("return 10 ** 400", "output is <an integer of about 401 digits>, outside the 64-bit range"),
    ("state['items']['I1']['qty'] = 10 ** 400\n    return 1", "state['items']['I1']['qty'] is <an integer"),
    ("state['items']['I1']['qty'] = 2 ** 64\n    return 1", "outside the 64-bit range"),
    ("state['items']['I1']['qty'] = 2 ** 63\n    return 1", "outside the 64-bit range"),
    ("state['items']['I1']['qty'] = -2 ** 63 - 1\n    return 1", "outside the 64-bit range"),
    ("return {'v': float('nan')}", "output['v'] is nan, which is not a JSON number"),
    ("state['items']['I1']['qty'] = 1e308 * 10\n    return 1", "is inf, which is not a JSON number"),
    ("state['items']['I1']['note'] = float('nan')\n    return 1", "state['items']['I1']['note'] is nan"),  # over a null
    ("state['items']['I1']['name'] = chr(0xD800)\n    return 1", "unpaired surrogate"),
    ("return chr(0xDFFF)", "unpaired surrogate"),
    ("import datetime\n    state['items']['I1']['when'] = datetime.date(2025, 1, 1)\n    return 1",
     "is a date, which is not JSON: store x.isoformat()"),
    ("state['items'][7] = {}\n    return 1", "has the key 7 (int); JSON object keys are strings: use str(key)"),
    ("x = []\n    x.append(x)\n    state['loop'] = x\n    return 1", "nested more than 254 levels deep"),
    ("state[3] = {}\n    return 1", "state has the key 3 (int)"),  # a top-level key
    ("state[chr(0xDC00)] = {}\n    return 1", "unpaired surrogate"),
    ("state['counter'] = 2 ** 100\n    return 1", "state['counter'] is <an integer of about 31 digits>"),
    ("return {float('nan'): 1}", "output has the key nan, which is not a JSON number"),
])
def test_non_json_values_are_the_tools_error_and_roll_back(stmt, fragment):
    src = f"def t(state):\n    {stmt}\n"
    with Environment([tool_code("t", src)]) as env:
        env.reset(INITIAL)
        obs = env.call("t")
        assert obs.kind == "crashed" and fragment in obs.error, obs.error
        assert "not JSON" in obs.error or "non-JSON" in obs.error
        assert_unchanged(env, INITIAL)


@pytest.mark.parametrize("arguments,fragment", [
    ({"n": math.nan}, "arguments['n'] is nan"),
    ({"n": math.inf}, "arguments['n'] is inf"),
    ({"n": 10 ** 30}, "arguments['n'] is <an integer of about 31 digits>"),
    ({"n": "\ud800"}, "unpaired surrogate"),
    ({"n": {"k": {1, 2}}}, "arguments['n']['k'] is a set"),
])
def test_non_json_arguments_are_invalid_arguments(failing_env, arguments, fragment):
    failing_env.reset(INITIAL)
    obs = failing_env.call("takes_one", arguments)
    assert obs.kind == "invalid_arguments" and fragment in obs.error and "are not JSON" in obs.error, obs.error
    assert_unchanged(failing_env, INITIAL)


@pytest.mark.parametrize("state,fragment", [
    ({"a": math.inf}, "state['a'] is inf"),
    ({"a": 2 ** 70}, "outside the 64-bit range"),
    ({1: {}}, "state has the key 1 (int)"),
])
def test_a_non_json_reset_state_is_refused_with_where(failing_env, state, fragment):
    with pytest.raises(ConfigError, match="state is not JSON-serialisable") as info:
        failing_env.reset(state)
    assert fragment in str(info.value)


EDGE_STATE = {"uni": {"Zürich ☃ 𝔘 ẞ": ["\u0000\n\"\\", "日本語", "e\u0301"]},
              "num": {"big": [2 ** 63 - 1, -(2 ** 63), 10 ** 18],
                      "float": [1e308, -1e308, 5e-324, -0.0, 0.1 + 0.2, 1 / 3, 2.5e-8]},
              "nest": {"deep": [[[[[[1, [2, [3, {"k": [None, True, False]}]]]]]]]]}}


def test_worker_hash_and_get_state_hash_always_agree():
    src = ("def t(state):\n    state['num']['big'].append(2 ** 63 - 1)\n    state['num']['float'].append(1e308)\n"
           "    state['uni']['ключ ✓'] = [[['ü']]]\n    state['nest']['deep'].append([[[-0.0]]])\n    return 1\n")
    with Environment([tool_code("t", src)]) as env:
        env.reset(EDGE_STATE)
        assert env.get_state() == EDGE_STATE
        assert env.state_hash() == state_hash(EDGE_STATE) == state_hash(env.get_state())
        assert env.call("t").ok
        expected = json.loads(json.dumps(EDGE_STATE))
        run_direct(src, "t", expected, {})
        assert env.get_state() == expected
        assert env.state_hash() == state_hash(expected) == state_hash(env.get_state())


# --------------------------------------------------------------------------- 4. regular expressions

REDOS = "^(a+)+$"
EVIL = "a" * 50_000 + "b"


@pytest.mark.parametrize("parameters,arguments", [
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": REDOS}}}, {"s": EVIL}),  # fast path
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": REDOS, "multipleOf": 2}}},
     {"s": EVIL}),  # a keyword the fast path declines: jsonschema's pattern keyword
    ({"type": "object", "patternProperties": {REDOS: {"type": "string"}}, "additionalProperties": False},
     {EVIL: "x"}),  # patterns on property names
])
def test_a_catastrophic_schema_pattern_is_checked_in_linear_time(parameters, arguments):
    src = "def t(state, **kw):\n    state['seen'] = 1\n    return 1\n"
    with Environment([tool_code("t", src, parameters)], timeout_s=2.0) as env:
        env.reset({})
        started = time.monotonic()
        obs = env.call("t", arguments)
        assert time.monotonic() - started < 10  # was 45 s with Python's re
        assert obs.kind == "invalid_arguments" and "does not match" in obs.error, obs.error
        assert len(obs.error) < 1500  # the 50 000-character value is not echoed back whole
        assert_unchanged(env, {})


def test_unique_items_over_many_objects_is_checked_in_linear_time():
    parameters = {"type": "object", "properties": {"rows": {"type": "array", "uniqueItems": True}}}
    rows = [{"id": i, "tags": [i, str(i)]} for i in range(20_000)] + [{"tags": [7, "7"], "id": 7}]
    with Environment([tool_code("t", "def t(state, rows):\n    return len(rows)\n", parameters)]) as env:
        env.reset({})
        started = time.monotonic()
        obs = env.call("t", {"rows": rows})
        assert time.monotonic() - started < 10  # jsonschema compares every pair: minutes
        assert obs.kind == "invalid_arguments" and "has non-unique elements" in obs.error and len(obs.error) < 1500
        assert env.call("t", {"rows": rows[:-1]}).output == 20_000


def test_a_backtracking_pattern_counts_against_the_calls_time_limit():
    parameters = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?!x)(a|a)+$"}}}
    src = "def t(state, s):\n    state['seen'] = s\n    return 1\n"
    with Environment([tool_code("t", src, parameters)], timeout_s=0.5) as env:
        env.reset({})
        started = time.monotonic()
        obs = env.call("t", {"s": "a" * 40 + "!"})
        assert time.monotonic() - started < 10
        assert obs.kind == "timeout" and "JSON Schema" in obs.error and "0.5 s limit" in obs.error, obs.error
        assert "(?!x)(a|a)+$" in obs.error and "Simplify the pattern" in obs.error
        assert_unchanged(env, {})
        assert env.call("t", {"s": "aaa"}).ok  # a short value still fits in the budget


def test_catastrophic_re_inside_tool_code_is_a_timeout_and_changes_nothing():
    src = ("import re\n\ndef t(state):\n    state['seen'] = 1\n"
           "    return bool(re.match(r'^(a+)+$', 'a' * 40 + 'b'))\n")
    with Environment([tool_code("t", src)], timeout_s=1.0) as env:
        env.reset({"k": {}})
        started = time.monotonic()
        obs = env.call("t")
        assert obs.kind == "timeout" and "timed out after 1 s" in obs.error, obs
        assert time.monotonic() - started < 15
        assert_unchanged(env, {"k": {}})


# --------------------------------------------------------------------------- 5. deep code, broken schemas

@pytest.mark.parametrize("expr", [
    "- " * 500 + "1",
    "not " * 500 + "1",
    "lambda: " * 300 + "1",
    "-" * 3000 + "1",                       # too deep for the parser itself
    "-" * 90000 + "1",                      # the parser runs out of stack
    " + ".join(["1"] * 5000),
    "state" + "['a']" * 3000,
    "1 if 1 else " * 3000 + "1",
])
def test_deeply_nested_code_is_rejected_with_a_reason(expr):
    src = f"def t(state):\n    return {expr}\n"
    with pytest.raises(UnsafeCodeError) as info:
        static_checks.check_source(src, "t")
    msg = str(info.value)
    assert "nested" in msg and f"at most {static_checks.MAX_AST_DEPTH}" in msg and "separate statements" in msg, msg
    res = check_tool(tool_code("t", src), {}, {})  # the synthesis check reports it, does not raise
    assert not res.ok and res.reason == "unsafe_code"


def test_deep_but_reasonable_code_still_passes():
    chain = "".join(f"    {'if' if i == 0 else 'elif'} x == {i}:\n        return {i}\n" for i in range(150))
    static_checks.check_source(f"def t(state, x):\n{chain}    return -1\n", "t")
    static_checks.check_source("def t(state):\n    return " + "[" * 150 + "1" + "]" * 150 + "\n", "t")


@pytest.mark.parametrize("schema,fragment", [
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "/$defs/missing"),
    ({"$ref": "#"}, "refers to itself without end"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?!x)(a|a)+$"}}}, "could not be checked"),
])
def test_a_broken_output_schema_is_a_problem_string(schema, fragment, monkeypatch):
    monkeypatch.setattr(checks, "OUTPUT_CHECK_S", 0.3)
    found = output_fits({"a": "a" * 40 + "!"}, schema)
    assert isinstance(found, str) and found.startswith("the declared output schema") and fragment in found, found


def test_a_broken_parameter_schema_is_an_observation():
    bad = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}
    with Environment([tool_code("t", "def t(state, **kw):\n    return 1\n", bad)]) as env:
        env.reset({})
        obs = env.call("t", {"a": 1})
        assert obs.kind == "invalid_arguments" and "parameter schema cannot be used" in obs.error
        assert "fix the tool's parameters" in obs.error


# --------------------------------------------------------------------------- the property

VALUES = ["1", "-7", "2.5", "'s'", "None", "True", "[1, 'a']", "{'k': [1]}", "10 ** 400", "2 ** 64", "-2 ** 63",
          "2 ** 63 - 1", "1e308", "1e308 * 10", "float('nan')", "{1, 2}", "chr(0xD800)", "'x' * 3", "1 / 3",
          "(1, 2)", "state['c'].get('a')", "len(state['c'])"]
KEYS = ["'a'", "'b'", "'lst'", "5"]
STATEMENTS = (
    [f"state['c'][{k}] = {v}" for k in KEYS for v in VALUES]
    + [f"state['c'].setdefault('lst', []).append({v})" for v in VALUES]
    + [f"return {v}" for v in VALUES]
    + ["del state['c']['a']", "state['c'].pop('b', None)", "state['d'] = state['c']", "state['c'] = {}",
       "x = 1 / 0", "raise ValueError('boom')", "return error('nope')", "return {'error': 'no', 'partial': 1}",
       "state['c']['a'] = str(state['c'].get('a', '')) + 'ab'", "state['c']['n'] = state['c'].get('n', 0) + 1",
       "for i in range(20):\n        state['c'][f'k{i}'] = i * i", "state['c']['lst'] = sorted(state['c'])",
       "state['c']['big'] = 10 ** 18 * 100", "if 'a' in state['c']:\n        return error('a exists')",
       "state.clear()", "args['extra'] = 1\n    state['c']['args'] = args"]
)
program = st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=6)


def _json_ok(value, *, str_keys: bool) -> bool:
    """An oracle independent of the worker: strict json, 64-bit ints, string keys, valid Unicode."""
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if str_keys and not all(isinstance(k, str) for k in v):
                return False
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and not -(2 ** 63) <= v < 2 ** 63:
            return False
    return True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program)
def test_any_generated_tool_call_is_all_or_nothing_and_never_raises(statements):
    src = "def tool(state, **args):\n" + "".join(f"    {s}\n" for s in statements) + "    return {'done': True}\n"
    start = {"c": {"a": 1, "lst": [0]}, "other": {"x": [1.5, None]}}
    with Environment([tool_code("tool", src)], timeout_s=5.0) as env:
        env.reset(start)
        before = env.state_hash()
        assert before == state_hash(start)
        obs = env.call("tool", {"q": 1})
        assert isinstance(obs, Observation)
        after = env.state_hash()
        assert after == state_hash(env.get_state())  # the worker's hash and get_state always agree
        # What the same code does in-process, judged by an oracle that does not share the worker's encoder.
        direct_state = json.loads(json.dumps(start))
        try:
            out = run_direct(src, "tool", direct_state, {"q": 1})
            failed = isinstance(out, dict) and "error" in out
            broken = not _json_ok(out, str_keys=False) or not _json_ok(direct_state, str_keys=True)
        except Exception:  # noqa: BLE001
            failed, broken, out = True, False, None
        if not obs.ok:
            assert after == before, (src, obs)  # a failed call changed nothing
            assert obs.error
        expect_ok = not failed and not broken
        assert obs.ok == expect_ok, (src, obs)
        if obs.ok:
            assert env.get_state() == json.loads(json.dumps(direct_state))
            assert obs.output == json.loads(json.dumps(out))


# --------------------------------------------------------------------------- found by a second probe pass

_SWAPS = {
    "counter": "state['a'] = collections.Counter(state['a'])",
    "defaultdict": "state['a'] = collections.defaultdict(list, state['a'])",
    "tuple": "state['a']['l'] = tuple(state['a']['l'])",
    "alias_across": "state['a']['x'] = state['b']['y']",
    "alias_within": "state['a']['x'] = state['a']['y']",
    "key_order": "v = state.pop('a')\n    state['a'] = v",
}
_PROBE = ("def probe(state):\n    state['b']['y']['k'] = 2\n    state['a']['l'].append(1)\n"
          "    return {'order': list(state), 'missing': state['a'].get('missing'), 'x': state['a']['x']}\n")


@pytest.mark.parametrize("name", list(_SWAPS))
@pytest.mark.parametrize("fails", [False, True])
def test_live_objects_that_encode_alike_do_not_outlive_a_call(name, fails):
    """A call that swaps in a Counter, a tuple or an alias leaves the same JSON; the next call must
    behave as on that JSON (a fresh environment reset from get_state()), whether the call failed or not."""
    start = {"a": {"x": {"k": 1}, "y": {"k": 1}, "l": []}, "b": {"y": {"k": 1}}}
    end = "return error('no')" if fails else "return {}"
    swap = tool_code("swap", f"import collections\n\ndef swap(state):\n    {_SWAPS[name]}\n    {end}\n")
    probe = tool_code("probe", _PROBE)
    with Environment([swap, probe]) as a, Environment([probe]) as b:
        a.reset(start)
        assert a.call("swap").ok is not fails
        b.reset(a.get_state())
        pa, pb = a.call("probe"), b.call("probe")
        assert pa.ok and pb.ok and pa.output == pb.output
        assert a.state_hash() == b.state_hash() and a.get_state() == b.get_state()


def test_an_error_returned_as_a_dict_subclass_is_an_error_and_rolls_back():
    src = "import collections\n\ndef t(state):\n    state['a']['v'] = 99\n    return collections.OrderedDict(error='nope')\n"
    with Environment([tool_code("t", src)]) as env:
        env.reset({"a": {"v": 1}})
        obs = env.call("t")
        assert obs.kind == "tool_error" and obs.error == "nope" and obs.rolled_back
        assert env.get_state() == {"a": {"v": 1}}


@pytest.mark.parametrize("name", [["t"], None, 3, {"t": 1}])
def test_a_tool_name_that_is_not_a_string_is_an_unknown_tool(name):
    with Environment([tool_code("t", "def t(state):\n    return 1\n")]) as env:
        env.reset({})
        assert env.call(name, {}).kind == "unknown_tool"


def test_output_keys_that_become_one_json_key_are_the_tools_error():
    src = "def t(state):\n    state['a']['v'] = 2\n    return {'n': {1: 'a', '1': 'b'}}\n"
    with Environment([tool_code("t", src)]) as env:
        env.reset({"a": {"v": 1}})
        obs = env.call("t")
        assert obs.kind == "crashed" and "output['n'] has the keys 1 and '1'" in obs.error
        assert env.get_state() == {"a": {"v": 1}}
        ok = tool_code("u", "def u(state):\n    return {1: 'a', 2.5: 'b', None: 'c'}\n")
    with Environment([ok]) as env:
        env.reset({})
        assert env.call("u").output == {"1": "a", "2.5": "b", "null": "c"}  # number keys alone are fine


def test_depth_limit_is_exact_and_names_the_path():
    src = "def F(state):\n    x = 1\n    for _ in range(N):\n        x = [x]\n    return x\n"
    t, u = (tool_code(f, src.replace("F", f).replace("N", n)) for f, n in (("t", "254"), ("u", "255")))
    with Environment([t, u]) as env:
        env.reset({})
        assert env.call("t").ok
        obs = env.call("u")
        assert obs.kind == "crashed" and "output[0][0]" in obs.error and "nested more than 254" in obs.error


_CHAIN = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]} for i in range(30)}
_CHAIN["a30"] = {"type": "string", "minLength": 3}


@pytest.mark.parametrize("params, args", [
    ({"type": "object", "$defs": _CHAIN, "properties": {"v": {"$ref": "#/$defs/a0"}}}, {"v": 5}),  # 2**30 paths
    ({"type": "object", "properties": {"v": {"allOf": [{"uniqueItems": True}] * 1000}}}, {"v": list(range(100_000))}),
])
def test_a_schema_whose_checking_explodes_stops_at_the_calls_time_limit(params, args):
    tool = tool_code("t", "def t(state, v=None):\n    return 1\n", params)
    with Environment([tool], timeout_s=0.5) as env:
        env.reset({})
        obs = env.call("t", args)
    assert obs.kind == "timeout" and "JSON Schema" in obs.error


def test_a_schema_that_shares_one_object_everywhere_is_refused_when_built():
    s: dict = {"type": "string"}
    for _ in range(18):
        s = {"oneOf": [s, s]}  # 2**18 copies once written out
    with pytest.raises(ConfigError, match="over 200,000 nodes"):
        Environment([tool_code("t", "def t(state, v=None):\n    return 1\n", {"type": "object", "properties": {"v": s}})])


def test_arguments_too_large_to_be_a_tool_call_are_invalid_arguments():
    with Environment([tool_code("t", "def t(state, v=None):\n    return 1\n")]) as env:
        env.reset({})
        obs = env.call("t", {"v": "x" * (9 * 1024 * 1024)})
        assert obs.kind == "invalid_arguments" and "bytes of JSON" in obs.error
        assert env.call("t", {"v": "x" * 1000}).ok
