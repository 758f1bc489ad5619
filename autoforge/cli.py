"""``autoforge ...``: the command line. Each command runs library code directly (no Prefect
server needed); the same library functions back the Prefect flows in ``flows/``.

Run ``autoforge --help`` or ``autoforge COMMAND --help``.
"""

from __future__ import annotations

import argparse
import csv
import errno
import io
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

from autoforge.errors import AutoforgeError, ConfigError
from autoforge.settings import PARAMS, range_message

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}
FAILED_EXIT_CODE = 3  # a stage finished but an environment failed (same code as the factory's empty environment)


def command(name: str):
    def deco(fn):
        COMMANDS[name] = fn
        return fn

    return deco


# ----------------------------------------------------------------------------- output helpers


def _jsonable(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def print_rows(rows: list[dict], fmt: str = "table", title: str | None = None, file=None) -> None:
    """Print query rows as a table (rich), CSV or JSON."""
    file = file or sys.stdout
    if fmt == "json":
        print(json.dumps([{k: _jsonable(v) for k, v in r.items()} for r in rows], indent=2, default=str), file=file)
        return
    if fmt == "csv":
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else _jsonable(v) for k, v in r.items()})
        print(buf.getvalue(), end="", file=file)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    cols = list(rows[0]) if rows else []
    for c in cols:
        table.add_column(str(c), overflow="fold")
    for r in rows:
        table.add_row(*[_cell(r[c]) for c in cols])
    Console(file=file, width=max(100, min(220, _term_width()))).print(table)
    if not rows:
        print("(no rows)", file=file)


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        s = json.dumps(v, default=str)
        return s if len(s) <= 120 else s[:117] + "..."
    return str(v)


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 160


def _wh(args: argparse.Namespace) -> str | None:
    return getattr(args, "warehouse", None)


# ----------------------------------------------------------------------------- commands: warehouse


@command("init")
def cmd_init(args: argparse.Namespace) -> int:
    from autoforge.warehouse import apply_migrations, resolve_url

    res = apply_migrations(_wh(args))
    url = resolve_url(_wh(args))
    if res["applied"]:
        print(f"{url}: applied {len(res['applied'])} migration(s): {', '.join(res['applied'])}")
    else:
        print(f"{url}: up to date ({res['already']} migrations applied earlier)")
    if res["changed"]:
        print(f"warning: applied migrations changed on disk since: {', '.join(res['changed'])} (add a new file instead)", file=sys.stderr)
    return 0


@command("sql")
def cmd_sql(args: argparse.Namespace) -> int:
    from autoforge.warehouse import query

    sql = args.query if args.query != "-" else sys.stdin.read()
    rows = query(_wh(args), sql)
    print_rows(rows, args.format)
    return 0


@command("export")
def cmd_export(args: argparse.Namespace) -> int:
    if args.format in ("hf", "verl"):  # folders for other trainers: autoforge/integrations
        from autoforge.integrations.hf import export_hf
        from autoforge.integrations.verl import export_verl

        res = (export_hf if args.format == "hf" else export_verl)(_wh(args), args.relation, args.out)
        parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
        print(f"wrote {sum(res.splits.values())} rows of {args.relation} to {res.out}/ ({args.format}: {parts}; "
              f"card: {res.out}/README.md)")
        return 0
    from autoforge.warehouse.export import export_relation

    n = export_relation(_wh(args), args.relation, args.format, args.out)
    print(f"wrote {n} rows of {args.relation} to {args.out} ({args.format})")
    return 0


# ----------------------------------------------------------------------------- commands: stages


@command("ingest")
def cmd_ingest(args: argparse.Namespace) -> int:
    from autoforge.pipeline import run_ingest

    if not args.paths and not args.bundled:
        raise AutoforgeError("give one or more PATHs (files or folders) or --bundled")
    summary = run_ingest(_wh(args), paths=args.paths, bundled=args.bundled)
    print_rows(summary["toolsets"], title="ingested tool sets")
    for err in summary["errors"]:
        print(f"rejected: {err}", file=sys.stderr)
    print(f"{summary['n_toolsets']} tool sets, {summary['n_tools']} tools, {summary['n_rejected']} document(s) rejected")
    return 1 if summary["n_rejected"] else 0


@command("synthesize")
def cmd_synthesize(args: argparse.Namespace) -> int:
    from autoforge.pipeline import run_synthesis

    summary = run_synthesis(_wh(args), env=args.env, backend=args.backend, max_envs=args.max_envs)
    print_rows(summary["table"], title="synthesized environments")
    from autoforge.pipeline.synthesize import environment_checks

    checks = environment_checks(_wh(args), [e["env_id"] for e in summary.get("environments", [])])
    print_rows([{"environment": r["name"], "kind": r["kind"],
                 "writes reachable from a read": f"{r['n_writes_reachable']}/{r['n_write_tools']}",
                 "of those by state only": r["n_writes_by_state"],
                 "+ needing no id": f"{r['n_writes_usable'] - r['n_writes_reachable']}",
                 "rules found / enforced / probe ok": f"{r['n_rules']} / {r['n_rules_enforced']} / {r['n_rules_probe_passed']}",
                 "outputs derived": r["n_outputs_derived"],
                 "writes no read leads to": _names(r["writes_unreachable"])} for r in checks],
               title="acceptance checks (autoforge sql \"SELECT * FROM v_environment_checks\")")
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


def _names(value: Any, most: int = 4) -> str:
    """A JSON list of names as a short comma list ("a, b, c +2 more")."""
    names = json.loads(value) if isinstance(value, str) else list(value or [])
    return (", ".join(names[:most]) + (f" +{len(names) - most} more" if len(names) > most else "")) or "-"


def _prefect_env() -> None:
    """Offline-friendly Prefect defaults for flows started from the CLI (an ephemeral server if no API URL)."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def _factory_params(args: argparse.Namespace, bundled: bool):
    from autoforge.pipeline import FactoryParams

    sampling = {k: getattr(args, k) for k in ("start", "min_len", "max_len", "walks", "attempts_per_task", "all_dags")
                if getattr(args, k, None) is not None}
    return FactoryParams(
        backend=args.backend, tasks_per_env=args.tasks_per_env, seed=args.seed, env=args.env,
        paths=list(args.paths or []), bundled=bundled, max_envs=args.max_envs, warehouse=_wh(args), **sampling,
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
        _prefect_env()
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
    from autoforge.warehouse import query, table_exists

    print(f"batch {result.get('batch_id')}")
    print_rows(result.get("funnel") or [], title="stage funnel (v_stage_funnel)")
    if table_exists(warehouse, "v_curated_tasks"):
        rows = query(warehouse, """
            SELECT count(*) AS verified_tasks, count(DISTINCT env_id) AS environments,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY n_tool_calls) AS median_tool_calls,
                   round(avg(CASE WHEN n_reasoning_nodes > 0 THEN 1 ELSE 0 END), 3) AS share_with_reasoning,
                   round(avg(CASE WHEN n_requirements >= 2 THEN 1 ELSE 0 END), 3) AS share_merged,
                   max(dag_depth) AS max_dag_depth
            FROM v_curated_tasks""", read_only_check=False)
        print_rows(rows, title="curated tasks (v_curated_tasks)")


@command("factory")
def cmd_factory(args: argparse.Namespace) -> int:
    params = _factory_params(args, bundled=args.bundled or not args.paths)
    result = run_factory_cli(params, use_prefect=not args.no_prefect, task_runner=args.task_runner,
                             dask_address=args.dask_address)
    print_factory_summary(_wh(args), result)
    return print_environment_yield(_wh(args), result.get("environments") or [])


def print_environment_yield(warehouse: str | None, names: list[str]) -> int:
    """The per-environment yield table; the exit code (EMPTY_EXIT_CODE when an environment of the
    batch yields no verified task, with why on stderr)."""
    from autoforge.pipeline import EMPTY_EXIT_CODE, empty_environments, environment_quality, environment_yield

    rows = environment_yield(warehouse, names)
    print_rows([{"environment": r["name"], "kind": r["kind"], "tools": r["n_tools_accepted"], "edges": r["n_edges"],
                 "sequences": r["n_sequences"], "starts": r["start_rules"] or "-", "dags": r["n_dags"], "generated": r["n_generated"],
                 "verified": r["n_verified"], "top drops": r["generate_drops"] or r["sample_drops"] or "-"}
                for r in rows], title="per environment (autoforge sql \"SELECT * FROM v_environment_funnel\")")
    quality = environment_quality(warehouse, names)

    def share(v: Any) -> str:
        return "-" if v is None else f"{v:.0%}"

    print_rows([{"environment": r["name"], "verified": r["n_verified"],
                 "distinct sequences": f"{r['n_sequences']} ({share(r['sequence_share'])})",
                 "writes used / reachable": f"{r['n_writes_used']}/{r['n_writes_reachable']}",
                 "median calls": r["median_calls"] if r["median_calls"] is not None else "-",
                 "with reasoning": share(r["reasoning_share"]),
                 "dropped: unobservable / out of domain / near-duplicate":
                     f"{share(r['dropped_unobservable'])} / {share(r['dropped_out_of_domain'])} / {share(r['dropped_near_duplicate'])}"}
                for r in quality], title="task quality (autoforge sql \"SELECT * FROM v_environment_quality\")")
    empty = empty_environments(rows)
    for r in empty:
        print(f"no verified task for environment {r['name']!r}: {r['why_empty']}", file=sys.stderr)
    if empty:
        print(f"{len(empty)} of {len(rows)} environment(s) yielded no task (exit code {EMPTY_EXIT_CODE}); see "
              "`autoforge sql \"SELECT name, why_empty FROM v_environment_funnel\"`", file=sys.stderr)
        return EMPTY_EXIT_CODE
    return 0


@command("eval")
def cmd_eval(args: argparse.Namespace) -> int:
    from autoforge.pipeline import evaluate as stage

    summary = stage.run(_wh(args), stage.EvalParams(
        agent=args.agent, user=args.user, trials=args.trials, split=args.split, env=args.env, limit=args.limit,
        concurrency=args.concurrency, user_error_rate=args.user_error_rate, seed=args.seed, judge=args.judge,
        max_turns=args.max_turns,
    ))
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        print(stage.format_report(_with_env_names(_wh(args), summary)))
    return 0


def _with_env_names(warehouse: str | None, summary: dict) -> dict:
    """The summary with environment names in place of env ids, for people reading the table."""
    from autoforge.warehouse import query

    names = {r["env_id"]: r["name"] for r in query(warehouse, "SELECT env_id, name FROM environments",
                                                  read_only_check=False)}
    rows = [{**r, "env_id": names.get(r["env_id"], r["env_id"])} if r.get("env_id") else r for r in summary["results"]]
    return {**summary, "results": rows}


@command("mcp")
def cmd_mcp(args: argparse.Namespace) -> int:
    from autoforge.integrations import mcp

    served = mcp.load_served(_wh(args), args.env, args.task)
    mcp.check_served(served)
    if args.http is None:
        mcp.announce(served, "serving over stdio")
        mcp.serve_stdio(served)
        return 0
    host, port = mcp.parse_host_port(args.http)
    mcp.serve_http(served, host, port, max_sessions=args.max_sessions,
                   ready=lambda url: mcp.announce(served, f"serving at {url} (Ctrl-C stops)"))
    return 0


@command("serve")
def cmd_serve(args: argparse.Namespace) -> int:
    _prefect_env()
    os.environ["PREFECT_LOGGING_LEVEL"] = "INFO"
    from flows.serve import serve_all

    print("serving the deployments of deployments/prefect.yaml from this process (Ctrl-C stops; schedules "
          f"{'on' if not args.no_schedules else 'off'}). Set PREFECT_API_URL to use a running Prefect server/UI.")
    serve_all(_wh(args), limit=args.limit, names=args.names or None, schedules=not args.no_schedules)
    return 0


def _quiet_hf() -> None:
    """No per-shard progress bars from transformers in our output (our own progress lines say what happens)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def _train_progress(console):
    """A progress callback for training: one line per step with the headline metrics."""

    def progress(phase: str, step: int, total: int, metrics: dict) -> None:
        keys = ("loss", "reward_mean", "masked_frac", "dropped_tasks", "tokens_per_s", "pass_hat_1")
        shown = ", ".join(f"{k}={metrics[k]:.4g}" if isinstance(metrics.get(k), float) else f"{k}={metrics[k]}"
                          for k in keys if metrics.get(k) is not None)
        console.print(f"  {phase} {step}/{total}: {shown}", markup=False, highlight=False)

    return progress


@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autoforge.pipeline.train import run_training, train_config

    console = Console()
    _quiet_hf()
    config = train_config(args.config, dict(args.set or []), where="--set")
    out = run_training(_wh(args), config, progress=_train_progress(console), out_dir=args.out)
    console.print(out["table_markdown"])
    console.print(f"learning curve: {out['curve']}   checkpoint: {out['checkpoint']}   run: {out['train_run_id']}")
    return 0


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autoforge.pipeline import FactoryParams
    from autoforge.pipeline.evaluate import format_report, run_eval
    from autoforge.pipeline.train import DEMO_TOP_UP, demo_envs, demo_training
    from autoforge.warehouse import apply_migrations, resolve_url

    console = Console()
    _quiet_hf()
    wh = _wh(args)
    t0 = time.time()
    console.rule("[bold]AutoForge demo: tool docs -> environments -> verified tasks -> ERPO")
    apply_migrations(wh)
    console.print(f"warehouse: {resolve_url(wh)}")
    console.rule("1. the factory on the bundled tool docs")
    params = FactoryParams(tasks_per_env=args.tasks_per_env, seed=args.seed, bundled=True, warehouse=wh,
                           max_envs=args.max_envs)
    result = run_factory_cli(params, use_prefect=not args.no_prefect)
    print_factory_summary(wh, result)
    console.rule("2. the oracle agent solves the held-out tasks through dialogue (proves they are solvable)")
    summary = run_eval(wh, agent="oracle", user="offline", trials=1, split="test")
    console.print(format_report(summary, max_failures=5).splitlines()[0])
    overall = [r for r in summary["results"] if r["env_id"] is None]
    console.print(f"  oracle pass^1 on {overall[0]['n_tasks']} held-out tasks: {overall[0]['pass_hat_k']:.3f}")
    if args.train_steps > 0:
        envs = [r["env_name"] for r in demo_envs(wh)]
        console.rule(f"3. more short tasks for training: the factory again on {', '.join(envs)} "
                     f"({DEMO_TOP_UP} candidates each, seed {args.seed + 1})")
        for name in envs:
            extra = FactoryParams(tasks_per_env=DEMO_TOP_UP, seed=args.seed + 1, bundled=True, warehouse=wh, env=name,
                                  all_dags=True)  # a top-up: the first batch's DAGs take turns too
            run_factory_cli(extra, use_prefect=not args.no_prefect)
        console.rule(f"4. training: the shipped base policy (copies values, knows no task), SFT on the short tasks' "
                     f"gold dialogues, {args.train_steps} ERPO steps")
        out_dir = Path(args.out)
        show = _train_progress(console)

        def progress(phase: str, step: int, total: int, metrics: dict) -> None:  # every 20th SFT step, every ERPO step
            if phase != "sft" or step % 20 == 0 or step == total:
                show(phase, step, total, metrics)

        out = demo_training(wh, out_dir, steps=args.train_steps, progress=progress, envs=envs,
                            say=lambda text: console.print(f"  {text}", markup=False, highlight=False))
        console.print(out["table_markdown"])
        console.print(f"  learning curve: {out['curve']}")
        print(out["headline"], flush=True)  # one unwrapped line, whatever the terminal width
    console.rule(f"done in {time.time() - t0:.0f}s")
    w = f" --warehouse {wh}" if wh else ""
    console.print("Look around:\n"
                  f"  autoforge sql{w} \"SELECT * FROM v_environments\"\n"
                  f"  autoforge sql{w} \"SELECT env_id, count(*) FROM v_curated_tasks GROUP BY 1\"\n"
                  f"  autoforge sql{w} \"SELECT * FROM v_stage_funnel\"\n"
                  f"  autoforge sql{w} \"SELECT * FROM v_eval_results\"\n"
                  f"  duckdb {resolve_url(wh).split(':///', 1)[-1]}   # the stock DuckDB shell opens it too")
    return 0


@command("base-checkpoint")
def cmd_base_checkpoint(args: argparse.Namespace) -> int:
    import tempfile

    from autoforge.rl.base import BASE_DIR, BaseSpec, build_base_checkpoint, estimated_build_s, read_manifest

    _quiet_hf()
    spec = BaseSpec(**{k: v for k, v in (("steps", args.steps), ("seed", args.seed), ("toolbox", args.toolbox))
                       if v is not None})
    out = Path(args.out) if args.out else BASE_DIR
    eta = estimated_build_s(spec)
    last = [time.perf_counter()]

    def progress(step: int, total: int, m: dict) -> None:
        if time.perf_counter() - last[0] >= 30 or step == total:
            last[0] = time.perf_counter()
            print(f"  copy warm-up {step}/{total}: loss {m['loss']:.3f}", flush=True)

    if args.check:
        shipped = read_manifest(out)
        if shipped is None:
            raise ConfigError(f"base-checkpoint --check: {out} holds no base_manifest.json; build it first with "
                              f"`autoforge base-checkpoint{' --out ' + str(out) if args.out else ''}`")
        spec = BaseSpec(**shipped["spec"])
        print(f"rebuilding {out}'s spec in a temp folder to compare weights (about {estimated_build_s(spec) / 60:.0f} "
              "min on one CPU core) ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="autoforge-base-check-") as tmp:
            man = build_base_checkpoint(Path(tmp) / "base", spec, progress=progress)
        same = man["weights_sha256"] == shipped["weights_sha256"]
        print(f"weights sha256: shipped {shipped['weights_sha256'][:16]}..., rebuilt {man['weights_sha256'][:16]}... "
              f"-> {'identical' if same else 'DIFFERENT'}")
        return 0 if same else 1
    print(f"building the base checkpoint into {out}: tokenizer from the bundled tool docs, {spec.steps} copy warm-up "
          f"steps of {spec.batch_size} synthetic recall dialogues (about {eta / 60:.0f} min on one CPU core) ...",
          flush=True)
    man = build_base_checkpoint(out, spec, progress=progress)
    print(f"done in {man['build_s']:.0f} s: {man['parameters']:,} parameters, held-out recall exact "
          f"{man['heldout_recall_exact']:.3f}, weights sha256 {man['weights_sha256']}")
    return 0


# ----------------------------------------------------------------------------- parser


def _share(text: str) -> float:
    """argparse ``type=``: a number from 0 to 1 (e.g. 0.5)."""
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1 (e.g. 0.5), got {text!r}")
    return x


def _number(key: str, flag: str | None = None) -> Callable[[str], Any]:
    """argparse ``type=``: a number within ``PARAMS[key]``; otherwise usage error naming the range and an example."""
    rng = PARAMS[key]
    flag = flag or "--" + key.replace("_", "-")

    def parse(text: str) -> Any:
        value, why = rng.parse(text)
        if why:
            raise argparse.ArgumentTypeError(range_message(rng, text, why, f"{flag} {rng.example}"))
        return value

    return parse


def _warehouse_arg(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a DuckDB file path or a duckdb:/// or postgresql:// URL: got {text!r} (empty); e.g. "
                                         "--warehouse data/autoforge.duckdb, or leave it out for $AUTOFORGE_WAREHOUSE "
                                         "or ./autoforge.duckdb")
    return text


def _assignment(text: str) -> tuple[str, str]:
    """``--set FIELD=VALUE`` -> ``(field, value)``; the field and value are checked against TrainConfig later."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"must be FIELD=VALUE, a TrainConfig field, '=' and its value: got {text!r}; "
                                         "e.g. --set steps=20 (fields: autoforge/rl/config.py)")
    return key.strip(), value


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        metavar="PATH",
        default=None,
        type=_warehouse_arg,
        help="DuckDB file, or a postgresql:// URL (default: $AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)",
    )
    p = argparse.ArgumentParser(
        prog="autoforge",
        description=(
            "AutoForge: tool docs -> simulated environments -> verified multi-step tasks -> ERPO training "
            "(arXiv 2512.22857). Every stage writes to a DuckDB warehouse you can query with `autoforge sql`."
        ),
        epilog="Start with `autoforge demo`. Each command has its own --help. Exit codes: 0 done; 1 the operating "
               "system refused (disk full, permission denied, ...); 2 a bad setting (AUTOFORGE_*), flag or input; "
               "130 interrupted.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("init", parents=[common], help="create or upgrade the warehouse schema (idempotent)")
    s = sub.add_parser("sql", parents=[common], help="run a read-only SQL query and print the result")
    s.add_argument("query", help='SQL text, e.g. "SELECT count(*) FROM tool_specs" ("-" reads stdin)')
    s.add_argument("--format", choices=["table", "csv", "json"], default="table")
    s = sub.add_parser("export", parents=[common], help="write a table or view to parquet, jsonl or csv, or a "
                       "folder for other trainers (hf: a Hugging Face DatasetDict; verl: verl's RL parquet)",
                       epilog="hf and verl write a folder: train/test from the task split, a dataset card README.md "
                              "(every column, the warehouse and batches it came from). hf takes any table or view "
                              "(tasks relations such as v_curated_tasks become one row per task with the prompt as "
                              "chat messages, OpenAI tool schemas, states and gold outcome); verl takes tasks "
                              "relations. The folder is written beside --out first and replaces it only when "
                              "complete; an existing --out must be empty or a previous export of the same format.")
    s.add_argument("relation", metavar="TABLE_OR_VIEW")
    s.add_argument("--format", choices=["parquet", "jsonl", "csv", "hf", "verl"], required=True,
                   help="parquet | jsonl | csv: one file; hf: datasets.load_from_disk folder; verl: train.parquet + "
                        "test.parquet")
    s.add_argument("--out", required=True, metavar="PATH", help="the file (parquet, jsonl, csv) or folder (hf, verl)")

    s = sub.add_parser("ingest", parents=[common], help="parse tool documentation into tool sets (candidate environments)")
    s.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (a folder = one tool set)")
    s.add_argument("--bundled", action="store_true", help="ingest the bundled corpus of 10+ domains")

    s = sub.add_parser("synthesize", parents=[common], help="generate state schema + checked tool code per tool set",
                       epilog=f"Exit codes: 0 done; {FAILED_EXIT_CODE} an environment failed (no tool accepted, it raised, "
                              "or e.g. the LLM server could not be reached) or its result was worse than the stored one "
                              "(which is kept); the reasons are printed. 2 bad parameters or input.")
    s.add_argument("--env", metavar="NAME", help="only this tool set (default: all)")
    s.add_argument("--backend", choices=["offline", "openai"], default="offline",
                   help="offline rules/templates (default) or an OpenAI-compatible server (AUTOFORGE_OPENAI_*)")
    s.add_argument("--max-envs", type=_number("max_envs"), default=None, help="at most this many tool sets")

    def factory_args(s: argparse.ArgumentParser, tasks_default: int) -> None:
        s.add_argument("--backend", choices=["offline", "openai"], default="offline",
                       help="offline rules (default, no network) or an OpenAI-compatible server (AUTOFORGE_OPENAI_*)")
        s.add_argument("--tasks-per-env", type=_number("tasks_per_env"), default=tasks_default,
                       help="candidate tasks per environment")
        s.add_argument("--seed", type=_number("seed"), default=0,
                       help="seed of walks, merges and instantiation (same seed: no new rows)")
        s.add_argument("--env", metavar="NAME", help="only this environment (tool set name)")
        s.add_argument("--max-envs", type=_number("max_envs"), default=None, help="at most this many environments")
        s.add_argument("--no-prefect", action="store_true", help="run the stages directly instead of as a Prefect flow")

    s = sub.add_parser("factory", parents=[common], help="run ingest -> synthesize -> sample -> generate -> verify",
                       description="Run the whole factory on one batch of tool docs and print the stage funnel, the "
                                   "curated corpus and each environment's yield.",
                       epilog="Exit codes: 0 every environment of the batch yields verified tasks; 3 an environment "
                              "yields none (the reason is printed, and stored in v_environment_funnel.why_empty); "
                              "2 bad parameters or input.")
    s.add_argument("paths", nargs="*", metavar="PATH", help="tool docs to ingest (default: the bundled corpus)")
    s.add_argument("--bundled", action="store_true", help="also ingest the bundled corpus when PATHs are given")
    factory_args(s, 110)
    g = s.add_argument_group("task runner (the Prefect flow; flows/_common.py)")
    g.add_argument("--task-runner", choices=["thread", "process", "dask"], default=None,
                   help="where each environment's stage work runs: thread (threads of the flow process, the "
                        "default), process (a pool of AUTOFORGE_STAGE_WORKERS worker processes) or dask (a Dask "
                        "cluster); default $AUTOFORGE_TASK_RUNNER or thread")
    g.add_argument("--dask-address", metavar="ADDR", default=None,
                   help="the scheduler of an existing Dask cluster, e.g. tcp://127.0.0.1:8786 (implies --task-runner "
                        "dask; default $AUTOFORGE_DASK_ADDRESS, else a local cluster started for the run)")
    g = s.add_argument_group("sampling (stage 3-4)")
    g.add_argument("--start", choices=["auto", "lookup", "read", "entry", "any"], default=None,
                   help="where walks start: auto (default: lookups, else any read, else any tool with no required id), "
                        "lookup, read, entry or any")
    g.add_argument("--min-len", type=_number("min_len"), default=None, help="shortest walk in tool calls (default 2)")
    g.add_argument("--max-len", type=_number("max_len"), default=None, help="longest walk in tool calls (default 5)")
    g.add_argument("--walks", type=_number("walks"), default=None,
                   help="walks per environment (default max(40, 2 * tasks-per-env // 3))")
    g.add_argument("--attempts-per-task", type=_number("attempts_per_task"), default=None,
                   help="instantiation attempts per wanted task (default 4)")
    g.add_argument("--all-dags", action="store_true", default=None,
                   help="generate from every stored DAG of the environments, not only those this batch sampled (a top-up "
                        "of environments sampled before; by default a batch reads only its own DAGs, so its memory and "
                        "time do not grow with the warehouse)")

    s = sub.add_parser("eval", parents=[common], help="roll out an agent with a simulated user on curated tasks: pass^k",
                       description="Evaluate an agent on curated tasks (v_curated_tasks) with a simulated user; prints "
                                   "pass^k for k = 1..trials with 95%% confidence intervals, per environment and overall, "
                                   "and stores episodes and results (view v_eval_results).")
    s.add_argument("--agent", default="oracle",
                   help="oracle | random | openai[:MODEL] | hf:MODEL_DIR (a local transformers model directory)")
    s.add_argument("--user", default="offline", help="offline (scripted) | llm[:MODEL] (OpenAI-compatible)")
    s.add_argument("--trials", type=_number("trials"), default=1, help="trials per task (K of pass^k)")
    s.add_argument("--split", choices=["train", "test"], default=None, help="only this split (test = held-out)")
    s.add_argument("--env", metavar="NAME", help="only this environment")
    s.add_argument("--limit", type=_number("limit"), default=None, help="at most this many tasks")
    s.add_argument("--concurrency", type=_number("concurrency"), default=4, help="episodes run at once (threads)")
    s.add_argument("--user-error-rate", type=_number("user_error_rate"), default=0.0,
                   help="rate of injected user errors (wrong fact, withheld fact, premature stop; split evenly)")
    s.add_argument("--judge", choices=["rule", "llm", "none"], default="rule", help="user-error judge")
    s.add_argument("--max-turns", type=_number("max_turns"), default=40, help="turn limit per episode")
    s.add_argument("--seed", type=_number("seed"), default=0)
    s.add_argument("--json", action="store_true", help="print the summary as JSON")

    s = sub.add_parser("serve", parents=[common], help="serve every Prefect deployment with its schedule from one process",
                       description="The single-process alternative to work pools and workers: serves the deployments "
                                   "of deployments/prefect.yaml (factory nightly, training weekly, every stage on "
                                   "demand) until interrupted. Trigger runs from the Prefect UI or `prefect deployment run`.")
    s.add_argument("names", nargs="*", metavar="DEPLOYMENT", help="only these deployments (default: all)")
    s.add_argument("--limit", type=_number("serve_limit", "--limit"), default=1,
                   help="flow runs at once in this process (default 1: DuckDB has one writer)")
    s.add_argument("--no-schedules", action="store_true", help="serve without schedules (runs only when triggered)")

    s = sub.add_parser("mcp", parents=[common], help="serve one environment as an MCP server (stdio, or HTTP with --http)",
                       description="Serve one synthesized environment's tools to any MCP client (official mcp SDK): "
                                   "tools/list gives the tools with their JSON schemas and descriptions, tools/call runs "
                                   "them in the sandbox. Each client session gets its own copy of the starting state "
                                   "(--task's initial state, else the environment's sample state) and a `reset` tool; "
                                   "sessions never see each other's writes. A failed call is an MCP tool error (isError).",
                       epilog="Client config (stdio): {\"command\": \"autoforge\", \"args\": [\"mcp\", \"--env\", "
                              "\"NAME\", \"--warehouse\", \"/abs/path/autoforge.duckdb\"]}. Over HTTP point the client "
                              "at http://HOST:PORT/mcp (streamable HTTP). Tool limits: AUTOFORGE_TOOL_TIMEOUT, "
                              "AUTOFORGE_TOOL_MEMORY_MB.")
    s.add_argument("--env", required=True, metavar="NAME", help="the environment (name or env id; `autoforge sql "
                   "\"SELECT name FROM environments\"` lists them)")
    s.add_argument("--task", metavar="TASK_ID", default=None,
                   help="start every session from this task's initial state (default: the environment's sample state)")
    s.add_argument("--max-sessions", type=_number("max_sessions"), default=64,
                   help="with --http: sessions at once, each with its own sandbox worker (default 64; more get HTTP 503)")
    s.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port; "
                        "127.0.0.1/localhost get DNS-rebinding protection; there is no authentication, so bind "
                        "another host only on a network you trust)")

    s = sub.add_parser("train", parents=[common], help="SFT cold start then ERPO on curated tasks (torch + transformers)",
                       description="Trains a policy on the warehouse's curated tasks: SFT on gold dialogues, then ERPO "
                                   "(environment-level advantage, user-error masking, dynamic sampling). Evaluates the "
                                   "held-out split before and after, writes training_runs/training_steps, a learning-curve "
                                   "PNG and a before/after table. A killed run resumes from its last checkpoint.")
    s.add_argument("--config", metavar="FILE", default=None,
                   help="YAML/JSON TrainConfig (default: the built-in defaults; every field documented in "
                        "autoforge/rl/config.py)")
    s.add_argument("--set", action="append", type=_assignment, metavar="FIELD=VALUE", help="override one config field (repeatable)")
    s.add_argument("--out", default=None, metavar="DIR", help="where the curve and table go (default: checkpoint dir)")

    s = sub.add_parser("demo", parents=[common], help="the whole factory on the bundled docs, then a short ERPO run",
                       description="Runs every stage end to end into the warehouse (default ./autoforge.duckdb): the "
                                   "factory (ingest, synthesize, sample, generate, verify) on the bundled tool docs, an "
                                   "oracle evaluation of the held-out tasks, and a short ERPO run of a tiny local policy.")
    s.add_argument("--tasks-per-env", type=_number("tasks_per_env"), default=110, help="candidate tasks per environment")
    s.add_argument("--max-envs", type=_number("max_envs"), default=None, help="at most this many environments (quicker)")
    s.add_argument("--seed", type=_number("seed"), default=0)
    s.add_argument("--train-steps", type=_number("train_steps"), default=4, help="ERPO steps of the short run (0 skips training)")
    s.add_argument("--out", default="runs/demo", metavar="DIR", help="checkpoints, learning curve, before/after table")
    s.add_argument("--no-prefect", action="store_true", help="run the stages directly instead of as a Prefect flow")

    s = sub.add_parser("base-checkpoint", help="(re)build the shipped base policy the demo starts from",
                       description="Builds autoforge/data/base_policy/: a tiny Llama policy whose tokenizer is trained "
                                   "on the bundled tool docs and whose weights are trained only on synthetic recall "
                                   "dialogues (the copy warm-up, autoforge/rl/warmup.py): it can copy a value from its "
                                   "context into a tool call and knows no task. Seeded, one CPU thread: the same spec "
                                   "gives the same weights (base_manifest.json records their SHA-256). The spec is "
                                   "autoforge/rl/base.py: BaseSpec.")
    s.add_argument("--out", default=None, metavar="DIR", help="where to write it (default: the package's "
                   "autoforge/data/base_policy, what `autoforge demo` uses)")
    s.add_argument("--steps", type=_number("train_steps", "--steps"), default=None,
                   help="copy warm-up steps (default: BaseSpec.steps; fewer = quicker, copies worse)")
    s.add_argument("--seed", type=_number("seed"), default=None, help="seed of the weights and dialogues (default 0)")
    s.add_argument("--toolbox", type=_share, default=None, metavar="SHARE",
                   help="share of warm-up dialogues with a tool list to pick from, 0..1 (default: BaseSpec.toolbox, 0; "
                        "0.5 makes the warm-up ~1.6x slower; not yet measured)")
    s.add_argument("--check", action="store_true", help="rebuild the checkpoint at --out from its manifest's spec in "
                   "a temp folder and compare the weights hash (exit 1 when they differ); writes nothing")
    return p


# ----------------------------------------------------------------------------- failures


# What an operating-system failure looks like inside a DuckDB / SQLAlchemy error (no OSError there).
_IO_WORDS = (("no space left on device", errno.ENOSPC), ("disk quota exceeded", errno.EDQUOT),
             ("read-only file system", errno.EROFS), ("permission denied", errno.EACCES),
             ("operation not permitted", errno.EPERM))
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_REFUSED = (*_DISK_FULL, errno.EACCES, errno.EPERM, errno.EROFS)  # also said for a WarehouseError's cause


def _os_failure(exc: BaseException) -> tuple[int | None, str | None, str] | None:
    """``(errno, file, reason)`` of the operating-system failure behind ``exc`` (an OSError, or an I/O
    error of the DuckDB driver, possibly wrapped by SQLAlchemy or a WarehouseError), else None.

    Under one of our own errors (a WarehouseError wrapping the driver's) only a full disk, a
    permission or a read-only disk counts, and only causes given with ``raise ... from`` are
    followed; a ConfigError already says what to change."""
    if isinstance(exc, ConfigError):
        return None
    ours = isinstance(exc, AutoforgeError)
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        found: tuple[int | None, str | None, str] | None = None
        if isinstance(e, OSError):
            found = e.errno, e.filename, e.strerror or str(e)
        elif type(e).__module__.lstrip("_").split(".")[0] in ("duckdb", "sqlalchemy"):
            text = str(e)
            words, code = next(((w, c) for w, c in _IO_WORDS if w in text.lower()), (None, None))
            if code is not None or type(e).__name__ == "IOException":
                quoted = re.search(r'"(/[^"]+)"', text)
                found = code, quoted.group(1) if quoted else None, words.capitalize() if words else text.split("\n")[0]
        if found and (not ours or found[0] in _REFUSED):
            return found
        todo += [getattr(e, "orig", None), e.__cause__] + ([] if ours else [e.__context__])
    return None


def _warehouse_dir(args: argparse.Namespace) -> str | None:
    """The folder of the DuckDB warehouse file of this command, if it is one."""
    from autoforge.settings import get_settings

    try:
        value = _wh(args) or get_settings().warehouse
    except AutoforgeError:
        return None
    if "://" in value:
        if not value.startswith("duckdb:///"):
            return None
        value = value[len("duckdb:///"):].split("?", 1)[0]
    return str(Path(value).expanduser().resolve().parent)


def _os_message(code: int | None, file: str | None, reason: str, args: argparse.Namespace) -> str:
    """One line: what the system refused, on which file, and what to do."""
    where = f" on {file}" if file else ""
    flags = "--warehouse" + (" / --out" if hasattr(args, "out") else "")
    if code in _DISK_FULL:
        folder = str(Path(file).parent) if file else _warehouse_dir(args) or "the disk being written"
        return (f"disk full ({reason}){where}: free space at {folder} or point {flags} elsewhere; the warehouse lost "
                "nothing already written (each write is one transaction: the failed one was rolled back)")
    if code in (errno.EACCES, errno.EPERM):
        return (f"permission denied ({reason}){where}: make it readable/writable for this user, or point {flags} "
                "at a location you can write")
    if code == errno.EROFS:
        return f"read-only file system ({reason}){where}: point {flags} at a writable disk"
    if code == errno.ENOENT:
        return f"no such file or directory{where}: check the path, or create the folder first"
    name = errno.errorcode.get(code, "I/O error") if code is not None else "I/O error"
    return f"{name} ({reason}){where}: the operating system refused the operation; check the disk and the path"


def _failure_exit(exc: Exception, args: argparse.Namespace) -> int | None:
    """Print one ``error: ...`` line for an expected failure and return the exit code; None: a bug (re-raise)."""
    failure = _os_failure(exc)
    if failure is not None and failure[0] == errno.EPIPE:  # stdout closed (`autoforge sql ... | head`)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    if failure is not None:
        print(f"error: {_os_message(*failure, args)}", file=sys.stderr)
        return 1
    if isinstance(exc, AutoforgeError):
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return None


def main(argv: list[str] | None = None) -> int:
    from autoforge.settings import get_settings

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    t0 = time.time()
    timing = False
    try:
        settings = get_settings()  # every AUTOFORGE_* setting is checked before the command writes anything
        timing = settings.timing
        if os.environ.get("AUTOFORGE_WAREHOUSE"):  # a database we do not support is refused even under --warehouse
            from autoforge.warehouse import resolve_url

            resolve_url(settings.warehouse)
        return COMMANDS[args.command](args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - expected failures become one line; anything else is a bug
        code = _failure_exit(exc, args)
        if code is None:
            raise
        return code
    finally:
        if timing:
            print(f"[{args.command} took {time.time() - t0:.2f}s]", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
