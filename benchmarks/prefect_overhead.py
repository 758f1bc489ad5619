"""Prefect's share of the factory's wall time: the same batch through the `factory` flow and
through the plain library path (``autoforge.pipeline.run_factory``), each into a fresh warehouse.

    python benchmarks/prefect_overhead.py                         # 2 environments, 10 tasks each
    python benchmarks/prefect_overhead.py --max-envs 11 --tasks-per-env 110 --repeat 3   # the full corpus
    python benchmarks/prefect_overhead.py --task-runner thread                          # process (default) | dask
    PREFECT_API_URL=http://127.0.0.1:4200/api python benchmarks/prefect_overhead.py      # against a server

Prints the wall time of each path, the orchestration overhead (flow minus library) and its
share of the flow's wall time, and checks that both paths stored the same number of rows per
table. Without ``PREFECT_API_URL`` the flow talks to an ephemeral server started in this
process; its start-up (9-24 s on a loaded 2-core machine) is paid once, timed on its own
with an empty flow, and NOT counted in the overhead. With ``--repeat N`` the two paths
alternate N times and medians are reported. ``--task-runner`` picks the flow's task runner (the
factory's default, ``process``, when not given; ``dask`` starts a local cluster per factory run,
its start-up counted).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TABLES = ("runs", "tool_docs", "tool_specs", "toolsets", "environments", "tool_code", "tool_graphs", "tool_sequences",
          "task_dags", "tasks", "verification_results", "rejections")


def counts(warehouse: str) -> dict[str, int]:
    from autoforge.pipeline.corpus import row_counts

    return row_counts(warehouse, TABLES)


def run_library(params: dict, warehouse: str) -> tuple[float, dict]:
    from autoforge.pipeline import FactoryParams, run_factory

    t0 = time.perf_counter()
    out = run_factory(FactoryParams(**params, warehouse=warehouse))
    return time.perf_counter() - t0, out["stages"]


def run_flow(params: dict, warehouse: str, task_runner: str) -> float:
    from flows.factory import factory_flow

    t0 = time.perf_counter()
    factory_flow(**params, warehouse=warehouse, task_runner=task_runner)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-envs", type=int, default=2, help="environments in the batch (default 2; 11 = whole corpus)")
    ap.add_argument("--tasks-per-env", type=int, default=10, help="candidate tasks per environment (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="alternate the two paths N times, report medians")
    ap.add_argument("--keep", metavar="DIR", help="write the warehouses here instead of a temporary folder")
    ap.add_argument("--task-runner", choices=["thread", "process", "dask"], default=None,
                    help="the flow's task runner (default: the factory's, flows._common.FACTORY_DEFAULT)")
    args = ap.parse_args(argv)
    from flows._common import FACTORY_DEFAULT

    runner = args.task_runner or FACTORY_DEFAULT
    params = {"max_envs": args.max_envs, "tasks_per_env": args.tasks_per_env, "seed": args.seed}

    from prefect import flow

    @flow(name="warm-up")
    def warm_up() -> None:
        return None

    t0 = time.perf_counter()
    warm_up()
    server_s = time.perf_counter() - t0
    where = "ephemeral server start + empty flow" if not os.environ.get("PREFECT_API_URL") else "empty flow (server given)"
    print(f"Prefect {where}: {server_s:.1f} s (not counted below)")

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="af-overhead-"))
    root.mkdir(parents=True, exist_ok=True)
    lib_s, flow_s, stage_s = [], [], []
    for i in range(args.repeat):
        lib_wh, flow_wh = str(root / f"library-{i}.duckdb"), str(root / f"flow-{i}.duckdb")
        for p in (lib_wh, flow_wh):
            Path(p).unlink(missing_ok=True)
        s, stages = run_library(params, lib_wh)
        lib_s.append(s)
        stage_s.append(stages)
        flow_s.append(run_flow(params, flow_wh, runner))
        c_lib, c_flow = counts(lib_wh), counts(flow_wh)
        if c_lib != c_flow:
            diff = {t: (c_lib[t], c_flow[t]) for t in TABLES if c_lib[t] != c_flow[t]}
            print(f"WARNING: library and flow stored different rows (library, flow): {diff}")

    lib, fl = statistics.median(lib_s), statistics.median(flow_s)
    overhead = fl - lib
    tasks = c_flow["tasks"]
    print(f"\nfactory batch: {args.max_envs} environments x {args.tasks_per_env} tasks/env, seed {args.seed}; "
          f"{tasks} tasks stored ({'median of ' + str(args.repeat) if args.repeat > 1 else '1 run'}); "
          f"flow task runner: {runner}")
    if args.repeat > 1:
        print("each run (library s, flow s, Prefect's share): " + "; ".join(
            f"{a:.1f}, {b:.1f}, {100 * (b - a) / b:.0f}%" for a, b in zip(lib_s, flow_s)))
        print(f"median of the runs' shares: {statistics.median(100 * (b - a) / b for a, b in zip(lib_s, flow_s)):.0f}%")
    print(f"{'path':<28}{'wall s':>10}")
    print(f"{'library (run_factory)':<28}{lib:>10.2f}")
    print(f"{'Prefect flow (' + runner + ')':<28}{fl:>10.2f}")
    print(f"{'orchestration overhead':<28}{overhead:>10.2f}")
    print(f"Prefect's share of the factory wall time: {100 * overhead / fl:.0f}% "
          f"(work itself: {100 * lib / fl:.0f}%)")
    print("library time per stage: " + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in stage_s[-1].items()))
    if not args.keep:
        print(f"(warehouses in {root})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
