"""``autoforge mcp``: one environment served to the official MCP SDK client, over stdio and HTTP.

The warehouse holds the hand-checked mock shop (``tests/dags_mock.py``): its tool code, tool
docs with known descriptions, and its tasks; ``task_buy``'s initial state has one extra order
(O0009) so a session started from the task is told apart from one started from the sample state.
The servers are real subprocesses (``python -m autoforge.cli mcp ...``) spoken to with
``mcp.client.client.Client``: over stdio (the SDK spawns it) and over streamable HTTP on
127.0.0.1 (a free port, given as port 0).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from test_rollout_support import STATE, make_env, make_tools, tasks_and_dags

from autoforge.errors import ConfigError
from autoforge.integrations import mcp as served_mcp
from autoforge.integrations import mcp_sessions
from autoforge.types import EnvironmentRecord, ToolCode, ToolSpec, canonical_json
from autoforge.warehouse import apply_migrations, write_records

pytest.importorskip("mcp")
from mcp.client.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SLOW = ToolCode(code_id="code_slow_count", env_id="env_mock_shop", tool_id="tool_slow_count", name="slow_count",
                source="def slow_count(state, n):\n    total = 0\n    for i in range(n):\n        total += i\n"
                       "    return {'total': total}\n",
                status="accepted", effect="read", kind="llm", parameters={
                    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                output_schema={"type": "object", "properties": {"total": {"type": "integer"}}})  # n = 10**12: a timeout
TOOLS = {t.name: t for t in [*make_tools(), SLOW]}
EXTRA_ORDER = {"order_id": "O0009", "user_id": "U0002", "product_id": "P0001", "quantity": 3, "total": 60.0,
               "status": "pending", "delivery_date": "2025-04-01"}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("mcp") / "wh.duckdb")
    apply_migrations(path)
    tasks, dags = tasks_and_dags()
    start = copy.deepcopy(STATE)
    start["orders"]["O0009"] = dict(EXTRA_ORDER)
    tasks = [t.model_copy(update={"initial_state": start}) if t.task_id == "task_buy" else t for t in tasks]
    specs = [ToolSpec(tool_id=t.tool_id, toolset="mock_shop", name=t.name, description=f"Docs of {t.name}.",
                      parameters=t.parameters, output_schema=t.output_schema, effect=t.effect, doc_id="doc_mock")
             for t in TOOLS.values()]
    broken = EnvironmentRecord(env_id="env_broken", name="broken_shop", toolset_id="toolset_broken", backend="offline",
                               state_schema=make_env().state_schema, status="failed", n_tools=1, n_tools_accepted=0,
                               reason="no tool passed the checks")
    write_records(path, [make_env(), broken, *TOOLS.values(), *specs, *dags.values(), *tasks])
    return path


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "AUTOFORGE_TIMING": "0", "AUTOFORGE_TOOL_TIMEOUT": "0.5"}


def _strip_null(schema):
    """The inverse of "null allowed wherever a value is typed": the tool code's own schema back."""
    if isinstance(schema, list):
        return [_strip_null(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strip_null(v) for k, v in schema.items()}
    t = out.get("type")
    if isinstance(t, list):
        kept = [x for x in t if x != "null"]
        kept = ["number"] if kept == ["number", "integer"] else kept
        out["type"] = kept[0] if len(kept) == 1 else kept
    if isinstance(out.get("enum"), list):
        out["enum"] = [v for v in out["enum"] if v is not None]
    return out


# --------------------------------------------------------------------------- stdio


def test_stdio_lists_the_tool_code_and_calls_run_in_the_sandbox(wh):
    params = StdioServerParameters(command=sys.executable, env=_env(), cwd=str(ROOT),
                                   args=["-m", "autoforge.cli", "mcp", "--env", "mock_shop", "--warehouse", wh])

    async def main():
        async with Client(params, read_timeout_seconds=60) as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert set(listed) == set(TOOLS) | {"reset"}
            for name, tool in TOOLS.items():
                got = listed[name]
                assert got.input_schema == tool.parameters  # exactly the tool code's
                assert _strip_null(got.output_schema) == tool.output_schema  # the tool code's, nulls allowed
                assert got.description == f"Docs of {name}."  # from the tool docs
                assert got.annotations.read_only_hint is (tool.effect == "read")
            assert listed["reset"].input_schema["properties"] == {}

            r = await c.call_tool("get_order", {"order_id": "O0002"})
            assert not r.is_error and r.structured_content == STATE["orders"]["O0002"]
            assert r.content[0].text == canonical_json(STATE["orders"]["O0002"])  # what AutoForge's agents see
            r = await c.call_tool("cancel_order", {"order_id": "O0002"})
            assert not r.is_error and r.structured_content["status"] == "cancelled"
            # errors are tool errors with the message, and the server goes on
            r = await c.call_tool("cancel_order", {"order_id": "O0002"})
            assert r.is_error and r.structured_content == {"error": "only pending orders can be cancelled",
                                                           "kind": "tool_error"}
            r = await c.call_tool("cancel_order", {})
            assert r.is_error and "'order_id' is a required property" in r.content[0].text
            assert r.structured_content["kind"] == "invalid_arguments"
            r = await c.call_tool("refund_order", {"order_id": "O0002"})
            assert r.is_error and "unknown tool 'refund_order'" in r.content[0].text
            r = await c.call_tool("slow_count", {"n": 10**12})  # past AUTOFORGE_TOOL_TIMEOUT: the worker is killed
            assert r.is_error and r.structured_content["kind"] == "timeout" and "0.5 s" in r.content[0].text
            r = await c.call_tool("slow_count", {"n": 4})  # a fresh worker, the state rebuilt by replay
            assert not r.is_error and r.structured_content == {"total": 6}
            r = await c.call_tool("get_order", {"order_id": "O0009"})  # the sample state has no O0009
            assert r.is_error and r.structured_content["error"] == "no order O0009"
            r = await c.call_tool("reset", {"hard": True})
            assert r.is_error and "takes no arguments" in r.content[0].text
            r = await c.call_tool("get_order", {"order_id": "O0002"})
            assert r.structured_content["status"] == "cancelled"  # failed calls changed nothing
            r = await c.call_tool("reset", {})
            assert not r.is_error and r.structured_content["state"] == "the environment's sample state"
            r = await c.call_tool("get_order", {"order_id": "O0002"})
            assert r.structured_content["status"] == "pending"

    anyio.run(main)


# --------------------------------------------------------------------------- streamable HTTP


@pytest.fixture
def http_server(wh):
    proc = subprocess.Popen([sys.executable, "-m", "autoforge.cli", "mcp", "--env", "mock_shop", "--task", "task_buy",
                             "--warehouse", wh, "--http", "127.0.0.1:0", "--max-sessions", "2"], cwd=str(ROOT), env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, line = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "serving at" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
        found = re.search(r"serving at (http://127\.0\.0\.1:\d+/mcp)", line)
        assert found, f"the server did not start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        assert "sessions start from task task_buy" in line
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_http_sessions_start_from_the_task_and_never_see_each_others_writes(http_server):
    url = http_server
    a_cancelled, b_updated = anyio.Event(), anyio.Event()
    seen: dict[str, dict] = {}

    async def a():
        async with Client(url, read_timeout_seconds=60) as c:
            assert c.protocol_version == "2025-11-25"  # the handshake: one session, one state
            r = await c.call_tool("get_order", {"order_id": "O0009"})
            assert not r.is_error and r.structured_content == EXTRA_ORDER  # --task: the task's initial state
            assert not (await c.call_tool("cancel_order", {"order_id": "O0002"})).is_error
            a_cancelled.set()
            await b_updated.wait()
            seen["a_O0001"] = (await c.call_tool("get_order", {"order_id": "O0001"})).structured_content
            seen["a_O0002"] = (await c.call_tool("get_order", {"order_id": "O0002"})).structured_content
            r = await c.call_tool("reset", {})
            assert r.structured_content["state"] == "task task_buy"
            seen["a_O0002_reset"] = (await c.call_tool("get_order", {"order_id": "O0002"})).structured_content

    async def b():
        async with Client(url, read_timeout_seconds=60) as c:
            await a_cancelled.wait()
            seen["b_O0002"] = (await c.call_tool("get_order", {"order_id": "O0002"})).structured_content
            r = await c.call_tool("update_delivery_date", {"order_id": "O0001", "delivery_date": "2025-05-05"})
            assert not r.is_error
            assert (await c.call_tool("update_delivery_date", {"order_id": "O0001"})).is_error
            b_updated.set()

    async def main():
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(a)
                tg.start_soon(b)

    anyio.run(main)
    assert seen["a_O0002"]["status"] == "cancelled" and seen["b_O0002"]["status"] == "pending"
    assert seen["a_O0001"]["delivery_date"] == STATE["orders"]["O0001"]["delivery_date"]  # B's write is B's
    assert seen["a_O0002_reset"]["status"] == "pending"

    async def at_most_two():  # --max-sessions 2, both taken: a third client is served all the same (issue 36:
        # not 503), because an idle session gives way, one that has made no tool call before one that has
        async with Client(url, read_timeout_seconds=60) as one:
            assert not (await one.call_tool("cancel_order", {"order_id": "O0002"})).is_error  # in use, with a write
            async with Client(url, read_timeout_seconds=60) as two:
                await two.list_tools()  # no tool call: the one to give way
                t0 = time.monotonic()
                async with Client(url, read_timeout_seconds=60) as three:
                    assert not (await three.call_tool("get_order", {"order_id": "O0009"})).is_error
                    assert time.monotonic() - t0 < mcp_sessions.ADMIT_WAIT_S  # waited out two's grace (FRESH_GRACE_S) at most
                    with pytest.raises(BaseException) as ended:
                        await two.list_tools()
                    assert "Session not found" in repr(ended.value) or "404" in repr(ended.value), repr(ended.value)
                    r = await one.call_tool("get_order", {"order_id": "O0002"})  # one kept its slot and its state
                    assert not r.is_error and r.structured_content["status"] == "cancelled"
        async with Client(url, read_timeout_seconds=60) as again:  # room again once they ended
            assert not (await again.call_tool("get_order", {"order_id": "O0009"})).is_error

    anyio.run(at_most_two)

    async def modern():  # the 2026-07-28 protocol has no sessions: refused, saying what to do
        async with Client(url, mode="2026-07-28", read_timeout_seconds=60) as c:
            await c.call_tool("get_order", {"order_id": "O0002"})

    with pytest.raises(BaseException) as info:
        anyio.run(modern)
    assert "initialize handshake" in repr(info.value)


def test_each_session_has_its_own_environment_closed_when_it_ends(wh):
    served = served_mcp.load_served(wh, "mock_shop")
    box = served_mcp.EnvironmentServer(served, transport="http")

    async def main():
        async with Client(box.server, mode="legacy") as one, Client(box.server, mode="legacy") as two:
            await one.call_tool("cancel_order", {"order_id": "O0001"})
            r = await two.call_tool("get_order", {"order_id": "O0001"})
            assert r.structured_content["status"] == "pending"
            assert len(box.sessions) == 2
            assert len({id(s._env) for s in box.sessions}) == 2 and all(s._env is not None for s in box.sessions)
            kept = list(box.sessions)
        assert box.sessions == set()  # both connections closed: their environments are closed
        assert all(s._env is None for s in kept)

    anyio.run(main)
    box.close()


# --------------------------------------------------------------------------- results and errors


def test_non_object_outputs_are_wrapped_and_a_misfit_is_a_tool_error():
    from autoforge.envs.runtime import Observation

    tool = ToolCode(code_id="c", env_id="e", tool_id="t", name="list_ids", source="", status="accepted",
                    output_schema={"type": "array", "items": {"type": "string"}})
    schema, wrapped = served_mcp.output_schema(tool)
    assert wrapped and schema == {"type": "object", "required": ["result"], "properties": {
        "result": {"type": ["array", "null"], "items": {"type": ["string", "null"]}}}}
    ok = served_mcp.tool_result(Observation(ok=True, output=["a", None]), tool)
    assert not ok.is_error and ok.structured_content == {"result": ["a", None]} and json.loads(ok.content[0].text) == ["a", None]
    bad = served_mcp.tool_result(Observation(ok=True, output=[1]), tool)
    assert bad.is_error and "does not fit its output schema" in bad.content[0].text
    order = TOOLS["get_order"]
    assert served_mcp.tool_result(Observation(ok=True, output=None), order).is_error  # null where an object is promised
    timeout = served_mcp.tool_result(Observation(ok=False, kind="timeout", error="list_ids: timed out"), tool)
    assert timeout.is_error and timeout.structured_content == {"error": "list_ids: timed out", "kind": "timeout"}


def test_a_sandbox_that_cannot_start_is_a_tool_error_not_an_exception(wh, monkeypatch):
    from autoforge.envs.runtime import Environment
    from autoforge.errors import SandboxError

    def refuse(self, state):
        raise SandboxError("environment env_mock_shop: could not load the tools in a new sandbox worker")

    monkeypatch.setattr(Environment, "reset", refuse)
    sess = served_mcp.Session(served_mcp.load_served(wh, "mock_shop"))
    r = sess.call("get_order", {"order_id": "O0001"})
    assert r.is_error and r.structured_content["kind"] == "crashed"
    assert "could not load the tools" in r.content[0].text and "`reset` starts over" in r.content[0].text
    sess.close()


def test_clear_errors_for_what_cannot_be_served(wh, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"no warehouse at .*autoforge factory"):
        served_mcp.load_served(str(tmp_path / "missing.duckdb"), "mock_shop")
    empty = str(tmp_path / "empty.duckdb")
    apply_migrations(empty)
    with pytest.raises(ConfigError, match=r"no environments yet: fill it with `autoforge factory`"):
        served_mcp.load_served(empty, "mock_shop")
    with pytest.raises(ConfigError, match=r"no environment named 'shop'.*usable environments: mock_shop"):
        served_mcp.load_served(wh, "shop")
    with pytest.raises(ConfigError, match=r"'broken_shop' failed synthesis \(no tool passed the checks\)"):
        served_mcp.load_served(wh, "broken_shop")
    with pytest.raises(ConfigError, match=r"no task 'task_nope'.*task_buy, task_cancel, task_reschedule"):
        served_mcp.load_served(wh, "mock_shop", "task_nope")
    assert served_mcp.load_served(wh, "env_mock_shop", "task_buy").initial_state["orders"]["O0009"] == EXTRA_ORDER
    for bad in ("8765", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(ConfigError, match="HOST:PORT"):
            served_mcp.parse_host_port(bad)
    assert served_mcp.parse_host_port("[::1]:0") == ("::1", 0)

    from autoforge.cli import main

    assert main(["mcp", "--env", "shop", "--warehouse", wh]) == 2
    assert "error: no environment named 'shop'" in capsys.readouterr().err
