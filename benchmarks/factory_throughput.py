"""Verified tasks per minute through stages 3-5 on the bundled corpus, and the time per stage.

    .venv/bin/python benchmarks/factory_throughput.py [--tasks-per-env 120] [--seed 0] [--warehouse PATH]

Runs ingest -> synthesize (offline) -> sample -> generate -> verify with the library stage
runners (no Prefect, so the figures are the work itself; the Prefect factory adds its fixed
per-flow and per-task overhead on top), then prints a table per stage and the curated-corpus
targets of issue 4 (>= 1,000 verified tasks over >= 10 environments, median tool calls >= 4,
>= 30% with a reasoning node, >= 25% with two or more requirements). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-per-env", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warehouse", default=None, help="DuckDB file (default: a fresh temporary file)")
    args = ap.parse_args()

    from autoforge.envs.synthesis import synthesize_all
    from autoforge.pipeline import run_generate, run_sample, run_verify
    from autoforge.tooldocs.ingest import ingest_bundled
    from autoforge.warehouse import apply_migrations
    from autoforge.warehouse.store import query, write_records

    wh = args.warehouse or os.path.join(tempfile.mkdtemp(prefix="af_bench_"), "bench.duckdb")
    apply_migrations(wh)
    times: dict[str, float] = {}
    t = time.perf_counter()
    ing = ingest_bundled()
    results = synthesize_all(ing.toolsets, ing.specs)
    write_records(wh, [*ing.records(), *[r for res in results for r in res.records()]])
    times["ingest+synthesize"] = time.perf_counter() - t
    counts = {}
    for stage, fn in [("sample", lambda: run_sample(wh, args.seed, walks=max(40, 2 * args.tasks_per_env // 3),
                                                     merges=max(40, 2 * args.tasks_per_env // 3))),
                      ("generate", lambda: run_generate(wh, args.seed, tasks_per_env=args.tasks_per_env)),
                      ("verify", lambda: run_verify(wh))]:
        t = time.perf_counter()
        counts[stage] = fn()
        times[stage] = time.perf_counter() - t
    total = sum(times.values())
    print(f"warehouse: {wh}")
    print(f"{'stage':<18}{'seconds':>9}{'in':>8}{'out':>8}")
    for stage, sec in times.items():
        c = counts.get(stage, {})
        print(f"{stage:<18}{sec:>9.1f}{c.get('in', ''):>8}{c.get('out', ''):>8}")
    s = query(wh, "SELECT count(*) n, count(DISTINCT env_id) envs, median(n_tool_calls) med, "
                  "avg(CASE WHEN has_reasoning THEN 1 ELSE 0 END) reasoning, "
                  "avg(CASE WHEN is_multi_requirement THEN 1 ELSE 0 END) multi, "
                  "avg(CASE WHEN split = 'test' THEN 1 ELSE 0 END) test FROM v_curated_tasks")[0]
    print(f"total {total:.1f} s; verified tasks {s['n']} over {s['envs']} environments; "
          f"{60 * s['n'] / total:.0f} verified tasks per minute (stages 3-5 only: "
          f"{60 * s['n'] / (times['sample'] + times['generate'] + times['verify']):.0f}/min)")
    print(f"median n_tool_calls {s['med']}; with a reasoning node {100 * (s['reasoning'] or 0):.0f}%; "
          f"two or more requirements {100 * (s['multi'] or 0):.0f}%; held out (test) {100 * (s['test'] or 0):.0f}%")
    for r in query(wh, "SELECT * FROM v_stage_funnel"):
        print(f"  {r['stage']:<11} in {r['items_in']:>6}  out {r['items_out']:>6}  dropped {r['n_rejected']:>5}  {r['top_reasons'] or ''}")


if __name__ == "__main__":
    main()
