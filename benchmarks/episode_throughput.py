"""Oracle episodes per second on one core: environment + simulated-user overhead, no model.

    python benchmarks/episode_throughput.py                    # the mock shop's three tasks
    python benchmarks/episode_throughput.py --warehouse wh.duckdb --limit 50   # curated tasks

The process (and the sandbox workers it starts, which inherit the affinity) is pinned to one
CPU. Three set-ups are timed:

- ``sandbox, env per episode``: what evaluation (``play_episodes``) does by default — a new sandboxed Environment for every
  episode (worker start included), then reset / calls / state read;
- ``sandbox, env reused``: one Environment, ``reset()`` per episode (copy-on-reset);
- ``in-process``: tools executed in-process, no sandbox — the engine + oracle + offline
  user + reward alone.

Paper context (arXiv 2512.22857, App. B, Table 3): environment execution is "virtually free"
next to the LLM (1 : 6.04 in their units); this prints what "free" costs here.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mock_inputs():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

    tasks, dags = tasks_and_dags()
    tools = make_tools()
    return tasks, dags, {tasks[0].env_id: tools}, local_env_factory


def warehouse_inputs(path: str, limit: int | None):
    from autoforge.pipeline.evaluate import load_eval_inputs

    tasks, dags, tools_by_env, _ = load_eval_inputs(path, limit=limit)
    if not tasks:
        raise SystemExit(f"no verified tasks in {path}")
    return tasks, dags, tools_by_env, None


def run(tasks, dags, tools_by_env, make_env, episodes: int, reuse: bool) -> tuple[float, int, int]:
    from autoforge.rollout.agents import OracleAgent
    from autoforge.rollout.engine import run_episode
    from autoforge.rollout.toolcalls import tool_schemas
    from autoforge.rollout.users import OfflineUser

    schemas = {e: tool_schemas(t) for e, t in tools_by_env.items()}
    cache: dict[str, object] = {}
    n_ok = n_calls = 0
    t0 = time.perf_counter()
    for i in range(episodes):
        task = tasks[i % len(tasks)]
        if reuse:
            env = cache.get(task.env_id) or cache.setdefault(task.env_id, make_env(tools_by_env[task.env_id]))
        else:
            env = make_env(tools_by_env[task.env_id])
        ep = run_episode(task, env, OracleAgent(), OfflineUser(task, seed=i), tools=schemas[task.env_id],
                         dag=dags.get(task.dag_id), seed=i).episode
        if not reuse and hasattr(env, "close"):
            env.close()
        n_ok += ep.reward == 1.0
        n_calls += ep.diagnostics.get("tool_calls", 0)
    wall = time.perf_counter() - t0
    for env in cache.values():
        if hasattr(env, "close"):
            env.close()
    return wall, n_ok, n_calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouse", help="a warehouse with verified tasks (default: the mock shop tasks)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many tasks from the warehouse")
    ap.add_argument("--episodes", type=int, default=300, help="episodes per set-up")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per set-up (median reported)")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from autoforge.envs.runtime import Environment

    if args.warehouse:
        tasks, dags, tools_by_env, local = warehouse_inputs(args.warehouse, args.limit)
    else:
        tasks, dags, tools_by_env, local = mock_inputs()
    setups = [("sandbox, env per episode", lambda t: Environment(t), False, max(30, args.episodes // 5)),
              ("sandbox, env reused", lambda t: Environment(t), True, args.episodes)]
    if local is not None:
        setups.append(("in-process (no sandbox)", local, True, args.episodes))
    print(f"{len(tasks)} task(s), {len(tools_by_env)} environment(s); pinned to 1 CPU; median of {args.repeats}")
    print(f"{'set-up':<28} {'episodes/s':>11} {'ms/episode':>11} {'tool calls/s':>13} {'success':>8}")
    for name, factory, reuse, n in setups:
        walls = []
        for _ in range(args.repeats):
            wall, ok, calls = run(tasks, dags, tools_by_env, factory, n, reuse)
            walls.append(wall)
        wall = statistics.median(walls)
        print(f"{name:<28} {n / wall:>11.1f} {1000 * wall / n:>11.2f} {calls / wall:>13.0f} {ok / n:>8.1%}")


if __name__ == "__main__":
    main()
