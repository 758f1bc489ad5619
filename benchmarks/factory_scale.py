"""The factory at corpus scale (~100k verified tasks) on a task runner: wall time, CPU time, peak
memory of the whole process tree, and the warehouse's size (issue 16).

    .venv/bin/python benchmarks/factory_scale.py                                   # 9 batches x 1100 tasks/env, dask
    .venv/bin/python benchmarks/factory_scale.py --batches 2 --tasks-per-env 110   # a quick look (~2 min)
    .venv/bin/python benchmarks/factory_scale.py --warehouse big.duckdb --json results.json

Why batches. One factory run holds each stage's inputs and outputs for the whole batch in memory
(measured on the Dask runner: 4.7 GB peak at 6k verified tasks, 8.1 GB at 12k), so a single
100k-task run would not fit a 24 GiB machine. The factory is built to be run again and again into
one warehouse (a new seed gives new walks and new tasks; a task already stored is not written
twice), so the scale run is ``--batches`` runs of ``autoforge factory --task-runner RUNNER
--seed S`` (S = 0, 1, ...) into one warehouse, each in its own process, one after the other. The
warehouse grows across batches, so every batch after the first also measures the stages against
a large warehouse (the reads of what is already there, the dedup on write).

Measured (benchmarks/results/factory_scale/, 2 cores, nothing else running): 9 batches of 1,100
tasks per environment, 108,421 verified tasks in 5,079 s wall and 8,252 s CPU; every batch 502-619
s, peak RSS 6.3-6.6 GB (largest process 3.8-4.1 GB), ~12,040 new tasks; warehouse 751.5 MB. Flat,
because a batch reads what it needs: generate its own batch's DAGs, verify two stored keys per
verified task (sql/081). Before that, every stage read every stored task and DAG, and the peak grew
~2.2 GB per 12k stored tasks (8.1 / 10.2 / 12.4 GB for batches 1-3): ~100k would not have fit.

Memory is sampled every ``--sample-s`` seconds over the factory process and all its descendants
(the Dask scheduler, nannies and workers, the sandbox workers, the ephemeral Prefect server): the
peak of their summed RSS, and the largest single process. CPU seconds are the process tree's
user + system time. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class TreeSampler(threading.Thread):
    """Polls a process and its descendants: peak summed RSS, peak single RSS, and CPU seconds of
    every process seen (its last reading, so processes that end early still count; a process that
    lives less than one period is missed)."""

    def __init__(self, pid: int, every_s: float):
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.peak_total = self.peak_single = 0
        self.cpu: dict[tuple[int, float], float] = {}  # (pid, create_time) -> user + system seconds
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for p in procs:
                try:
                    with p.oneshot():
                        rss = p.memory_info().rss
                        t = p.cpu_times()
                        self.cpu[(p.pid, p.create_time())] = t.user + t.system  # own time only: a parent's children_* would count them twice
                except psutil.Error:
                    continue
                total += rss
                self.peak_single = max(self.peak_single, rss)
            self.peak_total = max(self.peak_total, total)
            self.done.wait(self.every_s)

    def cpu_seconds(self) -> float:
        return sum(self.cpu.values())


def counts(warehouse: str) -> dict:
    from autoforge.pipeline.corpus import read_sql

    row = read_sql(warehouse, "SELECT (SELECT count(*) FROM v_curated_tasks) AS curated, "
                              "(SELECT count(*) FROM tasks) AS tasks, "
                              "(SELECT count(DISTINCT env_id) FROM v_curated_tasks) AS envs")[0]
    return {k: int(v) for k, v in row.items()}


def run_batch(warehouse: str, seed: int, tasks_per_env: int, runner: str, every_s: float, log: Path) -> dict:
    cmd = [sys.executable, "-m", "autoforge", "factory", "--warehouse", warehouse, "--tasks-per-env", str(tasks_per_env),
           "--seed", str(seed), "--task-runner", runner]
    t0 = time.perf_counter()
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid, every_s)
        sampler.start()
        rc = proc.wait()
        sampler.done.set()
        sampler.join()
    wall = time.perf_counter() - t0
    if rc not in (0, 3):  # 3: some environment yielded no task this batch (printed in the log), still a run
        raise SystemExit(f"batch seed {seed} failed with exit code {rc}; its output is in {log}")
    return {"seed": seed, "rc": rc, "wall_s": wall, "cpu_s": sampler.cpu_seconds(),
            "peak_rss_total_mb": sampler.peak_total / 2**20, "peak_rss_single_mb": sampler.peak_single / 2**20}


def totals(rows: list[dict], args: argparse.Namespace) -> dict:
    """The run so far: summed times (the batches run one after the other), peaks, and the warehouse now."""
    return {"batches": len(rows), "tasks_per_env": args.tasks_per_env, "task_runner": args.task_runner,
            "wall_s": sum(r["wall_s"] for r in rows), "cpu_s": sum(r["cpu_s"] for r in rows),
            "peak_rss_total_mb": max(r["peak_rss_total_mb"] for r in rows),
            "peak_rss_single_mb": max(r["peak_rss_single_mb"] for r in rows),
            "verified_tasks": rows[-1]["curated"], "task_rows": rows[-1]["tasks"], "environments": rows[-1]["envs"],
            "warehouse_mb": rows[-1]["warehouse_mb"]}


def plot(rows: list[dict], path: Path) -> None:
    """Per batch, against the verified tasks stored after it: peak memory (all processes and the largest
    one) and wall / CPU time. Flat lines: a batch costs the same however large the warehouse is."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    FigureCanvasAgg(fig)
    x = [r["curated"] / 1000 for r in rows]
    mem, t = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    mem.plot(x, [r["peak_rss_total_mb"] / 1024 for r in rows], "o-", label="all processes")
    mem.plot(x, [r["peak_rss_single_mb"] / 1024 for r in rows], "s-", label="largest process")
    mem.set(xlabel="verified tasks in the warehouse after the batch (thousands)", ylabel="peak RSS (GiB)", ylim=(0, None),
            title="memory per batch")
    t.plot(x, [r["wall_s"] for r in rows], "o-", label="wall")
    t.plot(x, [r["cpu_s"] for r in rows], "s-", label="CPU (process tree)")
    t.set(xlabel="verified tasks in the warehouse after the batch (thousands)", ylabel="seconds", ylim=(0, None),
          title="time per batch")
    for ax in (mem, t):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--batches", type=int, default=9, help="factory runs, seeds 0..N-1 (default 9: ~100k verified tasks)")
    ap.add_argument("--tasks-per-env", type=int, default=1100, help="candidate tasks per environment per batch (default 1100)")
    ap.add_argument("--task-runner", choices=["thread", "process", "dask"], default="dask",
                    help="the factory flow's task runner (default dask: a local cluster per batch)")
    ap.add_argument("--warehouse", default=None, help="DuckDB file (default: a fresh temporary file)")
    ap.add_argument("--sample-s", type=float, default=0.5, help="memory sampling period in seconds (default 0.5)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the figures here as JSON")
    ap.add_argument("--resume", action="store_true",
                    help="go on from the batches already in --json (same warehouse, next seed): a stopped run continues")
    args = ap.parse_args()

    rows: list[dict] = []
    if args.resume:
        if not args.json or not Path(args.json).exists():
            raise SystemExit("--resume needs --json PATH of the run to continue (written after every batch)")
        done = json.loads(Path(args.json).read_text())
        rows, args.warehouse = done["batches"], args.warehouse or done["total"]["warehouse"]
        if not Path(args.warehouse).exists():
            raise SystemExit(f"the run's warehouse {args.warehouse} is gone: start a new run without --resume")
    wh = args.warehouse or os.path.join(tempfile.mkdtemp(prefix="af_scale_"), "scale.duckdb")
    log = Path(wh).with_suffix(".log")
    print(f"warehouse {wh}; factory output in {log}", flush=True)
    print(f"{'batch':>5} {'seed':>4} {'wall s':>8} {'cpu s':>8} {'peak RSS MB':>12} {'largest MB':>11} "
          f"{'verified':>9} {'+new':>7} {'warehouse MB':>13}", flush=True)
    for b, r in enumerate(rows):
        print(f"{b + 1:>5} {r['seed']:>4} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_rss_total_mb']:>12,.0f} "
              f"{r['peak_rss_single_mb']:>11,.0f} {r['curated']:>9,} {r['new']:>7,} {r['warehouse_mb']:>13.1f}  (earlier)",
              flush=True)
    before = rows[-1]["curated"] if rows else 0
    for b in range(len(rows), args.batches):
        r = run_batch(wh, b, args.tasks_per_env, args.task_runner, args.sample_s, log)
        r.update(counts(wh), warehouse_mb=os.path.getsize(wh) / 2**20)
        r["new"] = r["curated"] - before
        before = r["curated"]
        rows.append(r)
        print(f"{b + 1:>5} {r['seed']:>4} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_rss_total_mb']:>12,.0f} "
              f"{r['peak_rss_single_mb']:>11,.0f} {r['curated']:>9,} {r['new']:>7,} {r['warehouse_mb']:>13.1f}", flush=True)
        if args.json:  # after every batch: a run stopped early keeps its figures
            Path(args.json).write_text(json.dumps({"total": {**totals(rows, args), "warehouse": wh}, "batches": rows}, indent=2))
    total = totals(rows, args)
    if args.json and rows:
        plot(rows, Path(args.json).with_suffix(".png"))
        print(f"figures: {args.json}, {Path(args.json).with_suffix('.png')}", flush=True)
    n = max(1, total["verified_tasks"])
    print(f"total: {total['verified_tasks']:,} verified tasks ({total['task_rows']:,} task rows) over "
          f"{total['environments']} environments in {total['wall_s']:.0f} s wall, {total['cpu_s']:.0f} s CPU "
          f"({1000 * total['wall_s'] / n:.1f} ms wall per verified task); peak RSS {total['peak_rss_total_mb']:,.0f} MB "
          f"(largest process {total['peak_rss_single_mb']:,.0f} MB); warehouse {total['warehouse_mb']:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
