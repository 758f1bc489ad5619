"""Policy rules through the factory (issue 33): one fresh warehouse per tool set, offline backend.

    .venv/bin/python benchmarks/policy.py [--corpus DIR ...] [--tasks-per-env 40] [--only NAME ...] [--json OUT] [--keep DIR]

DIR is a folder of tool-set folders (one folder = one tool set: its tool docs and, beside them, its
``policy.md``), or one tool-set folder; ``--corpus`` may be given more than once, and ``bundled``
names the bundled corpus (autoforge/data/tooldocs). Default: ``../shared/policydocs`` from the
repository root (public policy + tool sets, not part of this repository; skipped with a message
when it is absent); ``tests/fixtures/policies/`` works too.

Per tool set, ``autoforge factory`` (ingest -> ... -> verify) runs into its own warehouse, and the
first table gives, from ``v_rule_coverage`` / ``v_rule_summary``:

* ``policy rules (by kind)``: the rules read from its policy documents (``tool_rules.source`` other
  than ``'tool'``), every kind, ``unparsed`` (rule-like sentences no form matches) included;
* ``read``: of those, read into a kind (not ``unparsed``); ``enforced``: enforced at runtime (a
  guard the rule engine checks before the tool runs) or judged over the conversation;
  ``probe ok``: of those, the synthesis probe passed;
* ``checkable``: the policy rules that are *mechanically checkable*: a call or a record of the tool set
  could show them kept or broken (``v_rule_coverage.checkable``: enforced, or not enforced for a reason
  other than naming no tool, argument, record field or status of the set, ``rule_kinds.OUTSIDE``);
  ``checkable enforced``: of those, enforced (runtime with a probe that did not fail, or judged), and the share;
* ``tool rules``: the rules of the tools' own prose, and how many are enforced (code, runtime, judged);
* ``verified``, ``tasks/rule`` (mean verified tasks exercising an enforced policy rule, from
  ``tasks.rules``), ``boundary`` (verified tasks of kind ``boundary``), and the mean reward on them of
  the oracle (must be 1.00), an agent that does nothing (0.00) and one that does what the user asked
  (0.00), offline user (``boundary_play``);
* ``gold breaks``: verified tasks whose gold calls, replayed from their initial state in an
  Environment built from the tool_code rows (their guards included), have a call refused with a
  rule id, or break a judged rule by their order (identify first, the procedure rules:
  ``tasks.rules.gold_breaks``) (must be 0).

The second table lists every rule not enforced, with why, per tool set, the checkable ones first: where
it was read (the policy, at a character offset, or a tool's prose), its kind, whether it is checkable,
the sentence and why (both cut short).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realdocs import in_warehouse  # noqa: E402 - one warehouse per tool set, as the realdocs benchmark makes them

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "policydocs"
BUNDLED = REPO / "autoforge" / "data" / "tooldocs"
ENFORCED = ("runtime", "judged")
TEXT_CHARS, WHY_CHARS = 90, 110  # the second table's sentence and why, cut at these lengths


def tool_set_folders(corpus: Path) -> list[Path]:
    """The tool-set folders of ``corpus``: its sub-folders, or itself when it holds files only."""
    subs = sorted(p for p in corpus.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    return subs or [corpus]


def measure(folder: Path, tasks_per_env: int, seed: int, keep: Path | None = None) -> dict:
    return in_warehouse(_measure, folder, tasks_per_env, seed, keep, "af_policy_")


def _measure(folder: Path, tasks_per_env: int, seed: int, wh: str) -> dict:
    from autoforge.errors import AutoforgeError
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.pipeline.admin import init_warehouse
    from autoforge.pipeline.corpus import read_sql
    from autoforge.pipeline.rule_coverage import rule_coverage_rows

    init_warehouse(wh)
    row: dict = {"toolset": folder.name}
    t0 = time.perf_counter()
    try:
        run_factory(FactoryParams(paths=[str(folder)], bundled=False, tasks_per_env=tasks_per_env, seed=seed, warehouse=wh))
    except AutoforgeError as exc:
        row["error"] = str(exc).splitlines()[0][:120]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    row["policy_docs"] = read_sql(wh, "SELECT count(*) AS n FROM policy_docs")[0]["n"]
    rules = rule_coverage_rows(wh)
    policy = [r for r in rules if r["source"] != "tool"]
    prose = [r for r in rules if r["source"] == "tool"]
    row["policy_rules"] = len(policy)
    row["by_kind"] = dict(Counter(r["kind"] for r in policy).most_common())
    row["read"] = sum(r["kind"] != "unparsed" for r in policy)
    enforced = [r for r in policy if r["enforcement"] in ENFORCED]
    row["enforced"] = len(enforced)
    row["runtime"] = sum(r["enforcement"] == "runtime" for r in policy)
    row["judged"] = sum(r["enforcement"] == "judged" for r in policy)
    row["probe_passed"] = sum(r["probe"] == "passed" for r in enforced)
    row["probe_failed"] = sum(r["probe"] == "failed" for r in enforced)
    checkable = [r for r in policy if r.get("checkable", True)]
    row["checkable"] = len(checkable)
    row["checkable_enforced"] = sum(r["enforcement"] in ENFORCED and r["probe"] != "failed" for r in checkable)
    row["tool_rules"] = len(prose)
    row["tool_rules_enforced"] = sum(r["enforcement"] != "not enforced" for r in prose)
    row["tasks_per_rule"] = round(sum(r["tasks_exercising"] for r in enforced) / len(enforced), 1) if enforced else None
    row["verified"] = read_sql(wh, "SELECT count(*) AS n FROM tasks WHERE status = 'verified'")[0]["n"]
    row["boundary"] = read_sql(wh, "SELECT count(*) AS n FROM tasks WHERE status = 'verified' AND kind = 'boundary'")[0]["n"]
    row["boundary_play"] = boundary_play(wh)
    breaks = gold_breaks(wh)
    row["gold_breaks"] = len({b["task_id"] for b in breaks})
    texts = {r["rule_id"]: r["text"] for r in rules}
    row["broken_rules"] = dict(Counter(texts.get(b["rule_id"], b["rule_id"]) for b in breaks).most_common())
    row["not_enforced"] = [{"from": "tool " + r["tool"] if r["source"] == "tool" else "policy",
                            "at": r["source_offset"], "kind": r["kind"], "text": r["text"], "why": r["why"],
                            "checkable": bool(r.get("checkable", True))}
                           for r in sorted(rules, key=lambda r: not r.get("checkable", True))
                           if r["enforcement"] == "not enforced"]
    return row


def boundary_play(wh: str) -> dict[str, float] | None:
    """Mean reward on the verified boundary tasks of three agents, offline user: the oracle (the gold reads,
    then says why; must be 1.0), one that does nothing and says it is done (0.0), and one that does what
    the user asked, the forbidden write (0.0: the rule engine refuses it, a rule break). None: no boundary task."""
    from autoforge.pipeline.corpus import accepted_tools_by_env, judged_rules, records
    from autoforge.rollout.agents import ComplyAgent, IdleAgent, OracleAgent
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.users import OfflineUser
    from autoforge.types import Task, TaskDag

    tasks = [t for t in records(wh, Task) if t.status == "verified" and t.kind == "boundary"]
    if not tasks:
        return None

    dags = {d.dag_id: d for d in records(wh, TaskDag)}
    envs = {t.env_id for t in tasks}
    tools, judged = accepted_tools_by_env(wh, envs), judged_rules(wh, envs)
    out = {}
    for name, agent in (("oracle", OracleAgent), ("idle", IdleAgent), ("comply", ComplyAgent)):
        eps = play_episodes(tasks, dags, {e: tools.get(e, []) for e in envs}, agent_factory=agent,
                            user_factory=lambda t, p, s: OfflineUser(t, p, seed=s), agent_name=name, user_name="offline",
                            rules_by_env=judged, concurrency=2).episodes
        out[name] = round(sum(e.reward or 0.0 for e in eps) / len(eps), 2)
    return out


def gold_breaks(wh: str) -> list[dict]:
    """Each verified task's gold calls replayed from its initial state in an Environment built from the
    environment's accepted tool_code rows (their guards included): the first call refused with a rule
    id, per task that has one, else the first judged rule its calls break by their order."""
    from autoforge.envs.runtime import Environment
    from autoforge.pipeline.corpus import accepted_tools_by_env, judged_rules, records
    from autoforge.tasks.rules import gold_breaks as judged_breaks
    from autoforge.types import Task

    tasks = [t for t in records(wh, Task) if t.status == "verified"]
    envs = {t.env_id for t in tasks}
    tools, judged = accepted_tools_by_env(wh, envs), judged_rules(wh, envs)
    out = []
    for env_id in sorted({t.env_id for t in tasks}):
        with Environment(tools.get(env_id, []), env_id=env_id) as env:
            for task in (t for t in tasks if t.env_id == env_id):
                env.reset(task.initial_state)
                for i, call in enumerate(task.gold_calls):
                    obs = env.call(call.name, dict(call.arguments))
                    if obs.rule_id:
                        out.append({"task_id": task.task_id, "call": i, "tool": call.name, "rule_id": obs.rule_id})
                        break
                else:  # the judged rules the gold calls break by their order (identify first, procedures)
                    out += [{"task_id": task.task_id, "call": None, "tool": None, "rule_id": rid}
                            for rid, _ in judged_breaks(task.gold_calls, judged.get(env_id))[:1]]
    return out


def _cut(text: str | None, n: int) -> str:
    s = " ".join(str(text or "-").split()).replace("|", "/")
    return s if len(s) <= n else s[: n - 3] + "..."


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%" if n else "-"


def _kinds(by_kind: dict) -> str:
    return ", ".join(f"{k} {n}" for k, n in by_kind.items()) or "-"


def _md(header: list[str], lines: list[list], right: int = 1) -> str:
    """A markdown table; the columns from ``right`` on are right-aligned (figures)."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < right else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join("-" if v is None else str(v) for v in line) + " |" for line in lines]
    return "\n".join(out)


SUMMARY = ["tool set", "policy docs", "policy rules (by kind)", "read", "enforced (runtime / judged)", "probe ok (of runtime)",
           "checkable", "checkable enforced", "tool rules (enforced)", "verified", "tasks/rule", "boundary",
           "boundary oracle / idle / comply", "gold breaks", "s"]


def summary_line(r: dict) -> list:
    return [r["toolset"] + (f" (ERROR {r['error']})" if "error" in r else ""), r["policy_docs"],
            f"{r['policy_rules']} ({_kinds(r['by_kind'])})", r["read"], f"{r['enforced']} ({r['runtime']} / {r['judged']})",
            f"{r['probe_passed']}/{r['runtime']}" + (f" ({r['probe_failed']} failed)" if r["probe_failed"] else ""),
            r["checkable"], f"{r['checkable_enforced']} ({_pct(r['checkable_enforced'], r['checkable'])})",
            f"{r['tool_rules']} ({r['tool_rules_enforced']})", r["verified"], r["tasks_per_rule"], r["boundary"],
            " / ".join(f"{v:.2f}" for v in r["boundary_play"].values()) if r.get("boundary_play") else "-",
            r["gold_breaks"], r["seconds"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", action="append", default=None, metavar="DIR",
                    help=f"folder of tool-set folders, or one tool set; 'bundled': {BUNDLED} (default {DEFAULT_CORPUS})")
    ap.add_argument("--tasks-per-env", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None, help="only these tool-set folder names")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep each tool set's warehouse as DIR/<name>.duckdb (default: a temporary one, removed)")
    args = ap.parse_args()
    corpora = [BUNDLED if c == "bundled" else Path(c) for c in (args.corpus or [DEFAULT_CORPUS])]
    missing = [c for c in corpora if not c.is_dir()]
    if missing:
        print(f"no corpus at {', '.join(map(str, missing))}: skipped (give --corpus DIR, a folder of tool-set folders; "
              f"the policy sets are read from {DEFAULT_CORPUS} when present)", file=sys.stderr)
        corpora = [c for c in corpora if c.is_dir()]
        if not corpora:
            return 0
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    folders = [f for c in corpora for f in tool_set_folders(c) if args.only is None or f.name in args.only]
    rows = []
    for folder in folders:
        print(f"{folder.name} ...", file=sys.stderr, flush=True)
        rows.append(measure(folder, args.tasks_per_env, args.seed, args.keep))
    print(f"## Policy rules per tool set ({', '.join(str(c) for c in corpora)}; tasks-per-env {args.tasks_per_env}, "
          f"offline)\n")
    print(_md(SUMMARY, [summary_line(r) for r in rows], right=3))
    n = lambda k: sum(r[k] for r in rows)  # noqa: E731
    print(f"\n{len(rows)} tool sets: {n('policy_rules')} policy rules, {n('read')} read, {n('enforced')} enforced, "
          f"{n('probe_passed')} probe-passed; {n('checkable')} mechanically checkable, {n('checkable_enforced')} of them "
          f"enforced ({_pct(n('checkable_enforced'), n('checkable'))}; per set: "
          + ", ".join(f"{r['toolset']} {_pct(r['checkable_enforced'], r['checkable'])}" for r in rows)
          + f"); {n('verified')} verified tasks, {n('boundary')} boundary; "
          f"gold trajectories breaking an enforced rule: {n('gold_breaks')}")
    broken = [(r["toolset"], text, k) for r in rows for text, k in r["broken_rules"].items()]
    if broken:
        print("\n## Rules broken by gold trajectories (must be none)\n")
        print(_md(["tool set", "rule", "tasks"], [[t, _cut(text, TEXT_CHARS), k] for t, text, k in broken], right=2))
    print("\n## Rules not enforced, with why\n")
    lines = [[r["toolset"], x["from"], x["at"], x["kind"], "yes" if x["checkable"] else "no", _cut(x["text"], TEXT_CHARS),
              _cut(x["why"], WHY_CHARS)] for r in rows for x in r["not_enforced"]]
    print(_md(["tool set", "from", "at", "kind", "checkable", "sentence", "why"], lines, right=7) if lines else "(none)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
