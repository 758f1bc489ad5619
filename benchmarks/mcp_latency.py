"""MCP round trip per tool call: client -> `autoforge mcp` -> sandbox worker -> back, over stdio and HTTP.

    python benchmarks/mcp_latency.py                                   # the mock shop (tests/dags_mock.py)
    python benchmarks/mcp_latency.py --warehouse wh.duckdb --env retail --calls 500

The server is the real command (``python -m autoforge.cli mcp ...``) in its own process, spoken
to with the official SDK client (``mcp.client.client.Client``): over stdio (the SDK spawns it;
the 2026-07-28 protocol) and over streamable HTTP on 127.0.0.1 (the handshake protocol, one
session). Three calls are timed, each ``--calls`` times after ``--warmup`` untimed ones:

- ``read``: a read tool (the mock shop's ``get_order``; with ``--env``, the first read tool that
  succeeds on the sample state with its smoke-call arguments);
- ``write``: a write tool the same way (``update_delivery_date``), state changes included;
- ``reset``: the session's state back to its start.

Printed: median and p95 per call in milliseconds; ``http raw read``: the same read as JSON-RPC
over one kept-alive ``http.client`` connection (the server's share, without the SDK client's);
and, as the floor, the read called on :class:`autoforge.envs.runtime.Environment` directly in
this process (the sandbox round trip alone).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mock_warehouse(folder: str) -> tuple[str, str, dict, dict]:
    """The mock shop in a fresh warehouse: (path, env name, read call, write call)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_rollout_support import make_env, make_tools, tasks_and_dags

    from autoforge.pipeline.admin import init_warehouse, store_records

    path = str(Path(folder) / "mcp_bench.duckdb")
    init_warehouse(path)
    tasks, dags = tasks_and_dags()
    store_records(path, [make_env(), *make_tools(), *dags.values(), *tasks])
    return (path, "mock_shop", {"name": "get_order", "arguments": {"order_id": "O0002"}},
            {"name": "update_delivery_date", "arguments": {"order_id": "O0001", "delivery_date": "2025-06-01"}})


def calls_of(warehouse: str, env: str) -> tuple[dict, dict | None]:
    """A read and a write call of ``env`` that succeed on its sample state (smoke-call arguments)."""
    from autoforge.envs.runtime import Environment
    from autoforge.envs.sample import sample_arguments
    from autoforge.integrations.mcp import load_served

    served = load_served(warehouse, env)
    found: dict[str, dict] = {}
    with Environment.from_records(served.env, served.tools) as e:
        for tool in served.tools:
            kind = "read" if tool.effect == "read" else "write"
            if kind in found:
                continue
            args = sample_arguments(tool.parameters, served.initial_state, served.env.state_schema, tool.collection)
            e.reset(served.initial_state)
            if e.call(tool.name, args).ok:
                found[kind] = {"name": tool.name, "arguments": args}
    if "read" not in found:
        raise SystemExit(f"no read tool of {env} succeeds on its sample state with smoke-call arguments")
    return found["read"], found.get("write")


def server_args(warehouse: str, env: str) -> list[str]:
    return ["-m", "autoforge.cli", "mcp", "--env", env, "--warehouse", warehouse]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "AUTOFORGE_TIMING": "0"}


async def time_calls(client, calls: dict[str, dict | None], n: int, warmup: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for label, call in calls.items():
        if call is None:
            continue
        for _ in range(warmup):
            await client.call_tool(call["name"], call["arguments"])
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = await client.call_tool(call["name"], call["arguments"])
            times.append(time.perf_counter() - t0)
            if r.is_error:
                raise SystemExit(f"{label} call {call['name']} failed: {r.content[0].text}")
        out[label] = times
    return out


def over_stdio(warehouse: str, env: str, calls: dict, n: int, warmup: int) -> dict[str, list[float]]:
    import anyio
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=server_args(warehouse, env), env=_env(), cwd=str(ROOT))

    async def main():
        async with Client(params, read_timeout_seconds=60) as c:
            return c.protocol_version, await time_calls(c, calls, n, warmup)

    version, out = anyio.run(main)
    print(f"  stdio: protocol {version}")
    return out


def over_http(warehouse: str, env: str, calls: dict, n: int, warmup: int) -> dict[str, list[float]]:
    import anyio
    from mcp.client.client import Client

    proc = subprocess.Popen([sys.executable, *server_args(warehouse, env), "--http", "127.0.0.1:0"], cwd=str(ROOT),
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving at" not in line:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                raise SystemExit(f"the HTTP server did not start: {proc.stderr.read()}")
        url = re.search(r"(http://\S+/mcp)", line).group(1)

        async def main():
            async with Client(url, read_timeout_seconds=60) as c:
                return c.protocol_version, await time_calls(c, calls, n, warmup)

        version, out = anyio.run(main)
        out["raw read"] = raw_http(url, calls["read"], n, warmup)
        print(f"  http:  {url}, protocol {version}")
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class _RawHTTP:
    """JSON-RPC over one kept-alive ``http.client`` connection: the server's share without the SDK client."""

    HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    def __init__(self, url: str):
        import http.client
        import urllib.parse

        u = urllib.parse.urlparse(url)
        self.path, self.conn, self.headers, self.id = u.path, http.client.HTTPConnection(u.hostname, u.port), {}, 0
        version = "2025-11-25"
        r = self.send("initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "raw", "version": "0"}})
        self.headers = {"mcp-session-id": r.getheader("mcp-session-id"), "mcp-protocol-version": version}
        self.send("notifications/initialized", None)

    def send(self, method: str, params: dict | None):
        import json

        msg = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        if not method.startswith("notifications/"):
            self.id += 1
            msg["id"] = self.id
        self.conn.request("POST", self.path, body=json.dumps(msg).encode(), headers={**self.HEADERS, **self.headers})
        r = self.conn.getresponse()
        r.body = r.read()
        return r


def raw_http(url: str, call: dict, n: int, warmup: int) -> list[float]:
    raw = _RawHTTP(url)
    params = {"name": call["name"], "arguments": call["arguments"]}
    for _ in range(warmup):
        raw.send("tools/call", params)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = raw.send("tools/call", params)
        times.append(time.perf_counter() - t0)
        if r.status != 200 or b'"isError":true' in r.body:
            raise SystemExit(f"raw tools/call failed: {r.status} {r.body[:300]!r}")
    return times


def direct(warehouse: str, env: str, call: dict, n: int, warmup: int) -> list[float]:
    from autoforge.envs.runtime import Environment
    from autoforge.integrations.mcp import load_served

    served = load_served(warehouse, env)
    with Environment.from_records(served.env, served.tools) as e:
        e.reset(served.initial_state)
        for _ in range(warmup):
            e.call(call["name"], call["arguments"])
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            e.call(call["name"], call["arguments"])
            times.append(time.perf_counter() - t0)
    return times


def _ms(times: list[float]) -> str:
    q = statistics.quantiles(times, n=20)  # q[18] = p95
    return f"median {statistics.median(times) * 1e3:6.2f} ms   p95 {q[18] * 1e3:6.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warehouse", help="a filled warehouse (default: the mock shop in a temporary one)")
    ap.add_argument("--env", help="the environment to serve (with --warehouse)")
    ap.add_argument("--calls", type=int, default=300, help="timed calls per kind and transport (default 300)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if a.warehouse:
            if not a.env:
                raise SystemExit("--warehouse needs --env NAME")
            warehouse, env = a.warehouse, a.env
            read, write = calls_of(warehouse, env)
        else:
            warehouse, env, read, write = mock_warehouse(tmp)
        calls = {"read": read, "write": write, "reset": {"name": "reset", "arguments": {}}}
        print(f"MCP round trip per call, environment {env}: {a.calls} calls each after {a.warmup} warm-up "
              f"(read: {read['name']}, write: {write['name'] if write else '-'}), {os.cpu_count()} CPUs")
        results = {"stdio": over_stdio(warehouse, env, calls, a.calls, a.warmup),
                   "http": over_http(warehouse, env, calls, a.calls, a.warmup)}
        floor = direct(warehouse, env, read, a.calls, a.warmup)
    for transport, by_kind in results.items():
        for kind, times in by_kind.items():
            print(f"{transport:6s} {kind:8s} {_ms(times)}")
    print(f"direct read     {_ms(floor)}   (Environment.call in-process: the sandbox round trip alone)")


if __name__ == "__main__":
    main()
