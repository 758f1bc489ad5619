"""The factory on real tool documentation: one fresh warehouse per tool set, offline backend.

    .venv/bin/python benchmarks/realdocs.py [--corpus DIR] [--tasks-per-env 110] [--only NAME ...] [--json OUT] [--keep DIR]

DIR is a folder of tool-set folders (one folder = one tool set, in any format ``autoforge ingest``
reads), e.g. a checkout's copy of public projects' tool docs. Per tool set it prints: tools
ingested and accepted; read / write / unknown tools; write tools reachable from a read in the
tool graph through data or state edges, and through data edges alone (``by_data``: an output
of the read feeds the write; a state edge: the read shows what the write changes); collections
and reference fields of the state structure; verified tasks, distinct gold tool sequences and
write tools used by them; rules found / enforced / probe-passed / unparsed; then a second table,
the task-quality view per tool set (distinct sequences and write tools used as shares, median
calls, reasoning share, start rules, share of candidates each quality check dropped); a third,
the world checks per tool set (sample-state findings, tasks with findings, rejected, verified with
a rejecting one, and the tasks' findings per kind). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from autoforge.domain.world_checks import FINDING_KINDS

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "realdocs"


def in_warehouse(fn, folder: Path, tasks_per_env: int, seed: int, keep: Path | None, prefix: str) -> dict:
    """``fn(folder, tasks_per_env, seed, warehouse)`` on a fresh warehouse: ``keep/<name>.duckdb`` (left
    there to query) or a temporary one, removed afterwards."""
    if keep is not None:  # --keep DIR: one warehouse per tool set, left there to query
        keep.mkdir(parents=True, exist_ok=True)
        wh = str(keep / f"{folder.name}.duckdb")
        for stale in (wh, wh + ".wal"):
            if os.path.exists(stale):
                os.remove(stale)
        return fn(folder, tasks_per_env, seed, wh)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        return fn(folder, tasks_per_env, seed, os.path.join(tmp, "w.duckdb"))


def measure(folder: Path, tasks_per_env: int, seed: int, keep: Path | None = None) -> dict:
    return in_warehouse(_measure, folder, tasks_per_env, seed, keep, "af_realdocs_")


def _measure(folder: Path, tasks_per_env: int, seed: int, wh: str) -> dict:
    from autoforge.errors import AutoforgeError
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.types import EnvironmentRecord, Task, ToolCode, ToolGraph, ToolRule, ToolSet
    from autoforge.pipeline.admin import init_warehouse
    from autoforge.pipeline.corpus import records

    init_warehouse(wh)
    row: dict = {"toolset": folder.name}
    t0 = time.perf_counter()
    try:
        run_factory(FactoryParams(paths=[str(folder)], bundled=False, tasks_per_env=tasks_per_env, seed=seed, warehouse=wh))
    except AutoforgeError as exc:
        row["error"] = str(exc).splitlines()[0][:120]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    envs = records(wh, EnvironmentRecord)
    tools = records(wh, ToolCode)
    accepted = [t for t in tools if t.status == "accepted"]
    graphs = {g.env_id: g for g in records(wh, ToolGraph)}
    tasks = [t for t in records(wh, Task) if t.status == "verified"]
    row["kind"] = ",".join(sorted({t.kind for t in records(wh, ToolSet)})) or "-"
    row["tools"] = sum(e.n_tools for e in envs)
    row["accepted"] = len(accepted)
    for eff in ("read", "write", "unknown"):
        row[eff] = sum(t.effect == eff for t in accepted)
    # the linkage check stored with each environment at synthesis (autoforge.dags.sample.unreachable_writes)
    n_writes = sum(e.n_write_tools for e in envs)
    unreachable = sum(len(e.writes_unreachable) for e in envs)
    row["writes_reachable"] = f"{n_writes - unreachable}/{n_writes}"
    by_state = sum(len(e.writes_by_state) for e in envs)  # stored with the linkage check, like writes_unreachable
    row["by_data"] = f"{n_writes - unreachable - by_state}/{n_writes}"
    row["state_edges"] = sum(e.kind == "state" for g in graphs.values() for e in g.edges)
    row["writes_usable"] = f"{n_writes - unreachable + sum(len(e.writes_standalone) for e in envs)}/{n_writes}"
    cols = [c for e in envs for c in e.state_schema.collections]
    row["collections"] = len(cols)
    row["links"] = sum(1 for c in cols for f in c.fields if f.ref)
    row["edges"] = sum(len(g.edges) for g in graphs.values())
    row["verified_tasks"] = len(tasks)
    seqs = {tuple(c.name for c in t.gold_calls) for t in tasks}
    row["distinct_sequences"] = len(seqs)
    writes = {t.name for t in accepted if t.effect == "write"}
    used = {c.name for t in tasks for c in t.gold_calls} & writes
    row["writes_used"] = f"{len(used)}/{len(writes)}"
    from autoforge.domain.tool_kinds import SPECIAL_KINDS

    pure = {t.name for t in accepted if t.kind in SPECIAL_KINDS}  # scratchpad, calculator, hand-off: no state
    changes = [{c.name for c in t.gold_calls} & (writes | pure) for t in tasks if t.kind != "answer"]
    row["pure_only"] = sum(bool(w) and w <= pure for w in changes)  # tasks whose only "write" is a pure tool (must be 0)
    from autoforge.pipeline import environment_quality

    quality = environment_quality(wh)
    row["sequence_share"] = _share(quality, "n_sequences", "n_verified")
    row["writes_used_share"] = _share(quality, "n_writes_used", "n_writes_reachable")
    row["median_calls"] = next((q["median_calls"] for q in quality if q["median_calls"] is not None), None)
    row["reasoning_share"] = next((q["reasoning_share"] for q in quality if q["reasoning_share"] is not None), None)
    row["start_rules"] = ",".join(sorted({q["start_rules"] for q in quality if q["start_rules"]})) or "-"
    for k in ("dropped_unobservable", "dropped_out_of_domain", "dropped_near_duplicate"):
        row[k] = next((q[k] for q in quality if q[k] is not None), None)
    from autoforge.pipeline.synthesize import world_check_rows

    world = world_check_rows(wh)  # v_world_checks: findings of the sample states and of the checked tasks
    for k in ("sample_findings", "tasks_with_findings", "rejected_with_findings", "verified_with_rejecting_findings"):
        row[k] = sum(w[k] for w in world)
    for k in FINDING_KINDS:
        row[f"wc_{k}"] = sum(w[f"tasks_{k}"] for w in world)
    rules = records(wh, ToolRule)
    row["rules_found"] = len(rules)
    row["rules_enforced"] = sum(r.enforcement == "code" for r in rules)
    row["rules_probe_passed"] = sum(r.probe == "passed" for r in rules)
    row["rules_unparsed"] = sum(r.kind == "unparsed" for r in rules)
    return row


COLUMNS = ["toolset", "kind", "tools", "accepted", "read", "write", "unknown", "collections", "links", "edges",
           "writes_reachable", "by_data", "state_edges", "rules_found", "rules_enforced", "rules_probe_passed",
           "rules_unparsed", "verified_tasks", "seconds"]
# the second table: v_environment_quality per tool set (tasks worth training on)
QUALITY = ["toolset", "verified_tasks", "distinct_sequences", "sequence_share", "writes_used", "writes_used_share", "pure_only",
           "median_calls", "reasoning_share", "start_rules", "dropped_unobservable", "dropped_out_of_domain",
           "dropped_near_duplicate"]


# the third table: v_world_checks per tool set (findings after synthesis and at verification, per kind)
WORLD = ["toolset", "verified_tasks", "sample_findings", "tasks_with_findings", "rejected_with_findings",
         "verified_with_rejecting_findings", *(f"wc_{k}" for k in FINDING_KINDS)]


def _line(r: dict, cols: list[str]) -> str:
    return "  ".join(f"{str(r.get(c, '')):>{max(len(c), 8)}}" if c != "toolset" else f"{str(r[c]):<28}" for c in cols)


def _share(rows: list[dict], num: str, den: str) -> float | None:
    n, d = sum(r[num] or 0 for r in rows), sum(r[den] or 0 for r in rows)
    return round(n / d, 2) if d else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"folder of tool-set folders (default {DEFAULT_CORPUS})")
    ap.add_argument("--tasks-per-env", type=int, default=110)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="only these tool-set folder names")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep each tool set's warehouse as DIR/<name>.duckdb (default: a temporary one, removed)")
    args = ap.parse_args()
    if not args.corpus.is_dir():
        print(f"no corpus at {args.corpus}: give --corpus DIR (a folder of tool-set folders)", file=sys.stderr)
        return 2
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    folders = sorted(p for p in args.corpus.iterdir() if p.is_dir() and (args.only is None or p.name in args.only))
    rows = []
    print("environments (structure, links, rules)")
    print(_line({c: c for c in COLUMNS}, COLUMNS), flush=True)
    for folder in folders:
        r = measure(folder, args.tasks_per_env, args.seed, args.keep)
        rows.append(r)
        print(_line(r, COLUMNS) + (f"  ERROR {r['error']}" if "error" in r else ""), flush=True)
    print("\ntask quality (v_environment_quality)")
    print(_line({c: c for c in QUALITY}, QUALITY))
    for r in rows:
        print(_line(r, QUALITY))
    print("\nworld checks (v_world_checks; wc_<kind>: findings of that kind over the checked tasks)")
    print(_line({c: c for c in WORLD}, WORLD))
    for r in rows:
        print(_line(r, WORLD))
    n = len(rows)
    print(f"\n{n} tool sets; with >= 1 verified task: {sum(r['verified_tasks'] > 0 for r in rows)}; "
          f">= 50: {sum(r['verified_tasks'] >= 50 for r in rows)}; verified tasks in all: {sum(r['verified_tasks'] for r in rows)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
