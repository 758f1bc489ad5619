"""Episode state in the sandbox worker: resident initial states, record-level change tracking and
reset, and the incremental state hash (version 2), which must equal hashing the whole state."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mock_domain import tool_code
from test_rollout_support import make_tools, tasks_and_dags

from autoforge.envs.runtime import Environment, ResidentState, run_tool_direct
from autoforge.rollout.reward import score
from autoforge.tasks.verify import check_replay
from autoforge.types import STATE_HASH_PREFIX, canonical_json, legacy_state_hash, same_json, state_hash, state_hash_like

# One tool that applies a list of edits, so a random edit sequence is a random sequence of calls.
EDIT = tool_code("edit", '''
def edit(state, ops):
    for op in ops:
        kind = op[0]
        if kind == "set":
            state.setdefault(op[1], {})[op[2]] = op[3]
        elif kind == "del":
            state[op[1]].pop(op[2], None)
        elif kind == "nested":
            rec = state[op[1]].get(op[2])
            if isinstance(rec, dict):
                rec[op[3]] = op[4]
            elif isinstance(rec, list):
                rec.append(op[4])
        elif kind == "coll":
            state[op[1]] = op[2]
        elif kind == "drop":
            state.pop(op[1], None)
        elif kind == "move":
            coll = state[op[1]]
            if op[2] in coll:
                value = coll.pop(op[2])
                coll[op[2]] = value
        elif kind == "scan":
            for rec in state[op[1]].values():
                if isinstance(rec, dict):
                    rec[op[2]] = op[3]
                    break
        elif kind == "past":
            dict.update(state[op[1]], {op[2]: op[3]})
        elif kind == "past_pop":
            dict.pop(state[op[1]], op[2], None)
        elif kind == "fail":
            return error("refused")
        elif kind == "raise":
            raise ValueError("boom")
        elif kind == "nan":
            state[op[1]][op[2]] = {"v": float("nan")}
    return len(ops)
''', {"type": "object", "properties": {"ops": {"type": "array"}}, "required": ["ops"]}, effect="write")

READ = tool_code("read", '''
def read(state, name):
    coll = state.get(name)
    if not isinstance(coll, dict):
        return {"kind": str(coll)}
    return {"keys": list(coll), "first": coll[next(iter(coll))] if coll else None}
''', {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}, effect="read")

INITIAL = {"a": {"k1": {"x": 1, "tags": ["t"]}, "k2": {"x": 2}, "k3": "plain"},
           "b": {"k1": {"y": None}},
           "c": [1, 2, 3],
           "d": 7}

_names = st.sampled_from(["a", "b", "c", "e"])
_keys = st.sampled_from(["k1", "k2", "k3", "k4"])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False),
                     st.text("xyz", max_size=3))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.sampled_from(["x", "y", "z"]), inner,
                                                                         max_size=3)), max_leaves=6)
_op = st.one_of(
    st.tuples(st.just("set"), _names, _keys, _values),
    st.tuples(st.just("del"), _names, _keys),
    st.tuples(st.just("nested"), _names, _keys, st.sampled_from(["x", "y"]), _values),
    st.tuples(st.just("coll"), _names, st.one_of(st.dictionaries(_keys, _values, max_size=3), st.lists(_scalars))),
    st.tuples(st.just("drop"), _names),
    st.tuples(st.just("move"), _names, _keys),
    st.tuples(st.just("scan"), _names, st.sampled_from(["x", "w"]), _scalars),
    st.tuples(st.just("past"), _names, _keys, _values),
    st.tuples(st.just("past_pop"), _names, _keys),
    st.tuples(st.just("fail")),
    st.tuples(st.just("raise")),
    st.tuples(st.just("nan"), _names, _keys),
)
_step = st.one_of(st.lists(_op.map(list), min_size=1, max_size=3),  # one call
                  st.just("reset"), st.just("kill"), st.just("read"))


def _run(model: dict, ops: list) -> tuple[bool, dict, dict]:
    """What a call should do, from the tool run in-process on a copy: (succeeds, the state it
    leaves (unchanged when it fails), the state it had reached when it stopped)."""
    trial = copy.deepcopy(model)
    try:
        out = run_tool_direct(EDIT, trial, {"ops": ops})
        json.dumps(trial, allow_nan=False)
    except Exception:  # noqa: BLE001 - raised, or left a non-JSON value: the runtime undoes it
        return False, model, trial
    if isinstance(out, dict) and "error" in out:
        return False, model, trial
    return True, json.loads(json.dumps(trial)), trial


def _same(env: Environment, model: dict) -> None:
    got = env.get_state()
    assert json.dumps(got) == json.dumps(model)  # values and every key order
    assert env.state_hash() == state_hash(model) == state_hash(got)


@pytest.fixture(scope="module")
def env():
    with Environment([EDIT, READ]) as e:
        yield e


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=8))
def test_the_incremental_hash_equals_hashing_the_whole_state(env, steps):
    """Random edit sequences (inserts, updates, deletes, nested changes, new and dropped collections,
    moved keys, writes past the collection's methods, failed and non-JSON calls that roll back,
    resets, a killed worker rebuilt by replay): after every step the worker's state and hash equal
    the reference (the same tool run in-process) and hashing that state from scratch."""
    env.reset(INITIAL)
    model = copy.deepcopy(INITIAL)
    _same(env, model)
    for step in steps:
        if step == "reset":
            env.reset(INITIAL)
            model = copy.deepcopy(INITIAL)
        elif step == "kill":
            env._worker.close()  # the next request starts a fresh worker and replays the calls since reset
        elif step == "read":
            fresh = Environment([READ])
            fresh.reset(model)
            for name in ("a", "b", "c"):
                assert env.call("read", {"name": name}).output == fresh.call("read", {"name": name}).output
            fresh.close()
        else:
            obs = env.call("edit", {"ops": step})
            ok, after, reached = _run(model, step)
            assert obs.ok == ok, (step, obs)
            if not ok:  # rolled back; rolled_back says whether the call had changed anything first
                assert obs.rolled_back == (json.dumps(reached) != json.dumps(model)), (step, obs)
            model = after
        _same(env, model)


def _reference_hash(state: dict) -> str:
    """Version 2 written out from its definition (autoforge.types.state_hash), piece by piece."""
    def digest(piece):
        return int.from_bytes(hashlib.blake2b(canonical_json(piece).encode(), digest_size=64).digest(), "big")

    total = 0
    for name, value in state.items():
        if isinstance(value, dict):
            total += digest(["d", {name: None}]) + sum(digest(["r", {name: {k: v}}]) for k, v in value.items())
        else:
            total += digest(["v", {name: value}])
    return "h2:" + hashlib.sha256((total % (1 << 512)).to_bytes(64, "big")).hexdigest()


@settings(max_examples=50, deadline=None)
@given(state=st.dictionaries(st.text(max_size=3), st.one_of(st.dictionaries(st.text(max_size=3), _values, max_size=4),
                                                              _values), max_size=4))
def test_the_hash_is_its_definition(state):
    assert state_hash(state) == _reference_hash(state)
    assert state_hash({1: {2: "x"}}) == _reference_hash({1: {2: "x"}})  # non-string keys, as canonical JSON has them


@settings(max_examples=200, deadline=None)
@given(a=_values, b=_values)
def test_same_json_is_equal_canonical_json(a, b):
    """The fast comparison the gold runs' state diffs use (autoforge.types.same_json) says what canonical JSON says."""
    for x, y in ((a, b), (a, a), (a, copy.deepcopy(a))):
        assert same_json(x, y) == (canonical_json(x) == canonical_json(y))
    assert not same_json({"n": 1}, {"n": True}) and not same_json([0.0], [-0.0]) and not same_json(1, 1.0)
    assert same_json({"a": 1, "b": [None, "x"]}, {"b": [None, "x"], "a": 1})


def test_equal_states_hash_equal_whatever_the_order_and_history():
    a = {"u": {"1": {"n": 1, "m": [1, 2]}, "2": {"n": 2}}, "v": 3, "w": {}}
    b = {"w": {}, "v": 3, "u": {"2": {"n": 2}, "1": {"m": [1, 2], "n": 1}}}
    assert state_hash(a) == state_hash(b) and state_hash(a).startswith(STATE_HASH_PREFIX)
    assert state_hash(a) != state_hash({**a, "w": []}) != state_hash({k: v for k, v in a.items() if k != "w"})
    assert state_hash({"u": {"1": 1}}) != state_hash({"u": {"1": 1.0}})  # canonical JSON tells 1 from 1.0
    assert state_hash({"u": {"1": {"n": 1}, "2": {"n": 2}}}) != state_hash({"u": {"1": {"n": 2}, "2": {"n": 1}}})
    with Environment([EDIT]) as env:  # built up by calls in another order, with a detour
        env.reset({"w": {}, "u": {}, "v": 3})
        assert env.call("edit", {"ops": [["set", "u", "2", {"n": 2}], ["set", "u", "9", 0]]}).ok
        assert env.call("edit", {"ops": [["set", "u", "1", {"m": [1, 2], "n": 1}], ["del", "u", "9"]]}).ok
        assert env.state_hash() == state_hash(a)


def _sent(env: Environment) -> int:
    return env._worker.bytes_sent


def test_a_resident_state_is_not_sent_again():
    big = {"orders": {f"O{i:04d}": {"order_id": f"O{i:04d}", "note": "n" * 200} for i in range(300)}}
    size = len(json.dumps(big, separators=(",", ":")))
    with Environment([EDIT]) as env:
        env.reset(big)
        before = _sent(env)
        env.call("edit", {"ops": [["set", "orders", "O0001", {"x": 1}]]})
        env.state_hash()
        during = _sent(env) - before
        for _ in range(3):
            start = _sent(env)
            env.reset(big)
            assert _sent(env) - start < 100  # the key only
            assert env.get_state() == big
        handle = ResidentState(big)
        start = _sent(env)
        env.reset(handle)
        assert _sent(env) - start < 100 and env.state_hash() == state_hash(big)
        assert during < 1000
    with Environment([EDIT]) as again:  # the next Environment on the pooled worker finds it there too
        again.reset({})
        start = _sent(again)
        again.reset(big)
        assert _sent(again) - start < 100 and again.get_state() == big
        other = {"orders": {"O1": {"note": "m" * 200}}}
        start = _sent(again)
        again.reset(other)  # a new state is sent once
        assert _sent(again) - start > 200
        assert again.get_state() == other
    assert size > 60_000


def test_a_state_the_worker_dropped_is_sent_again():
    from autoforge.envs import worker_state

    with Environment([EDIT]) as env:
        first = {"a": {"k": {"v": 0}}}
        env.reset(first)
        for i in range(1, worker_state.RESIDENT_STATES + 2):  # push it out of the worker's resident states
            env.reset({"a": {"k": {"v": i}}})
        start = _sent(env)
        env.reset(first)
        assert _sent(env) - start > len(json.dumps(first))  # the worker answered "missing"; sent whole
        assert env.get_state() == first and env.state_hash() == state_hash(first)


def test_reset_restores_exactly():
    initial = {"a": {f"k{i}": {"x": i, "l": [i]} for i in range(20)}, "b": {"k": {"y": 1}}, "c": [1], "d": "s"}
    with Environment([EDIT, READ]) as env, Environment([READ]) as fresh:
        fresh.reset(initial)
        env.reset(initial)
        edits = [["set", "a", "k3", {"x": 99}], ["set", "a", "new", 1], ["del", "a", "k0"], ["move", "a", "k5"],
                 ["nested", "a", "k7", "x", [1]], ["coll", "b", {"z": 1}], ["drop", "c"], ["coll", "e", [1]],
                 ["past", "a", "k9", 5]]
        for op in edits:
            assert env.call("edit", {"ops": [op]}).ok, op
        assert env.get_state() != initial
        env.reset(initial)
        assert json.dumps(env.get_state()) == json.dumps(initial)  # order of collections and of records too
        assert env.state_hash() == state_hash(initial)
        for name in ("a", "b", "c"):
            assert env.call("read", {"name": name}).output == fresh.call("read", {"name": name}).output
        # an episode that only updated and added records is put back record by record
        assert env.call("edit", {"ops": [["set", "a", "k4", 0], ["set", "a", "zz", 0]]}).ok
        env.reset(initial)
        assert json.dumps(env.get_state()) == json.dumps(initial)
        assert env.call("read", {"name": "a"}).output == fresh.call("read", {"name": "a"}).output


def test_a_failed_call_rolls_back_exactly_and_says_so():
    with Environment([EDIT]) as env:
        env.reset(INITIAL)
        for ops in ([["set", "a", "k1", 5], ["fail"]], [["del", "a", "k2"], ["raise"]],
                    [["set", "a", "k9", 1], ["nan", "a", "k1"]], [["coll", "z", {}], ["fail"]],
                    [["past", "a", "k1", 0], ["fail"]], [["scan", "a", "x", 9], ["fail"]]):
            obs = env.call("edit", {"ops": ops})
            assert not obs.ok and obs.rolled_back, (ops, obs)
            assert json.dumps(env.get_state()) == json.dumps(INITIAL)
            assert env.state_hash() == state_hash(INITIAL)
        obs = env.call("edit", {"ops": [["fail"]]})
        assert obs.kind == "tool_error" and not obs.rolled_back


def test_a_legacy_gold_hash_still_verifies_and_scores():
    """Tasks stored before hash version 2 carry a version-1 S*: verification and the reward compare
    with the same function the hash was made with."""
    tasks, dags = tasks_and_dags()
    task = tasks[0]
    old = legacy_state_hash(task.gold_state)
    assert not old.startswith(STATE_HASH_PREFIX) and state_hash_like(task.gold_state, old) == old
    assert state_hash_like(task.gold_state, task.gold_state_hash) == task.gold_state_hash == state_hash(task.gold_state)
    legacy = task.model_copy(update={"gold_state_hash": old})
    with Environment(make_tools()) as env:
        assert check_replay(env, task, dags[task.dag_id])[0] is None
        assert check_replay(env, legacy, dags[task.dag_id])[0] is None
        wrong = legacy.model_copy(update={"gold_state_hash": legacy_state_hash(task.initial_state)})
        assert "the task stores" in check_replay(env, wrong, dags[task.dag_id])[0]
    # the engine hands the reward a version-2 final hash; against a version-1 S* it is redone as version 1
    assert score(legacy, task.gold_state, state_hash(task.gold_state))[0] == 1.0
    assert score(legacy, task.initial_state, state_hash(task.initial_state))[0] == 0.0


OPS = tool_code("ops", '''
import copy as cp
import json

def ops(state):
    a, b = state["a"], state["b"]
    out = {"eq": a == b, "ne": a != state["c"], "eq_plain": {"k1": {"x": 1}, "k2": {"x": 2}} == a,
           "copy": a.copy(), "dict": dict(a), "spread": {**b}, "union": a | b, "json": json.dumps(a, sort_keys=True),
           "shallow": cp.copy(b), "deep": copy(a), "sorted": sorted(a.items()), "len": len(a), "in": "k1" in a,
           "values": list(b.values()), "get": a.get("k2"), "missing": a.get("nope", 0), "repr": repr(b) == repr(dict(b))}
    c = state["c"]
    c.setdefault("k9", {"x": 9})
    out["popitem"] = c.popitem()
    c.update({"k1": {"x": 10}}, k2={"x": 20})
    b |= {"k5": {"x": 5}}
    state["d"] = {**state["d"], "n": 1}
    return out
''')


def test_collections_behave_as_plain_dicts():
    """A tool sees collections whose records are decoded when read: every dict operation gives what
    it gives on the plain state, and the state ends the same."""
    start = {"a": {"k1": {"x": 1}, "k2": {"x": 2}}, "b": {"k1": {"x": 1}, "k2": {"x": 2}},
             "c": {"k1": {"x": 3}}, "d": {"m": {"x": 0}}}
    direct_state = copy.deepcopy(start)
    direct = run_tool_direct(OPS, direct_state, {})
    with Environment([OPS]) as env:
        env.reset(start)
        obs = env.call("ops")
        assert obs.ok, obs
        assert obs.output == json.loads(json.dumps(direct))
        assert json.dumps(env.get_state()) == json.dumps(direct_state)
        assert env.state_hash() == state_hash(direct_state)
