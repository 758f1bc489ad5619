"""Episode overhead against the size of the state: reset + a few tool calls + the final-state hash.

    python benchmarks/episode_overhead.py                       # 150 / 1,500 / 6,000 records
    python benchmarks/episode_overhead.py --sizes 150,1500 --episodes 200

One run prints, per state size, the milliseconds per episode of

- ``runtime``: the sandboxed :class:`autoforge.envs.runtime.Environment`, one Environment reused
  across episodes (what evaluation and verification do per task): ``reset(state)`` with the state
  dict (encoded on every reset to recognise it; the worker holds it after the first), the calls,
  ``state_hash()`` (kept up to date in the worker);
- ``resident``: the same with ``reset(ResidentState(state))``, the state encoded once per task;
- ``baseline``: what hand-built benchmarks do in-process: ``copy.deepcopy(state)``, the same tool
  functions called directly (no sandbox, no checks), then ``sha256`` of the sorted-key JSON of the
  whole state (:func:`autoforge.types.legacy_state_hash`, the hash every stored task had before
  hash version 2);

and the ratio baseline / runtime. ``guarded`` is ``resident`` with the tools carrying the policy rules
a real domain binds to such calls (:mod:`autoforge.envs.guards`: a status, a count limit, a time
window and an argument limit on ``cancel_order``, an ownership and an argument rule on
``add_order``), none of them broken, so ``guarded / resident`` is what the rule engine costs. The episode is the mock shop's (``tests/mock_domain.py``): look
up an order, cancel it, insert a new one under a given id (``add_order``, defined here): tools
whose own work does not grow with the state (one that scans a collection, such as ``list_orders``
or ``create_order``'s ``next_id``, costs its scan in both set-ups). The state is the mock
shop's users and orders, grown to N records of ~500 bytes of JSON each (a third users, two thirds
orders), so 1,500 records are ~0.75 MB of JSON. The process (and its sandbox worker, which inherits
the affinity) is pinned to one CPU; each figure is the median of ``--repeats`` timed runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mock_domain import mock_tools, tool_code  # noqa: E402

from autoforge.envs.runtime import Environment, ResidentState, direct_function, tool_function  # noqa: E402
from autoforge.types import legacy_state_hash  # noqa: E402


def grown_state(n: int) -> dict:
    """The mock shop with ``n`` records (~500 bytes of JSON each)."""
    n_users = max(1, n // 3)
    users = {f"U{i:05d}": {"user_id": f"U{i:05d}", "name": f"User {i}", "email": f"user{i}@example.com",
                           "address": {"street": f"{i} Analytical St", "city": "London"},
                           "bio": "likes notebooks and lamps; " * 14, "tags": ["retail", f"cohort-{i % 7}"]}
             for i in range(1, n_users + 1)}
    orders = {f"O{i:05d}": {"order_id": f"O{i:05d}", "user_id": f"U{1 + i % n_users:05d}", "item": "notebook",
                            "quantity": 1 + i % 5, "total": round(2.5 * (1 + i % 5), 2),
                            "status": "pending" if i % 3 else "shipped", "created_at": "2025-01-10T09:00:00",
                            "note": "leave at the door, ring twice; " * 12}
              for i in range(1, n - n_users + 1)}
    return {"users": users, "orders": orders}


ADD_ORDER = tool_code("add_order", """
def add_order(state, order_id, user_id, item):
    if order_id in state["orders"]:
        return error(f"order {order_id} exists")
    state["orders"][order_id] = {"order_id": order_id, "user_id": user_id, "item": item, "quantity": 1,
                                 "total": 2.5, "status": "pending", "created_at": NOW}
    return {"order_id": order_id}
""", {"type": "object", "properties": {"order_id": {"type": "string"}, "user_id": {"type": "string"},
                                       "item": {"type": "string"}}, "required": ["order_id", "user_id", "item"]},
                      effect="write")


GUARDS = {
    "cancel_order": [
        {"op": "status", "collection": "orders", "id_arg": "order_id", "field": "status", "allowed": ["pending"]},
        {"op": "count_limit", "collection": "orders", "id_arg": "order_id", "counter": "cancel_count", "max": 2},
        {"op": "window", "collection": "orders", "id_arg": "order_id", "field": "created_at", "days": 3650,
         "direction": "since"},
        {"op": "arg_limit", "arg": "reason", "max": 200}],
    "add_order": [
        {"op": "arg_in", "arg": "item", "values": ["lamp", "notebook", "pen"]},
        {"op": "owned", "collection": "orders", "id_arg": "order_id", "owner_field": "user_id", "owner_arg": "user_id"}],
}


def tools(guarded: bool = False):
    out = [*mock_tools(), ADD_ORDER]
    if not guarded:
        return out
    return [t.model_copy(update={"guards": [{**g, "rule_id": f"R{k}", "tool": t.name, "message": g["op"]}
                                            for k, g in enumerate(GUARDS.get(t.name, []))]}) for t in out]


def episode(n: int) -> list[tuple[str, dict]]:
    """A point read, a point update and an insert (tools whose own work does not grow with the state)."""
    return [("get_order", {"order_id": "O00001"}),
            ("cancel_order", {"order_id": "O00001", "reason": "ordered by mistake"}),
            ("add_order", {"order_id": "O99999", "user_id": "U00001", "item": "lamp"})]


def time_runtime(state: dict, calls: list, episodes: int, resident: bool = False, guarded: bool = False) -> float:
    if resident:
        state = ResidentState(state)
    with Environment(tools(guarded), timeout_s=30.0) as env:
        for _ in range(3):  # warm up: the first reset sends the state, later ones reuse it
            env.reset(state)
            for name, args in calls:
                assert env.call(name, args).ok
            env.state_hash()
        t0 = time.perf_counter()
        for _ in range(episodes):
            env.reset(state)
            for name, args in calls:
                env.call(name, args)
            env.state_hash()
        return (time.perf_counter() - t0) / episodes


def time_baseline(state: dict, calls: list, episodes: int) -> float:
    fns = {t.name: direct_function(t.source, tool_function(t)) for t in tools()}
    t0 = time.perf_counter()
    for _ in range(episodes):
        s = copy.deepcopy(state)
        for name, args in calls:
            fns[name](s, **args)
        legacy_state_hash(s)
    return (time.perf_counter() - t0) / episodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="150,1500,6000", help="comma-separated record counts (default 150,1500,6000)")
    ap.add_argument("--episodes", type=int, default=100, help="episodes per timed run (default 100)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per figure; the median is printed (default 5)")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to (the worker inherits it)")
    a = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {a.cpu})
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    print(f"reset + {len(episode(10))} calls + state hash, ms per episode (median of {a.repeats} x {a.episodes} "
          "episodes, one core)")
    print(f"{'records':>8} {'JSON bytes':>11} {'runtime':>9} {'resident':>9} {'guarded':>9} {'baseline':>9} "
          f"{'baseline/runtime':>17} {'baseline/resident':>18} {'guarded/resident':>17} {'runtime vs first':>17} "
          f"{'resident vs first':>18}")
    first = None
    for n in sizes:
        state, calls = grown_state(n), episode(n)
        size = len(json.dumps(state, separators=(",", ":")))
        rt = statistics.median(time_runtime(state, calls, a.episodes) for _ in range(a.repeats))
        rs = statistics.median(time_runtime(state, calls, a.episodes, resident=True) for _ in range(a.repeats))
        gd = statistics.median(time_runtime(state, calls, a.episodes, resident=True, guarded=True)
                               for _ in range(a.repeats))
        eps = max(5, a.episodes // max(1, n // 300))  # the baseline is slow at large sizes
        bl = statistics.median(time_baseline(state, calls, eps) for _ in range(a.repeats))
        first = first or (rt, rs)
        print(f"{n:>8,} {size:>11,} {rt * 1e3:>9.3f} {rs * 1e3:>9.3f} {gd * 1e3:>9.3f} {bl * 1e3:>9.2f} {bl / rt:>16.1f}x "
              f"{bl / rs:>17.1f}x {gd / rs:>16.2f}x {rt / first[0]:>16.2f}x {rs / first[1]:>17.2f}x")
    print("runtime: env.reset(state dict), which encodes the dict to recognise it; resident: "
          "env.reset(ResidentState(state)), made once per task")


if __name__ == "__main__":
    main()
