"""``autoforge mcp --http`` is safe to serve (issue 36): who may talk to it, and that no client can
hoard its sessions.

- Beyond loopback a bearer token is required: without one the command refuses to start (exit 2,
  before the warehouse is opened); with one, a request without it (or with another) gets 401.
- Every binding checks ``Host`` (421) and ``Origin`` (403) against the names it answers to: a
  DNS-rebinding page is refused on a loopback alias (127.0.0.2) and a wildcard (0.0.0.0) too.
- Sessions: handshakes that never call a tool cannot lock out other clients; unused sessions
  expire; 200 clients at once are all served (the slow test prints p50/p99).

The servers are real subprocesses (``python -m autoforge.cli mcp ...``) on free ports of
127.0.0.1 / 127.0.0.2 / 0.0.0.0 (connected to through 127.0.0.1), stopped after each test;
requests are raw JSON-RPC over ``httpx`` (every header under the test's control), a client
address other than 127.0.0.1 comes from binding the client socket to 127.0.0.N.
:class:`Admission`'s rules are also checked on their own with a hand-moved clock.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from test_rollout_support import STATE, make_env, make_tools, tasks_and_dags

from autoforge.errors import ConfigError
from autoforge.warehouse import apply_migrations, write_records

pytest.importorskip("mcp")
from autoforge.integrations import mcp_access, mcp_sessions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "t0ken-for-the-tests-0123456789abcdef"
PROTOCOL = "2025-11-25"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get_order", "arguments": {"order_id": "O0002"}}}
BASE = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("safe_mcp") / "wh.duckdb")
    apply_migrations(path)
    tasks, dags = tasks_and_dags()
    write_records(path, [make_env(), *make_tools(), *dags.values(), *tasks])
    return path


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOFORGE_MCP_")}
    return {**env, "PYTHONPATH": str(ROOT), "AUTOFORGE_TIMING": "0", **extra}


def _mcp(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autoforge.cli", "mcp", "--env", "mock_shop", *args], cwd=str(ROOT),
                          env=env or _env(), capture_output=True, text=True, timeout=timeout)


class Server:
    """One ``autoforge mcp --http`` subprocess: its URL, the port, and the line it announced."""

    def __init__(self, wh: str, bind: str, *args: str, env: dict | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "autoforge.cli", "mcp", "--env", "mock_shop", "--warehouse",
                                      wh, "--http", f"{bind}:0", *args], cwd=str(ROOT), env=env or _env(),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline, line = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "serving at" not in line:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
        found = re.search(r"serving at http://(\S+):(\d+)/mcp", line)
        if not found:
            self.stop()
            raise AssertionError(f"the server did not start: {line!r}")
        self.line, self.port = line, int(found.group(2))
        self.host = "127.0.0.1" if found.group(1) == "0.0.0.0" else found.group(1)
        self.url = f"http://{self.host}:{self.port}/mcp"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serve(wh):
    started: list[Server] = []

    def start(bind: str, *args: str, env: dict | None = None) -> Server:
        started.append(Server(wh, bind, *args, env=env))
        return started[-1]

    yield start
    for s in started:
        s.stop()


def _post(url: str, body: dict, **headers: str) -> httpx.Response:
    with httpx.Client(timeout=30) as c:
        return c.post(url, json=body, headers={**BASE, **headers})


def _auth(token: str = TOKEN) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def _session(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> dict:
    """One client's whole session in raw JSON-RPC: initialize, initialized, one tools/call, DELETE."""
    r = await client.post(url, json=INIT, headers={**BASE, **headers})
    if r.status_code != 200:
        return {"error": f"initialize: HTTP {r.status_code} {r.text[:200]}"}
    h = {**BASE, **headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
    await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h)
    r = await client.post(url, json=CALL, headers=h)
    body = r.json() if r.status_code == 200 else {}
    if r.status_code != 200 or body.get("result", {}).get("isError") is not False:
        return {"error": f"tools/call: HTTP {r.status_code} {r.text[:200]}"}
    await client.delete(url, headers=h)
    return {"order": body["result"]["structuredContent"]}


def _client(source: str | None = None) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=source) if source else None
    return httpx.AsyncClient(transport=transport, timeout=300)  # the SDK client waits as long


# --------------------------------------------------------------------------- a token beyond loopback


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
def test_a_wildcard_bind_without_a_token_refuses_to_start(bind, tmp_path):
    missing = str(tmp_path / "never.duckdb")  # refused before the warehouse is looked at
    done = _mcp("--warehouse", missing, "--http", f"{'[::]' if bind == '::' else bind}:0", timeout=60)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("error: ") and "refusing to serve beyond this machine" in line
    assert "--token-file" in line and "AUTOFORGE_MCP_TOKEN" in line and "bind 127.0.0.1" in line
    assert not Path(missing).exists()


def test_bad_tokens_and_misplaced_flags_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from autoforge.cli import main

    missing = str(tmp_path / "never.duckdb")
    cases = [
        (["--http", "0.0.0.0:0", "--token", "short"], {}, "--token: the token is shorter than 16 characters"),
        (["--http", "0.0.0.0:0", "--token-file", str(tmp_path / "nope")], {}, "cannot read it"),
        (["--http", "0.0.0.0:0", "--token", TOKEN, "--token-file", "x"], {}, "not both"),
        (["--http", "0.0.0.0:0"], {"AUTOFORGE_MCP_TOKEN": "has a space in it, see"}, "AUTOFORGE_MCP_TOKEN must be"),
        (["--token", TOKEN], {}, "apply to --http only"),
        (["--http", "127.0.0.1:0", "--allow-host", "bad name"], {}, "--allow-host 'bad name'"),
        (["--http", "127.0.0.1:0"], {"AUTOFORGE_MCP_ALLOW_HOSTS": "ok.example,-x"}, "AUTOFORGE_MCP_ALLOW_HOSTS"),
    ]
    for args, extra, says in cases:
        for name in ("AUTOFORGE_MCP_TOKEN", "AUTOFORGE_MCP_ALLOW_HOSTS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in extra.items():
            monkeypatch.setenv(name, value)
        assert main(["mcp", "--env", "mock_shop", "--warehouse", missing, *args]) == 2, args
        line = capsys.readouterr().err.strip()
        assert "\n" not in line and line.startswith("error: ") and says in line, (args, line)
        assert "has a space" not in line and TOKEN not in line  # a token is never echoed
    assert not Path(missing).exists()


def test_with_a_token_requests_without_it_get_401(serve, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = serve("127.0.0.1", "--token-file", str(token_file))
    assert "bearer token required" in server.line and TOKEN not in server.line
    for headers in ({}, _auth("x" * len(TOKEN)), _auth(TOKEN + "x"), {"authorization": TOKEN},
                    {"authorization": f"Basic {TOKEN}"}):
        r = _post(server.url, INIT, **headers)
        assert r.status_code == 401 and "mcp-session-id" not in r.headers, headers
        assert r.headers["www-authenticate"].startswith("Bearer") and "bearer token" in r.json()["error"]["message"]
    r = _post(server.url, INIT, **_auth())
    assert r.status_code == 200 and r.headers["mcp-session-id"]

    async def served():  # the official SDK client, given the header, is served end to end
        from mcp.client.client import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=_auth()) as http:
            async with Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=60) as c:
                r = await c.call_tool("get_order", {"order_id": "O0002"})
                assert not r.is_error and r.structured_content == STATE["orders"]["O0002"]

    anyio.run(served)


def test_a_wildcard_bind_with_a_token_checks_the_token_and_the_host(serve):
    server = serve("0.0.0.0", "--allow-host", "mcp.example.org", env=_env(AUTOFORGE_MCP_TOKEN=TOKEN))
    assert "plain HTTP carries the token in the clear" in server.line
    assert _post(server.url, INIT).status_code == 401
    assert _post(server.url, INIT, host="evil.example", **_auth()).status_code == 421  # DNS rebinding
    assert _post(server.url, INIT, origin="http://evil.example", **_auth()).status_code == 403
    assert _post(server.url, INIT, host=f"mcp.example.org:{server.port}", **_auth()).status_code == 200  # --allow-host
    assert _post(server.url, INIT, **_auth()).status_code == 200  # Host: 127.0.0.1:PORT, one of the machine's


# --------------------------------------------------------------------------- Host and Origin on every binding


def test_a_loopback_alias_refuses_foreign_hosts_and_origins(serve):
    server = serve("127.0.0.2")
    assert "no token (loopback only)" in server.line
    port = server.port
    refused = [({"host": "evil.example"}, 421), ({"host": f"evil.example:{port}"}, 421), ({"host": ""}, 421),
               ({"host": "127.0.0.2.evil.example"}, 421), ({"host": f"[::2]:{port}"}, 421),
               ({"origin": "http://evil.example"}, 403), ({"origin": f"http://evil.example:{port}"}, 403),
               ({"origin": "null"}, 403), ({"origin": "file://"}, 403)]
    for headers, status in refused:
        r = _post(server.url, INIT, **headers)
        assert r.status_code == status and "mcp-session-id" not in r.headers, (headers, r.status_code, r.text)
        assert r.json()["error"]["message"]  # says why
    for headers in ({}, {"host": f"localhost:{port}"}, {"host": "127.0.0.1"}, {"host": f"[::1]:{port}"},
                    {"origin": f"http://127.0.0.2:{port}"}, {"origin": "http://localhost:3000"}):
        assert _post(server.url, INIT, **headers).status_code == 200, headers


# --------------------------------------------------------------------------- sessions cannot be hoarded


@pytest.mark.slow  # ~20 s on 2 cores: 200 handshakes, then the unused timeout runs out
def test_idle_handshakes_do_not_lock_out_other_clients(serve):
    server = serve("127.0.0.1", "--unused-timeout", "3")  # --max-sessions 64 (the default)

    async def main():
        async with _client("127.0.0.3") as hoarder:  # 200 bare initialize requests at once from one address
            answers = await _gather([hoarder.post(server.url, json=INIT, headers=BASE) for _ in range(200)])
        hoarded = [r.headers["mcp-session-id"] for r in answers if r.status_code == 200]
        t0 = time.monotonic()
        async with _client() as other:  # another address: served
            other_got = await _session(other, server.url, {})
        async with _client("127.0.0.3") as same:  # the hoarder's own address: served too
            same_got = await _session(same, server.url, {})
        waited = time.monotonic() - t0
        async with _client() as c:
            r = await c.post(server.url, json=INIT, headers=BASE)  # a session that never calls a tool
            unused = r.headers["mcp-session-id"]
            await anyio.sleep(4.5)  # --unused-timeout 3 (+ the reaper's 0.75 s step): it has ended, and every hoarded one
            gone = []
            for sid in [unused, *hoarded]:
                h = {**BASE, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL}
                gone.append((await c.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                                          headers=h)).status_code)
        return [r.status_code for r in answers], other_got, same_got, waited, gone

    statuses, other_got, same_got, waited, gone = anyio.run(main)
    print(f"\n200 idle handshakes: {statuses.count(200)} answered 200, {statuses.count(503)} 503; the next two clients "
          f"were served within {waited:.2f} s")
    assert "order" in other_got and "order" in same_got, (other_got, same_got)
    assert waited < mcp_sessions.ADMIT_WAIT_S
    assert statuses.count(200) == 200  # the hoarder's own handshakes pushed out its older ones, none got 503
    assert set(gone) == {404}


async def _gather(coros: list) -> list:
    out: list = [None] * len(coros)

    async def one(i, coro):
        out[i] = await coro

    async with anyio.create_task_group() as tg:
        for i, coro in enumerate(coros):
            tg.start_soon(one, i, coro)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("addresses", [1, 50])
def test_two_hundred_clients_at_once_are_all_served(serve, addresses):
    server = serve("127.0.0.1")  # the defaults: --max-sessions 64, a share of 16 per address when full
    latencies: list[float] = []
    errors: list[str] = []

    async def one(i: int) -> None:
        async with _client(f"127.0.0.{1 + i % addresses}") as c:
            t0 = time.perf_counter()
            got = await _session(c, server.url, {})
            latencies.append(time.perf_counter() - t0)
            if "error" in got:
                errors.append(got["error"])

    async def main():
        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one, i)

    t0 = time.perf_counter()
    anyio.run(main)
    wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100)
    print(f"\n200 clients at once from {addresses} address(es), each initialize + tools/call + DELETE: {len(errors)} "
          f"errors, p50 {q[49] * 1000:.0f} ms, p99 {q[98] * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms, "
          f"all done in {wall:.1f} s")
    assert errors == [] and len(latencies) == 200, errors[:3]
    assert max(latencies) < 300  # sanity only: the timings are printed, not judged


# --------------------------------------------------------------------------- the admission rules on their own


def test_admission_rules_with_a_hand_moved_clock():
    a = mcp_sessions.Admission(max_sessions=4, per_client=2, unused_s=30, grace_s=1)
    assert a.per_client == 2 and mcp_sessions.Admission(64).per_client == 16 and mcp_sessions.Admission(2).per_client == 2
    for i in range(4):  # a free slot goes to whoever asks, share or not
        assert a.room("A", 0.0) == []
        a.open(f"a{i}", "A", 0.0).in_flight = 0
    assert a.room("B", 0.5) is None  # full, and every session is in its first second
    a.slots["a0"].tool_calls = 1
    assert a.room("B", 2.0) == ["a1"]  # the oldest unused idle one gives way (a0 has made a call)
    a.slots["a1"].in_flight = 1
    assert a.room("B", 2.0) == ["a2"]  # one serving a request never does
    for sid in ("a1", "a2", "a3"):
        a.slots[sid].tool_calls = 1
    assert a.room("B", 10.0) is None  # used sessions keep their slot until idle for unused_s
    assert a.room("B", 31.0) == ["a0"]  # a0 has been idle longest (a1 is busy)
    for gone, (sid, client) in zip(("a3", "a2", "a1"), (("b0", "B"), ("b1", "B"), ("c0", "C"))):
        a.discard(gone)
        a.open(sid, client, 31.0).in_flight = 0
    assert len(a.slots) == 4 and a.at_share("B") and not a.at_share("A")  # B holds its share (2)
    assert a.room("B", 33.0) == ["b0"]  # B at its share can only push out its own
    a.slots["b0"].in_flight = a.slots["b1"].in_flight = 1
    assert a.room("B", 33.0) is None  # ... and waits when they are busy
    assert a.room("D", 33.0) == ["c0"]  # unused before used, whoever holds it
    assert sorted(a.expired(33.0)) == [] and a.expired(61.0) == ["c0"]  # unused, idle for unused_s
    assert mcp_sessions.client_key("2001:db8::1") == mcp_sessions.client_key("2001:db8::2") == "2001:db8::/64"
    assert mcp_sessions.client_key("::ffff:10.0.0.1") == "10.0.0.1" and mcp_sessions.client_key("::1") == "::1"


def test_access_allow_lists():
    loop = mcp_access.http_access("127.0.0.2")
    assert loop.loopback and loop.hosts == {"127.0.0.2", "127.0.0.1", "localhost", "::1"}
    assert mcp_access.http_access("localhost").loopback
    with pytest.raises(ConfigError, match="without a bearer token"):
        mcp_access.http_access("0.0.0.0")
    wild = mcp_access.http_access("0.0.0.0", token=TOKEN, allow_hosts=["Proxy.Example.ORG."])
    assert {"proxy.example.org", "localhost", "127.0.0.1"} <= wild.hosts and not wild.loopback
    assert TOKEN not in repr(wild)
    assert mcp_access.host_of_header("[::1]:80") == "::1" and mcp_access.host_of_header("a.b:1") == "a.b"
    for bad in ("a.b:x", "[::1", "[::1]x", "a b", "::1:80"):
        assert mcp_access.host_of_header(bad) is None, bad
    assert wild.refusal(f"127.0.0.1:1", None, f"bearer {TOKEN}") is None  # the scheme is case-insensitive
