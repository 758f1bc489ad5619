"""The sandboxed Environment: observations, copy-on-reset, validation, determinism, containment."""

from __future__ import annotations

import os
import time

import jsonschema
import pytest
from mock_domain import ENV_ID, EPISODE, SOURCES, mock_env_record, mock_state, mock_tools, tool_code

from autoforge.envs import _worker_client, runtime
from autoforge.envs.runtime import Environment, Observation, run_direct, smoke_check
from autoforge.envs.validation import fast_validator
from autoforge.errors import ConfigError, SandboxError, UnsafeCodeError
from autoforge.types import state_hash


@pytest.fixture(scope="module")
def env():
    with Environment(mock_tools(), env_id=ENV_ID) as e:
        yield e


@pytest.fixture
def fresh(env):
    env.reset(mock_state())
    return env


# --------------------------------------------------------------------------- observations


def test_read_write_and_tool_error(fresh):
    obs = fresh.call("get_user_id_by_email", {"email": "ADA@example.com"})
    assert obs == Observation(ok=True, output={"user_id": "U0001"}, kind="ok")
    obs = fresh.call("cancel_order", {"order_id": "O0001", "reason": "changed my mind"})
    assert obs.ok and obs.output == {"order_id": "O0001", "status": "cancelled"}
    state = fresh.get_state()
    assert state["orders"]["O0001"]["status"] == "cancelled"
    assert state["orders"]["O0001"]["updated_at"] == "2025-01-15T10:00:00"  # the fixed clock
    again = fresh.call("cancel_order", {"order_id": "O0001", "reason": "again"})
    assert again.kind == "tool_error" and not again.ok
    assert "only pending orders can be cancelled" in again.error
    assert again.to_text() == '{"error":"order O0001 is cancelled; only pending orders can be cancelled"}'
    created = fresh.call("create_order", {"user_id": "U0002", "item": "desk", "quantity": 2, "unit_price": 99.99})
    assert created.output == {"order_id": "O0004"}
    assert fresh.get_state()["orders"]["O0004"]["ship_by"] == "2025-01-18"


def test_unknown_and_rejected_tools():
    tools = mock_tools() + [tool_code("refund", "def refund(state):\n    return 1\n", status="rejected")]
    tools[-1] = tools[-1].model_copy(update={"reason": "smoke call crashed"})
    with Environment(tools) as env:
        env.reset(mock_state())
        assert "refund" not in env.tool_names and env.rejected == {"refund": "smoke call crashed"}
        obs = env.call("refund", {})
        assert obs.kind == "unknown_tool" and "rejected at synthesis: smoke call crashed" in obs.error
        obs = env.call("delete_everything", {})
        assert obs.kind == "unknown_tool" and "get_order" in obs.error


@pytest.mark.parametrize("name,args,fragment", [
    ("get_order", {"order_id": 7}, "7 is not of type 'string' (at 'order_id')"),
    ("get_order", {}, "'order_id' is a required property"),
    ("get_order", {"order_id": "O0001", "verbose": True}, "Additional properties are not allowed"),
    ("list_orders", {"user_id": "U0001", "status": "lost"}, "'lost' is not one of"),
    ("create_order", {"user_id": "U0001", "item": "x", "quantity": 0}, "0 is less than the minimum of 1"),
    ("update_address", {"user_id": "U0001", "address": {"street": "x"}}, "'city' is a required property"),
    ("get_order", ["O0001"], "must be a JSON object"),
    # allowed by the schema (no additionalProperties: false) but not by the function signature
    ("get_user", {"user_id": "U0001", "extra": 1}, "unexpected argument(s) ['extra']"),
])
def test_invalid_arguments_never_reach_the_code(fresh, name, args, fragment):
    before = fresh.state_hash()
    obs = fresh.call(name, args)
    assert obs.kind == "invalid_arguments" and not obs.ok
    assert fragment in obs.error, obs.error
    assert fresh.state_hash() == before


def test_observation_text_for_agents():
    assert Observation(ok=True, output={"b": 1, "a": [1, 2]}).to_text() == '{"a":[1,2],"b":1}'
    assert Observation(ok=False, kind="timeout", error="timed out").to_text() == '{"error":"timed out"}'


# --------------------------------------------------------------------------- state


def test_copy_on_reset(env):
    state = mock_state()
    snapshot = mock_state()
    env.reset(state)
    env.call("cancel_order", {"order_id": "O0001", "reason": "x"})
    assert state == snapshot  # the caller's dict is untouched
    got = env.get_state()
    got["orders"].clear()  # get_state hands out a copy
    assert env.get_state()["orders"]["O0001"]["status"] == "cancelled"
    env.reset(state)
    assert env.get_state() == snapshot


def test_state_hash_matches_types_state_hash(fresh):
    assert fresh.state_hash() == state_hash(mock_state())
    fresh.call("update_address", {"user_id": "U0002", "address": {"street": "Straße 1", "city": "Zürich"}})
    assert fresh.state_hash() == state_hash(fresh.get_state())


def test_determinism_and_agreement_with_direct_execution(env):
    runs = []
    for _ in range(2):
        env.reset(mock_state())
        outputs = [env.call(name, args).model_dump() for name, args in EPISODE]
        runs.append((outputs, env.state_hash()))
    assert runs[0] == runs[1]
    direct_state = mock_state()
    direct = [run_direct(SOURCES[name], name, direct_state, args) for name, args in EPISODE]
    assert [o["output"] for o in runs[0][0]] == direct
    assert runs[0][1] == state_hash(direct_state)


def test_a_caller_that_reads_the_state_after_each_call_gets_it_with_the_call(env, monkeypatch):
    """A gold run reads the state after every call: from the second call on it comes with the call's reply
    (one round trip per call, not two), the same state a separate request gives; a caller that stops
    reading it stops receiving it."""
    sent = []
    real = _worker_client.WorkerProcess.request

    def counting(self, payload, *args, **kw):
        sent.append(payload)
        return real(self, payload, *args, **kw)

    monkeypatch.setattr(_worker_client.WorkerProcess, "request", counting)
    env.reset(mock_state())
    direct_state = mock_state()
    sent.clear()
    for name, args in EPISODE:
        env.call(name, args)
        run_direct(SOURCES[name], name, direct_state, args)
        assert env.get_state() == direct_state
    asks = [p for p in sent if p.startswith(b'["state"')]
    calls = [p for p in sent if p.startswith(b'["call"')]
    assert len(calls) == len(EPISODE) and len(asks) == 1  # only after the first call
    assert all(p.endswith(b",true]") for p in calls[1:])
    sent.clear()
    for name, args in EPISODE[:3]:  # the state is not read any more
        env.call(name, args)
    assert [p.endswith(b",true]") for p in sent] == [True, False, False]


def test_module_globals_do_not_survive_a_call():
    """Each call runs in a fresh namespace: a module-level counter is hidden state, so it never counts."""
    src = "SEEN = {'n': 0}\n\ndef count(state):\n    SEEN['n'] += 1\n    return SEEN['n']\n"
    with Environment([tool_code("count", src)]) as env:
        env.reset({})
        assert [env.call("count").output for _ in range(3)] == [1, 1, 1]
        env.reset({})
        assert env.call("count").output == 1


def test_from_records_and_accessors():
    record = mock_env_record()
    other = tool_code("get_order", SOURCES["get_order"], env_id="env_other")
    with Environment.from_records(record, mock_tools() + [other]) as env:
        assert env.env_id == ENV_ID and env.sample_state == mock_state()
        assert env.tool_names == list(SOURCES)
        assert env.tool_effects["cancel_order"] == "write" and env.tool_effects["get_order"] == "read"
        env.reset(env.sample_state)
        assert env.call("get_order", {"order_id": "O0003"}).output["item"] == "lamp"
    with pytest.raises(ConfigError, match="none of the 1 tools"):
        Environment.from_records(record, [other])


def test_misuse_is_loud():
    with Environment(mock_tools()) as env:
        with pytest.raises(SandboxError, match="reset"):
            env.call("get_order", {"order_id": "O0001"})
        with pytest.raises(ConfigError, match="not JSON-serialisable"):
            env.reset({"s": {1, 2}})
    with pytest.raises(ConfigError, match="two accepted tools"):
        Environment(mock_tools() + mock_tools()[:1])
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        Environment([tool_code("t", "def t(state):\n    return 1\n", {"type": "nonsense"})])


# --------------------------------------------------------------------------- containment

# Code that passes the static checks but must be stopped by the worker's limits.
SPIN = "def spin(state):\n    while True:\n        pass\n"
RECURSE = "def recurse(state, n=0):\n    return recurse(state, n + 1)\n"
HUGE = "def huge(state):\n    x = [0] * (20 * 1024**3)\n    return len(x)\n"
GROW = "def grow(state):\n    x = []\n    while True:\n        x.append([0] * 10000)\n"
GROW_IN_STATE = ("def grow_state(state):\n    state['junk'] = {'rows': []}\n    while True:\n"
                 "        state['junk']['rows'].append([0] * 10000)\n")
NON_JSON = "def leaves_set(state):\n    state['users']['U0001']['tags'] = {'a'}\n    return {'ok': True}\n"
RETURNS_SET = "def returns_set(state):\n    return {1, 2}\n"
RAISES = "def raises(state):\n    return state['nope']['x']\n"


@pytest.fixture(scope="module")
def hostile():
    tools = mock_tools() + [tool_code(n, s) for n, s in [
        ("spin", SPIN), ("recurse", RECURSE), ("huge", HUGE), ("grow", GROW), ("grow_state", GROW_IN_STATE),
        ("returns_set", RETURNS_SET), ("raises", RAISES)]]
    with Environment(tools, timeout_s=1.0, memory_mb=100) as env:
        yield env


@pytest.mark.parametrize("tool,kind,fragment", [
    ("spin", "timeout", "timed out after 1 s"),
    ("recurse", "crashed", "RecursionError"),
    ("huge", "memory_limit", "MemoryError"),
    ("grow", "memory_limit", "MemoryError"),
    ("grow_state", "memory_limit", "MemoryError"),
    ("returns_set", "crashed", "not JSON-serialisable"),
    ("raises", "crashed", "KeyError: 'nope' (line 2)"),
])
def test_limits_stop_code_that_passes_the_static_checks(hostile, tool, kind, fragment):
    hostile.reset(mock_state())
    hostile.call("cancel_order", {"order_id": "O0001", "reason": "before the failure"})
    started = time.monotonic()
    obs = hostile.call(tool, {})
    assert obs.kind == kind and not obs.ok and fragment in obs.error, obs
    assert time.monotonic() - started < 15
    # The calling process is alive and the environment still works, with the state as it was
    # before the failed call (a killed worker is replaced and the calls since reset replayed).
    assert hostile.call("get_order", {"order_id": "O0003"}).ok
    state = hostile.get_state()
    assert state["orders"]["O0001"]["status"] == "cancelled" and "junk" not in state
    hostile.reset(mock_state())
    assert hostile.state_hash() == state_hash(mock_state())


def test_a_starved_worker_is_not_timed_out_but_a_busy_one_is(hostile):
    """The deadline is a CPU budget: a worker that waited for a core (here: stopped for 2.5 budgets)
    finishes its call; a spinning one is stopped at its budget however busy the machine is."""
    import signal
    import threading

    hostile.reset(mock_state())
    hostile.call("get_order", {"order_id": "O0001"})  # the worker is started and warm
    pid = hostile._worker.pid
    os.kill(pid, signal.SIGSTOP)
    threading.Timer(2.5, os.kill, (pid, signal.SIGCONT)).start()
    started = time.monotonic()
    obs = hostile.call("cancel_order", {"order_id": "O0001", "reason": "after a stall"})
    assert obs.ok, obs
    assert time.monotonic() - started >= 2.4 and hostile._worker.pid == pid  # it waited; no new worker
    assert hostile.get_state()["orders"]["O0001"]["status"] == "cancelled"
    started = time.monotonic()
    obs = hostile.call("spin", {})
    assert obs.kind == "timeout" and time.monotonic() - started < 2 * _worker_client.STARVED_WALL_FACTOR


def test_closed_environments_hand_their_worker_to_the_next():
    from autoforge.envs import _worker_client

    with _worker_client._POOL_LOCK:  # start from an empty pool: earlier tests may have filled it
        idle, _worker_client._POOL[:] = list(_worker_client._POOL), []
    for w in idle:
        w.close()
    with Environment(mock_tools()) as first:
        first.reset(mock_state())
        first.call("cancel_order", {"order_id": "O0001", "reason": "x"})
        pid = first._worker.pid
    src = "def peek(state):\n    return sorted(state)\n"
    with Environment([tool_code("peek", src)]) as second:
        second.reset({"other": {}})
        assert second._worker.pid == pid  # no new process
        assert second.call("peek").output == ["other"]  # nothing of the first environment is left
        assert second.call("get_order", {"order_id": "O0001"}).kind == "unknown_tool"


def test_worker_is_replaced_after_a_kill(hostile):
    hostile.reset(mock_state())
    hostile.call("get_order", {"order_id": "O0001"})
    pid = hostile._worker.pid
    assert hostile.call("spin").kind == "timeout"
    assert hostile.call("get_order", {"order_id": "O0001"}).ok
    assert hostile._worker.pid != pid


def test_a_long_episode_is_checkpointed_so_a_kill_still_changes_nothing(hostile, monkeypatch):
    """Past MAX_REPLAY_LOG calls the state becomes the new rebuild point: a timeout after any
    number of calls leaves the state as it was."""
    monkeypatch.setattr(runtime, "MAX_REPLAY_LOG", 3)
    hostile.reset(mock_state())
    for i in range(7):
        args = {"order_id": "O0001", "reason": "long episode"} if i == 0 else {"order_id": "O0001"}
        assert hostile.call("cancel_order" if i == 0 else "get_order", args).ok
    before = hostile.state_hash()
    assert hostile.call("spin").kind == "timeout"
    assert hostile.state_hash() == before
    assert hostile.get_state()["orders"]["O0001"]["status"] == "cancelled"
    assert hostile.call("get_order", {"order_id": "O0001"}).ok


def test_state_lost_when_the_checkpoint_cannot_be_taken(hostile, monkeypatch):
    monkeypatch.setattr(runtime, "MAX_REPLAY_LOG", 3)
    hostile.reset(mock_state())
    monkeypatch.setattr(runtime.Environment, "get_state", lambda self: (_ for _ in ()).throw(SandboxError("gone")))
    for _ in range(5):
        hostile.call("get_order", {"order_id": "O0001"})
    monkeypatch.undo()
    assert hostile.call("spin").kind == "timeout"
    obs = hostile.call("get_order", {"order_id": "O0001"})
    assert obs.kind == "crashed" and "reset() first" in obs.error
    with pytest.raises(SandboxError, match="reset"):
        hostile.get_state()
    hostile.reset(mock_state())
    assert hostile.call("get_order", {"order_id": "O0001"}).ok


@pytest.mark.parametrize("source", [
    "import os\n\ndef t(state):\n    return os.listdir('/')\n",
    "def t(state):\n    return __import__('os').getcwd()\n",
    "def t(state):\n    return open('/etc/passwd').read()\n",
    "def t(state):\n    return ().__class__.__base__.__subclasses__()\n",
    "def t(state):\n    f = lambda: 1\n    return getattr(f, '__globals__')\n",
])
def test_unsafe_code_never_reaches_a_worker(source):
    tool = tool_code("t", source)
    with pytest.raises(UnsafeCodeError):  # even if it was stored as "accepted"
        Environment([tool])
    with pytest.raises(UnsafeCodeError):
        smoke_check(tool, {}, {})


def _proc(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/{name}", "rb") as f:
        return f.read().decode(errors="replace")


@pytest.mark.skipif(not os.path.exists("/proc/self/limits"), reason="needs Linux /proc")
def test_worker_process_is_locked_down(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_TEST_SECRET", "hunter2")
    with Environment(mock_tools(), timeout_s=1.0, memory_mb=128) as env:
        env.reset(mock_state())
        assert env.call("get_order", {"order_id": "O0001"}).ok
        pid = env._worker.pid
        limits = _proc(pid, "limits")
        lines = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
        assert lines["Max open files"][:2] == ["0", "0"]  # no new files or sockets
        assert lines["Max core file size"][:2] == ["0", "0"]
        assert int(lines["Max address space"][0]) < 1024 * 1024 * 1024  # interpreter + 128 MB
        assert lines["Max cpu time"][0] != "unlimited"
        environ = _proc(pid, "environ").split("\0")
        assert not any("hunter2" in v or v.startswith(("HOME=", "PATH=")) for v in environ)
        assert "PYTHONHASHSEED=0" in environ  # set iteration order is the same in every worker
        if os.getuid() == 0:
            status = _proc(pid, "status")
            uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uid_line.split()[1] == "65534"  # root is dropped to nobody
    assert any(w.pid == pid for w in _worker_client._POOL)  # closed: back in the pool, not killed


def test_cpu_rlimit_stops_a_loop_even_without_the_parent_deadline():
    """Layer 3's backstop: RLIMIT_CPU ends the worker if the parent's wall clock never fires."""
    from autoforge.envs.wire import dumps
    from autoforge.envs._worker_client import WorkerProcess

    w = WorkerProcess(memory_mb=64, timeout_s=0.2)
    try:
        w.admin(["load", {"spin": SPIN}])
        w.admin(["reset", {}])
        started = time.monotonic()
        with pytest.raises(runtime.WorkerDied) as info:
            w.request(dumps(["call", "spin", {}]), timeout_s=60)  # parent would wait a minute
        assert info.value.kind == "timeout" and "CPU-time limit" in str(info.value)
        assert time.monotonic() - started < 30
    finally:
        w.close()


def test_tool_whose_module_code_fails_to_load():
    src = "RATE = 1 // 0\n\ndef t(state):\n    return RATE\n"
    with Environment([tool_code("t", src), *mock_tools()[:1]]) as env:
        env.reset({})
        obs = env.call("t")
        assert obs.kind == "crashed" and "failed to load: ZeroDivisionError" in obs.error


# --------------------------------------------------------------------------- synthesis helpers


def test_smoke_check_passes_a_good_tool():
    tool = mock_tools()[4]  # cancel_order
    first, second = smoke_check(tool, mock_state(), {"order_id": "O0001", "reason": "x"})
    assert first.ok and first == second and first.state_hash
    assert first.state_hash != state_hash(mock_state())
    err, _ = smoke_check(tool, mock_state(), {"order_id": "O0002", "reason": "x"})
    assert err.kind == "tool_error" and err.state_hash == state_hash(mock_state())


def test_smoke_check_runs_unaccepted_code_and_reports_failures():
    bad_state = tool_code("leaves_set", NON_JSON, status="rejected")
    first, second = smoke_check(bad_state, mock_state(), {})
    assert first.kind == second.kind == "crashed" and "non-JSON" in first.error
    spin = tool_code("spin", SPIN, status="rejected")
    first, second = smoke_check(spin, {}, {}, timeout_s=0.3)
    assert first.kind == second.kind == "timeout"
    slow_load = tool_code("t", "X = sum(range(10**12))\n\ndef t(state):\n    return X\n", status="rejected")
    first, second = smoke_check(slow_load, {}, {}, timeout_s=0.3)
    assert first.kind == second.kind == "timeout"
    invalid = tool_code("get_order", SOURCES["get_order"], {"type": "object", "required": ["order_id"]})
    first, _ = smoke_check(invalid, mock_state(), {})
    assert first.kind == "invalid_arguments"


# --------------------------------------------------------------------------- fast argument validation

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}, "b": {"type": "string", "enum": ["x", "y"]},
                                      "c": {"type": "array", "items": {"type": "number"}, "maxItems": 2}},
     "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": ["string", "null"], "minLength": 2}}},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"k": {"type": "boolean"}},
                                            "required": ["k"]}}},
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "^U\\d{4}$", "format": "email"},
                                      "o": {"anyOf": [{"type": "string", "enum": ["x", "xy"]}, {"type": "null"}]},
                                      "c": {"oneOf": [{"type": "array", "minItems": 1}, {"type": "array", "maxItems": 2}]}}},
    {"type": "object", "properties": {"a": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 2},
                                      "b": {"const": "x"}, "o": {"enum": [1, None, "k"]}}},
]
INSTANCES = [{}, {"a": 1}, {"a": 1.0}, {"a": 1.5}, {"a": True}, {"a": 0}, {"a": "s"}, {"a": None}, {"a": "xy"},
             {"a": "U0001"}, {"a": "xU00012"}, {"a": 2}, {"b": "x"}, {"b": "y"}, {"o": None}, {"o": "x"}, {"o": "k"},
             {"o": 1}, {"o": 1.0}, {"o": True}, {"o": [1]}, {"c": []}, {"c": [1, 2, 3]},
             {"a": 2, "b": "x"}, {"a": 2, "b": "z"}, {"a": 2, "d": 1}, {"a": 1, "c": [1, 2.5]}, {"a": 1, "c": [1, 2, 3]},
             {"a": 1, "c": [True]}, {"o": {"k": True}}, {"o": {"k": 1}}, {"o": {}}, {"o": 3}]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_validator_agrees_with_jsonschema(schema):
    fast = fast_validator(schema)
    assert fast is not None
    full = jsonschema.Draft202012Validator(schema)
    for instance in INSTANCES:
        assert fast(instance) == full.is_valid(instance), instance


def test_fast_validator_declines_what_it_does_not_know():
    assert fast_validator({"type": "object", "properties": {"a": {"multipleOf": 2}}}) is None
    assert fast_validator({"allOf": [{"type": "string"}]}) is None
    assert fast_validator({"type": "object", "properties": {"a": {"enum": [True, 2]}}}) is None
    assert fast_validator({"type": "object", "properties": {"a": {"enum": [[1], 2]}}}) is None
    assert fast_validator({"$ref": "#/$defs/x"}) is None
