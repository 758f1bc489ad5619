"""``autoforge ingest``, ``synthesize`` and ``factory``: the factory stages, with their tables."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from autoforge.cli.args import FAILED_EXIT_CODE, default, number, prefect_env, wh
from autoforge.cli.failures import require_extra
from autoforge.cli.output import names_text, print_rows, share_text
from autoforge.errors import AutoforgeError, ConfigError


def cmd_ingest(args: argparse.Namespace) -> int:
    from autoforge.pipeline import run_ingest

    if not args.paths and not args.bundled:
        raise AutoforgeError("give one or more PATHs (files or folders) or --bundled")
    summary = run_ingest(wh(args), paths=args.paths, bundled=args.bundled, policy=args.policy)
    print_rows(summary["toolsets"], title="ingested tool sets")
    for err in summary["errors"]:
        print(f"rejected: {err}", file=sys.stderr)
    print(f"{summary['n_toolsets']} tool sets, {summary['n_tools']} tools, {summary['n_policies']} policy document(s), "
          f"{summary['n_rejected']} document(s) rejected")
    return 1 if summary["n_rejected"] else 0


def cmd_synthesize(args: argparse.Namespace) -> int:
    from autoforge.pipeline import run_synthesis

    if args.all_toolsets and not args.paths:
        raise ConfigError("--all widens PATH's tool sets to every tool set in the warehouse; without PATH, synthesize "
                          "already works on every tool set: drop --all, or give PATH")
    summary = run_synthesis(wh(args), env=args.env, backend=args.backend, max_envs=args.max_envs,
                            paths=list(args.paths or []), all_toolsets=args.all_toolsets)
    ingested = summary.get("ingest")
    if ingested is not None:
        for err in ingested["errors"]:
            print(f"rejected: {err}", file=sys.stderr)
        print(f"ingested {ingested['n_toolsets']} tool set(s) from PATH: "
              f"{', '.join(t['toolset'] for t in ingested['toolsets']) or '-'}")
    print_rows(summary["table"], title="synthesized environments")
    from autoforge.pipeline.synthesize import environment_checks

    checks = environment_checks(wh(args), [e["env_id"] for e in summary.get("environments", [])])
    print_rows([{"environment": r["name"], "kind": r["kind"],
                 "writes reachable from a read": f"{r['n_writes_reachable']}/{r['n_write_tools']}",
                 "of those by state only": r["n_writes_by_state"],
                 "+ needing no id": f"{r['n_writes_usable'] - r['n_writes_reachable']}",
                 "rules found / enforced / probe ok": f"{r['n_rules']} / {r['n_rules_enforced']} / {r['n_rules_probe_passed']}",
                 "outputs derived": r["n_outputs_derived"],
                 "writes no read leads to": names_text(r["writes_unreachable"])} for r in checks],
               title="acceptance checks (autoforge sql \"SELECT * FROM v_environment_checks\")")
    print_world_checks(wh(args), env_ids=[e["env_id"] for e in summary.get("environments", [])])
    print_rule_summary(wh(args), env_ids=[e["env_id"] for e in summary.get("environments", [])])
    c = summary["counts"]
    print(", ".join(f"{k}={v}" for k, v in c.items()))
    for p in summary.get("problems", []):
        print(f"problem: {p['env']}: {p['problem']}", file=sys.stderr)
    failed = [e for e in summary.get("environments", []) if e["status"] == "failed" and not e.get("kept")]
    for e in failed:
        if not e.get("problem"):
            why = e.get("reason") or "; ".join(f"{n}: {r}" for n, r in list(e["rejected"].items())[:3]) or "no tool accepted"
            print(f"failed: {e['env']}: {why[:500]}", file=sys.stderr)
    if summary.get("status") == "failed" or failed:
        print(f"{len(summary.get('problems', [])) + len(failed)} environment(s) failed or were kept back (exit code "
              f"{FAILED_EXIT_CODE}); a stored environment a worse result would have replaced is kept", file=sys.stderr)
        return FAILED_EXIT_CODE
    return 0


def _factory_params(args: argparse.Namespace, bundled: bool):
    from autoforge.pipeline import FactoryParams

    sampling = {k: getattr(args, k) for k in ("start", "min_len", "max_len", "walks", "attempts_per_task", "all_dags")
                if getattr(args, k, None) is not None}
    return FactoryParams(
        backend=args.backend, tasks_per_env=args.tasks_per_env, seed=args.seed, env=args.env,
        paths=list(args.paths or []), bundled=bundled, max_envs=args.max_envs, warehouse=wh(args),
        all_toolsets=args.all_toolsets, policy=list(args.policy or []), **sampling,
    )


def run_factory_cli(params, use_prefect: bool, task_runner: str | None = None, dask_address: str | None = None) -> dict:
    """Run the factory with a progress bar (library path) or as the Prefect `factory` flow on a task
    runner (``task_runner``/``dask_address``: None = AUTOFORGE_TASK_RUNNER / AUTOFORGE_DASK_ADDRESS)."""
    params.validate_for_run()
    if not use_prefect and (task_runner or dask_address):
        raise ConfigError("--task-runner and --dask-address choose where the Prefect flow's tasks run: drop --no-prefect, "
                          "or drop them for the library path")
    if use_prefect:
        from flows._common import FACTORY_DEFAULT, choose_runner

        kind, address = choose_runner(task_runner, dask_address, default=FACTORY_DEFAULT)  # refused before any work
        if kind == "dask":
            require_extra("dask", "the factory on the dask task runner")
        prefect_env()
        print(f"running the factory as a Prefect flow on the {kind} task runner{' at ' + address if address else ''} "
              "(ephemeral server unless PREFECT_API_URL is set) ...", flush=True)
        from flows.factory import factory_flow

        return factory_flow(**params.model_dump(), task_runner=kind, dask_address=address)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from autoforge.pipeline import STAGES, run_factory

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} stages"),
                  TimeElapsedColumn(), transient=False) as bar:
        task = bar.add_task("factory: ingest", total=len(STAGES))

        def progress(stage: str, counts: dict) -> None:
            i = STAGES.index(stage)
            nxt = STAGES[i + 1] if i + 1 < len(STAGES) else "done"
            bar.update(task, advance=1, description=f"factory: {nxt}")
            brief = {k: v for k, v in counts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            bar.console.print(f"  {stage:<10} " + ", ".join(f"{k}={v}" for k, v in brief.items()))

        return run_factory(params, progress=progress)


def print_factory_summary(warehouse: str | None, result: dict) -> None:
    from autoforge.pipeline.corpus import curated_summary

    print(f"batch {result.get('batch_id')}")
    print_rows(result.get("funnel") or [], title="stage funnel (v_stage_funnel)")
    rows = curated_summary(warehouse)
    if rows:
        print_rows(rows, title="curated tasks (v_curated_tasks)")


def cmd_factory(args: argparse.Namespace) -> int:
    params = _factory_params(args, bundled=args.bundled or not args.paths)
    result = run_factory_cli(params, use_prefect=not args.no_prefect, task_runner=args.task_runner,
                             dask_address=args.dask_address)
    from autoforge.pipeline.corpus import reading

    with reading(wh(args)):  # the reports' dozen questions on one connection
        print_factory_summary(wh(args), result)
        print_policy_counts(params.docs().policy_counts())
        return print_environment_yield(wh(args), result.get("environments") or [])


def print_policy_counts(counts: dict[str, int]) -> None:
    """How many policy documents (policy_docs) each tool set of the batch has."""
    if counts:
        print("policy documents read (policy_docs): " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))


def _kinds_text(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in kinds.items()) or "none"


def print_world_checks(warehouse: str | None, env_ids: list[str] | None = None, names: list[str] | None = None) -> None:
    """The world checks per environment (``v_world_checks``): its sample state's findings and, once
    verified, its tasks'. An environment with findings is kept; the note says what rejects a task."""
    from autoforge.domain.world_checks import FINDING_KINDS
    from autoforge.pipeline.synthesize import world_check_rows

    rows = world_check_rows(warehouse, env_ids=env_ids, names=names)
    if not rows:
        return
    print_rows([{"environment": r["name"], "sample-state findings": _kinds_text(r["sample_kinds"]),
                 "tasks with findings (rejected)": f"{r['tasks_with_findings']} ({r['rejected_with_findings']})",
                 "task findings": _kinds_text(r["task_kinds"])} for r in rows],
               title="world checks (autoforge sql \"SELECT * FROM v_world_checks\"; rows: world_checks)")
    keep = [k for k, v in FINDING_KINDS.items() if not v.rejects]
    n_envs = sum(bool(r["sample_findings"]) for r in rows)
    but = f", except {' and '.join(keep)}, which are stored and shown only" if keep else ""
    print(f"{n_envs} environment(s) with sample-state findings, kept (findings never discard an environment); a task "
          f"holding a finding is rejected (check `world`){but}")


def print_rule_summary(warehouse: str | None, env_ids: list[str] | None = None, names: list[str] | None = None) -> None:
    """The rules per environment (``v_rule_summary``), when some environment has policy rules or rules
    enforced at runtime or judged: read, by enforcement, probe passed / failed, tasks exercising them."""
    from autoforge.pipeline.rule_coverage import rule_summary_rows, shows_rules, summary_table

    rows = rule_summary_rows(warehouse, env_ids=env_ids, names=names)
    if not shows_rules(rows):
        return
    print_rows(summary_table(rows), title="rules (autoforge sql \"SELECT * FROM v_rule_summary\"; per rule: v_rule_coverage)")
    n = sum(r["n_not_enforced"] for r in rows)
    if n:
        print(f"{n} rule(s) not enforced, each with why: autoforge sql \"SELECT env_name, text, why FROM v_rule_coverage "
              "WHERE enforcement = 'not enforced'\"")


def print_environment_yield(warehouse: str | None, names: list[str]) -> int:
    """The per-environment yield table; the exit code (EMPTY_EXIT_CODE when an environment of the
    batch yields no verified task, with why on stderr)."""
    from autoforge.pipeline import EMPTY_EXIT_CODE, empty_environments, environment_quality, environment_yield

    rows = environment_yield(warehouse, names)
    print_rows([{"environment": r["name"], "kind": r["kind"], "tools accepted": r["n_tools_accepted"], "edges": r["n_edges"],
                 "sequences": r["n_sequences"], "starts": r["start_rules"] or "-", "dags": r["n_dags"],
                 "tasks generated": r["n_generated"], "verified": r["n_verified"], "top drops (stage: reason (n))": top_drops(r)}
                for r in rows], title="per environment (autoforge sql \"SELECT * FROM v_environment_funnel\")")
    quality = environment_quality(warehouse, names)
    print_rows([{"environment": r["name"], "verified": r["n_verified"],
                 "distinct sequences (per task)": f"{r['n_sequences']} ({share_text(r['sequence_share'])})",
                 "writes used / reachable": f"{r['n_writes_used']}/{r['n_writes_reachable']}",
                 "median calls": r["median_calls"] if r["median_calls"] is not None else "-",
                 "with reasoning": share_text(r["reasoning_share"]),
                 "dropped of candidates: unobservable / out of domain / near-duplicate":
                     f"{share_text(r['dropped_unobservable'])} / {share_text(r['dropped_out_of_domain'])} / {share_text(r['dropped_near_duplicate'])}"}
                for r in quality], title="task quality (autoforge sql \"SELECT * FROM v_environment_quality\")")
    print_world_checks(warehouse, names=names)
    print_rule_summary(warehouse, names=names)
    empty = empty_environments(rows)
    for r in empty:
        print(f"no verified task for environment {r['name']!r}: {r['why_empty']}", file=sys.stderr)
        for text in r.get("advice") or []:
            print(f"  what to change in the doc: {text}", file=sys.stderr)
    if empty:
        print(f"{len(empty)} of {len(rows)} environment(s) yielded no task (exit code {EMPTY_EXIT_CODE}); see "
              "`autoforge sql \"SELECT name, why_empty FROM v_environment_funnel\"`", file=sys.stderr)
        return EMPTY_EXIT_CODE
    return 0


def top_drops(row: dict[str, Any]) -> str:
    """The first stage (generate, sample, verify) that dropped candidates, with its top reasons."""
    for stage in ("generate", "sample", "verify"):
        if row.get(f"{stage}_drops"):
            return f"{stage}: {row[stage + '_drops']}"
    return "-"


# each command's one-line help in the `autoforge --help` list (add_parsers below gives it, or parser.py's
# stub when this group is not built)
HELP = {
    "ingest": "parse tool documentation into tool sets (candidate environments)",
    "synthesize": "generate state schema + checked tool code per tool set",
    "factory": "run ingest -> synthesize -> sample -> generate -> verify",
}
POLICY_HELP = ("a policy document (Markdown or text; repeatable): inside a PATH folder it is that tool set's, "
               "elsewhere every PATH tool set's; a policy.md beside the tool docs is read without it "
               "(stored in policy_docs; synthesize reads its rules into tool_rules and enforces those it can: "
               "docs/policies.md)")
COMMANDS = {"ingest": cmd_ingest, "synthesize": cmd_synthesize, "factory": cmd_factory}


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.dags.sequences import START_RULES
    from autoforge.pipeline import FactoryParams, IngestParams, SynthesizeParams
    from autoforge.settings import BACKENDS, TASK_RUNNERS

    s = sub.add_parser("ingest", parents=[common], help=HELP["ingest"],
                       description="Parse tool docs (OpenAI function calling, MCP tools/list, OpenAPI 3, Markdown) into "
                                   "tool specs and tool sets; a folder is one tool set. A bad document is stored as "
                                   "rejected with the reason, and the others are still ingested.",
                       epilog="Exit codes: 0 done; 1 a document was rejected (listed on stderr); 2 bad input.")
    s.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (a folder = one tool set)")
    s.add_argument("--bundled", action="store_true", default=default(IngestParams, "bundled"),
                   help="ingest the bundled corpus of 10+ domains")
    s.add_argument("--policy", action="append", metavar="FILE", default=default(IngestParams, "policy"),
                   help=POLICY_HELP)

    s = sub.add_parser("synthesize", parents=[common], help=HELP["synthesize"],
                       description="Synthesize an environment (state schema + checked tool code) per tool set. With "
                                   "PATH: ingest those docs first (the same docs give the same rows, so docs ingested "
                                   "before are not duplicated) and synthesize only the tool sets they define; the "
                                   "other tool sets in the warehouse are left untouched (--all: every tool set). "
                                   "Without PATH: every tool set already in the warehouse (`autoforge ingest` first).",
                       epilog=f"Exit codes: 0 done; {FAILED_EXIT_CODE} an environment failed (no tool accepted, it raised, "
                              "or e.g. the LLM server could not be reached) or its result was worse than the stored one "
                              "(which is kept); the reasons are printed. 2 bad parameters or input.")
    s.add_argument("paths", nargs="*", metavar="PATH",
                   help="tool docs (files or folders) to ingest and synthesize; default: every tool set in the warehouse")
    s.add_argument("--all", dest="all_toolsets", action="store_true",
                   help="with PATH: after ingesting it, synthesize every tool set in the warehouse, not only PATH's")
    s.add_argument("--env", metavar="NAME", default=default(SynthesizeParams, "env"), help="only this tool set (default: all)")
    s.add_argument("--backend", choices=BACKENDS, default=default(SynthesizeParams, "backend"),
                   help="offline: rules and templates, no network; openai: an OpenAI-compatible server "
                        "(AUTOFORGE_OPENAI_*); default %(default)s")
    s.add_argument("--max-envs", type=number("max_envs"), default=default(SynthesizeParams, "max_envs"),
                   help="at most this many tool sets")

    s = sub.add_parser("factory", parents=[common], help=HELP["factory"],
                       description="Run the whole factory on one batch of tool docs and print the stage funnel, the "
                                   "curated corpus and each environment's yield.",
                       epilog="Exit codes: 0 every environment of the batch yields verified tasks; 3 an environment "
                              "yields none (the reason is printed, and stored in v_environment_funnel.why_empty); "
                              "2 bad parameters or input.")
    s.add_argument("paths", nargs="*", metavar="PATH",
                   help="tool docs to ingest (default: the bundled corpus); the later stages work on the tool sets "
                        "these docs define and leave the warehouse's others untouched")
    s.add_argument("--bundled", action="store_true", help="also ingest the bundled corpus when PATHs are given")
    s.add_argument("--policy", action="append", metavar="FILE", default=default(FactoryParams, "policy"),
                   help=POLICY_HELP)
    s.add_argument("--all", dest="all_toolsets", action="store_true", default=default(FactoryParams, "all_toolsets"),
                   help="synthesize, sample, generate and verify every tool set in the warehouse, not only those of "
                        "PATH (or of the bundled corpus without PATH)")
    s.add_argument("--backend", choices=BACKENDS, default=default(FactoryParams, "backend"),
                   help="offline: rules, no network; openai: an OpenAI-compatible server (AUTOFORGE_OPENAI_*); "
                        "default %(default)s")
    s.add_argument("--tasks-per-env", type=number("tasks_per_env"), default=default(FactoryParams, "tasks_per_env"),
                   help="candidate tasks per environment (default %(default)s)")
    s.add_argument("--seed", type=number("seed"), default=default(FactoryParams, "seed"),
                   help="seed of walks, merges and instantiation (default %(default)s; same seed: no new rows)")
    s.add_argument("--env", metavar="NAME", default=default(FactoryParams, "env"), help="only this environment (tool set name)")
    s.add_argument("--max-envs", type=number("max_envs"), default=default(FactoryParams, "max_envs"),
                   help="at most this many environments")
    s.add_argument("--no-prefect", action="store_true", help="run the stages directly instead of as a Prefect flow")
    g = s.add_argument_group("task runner (the Prefect flow; flows/_common.py)")
    g.add_argument("--task-runner", choices=TASK_RUNNERS, default=None,
                   help="where each environment's stage work runs: thread (threads of the flow process, the "
                        "default), process (a pool of AUTOFORGE_STAGE_WORKERS worker processes) or dask (a Dask "
                        "cluster; needs the dask extra: pip install -e \".[dask]\"); default $AUTOFORGE_TASK_RUNNER or thread")
    g.add_argument("--dask-address", metavar="ADDR", default=None,
                   help="the scheduler of an existing Dask cluster, e.g. tcp://127.0.0.1:8786 (implies --task-runner "
                        "dask; default $AUTOFORGE_DASK_ADDRESS, else a local cluster started for the run)")
    g = s.add_argument_group("sampling (stage 3-4)")
    g.add_argument("--start", choices=["auto", *START_RULES], default=default(FactoryParams, "start"),
                   help="where walks start: auto (default: lookups, else any read, else any tool with no required id), "
                        + ", ".join(START_RULES[:-1]) + " or " + START_RULES[-1])
    g.add_argument("--min-len", type=number("min_len"), default=default(FactoryParams, "min_len"),
                   help="shortest walk in tool calls (default %(default)s)")
    g.add_argument("--max-len", type=number("max_len"), default=default(FactoryParams, "max_len"),
                   help="longest walk in tool calls (default %(default)s)")
    g.add_argument("--walks", type=number("walks"), default=default(FactoryParams, "walks"),
                   help="walks per environment (default max(40, 2 * tasks-per-env // 3))")
    g.add_argument("--attempts-per-task", type=number("attempts_per_task"), default=default(FactoryParams, "attempts_per_task"),
                   help="instantiation attempts per wanted task (default %(default)s)")
    g.add_argument("--all-dags", action="store_true", default=default(FactoryParams, "all_dags"),
                   help="generate from every stored DAG of the environments, not only those this batch sampled (a top-up "
                        "of environments sampled before; by default a batch reads only its own DAGs, so its memory and "
                        "time do not grow with the warehouse)")
