"""Where the factory's time goes, per stage and per verified task, on the bundled corpus and on real
tool docs; the same measurement of an older commit side by side; and how the cost per verified task
grows with the batch.

    .venv/bin/python benchmarks/factory_throughput.py [--tasks-per-env 110] [--seed 0] [--corpus bundled --corpus DIR]
    .venv/bin/python benchmarks/factory_throughput.py --compare --corpus bundled   # and 899e6aa, a45d4c8 (issue 37's table)
    .venv/bin/python benchmarks/factory_throughput.py --compare COMMIT [--compare COMMIT ...] --corpus bundled
    .venv/bin/python benchmarks/factory_throughput.py --sizes 110,1100          # ~1.2k vs ~10k tasks, side by side
    .venv/bin/python benchmarks/factory_throughput.py --sizes 110,1100 --env retail   # one environment (quick)

One factory batch per corpus (``run_factory``: ingest -> synthesize (offline) -> sample -> generate
-> verify, no Prefect), each in a fresh process and a fresh warehouse: the bundled corpus, and
``../shared/realdocs`` (the tool sets beside the checkout, ingested without the bundled corpus; a
message and no figures where that folder is absent). Per corpus it prints a table per stage:

* wall seconds: the factory's timer around the stage (its loads, its work and its one write);
  ``other``: the batch's wall time outside the five (run_factory's own work around them: parsing the
  batch's docs to scope it, stopping its stage worker processes, the funnel read last);
* CPU seconds: this process, its reaped children and its live ones (the pooled sandbox workers);
* items in / out and ms per item (wall ms / items in), from the stage's run row, as v_stage_budget
  (sql/093) defines them: ingest documents read / accepted; synthesize tools / accepted tools;
  sample sequences / sequences with a DAG; **generate: candidate tasks tried (tasks kept + the
  stage's rejections) / tasks kept; verify: tasks checked / tasks verified**;
* worker requests: calls of ``WorkerProcess.request`` (autoforge/envs/_worker_client.py) during the
  stage, each one round trip to a sandbox worker, counted in every Python process of the run (this
  one and the stage worker processes it spawns, ``AUTOFORGE_STAGE_WORKERS``; a sitecustomize.py on their
  PYTHONPATH wraps the method): to episode workers (load, reset, tool calls, state, hash) and, apart,
  to check workers (the determinism checks), and the sandbox worker processes started. CPU seconds
  and requests before the first stage (the batch's docs parsed to scope it) count in ``ingest``.

Then the totals: wall, CPU, verified tasks, ms per verified task, worker round trips per verified
task, and the share of the candidate tasks (generate's items in) rejected per stage and reason
(the ``rejections`` table). ``--compare COMMIT`` (repeatable; alone: both commits of issue 37's table,
899e6aa, its "now", and a45d4c8, its round 1) checks each commit out in
``/tmp/af_wt_<commit>`` (``git worktree add --detach``; reused when there), runs the same
measurement of its code (this script, this venv's python, PYTHONPATH and cwd the worktree:
``run_factory``, the runs and rejections tables and ``WorkerProcess.request`` exist there too) one
corpus after the other with this checkout's, and prints each beside this one: per stage seconds and
ms per item, old and new and new / old, then total wall and ms per verified task. Issue 37's
done-when is generate and verify each at <= 0.5x the ms per item of its "now" row (899e6aa),
measured in one run beside round 1's commit (a45d4c8): ``--compare`` alone measures all three.

``--sizes A,B,...`` runs each size in its own fresh process and warehouse (one after the other,
so no size inherits another's warm caches) with the library stage runners, and prints, per size,
the seconds of every stage, the generate stage's yield (tasks kept per instantiation attempt) and
the milliseconds per verified task, with the ratio of each size's cost per task to the first
size's (issue 16: <= 1.2x from ~1k to ~10k tasks). Wall seconds on a shared machine move with the
load, so CPU seconds are printed beside them. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# FACTORY_BENCH_CODE: the checkout whose autoforge this process measures (--compare sets it to the worktree)
sys.path.insert(0, os.environ.get("FACTORY_BENCH_CODE") or str(ROOT))

STAGES = ("ingest", "synthesize", "sample", "generate", "verify")
REALDOCS = ROOT.parent / "shared" / "realdocs"
ROUND_1 = "a45d4c8"  # issue 37's table, round 1
ISSUE_NOW = "899e6aa"  # issue 37's table, "now": the per-item costs of generate and verify must halve from these


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


# --------------------------------------------------------------------------- one factory batch, measured


# Written as sitecustomize.py into a folder put first on PYTHONPATH of a measured run: every Python
# process of the run (the measuring one and the stage worker processes it spawns; not the sandbox
# workers, whose environment is their own) counts its WorkerProcess requests and starts into a small
# file of its own, FACTORY_BENCH_COUNTS/<pid>.cnt (three int64, mapped: no system call per count).
COUNT_HOOK = """
import os, sys
if os.environ.get("FACTORY_BENCH_COUNTS"):
    import importlib.abc, importlib.machinery, mmap

    def _patch(mod):
        cls = getattr(mod, "WorkerProcess", None)
        if cls is None:
            return
        fd = os.open(os.path.join(os.environ["FACTORY_BENCH_COUNTS"], f"{os.getpid()}.cnt"), os.O_RDWR | os.O_CREAT, 0o600)
        os.ftruncate(fd, 24)
        mm = mmap.mmap(fd, 24)
        n = memoryview(mm).cast("q")  # episode requests, check requests, worker processes started
        request, init = cls.request, cls.__init__

        def counted_request(self, *a, **kw):
            n[1 if getattr(self, "role", "episode") == "check" else 0] += 1
            return request(self, *a, **kw)

        def counted_init(self, *a, **kw):
            n[2] += 1
            return init(self, *a, **kw)

        cls.request, cls.__init__ = counted_request, counted_init
        mod._factory_bench_counts = (fd, mm, n)

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "autoforge.envs._worker_client":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.loader is not None:
                run = spec.loader.exec_module
                spec.loader.exec_module = lambda module: (run(module), _patch(module))
            return spec

    sys.meta_path.insert(0, _Hook())
"""


def worker_counts() -> dict[str, int] | None:
    """Requests to episode and check workers and worker processes started so far, summed over the
    run's processes (COUNT_HOOK's files); None when this process is not a measured run."""
    folder = os.environ.get("FACTORY_BENCH_COUNTS")
    if not folder:
        return None
    total = [0, 0, 0]
    for f in Path(folder).glob("*.cnt"):
        data = f.read_bytes()
        if len(data) == 24:
            total = [t + v for t, v in zip(total, struct.unpack("3q", data))]
    return dict(zip(("episode", "check", "started"), total))


def stage_items(stage: str, c: dict) -> tuple[int | None, int | None]:
    """Items in / out of a stage from its run row's counts (the module docstring's definitions)."""
    g = lambda k: c.get(k) if isinstance(c.get(k), int) else None  # noqa: E731
    if stage == "ingest":
        return g("docs_in"), (g("docs_in") - (g("docs_rejected") or 0)) if g("docs_in") is not None else None
    if stage == "synthesize":
        return g("tools"), g("tools_accepted")
    if stage == "generate":
        tried = g("tasks") + g("rejected") if g("tasks") is not None and g("rejected") is not None else g("in")
        return tried, g("tasks")
    if stage == "verify":
        return g("in") if g("in") is not None else g("tasks"), g("verified")
    return g("in"), g("out")


def measure(corpus: str, tasks_per_env: int, seed: int, warehouse: str, env: str | None, max_envs: int | None) -> dict:
    """One factory batch of ``corpus`` ('bundled' or a folder of tool docs, without the bundled
    corpus) into ``warehouse`` (fresh), measured; works on this checkout and on a45d4c8 alike."""
    import duckdb

    import autoforge
    from autoforge.pipeline import FactoryParams, run_factory

    counted: dict[str, dict[str, int] | None] = {}
    before = [worker_counts()]
    paths, bundled = ([], True) if corpus == "bundled" else ([corpus], False)
    params = FactoryParams(paths=paths, bundled=bundled, tasks_per_env=tasks_per_env, seed=seed, env=env,
                           max_envs=max_envs, warehouse=warehouse)
    cpu: dict[str, float] = {}
    mark = [cpu_seconds()]

    def progress(stage: str, _counts: dict) -> None:
        now, seen = cpu_seconds(), worker_counts()
        cpu[stage], mark[0] = now - mark[0], now
        counted[stage] = None if seen is None else {k: seen[k] - before[0][k] for k in seen}
        before[0] = seen

    c0, t0 = mark[0], time.perf_counter()
    out = run_factory(params, progress=progress)
    wall_total, cpu_total = time.perf_counter() - t0, cpu_seconds() - c0
    wall = {s: float(out["stages"][s]["seconds"]) for s in STAGES}
    wall["other"], cpu["other"] = max(0.0, wall_total - sum(wall.values())), max(0.0, cpu_total - sum(cpu.values()))
    seen = worker_counts()
    counted["other"] = None if seen is None else {k: seen[k] - before[0][k] for k in seen}
    # the warehouse read with duckdb itself: the same lines read a45d4c8's (it has no autoforge.pipeline.corpus)
    with duckdb.connect(warehouse, read_only=True) as con:
        runs = {s: json.loads(c) if isinstance(c, str) else c for s, c in
                con.execute("SELECT stage, counts FROM runs WHERE batch_id = ?", [out["batch_id"]]).fetchall()}
        rejections = [{"stage": s, "reason": r, "n": n} for s, r, n in con.execute(
            "SELECT stage, reason, count(*) AS n FROM rejections GROUP BY stage, reason ORDER BY n DESC, stage, reason").fetchall()]
        verified = con.execute("SELECT count(*) FROM tasks WHERE status = 'verified'").fetchone()[0]
        envs = con.execute("SELECT count(DISTINCT env_id) FROM tasks WHERE status = 'verified'").fetchone()[0]
    stages = {}
    for s in (*STAGES, "other"):
        items = stage_items(s, runs.get(s, {})) if s in STAGES else (None, None)
        stages[s] = {"wall": wall[s], "cpu": cpu.get(s, 0.0), "in": items[0], "out": items[1],
                     "requests": counted.get(s)}
    return {"corpus": corpus, "code": str(Path(autoforge.__file__).resolve().parents[1]), "warehouse": warehouse,
            "tasks_per_env": tasks_per_env, "batch_id": out["batch_id"], "stages": stages, "wall": wall_total,
            "cpu": cpu_total, "verified": int(verified), "envs": int(envs), "rejections": rejections}


def ms(seconds: float | None, n: int | None) -> float | None:
    return 1000 * seconds / n if seconds is not None and n else None


def fmt(v, spec: str = ".1f", width: int = 9) -> str:
    return f"{'-' if v is None else format(v, spec):>{width}}"


def print_measured(m: dict, label: str) -> None:
    """The stage table, the totals, the round trips and the rejections of one measured batch."""
    print(f"== {label}: {m['corpus']}, tasks_per_env {m['tasks_per_env']}  (code {m['code']}; warehouse {m['warehouse']})")
    print(f"{'stage':<12}{'wall s':>9}{'cpu s':>9}{'in':>8}{'out':>8}{'ms/item':>10}{'episode req':>13}{'check req':>11}"
          f"{'workers':>9}")
    for s, r in m["stages"].items():
        q = r["requests"] or {}
        print(f"{s:<12}{fmt(r['wall'])}{fmt(r['cpu'])}{fmt(r['in'], 'd', 8)}{fmt(r['out'], 'd', 8)}"
              f"{fmt(ms(r['wall'], r['in']), '.2f', 10)}{fmt(q.get('episode'), 'd', 13)}{fmt(q.get('check'), 'd', 11)}"
              f"{fmt(q.get('started'), 'd', 9)}")
    n = m["verified"]
    print(f"total wall {m['wall']:.1f} s, cpu {m['cpu']:.1f} s; verified tasks {n} over {m['envs']} environments; "
          f"ms per verified task: wall {fmt(ms(m['wall'], n), '.1f', 0)}, cpu {fmt(ms(m['cpu'], n), '.1f', 0)}")
    if all(r["requests"] is not None for r in m["stages"].values()):
        ep = sum(r["requests"]["episode"] for r in m["stages"].values())
        ck = sum(r["requests"]["check"] for r in m["stages"].values())
        started = sum(r["requests"]["started"] for r in m["stages"].values())
        per = (lambda x: f"{x / n:.1f}" if n else "-")  # noqa: E731
        print(f"worker round trips per verified task: {per(ep + ck)} ({per(ep)} to episode workers, {per(ck)} to check "
              f"workers); {ep + ck:,} requests, {started} worker processes started")
    candidates = m["stages"]["generate"]["in"] or 0
    print(f"candidate tasks {candidates:,}; rejected, by stage and reason (share of the candidates):")
    for r in m["rejections"]:
        share = f"{100 * r['n'] / candidates:5.1f}%" if candidates and r["stage"] in ("generate", "verify") else "     -"
        print(f"  {r['stage']:<11}{r['reason']:<32}{r['n']:>7}  {share}")
    print(flush=True)


def print_compare(old: dict, new: dict, old_label: str, new_label: str) -> None:
    """Per stage seconds and ms per item, old and new and new / old; total wall, ms per verified task."""
    ratio = lambda a, b: f"{b / a:.2f}x" if a and b is not None else "-"  # noqa: E731
    print(f"== side by side: {new['corpus']}, tasks_per_env {new['tasks_per_env']}: old {old_label}, new {new_label}")
    print(f"{'stage':<12}{'old s':>9}{'new s':>9}{'new/old':>9}{'old ms/item':>13}{'new ms/item':>13}{'new/old':>9}"
          f"{'old in':>9}{'new in':>9}")
    for s in (*STAGES, "other"):
        o, n = old["stages"][s], new["stages"][s]
        mo, mn = ms(o["wall"], o["in"]), ms(n["wall"], n["in"])
        print(f"{s:<12}{fmt(o['wall'])}{fmt(n['wall'])}{ratio(o['wall'], n['wall']):>9}{fmt(mo, '.2f', 13)}"
              f"{fmt(mn, '.2f', 13)}{ratio(mo, mn):>9}{fmt(o['in'], 'd')}{fmt(n['in'], 'd')}")
    print(f"{'total wall':<12}{fmt(old['wall'])}{fmt(new['wall'])}{ratio(old['wall'], new['wall']):>9}")
    print(f"{'cpu':<12}{fmt(old['cpu'])}{fmt(new['cpu'])}{ratio(old['cpu'], new['cpu']):>9}")
    print(f"{'verified':<12}{fmt(old['verified'], 'd')}{fmt(new['verified'], 'd')}")
    po, pn = ms(old["wall"], old["verified"]), ms(new["wall"], new["verified"])
    print(f"{'ms/verified':<12}{fmt(po)}{fmt(pn)}{ratio(po, pn):>9}   (wall ms per verified task)")
    parts = []
    for s in ("generate", "verify"):
        mo, mn = ms(old["stages"][s]["wall"], old["stages"][s]["in"]), ms(new["stages"][s]["wall"], new["stages"][s]["in"])
        parts.append(f"{s} {ratio(mo, mn)} ({'<=' if mo and mn is not None and mn <= 0.5 * mo else '>'} 0.5x)")
    what = "issue 37's done-when" if old_label == ISSUE_NOW else f"(issue 37's done-when compares with {ISSUE_NOW})"
    print(f"ms per item new / old, {what}: {', '.join(parts)}")
    print(flush=True)


# --------------------------------------------------------------------------- the old commit's checkout


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def worktree(commit: str) -> Path:
    """``/tmp/af_wt_<commit>``: a detached worktree of ``commit``, made once and then reused."""
    sha = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    path = Path(tempfile.gettempdir()) / f"af_wt_{commit}"
    if not path.is_dir():
        git("worktree", "add", "--detach", str(path), sha)
    elif git("rev-parse", "HEAD", cwd=path) != sha:
        print(f"{path} holds {git('rev-parse', '--short', 'HEAD', cwd=path)}; checking out {commit} there", flush=True)
        git("checkout", "--detach", sha, cwd=path)
    return path


def this_code() -> str:
    """This checkout's commit, ``+changes`` when its working tree differs from it."""
    head = git("rev-parse", "--short", "HEAD")
    return head + (" + changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def run_measure(corpus: str, code: Path | None, args: argparse.Namespace, warehouse: str) -> dict:
    """``measure`` in a fresh process: of this checkout, or of the checkout ``code`` (cwd and PYTHONPATH there)."""
    hook = Path(tempfile.mkdtemp(prefix="af_bench_hook_"))
    (hook / "sitecustomize.py").write_text(COUNT_HOOK)
    (hook / "counts").mkdir()
    env = {**os.environ, "FACTORY_BENCH_COUNTS": str(hook / "counts")}
    if code is not None:
        env["FACTORY_BENCH_CODE"] = str(code)
    env["PYTHONPATH"] = os.pathsep.join([str(hook), *([str(code)] if code is not None else []),
                                         *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", corpus, "--tasks-per-env", str(args.tasks_per_env),
           "--seed", str(args.seed), "--warehouse", warehouse, *(["--env", args.env] if args.env else []),
           *(["--max-envs", str(args.max_envs)] if args.max_envs else [])]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env, cwd=code or ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def warehouse_for(base: str | None, corpus: str, tag: str) -> str:
    """A fresh DuckDB file per (corpus, code): ``base`` with a suffix, or a temporary one."""
    name = f"{'bundled' if corpus == 'bundled' else Path(corpus).name}{tag}.duckdb"
    path = Path(base).with_suffix(f".{name}") if base else Path(tempfile.mkdtemp(prefix="af_bench_")) / name
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks-per-env", type=int, default=110, help="candidate tasks per environment (the factory's default)")
    ap.add_argument("--corpus", action="append", default=None,
                    help=f"'bundled' or a folder of tool-set folders (repeatable; default: bundled and {REALDOCS})")
    ap.add_argument("--compare", nargs="?", action="append", const="", default=None, metavar="COMMIT",
                    help=f"also measure COMMIT (repeatable; alone: {ISSUE_NOW} and {ROUND_1}, issue 37's 'now' and "
                         "round 1) and print each beside this checkout")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated tasks-per-env values, e.g. 110,1100: each in its own process, then side by side")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", default=None, help="only this environment (tool-set name), e.g. retail; default: all")
    ap.add_argument("--max-envs", type=int, default=None, help="at most this many environments per corpus (quick runs)")
    ap.add_argument("--warehouse", default=None,
                    help="DuckDB file (default: fresh temporary files); with several batches, one file per batch beside it")
    ap.add_argument("--json", action="store_true", help="one stage-runner batch as one JSON object (used by --sizes)")
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # one corpus, this process's code, JSON out
    args = ap.parse_args()

    if args.measure:
        print(json.dumps(measure(args.measure, args.tasks_per_env, args.seed, args.warehouse, args.env, args.max_envs)))
        return
    if args.json:
        print(json.dumps(run_size(args.tasks_per_env, args.seed, args.warehouse, args.env), default=str))
        return
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

    corpora = args.corpus or ["bundled", str(REALDOCS)]
    commits = list(dict.fromkeys(c or k for c in (args.compare or []) for k in ((ISSUE_NOW, ROUND_1) if not c else (c,))))
    olds = {c: worktree(c) for c in commits}
    new_label = this_code()
    pairs = []
    for corpus in corpora:
        if corpus != "bundled" and not Path(corpus).is_dir():
            print(f"== {corpus}: not here, skipped (no figures for it)\n", flush=True)
            continue
        corpus = corpus if corpus == "bundled" else str(Path(corpus).resolve())
        new = run_measure(corpus, None, args, warehouse_for(args.warehouse, corpus, ""))
        print_measured(new, f"this checkout ({new_label})")
        for commit, code in olds.items():  # right after the new one: they see the same machine load, as near as can be
            old = run_measure(corpus, code, args, warehouse_for(args.warehouse, corpus, f".{commit}"))
            print_measured(old, f"{commit} (worktree {code})")
            pairs.append((new, old, commit))
    for new, old, commit in pairs:
        print_compare(old, new, commit, new_label)


if __name__ == "__main__":
    main()
