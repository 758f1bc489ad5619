"""Tool calls per second through the sandboxed Environment vs calling the same functions directly.

The paper's premise (arXiv 2512.22857) is that environment execution is nearly free next to
the LLM; this prints how close the sandbox (separate worker process, JSON-Schema validation,
time/memory limits) stays to plain in-process calls.

    python benchmarks/env_throughput.py                      # the mock users/orders domain
    python benchmarks/env_throughput.py --warehouse autoforge.duckdb [--env NAME]
    python benchmarks/env_throughput.py --scale 50           # every collection 50x as many records

Everything runs on one core (``--cpu``, the worker inherits the affinity) unless ``--no-pin``.
Each episode resets to the initial state, then makes its calls (reads and writes mixed); the
direct baseline copies the state the same way (JSON round trip) and calls the compiled
functions with no validation and no limits. A third line adds only the argument validation
to the direct calls, to show where the overhead goes.

Calls are all or nothing, so after each call the worker encodes the state to check it is JSON
and to commit it (and rebuilds it when it changed): that part of a call's cost grows with the
size of the state, which ``--scale`` shows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from autoforge.envs.wire import dumps, loads  # noqa: E402
from autoforge.envs.runtime import Environment  # noqa: E402
from autoforge.envs.runtime import direct_function, tool_function  # noqa: E402
from autoforge.envs.validation import ArgValidator  # noqa: E402
from autoforge.types import EnvironmentRecord, ToolCode  # noqa: E402

Workload = tuple[str, list[ToolCode], dict, list[tuple[str, dict]]]  # name, tools, state, episode


def mock_workload() -> list[Workload]:
    from mock_domain import EPISODE, mock_state, mock_tools

    return [("mock_shop", mock_tools(), mock_state(), EPISODE)]


# --------------------------------------------------------------------------- warehouse environments


_PY = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def _example(name: str, schema: dict, state: dict):
    """An argument value for one parameter: an existing id or field value of the right type."""
    if "enum" in schema:
        return schema["enum"][0]
    t = schema.get("type")
    t = t[0] if isinstance(t, list) else t
    fits = _PY.get(t, object)
    for records in state.values():
        if not isinstance(records, dict):
            continue
        for rid, rec in records.items():
            if not isinstance(rec, dict):
                continue
            v = rec.get(name)
            if name in rec and isinstance(v, fits) and isinstance(v, bool) == (t == "boolean"):
                return rec[name]
    return {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(t, "x")


def _arguments(tool: ToolCode, state: dict) -> dict:
    props = tool.parameters.get("properties", {})
    return {p: _example(p, s if isinstance(s, dict) else {}, state) for p, s in props.items()
            if p in tool.parameters.get("required", props)}


def warehouse_workloads(path: str, only: str | None) -> list[Workload]:
    from autoforge.pipeline.corpus import accepted_tools, records

    envs = records(path, EnvironmentRecord, order_by="name")
    codes = accepted_tools(path)
    out = []
    for env in envs:
        if only and env.name != only:
            continue
        tools = [t for t in codes if t.env_id == env.env_id]
        episode = []
        for t in sorted(tools, key=lambda t: (t.effect != "read", t.name)):  # reads first, then writes
            args = _arguments(t, env.sample_state)
            if ArgValidator(t).problem(args) is not None:
                continue
            try:  # keep calls the direct baseline can make (a raising call would end it)
                _direct(t)(loads(dumps(env.sample_state)), args)
            except Exception:  # noqa: BLE001
                continue
            episode.append((t.name, args))
        if episode:
            out.append((env.name, tools, env.sample_state, episode))
    return out


def scaled(state: dict, factor: int) -> dict:
    """``state`` with every collection of records ``factor`` times as large (copies under ``<id>_<k>``)."""
    if factor <= 1:
        return state
    out = {}
    for name, records in state.items():
        if isinstance(records, dict) and all(isinstance(r, dict) for r in records.values()):
            grown = dict(records)
            for k in range(1, factor):
                grown.update({f"{rid}_{k}": loads(dumps(rec)) for rid, rec in records.items()})
            out[name] = grown
        else:
            out[name] = records
    return out


# --------------------------------------------------------------------------- measurement


def _direct(tool):
    """The tool's function called in-process, public argument names mapped to Python ones (no sandbox)."""
    fn, amap = direct_function(tool.source, tool_function(tool)), dict(tool.arg_map or {})
    if not amap:
        return lambda state, args: fn(state, **args)
    return lambda state, args: fn(state, **{amap.get(k, k): v for k, v in args.items()})


def bench_sandbox(tools, state, episode, seconds: float) -> tuple[int, float]:
    with Environment(tools, timeout_s=10.0) as env:
        env.reset(state)
        for name, args in episode:  # warm up
            env.call(name, args)
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.reset(state)
            for name, args in episode:
                env.call(name, args)
            calls += len(episode)
        return calls, time.perf_counter() - start


def bench_direct(tools, state, episode, seconds: float, validate: bool) -> tuple[int, float]:
    by_name = {t.name: t for t in tools}
    fns = {name: _direct(by_name[name]) for name, _ in episode}
    validators = {name: ArgValidator(by_name[name]) for name, _ in episode}
    frame = dumps(state)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        s = loads(frame)
        for name, args in episode:
            if validate and validators[name].problem(args) is not None:
                raise AssertionError(name)
            fns[name](s, args)
        calls += len(episode)
    return calls, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouse", help="DuckDB warehouse with synthesized environments (default: mock domain)")
    ap.add_argument("--env", help="only this environment name")
    ap.add_argument("--seconds", type=float, default=3.0, help="measuring time per configuration")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to (the worker inherits it)")
    ap.add_argument("--no-pin", action="store_true", help="do not pin to one core")
    ap.add_argument("--scale", type=int, default=1, help="make every collection of the state this many times larger")
    a = ap.parse_args()
    if not a.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {a.cpu})
    workloads = warehouse_workloads(a.warehouse, a.env) if a.warehouse else mock_workload()
    workloads = [(name, tools, scaled(state, a.scale), episode) for name, tools, state, episode in workloads]
    if not workloads:
        sys.exit("no environment with accepted, callable tools found")
    where = "one core" if not a.no_pin else "unpinned"
    if a.scale > 1:
        where += f", state x{a.scale}: {len(dumps(workloads[0][2])):,} bytes"
    print(f"{'environment':<24}{'tools':>6}{'calls/ep':>9}{'sandbox c/s':>13}{'direct c/s':>12}"
          f"{'direct+val c/s':>16}{'overhead':>10}{'us/call':>9}   ({where})")
    totals = [0, 0.0, 0, 0.0]
    for name, tools, state, episode in workloads:
        sc, st = bench_sandbox(tools, state, episode, a.seconds)
        dc, dt = bench_direct(tools, state, episode, a.seconds, validate=False)
        vc, vt = bench_direct(tools, state, episode, a.seconds / 2, validate=True)
        s_rate, d_rate, v_rate = sc / st, dc / dt, vc / vt
        totals = [totals[0] + sc, totals[1] + st, totals[2] + dc, totals[3] + dt]
        print(f"{name:<24}{len(tools):>6}{len(episode):>9}{s_rate:>13,.0f}{d_rate:>12,.0f}{v_rate:>16,.0f}"
              f"{d_rate / s_rate:>9.1f}x{1e6 / s_rate:>9.1f}")
    if len(workloads) > 1:
        s_rate, d_rate = totals[0] / totals[1], totals[2] / totals[3]
        print(f"{'all':<24}{'':>6}{'':>9}{s_rate:>13,.0f}{d_rate:>12,.0f}{'':>16}{d_rate / s_rate:>9.1f}x"
              f"{1e6 / s_rate:>9.1f}")
    print("(calls/s include one reset per episode; overhead = direct / sandbox)")
    name, tools, state, episode = workloads[0]
    cold, warm = open_cost(tools, state)
    print(f"open + first reset of an Environment ({name}): {cold * 1e3:.1f} ms with a new worker process, "
          f"{warm * 1e3:.2f} ms with a pooled one")


def open_cost(tools, state) -> tuple[float, float]:
    from autoforge.envs import _worker_client

    for w in list(_worker_client._POOL):  # make the first open start a process
        w.close()
    _worker_client._POOL.clear()
    times = []
    for _ in range(2):
        start = time.perf_counter()
        with Environment(tools, timeout_s=10.0) as env:
            env.reset(state)
            times.append(time.perf_counter() - start)
    return times[0], times[1]


if __name__ == "__main__":
    main()
