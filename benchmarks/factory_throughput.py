"""Verified tasks per minute through stages 3-5 on the bundled corpus, the time per stage, and how
the cost per verified task grows with the batch.

    .venv/bin/python benchmarks/factory_throughput.py [--tasks-per-env 120] [--seed 0] [--warehouse PATH]
    .venv/bin/python benchmarks/factory_throughput.py --sizes 110,1100          # ~1.2k vs ~10k tasks, side by side
    .venv/bin/python benchmarks/factory_throughput.py --sizes 110,1100 --env retail   # one environment (quick)

Runs ingest -> synthesize (offline) -> sample -> generate -> verify with the library stage
runners (no Prefect, so the figures are the work itself; the Prefect factory adds its fixed
per-flow and per-task overhead on top), then prints a table per stage and the curated-corpus
targets of issue 4 (>= 1,000 verified tasks over >= 10 environments, median tool calls >= 4,
>= 30% with a reasoning node, >= 25% with two or more requirements).

``--sizes A,B,...`` runs each size in its own fresh process and warehouse (one after the other,
so no size inherits another's warm caches) and prints, per size, the seconds of every stage, the
generate stage's yield (tasks kept per instantiation attempt) and the milliseconds per verified
task, with the ratio of each size's cost per task to the first size's (issue 16: <= 1.2x from ~1k
to ~10k tasks). Wall seconds on a shared machine move with the load, so CPU seconds (this process
plus its sandbox workers) are printed beside them. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children and its live children (the pooled sandbox
    workers, which run as another user and live across stages)."""
    import psutil

    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # it ended between the listing and the read
            pass
    return total


def run_size(tasks_per_env: int, seed: int, warehouse: str | None, env: str | None) -> dict:
    """One batch into a fresh warehouse; the stage times (wall and CPU), counts and corpus figures."""
    from autoforge.envs.synthesis import synthesize_all
    from autoforge.pipeline import run_generate, run_sample, run_verify
    from autoforge.tooldocs.ingest import ingest_bundled
    from autoforge.pipeline.admin import init_warehouse, store_records
    from autoforge.pipeline.corpus import funnel_rows, read_sql

    wh = warehouse or os.path.join(tempfile.mkdtemp(prefix="af_bench_"), "bench.duckdb")
    init_warehouse(wh)
    sel = {"env": env} if env else {}
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    t, c = time.perf_counter(), cpu_seconds()
    ing = ingest_bundled()
    results = synthesize_all(ing.toolsets, ing.specs)
    store_records(wh, [*ing.records(), *[r for res in results for r in res.records()]])
    wall["ingest+synthesize"], cpu["ingest+synthesize"] = time.perf_counter() - t, cpu_seconds() - c
    counts = {}
    for stage, fn in [("sample", lambda: run_sample(wh, seed, tasks_per_env=tasks_per_env, **sel)),
                      ("generate", lambda: run_generate(wh, seed, tasks_per_env=tasks_per_env, **sel)),
                      ("verify", lambda: run_verify(wh, **sel))]:
        t, c = time.perf_counter(), cpu_seconds()
        counts[stage] = fn()
        wall[stage], cpu[stage] = time.perf_counter() - t, cpu_seconds() - c
    s = read_sql(wh, "SELECT count(*) n, count(DISTINCT env_id) envs, median(n_tool_calls) med, "
                     "avg(CASE WHEN has_reasoning THEN 1 ELSE 0 END) reasoning, "
                     "avg(CASE WHEN is_multi_requirement THEN 1 ELSE 0 END) multi, "
                     "avg(CASE WHEN split = 'test' THEN 1 ELSE 0 END) test FROM v_curated_tasks")[0]
    funnel = funnel_rows(wh)
    return {"tasks_per_env": tasks_per_env, "warehouse": wh, "wall": wall, "cpu": cpu,
            "counts": {k: {"in": v.get("in"), "out": v.get("out")} for k, v in counts.items()},
            "summary": {k: (float(v) if v is not None else None) for k, v in s.items()}, "funnel": funnel}


def print_one(r: dict) -> None:
    wall, counts, s = r["wall"], r["counts"], r["summary"]
    total = sum(wall.values())
    n = int(s["n"])
    print(f"warehouse: {r['warehouse']}")
    print(f"{'stage':<18}{'seconds':>9}{'cpu s':>8}{'in':>8}{'out':>8}")
    for stage, sec in wall.items():
        c = counts.get(stage, {})
        print(f"{stage:<18}{sec:>9.1f}{r['cpu'][stage]:>8.1f}{c.get('in', ''):>8}{c.get('out', ''):>8}")
    stages = wall["sample"] + wall["generate"] + wall["verify"]
    print(f"total {total:.1f} s; verified tasks {n} over {int(s['envs'])} environments; "
          f"{60 * n / total:.0f} verified tasks per minute (stages 3-5 only: {60 * n / stages:.0f}/min)")
    print(f"median n_tool_calls {s['med']}; with a reasoning node {100 * (s['reasoning'] or 0):.0f}%; "
          f"two or more requirements {100 * (s['multi'] or 0):.0f}%; held out (test) {100 * (s['test'] or 0):.0f}%")
    for f in r["funnel"]:
        print(f"  {f['stage']:<11} in {f['items_in']:>6}  out {f['items_out']:>6}  dropped {f['n_rejected']:>5}  "
              f"{f['top_reasons'] or ''}")


def per_task(r: dict) -> dict[str, float]:
    """Milliseconds per verified task: wall and CPU, the whole batch and stages 3-5 only."""
    n = max(1, int(r["summary"]["n"]))
    s35 = ("sample", "generate", "verify")
    return {"wall": 1000 * sum(r["wall"].values()) / n, "cpu": 1000 * sum(r["cpu"].values()) / n,
            "wall35": 1000 * sum(r["wall"][k] for k in s35) / n, "cpu35": 1000 * sum(r["cpu"][k] for k in s35) / n}


def print_sizes(runs: list[dict]) -> None:
    """The sizes side by side; ratios are against the first size."""
    cols = [f"tpe {r['tasks_per_env']}" for r in runs]
    w = max(16, *(len(c) + 2 for c in cols))  # room for '158.6 (27.8)' with a gap
    line = lambda label, vals: print(f"{label:<34}" + "".join(f"{v:>{w}}" for v in vals))  # noqa: E731
    line("", cols)
    line("verified tasks", [f"{int(r['summary']['n']):,}" for r in runs])
    line("generate attempts", [f"{r['counts']['generate']['in']:,}" for r in runs])
    line("generate yield (kept / attempts)", [f"{100 * r['counts']['generate']['out'] / max(1, r['counts']['generate']['in']):.1f}%"
                                               for r in runs])
    for stage in runs[0]["wall"]:
        line(f"{stage} s (cpu s)", [f"{r['wall'][stage]:.1f} ({r['cpu'][stage]:.1f})" for r in runs])
    base = per_task(runs[0])
    for key, label in [("wall", "ms / verified task, wall"), ("cpu", "ms / verified task, cpu"),
                       ("wall35", "  stages 3-5 only, wall"), ("cpu35", "  stages 3-5 only, cpu")]:
        line(label, [f"{per_task(r)[key]:.1f}" for r in runs])
        line(f"  ratio to tpe {runs[0]['tasks_per_env']}", [f"{per_task(r)[key] / base[key]:.2f}x" for r in runs])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-per-env", type=int, default=120, help="candidate tasks per environment (one size)")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated tasks-per-env values, e.g. 110,1100: each in its own process, then side by side")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", default=None, help="only this environment (tool-set name), e.g. retail; default: all 11")
    ap.add_argument("--warehouse", default=None, help="DuckDB file (default: a fresh temporary file; not with --sizes)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables (used by --sizes)")
    args = ap.parse_args()

    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        runs = []
        for size in sizes:
            cmd = [sys.executable, __file__, "--tasks-per-env", str(size), "--seed", str(args.seed), "--json",
                   *(["--env", args.env] if args.env else [])]
            out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
            print(f"== tasks_per_env {size}" + (f", environment {args.env}" if args.env else ", whole corpus"))
            print_one(runs[-1])
            print(flush=True)
        print_sizes(runs)
        return
    r = run_size(args.tasks_per_env, args.seed, args.warehouse, args.env)
    if args.json:
        print(json.dumps(r, default=str))
    else:
        print_one(r)


if __name__ == "__main__":
    main()
