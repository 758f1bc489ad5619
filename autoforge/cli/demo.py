"""``autoforge demo``: the factory on the bundled docs, an oracle evaluation, a short ERPO run."""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import sys
import time
from pathlib import Path

from autoforge.cli.args import default, number, quiet_hf
from autoforge.cli.args import wh as chosen_warehouse
from autoforge.cli.learn import train_progress
from autoforge.cli.stages import print_factory_summary, run_factory_cli


def cmd_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autoforge.pipeline import FactoryParams
    from autoforge.pipeline.evaluate import format_report, run_eval
    from autoforge.pipeline.admin import init_warehouse, warehouse_url
    from autoforge.pipeline.train import DEMO_TOP_UP, demo_envs, demo_training

    console = Console()
    quiet_hf()
    wh = chosen_warehouse(args)
    t0 = time.time()
    console.rule("[bold]AutoForge demo: tool docs -> environments -> verified tasks -> ERPO")
    init_warehouse(wh)
    console.print(f"warehouse: {warehouse_url(wh)}")
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
        show = train_progress(console)

        def progress(phase: str, step: int, total: int, metrics: dict) -> None:  # every 20th SFT step, every ERPO step
            if phase != "sft" or step % 20 == 0 or step == total:
                show(phase, step, total, metrics)

        out = demo_training(wh, out_dir, steps=args.train_steps, progress=progress, envs=envs,
                            say=lambda text: console.print(f"  {text}", markup=False, highlight=False))
        console.print(out["table_markdown"])
        console.print(f"  learning curve: {out['curve']}")
        print(out["headline"], flush=True)  # one unwrapped line, whatever the terminal width
        if out.get("checkpoint"):
            console.print("  the same held-out numbers from the final checkpoint (its agent.json: the demo's prompt, "
                          "tasks and seed):", markup=False, highlight=False)
            print(f"  {eval_command(invocation(), wh, out['checkpoint'])}", flush=True)
    console.rule(f"done in {time.time() - t0:.0f}s")
    w = f" --warehouse {wh}" if wh else ""
    me = invocation()
    console.print("Look around:\n"
                  f"  {me} sql{w} \"SELECT * FROM v_environments\"\n"
                  f"  {me} sql{w} \"SELECT env_id, count(*) FROM v_curated_tasks GROUP BY 1\"\n"
                  f"  {me} sql{w} \"SELECT * FROM v_stage_funnel\"\n"
                  f"  {me} sql{w} \"SELECT * FROM v_eval_results\"\n"
                  f"  duckdb {warehouse_url(wh).split(':///', 1)[-1]}   # the stock DuckDB shell opens it too")
    return 0


def eval_command(me: str, warehouse: str | None, checkpoint: str) -> str:
    """The ``autoforge eval`` line that reproduces a training run's held-out numbers for ``checkpoint``."""
    import shlex

    w = f" --warehouse {shlex.quote(str(warehouse))}" if warehouse else ""
    return f"{me} eval{w} --agent {shlex.quote('hf:' + str(checkpoint))} --recorded-tasks"


def invocation() -> str:
    """How to run autoforge again from here, as this run was started: ``autoforge`` when that is on
    PATH, else the path of the script that ran (``.venv/bin/autoforge`` after the README's install),
    else ``python -m autoforge``."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    on_path = shutil.which("autoforge")
    if argv0 is not None and argv0.name == "autoforge":
        if on_path and Path(on_path).resolve() == argv0.resolve():
            return "autoforge"
        return os.path.relpath(argv0) if not argv0.is_absolute() or argv0.is_relative_to(Path.cwd()) else str(argv0)
    return "autoforge" if on_path else f"{Path(sys.executable).name} -m autoforge"


# each command's one-line help in the `autoforge --help` list (add_parsers below gives it, or parser.py's
# stub when this group is not built)
HELP = {
    "demo": "the whole factory on the bundled docs, then a short ERPO run",
}
COMMANDS = {"demo": cmd_demo}


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.pipeline import FactoryParams
    from autoforge.pipeline.train import demo_training

    s = sub.add_parser("demo", parents=[common], help=HELP["demo"],
                       description="Runs every stage end to end into the warehouse (default ./autoforge.duckdb): the "
                                   "factory (ingest, synthesize, sample, generate, verify) on the bundled tool docs, an "
                                   "oracle evaluation of the held-out tasks, and a short ERPO run of a tiny local policy.")
    s.add_argument("--tasks-per-env", type=number("tasks_per_env"), default=default(FactoryParams, "tasks_per_env"),
                   help="candidate tasks per environment (default %(default)s)")
    s.add_argument("--max-envs", type=number("max_envs"), default=default(FactoryParams, "max_envs"),
                   help="at most this many environments (quicker)")
    s.add_argument("--seed", type=number("seed"), default=default(FactoryParams, "seed"),
                   help="seed of the factory batch (default %(default)s; the training top-up uses seed + 1)")
    s.add_argument("--train-steps", type=number("train_steps"), default=inspect.signature(demo_training).parameters["steps"].default,
                   help="ERPO steps of the short run (default %(default)s; 0 skips training)")
    s.add_argument("--out", default="runs/demo", metavar="DIR", help="checkpoints, learning curve, before/after table")
    s.add_argument("--no-prefect", action="store_true", help="run the stages directly instead of as a Prefect flow")
