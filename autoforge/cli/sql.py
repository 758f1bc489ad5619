"""``autoforge init``, ``sql`` and ``export``: the warehouse itself, a user's query, a relation written out."""

from __future__ import annotations

import argparse
import sys

from autoforge.cli.args import wh
from autoforge.cli.failures import require_extra
from autoforge.cli.output import print_rows

FOLDER_FORMATS = ("hf", "verl", "harbor")  # folders for other trainers: autoforge/integrations


def cmd_init(args: argparse.Namespace) -> int:
    from autoforge.pipeline.admin import init_warehouse, warehouse_url

    res = init_warehouse(wh(args))
    url = warehouse_url(wh(args))
    if res["applied"]:
        print(f"{url}: applied {len(res['applied'])} migration(s): {', '.join(res['applied'])}")
    else:
        print(f"{url}: up to date ({res['already']} migrations applied earlier)")
    if res["changed"]:
        print(f"warning: applied migrations changed on disk since: {', '.join(res['changed'])} (add a new file instead)", file=sys.stderr)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    from autoforge.pipeline.export import user_sql

    sql = args.query if args.query != "-" else sys.stdin.read()
    print_rows(user_sql(wh(args), sql), args.format)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from autoforge.errors import ConfigError

    if args.bundle is not None and args.format not in ("verl", "harbor"):
        raise ConfigError(f"--bundle is read by --format verl only (and --format harbor), not --format {args.format}")
    if args.bundle is not None and args.relation is not None:
        raise ConfigError(f"--bundle exports the bundle's own tasks; drop {args.relation!r} (or drop --bundle to "
                          "export the relation from the warehouse)")
    if args.relation is None and args.bundle is None:
        raise ConfigError("name the table or view to export (e.g. v_curated_tasks), or, with --format verl or harbor, "
                          "pass --bundle DIR")
    if args.format == "harbor":
        from autoforge.integrations.harbor import export_harbor

        res = export_harbor(wh(args), args.relation, args.out, bundle=args.bundle)
        parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
        print(f"wrote {sum(res.splits.values())} Harbor tasks of {res.relation} to {res.out}/ (harbor: {parts}; "
              "each <task>/: task.toml, instruction.md, environment/, tests/test.sh, solution/solve.sh)")
        return 0
    if args.format in FOLDER_FORMATS:
        require_extra("hf", f"autoforge export --format {args.format}")
        if args.format == "verl":
            from autoforge.integrations.verl import export_verl

            res = export_verl(wh(args), args.relation, args.out, bundle=args.bundle)
            parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
            print(f"wrote {sum(res.splits.values())} tasks of {res.relation} to {res.out}/ (verl: {parts}; tools.yaml, "
                  f"reward.py, bundle/; settings: {res.out}/README.md)")
            return 0
        from autoforge.integrations.hf import export_hf

        res = export_hf(wh(args), args.relation, args.out)
        parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
        print(f"wrote {sum(res.splits.values())} rows of {args.relation} to {res.out}/ ({args.format}: {parts}; "
              f"card: {res.out}/README.md)")
        return 0
    from autoforge.pipeline.export import export_file

    n = export_file(wh(args), args.relation, args.format, args.out)
    print(f"wrote {n} rows of {args.relation} to {args.out} ({args.format})")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    from autoforge.integrations.bundle import write_bundle

    res = write_bundle(wh(args), args.relation, args.out, env=args.env, split=args.split, limit=args.limit)
    parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
    print(f"wrote {res.tasks} tasks of {res.environments} environment(s) from {args.relation} to {res.out}/ "
          f"(bundle: {parts}; {res.files} files, {res.bytes / 1024:.0f} KiB; {res.out}/manifest.json)")
    return 0


# each command's one-line help in the `autoforge --help` list (add_parsers below gives it, or parser.py's
# stub when this group is not built)
HELP = {
    "init": "create or upgrade the warehouse schema (idempotent)",
    "sql": "run a read-only SQL query and print the result",
    "export": ("write a table or view to parquet, jsonl or csv, or a folder for other trainers (hf: a Hugging Face "
               "DatasetDict; verl: tools, rows and reward verl trains with; harbor: one Harbor task folder per task)"),
    "bundle": ("write tasks and their environments (tool code, schemas, rules, states, gold outcomes) to one folder "
               "that plays with no warehouse"),
}
COMMANDS = {"init": cmd_init, "sql": cmd_sql, "export": cmd_export, "bundle": cmd_bundle}


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.pipeline.export import FORMATS

    sub.add_parser("init", parents=[common], help=HELP["init"],
                   description="Create the warehouse (default ./autoforge.duckdb) or apply the migrations it lacks; "
                               "running it again changes nothing.")
    s = sub.add_parser("sql", parents=[common], help=HELP["sql"],
                       description="Run one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, ...) on the "
                                   "warehouse and print the rows; anything that writes is refused before it runs.")
    s.add_argument("query", help='SQL text, e.g. "SELECT count(*) FROM tool_specs" ("-" reads stdin)')
    s.add_argument("--format", choices=["table", "csv", "json"], default="table", help="how rows are printed (default table)")
    s = sub.add_parser("export", parents=[common], help=HELP["export"],
                       epilog="hf and verl write a folder: train/test from the task split, a dataset card README.md "
                              "(every column, the warehouse and batches it came from). hf takes any table or view "
                              "(tasks relations such as v_curated_tasks become one row per task with the prompt as "
                              "chat messages, OpenAI tool schemas, states and gold outcome); verl takes tasks "
                              "relations, writes an environment bundle (bundle/, or copies --bundle DIR) and what "
                              "verl's multi-turn tool agent reads: tools.yaml (one generic BaseTool class per tool, "
                              "talk_to_user for the simulated user), train/test.parquet rows (tools_kwargs, "
                              "tool_selection, ground truth) and reward.py (compute_score replays the response's "
                              "tool calls in the bundle); README.md gives the verl settings. The folder is written "
                              "beside --out first and replaces it only when complete; an existing --out must be "
                              "empty or a previous export of the same format. "
                              'hf and verl need the hf extra: pip install -e ".[hf]" (a checkout) or '
                              'pip install "autoforge[hf]".')
    s.add_argument("relation", metavar="TABLE_OR_VIEW", nargs="?", default=None,
                   help="the table or view (verl: a tasks relation such as v_curated_tasks; not needed with --bundle)")
    s.add_argument("--format", choices=[*FORMATS, *FOLDER_FORMATS], required=True,
                   help="parquet | jsonl | csv: one file; hf: a datasets.load_from_disk folder; verl: tools.yaml, "
                        "train/test.parquet, reward.py and the bundle, for verl's ToolAgentLoop; harbor: one folder "
                        "per task (task.toml, instruction.md, environment/, tests/test.sh, solution/solve.sh)")
    s.add_argument("--out", required=True, metavar="PATH",
                   help="the file (parquet, jsonl, csv) or folder (hf, verl, harbor)")
    s.add_argument("--bundle", default=None, metavar="DIR",
                   help="verl, harbor: export this environment bundle (autoforge bundle) instead of reading the "
                        "warehouse")
    s = sub.add_parser(
        "bundle", parents=[common], help=HELP["bundle"],
        description="Write the tasks of a tasks relation and everything an episode of them needs into one folder: "
                    "per environment its accepted tool code, tool specs and the schemas the agent sees, its rules "
                    "(runtime guards, judged conversation rules), its state schema and sample state; per task the "
                    "user's request and hidden facts, the initial state, the gold calls, the gold state and its hash, "
                    "the gold answer and the rules it exercises. manifest.json gives the format version, the "
                    "autoforge version and git commit, the warehouse, relation and filters, counts and the sha256 "
                    "of every file.",
        epilog="The bundle plays with no warehouse and no Prefect: autoforge.integrations.bundle.Bundle.load(DIR) "
               "checks every file's sha256, and bundle.episode(task_id) gives prompt(), call(name, args), "
               "talk_to_user(message) and reward(), scored as the episode engine scores (docs/trainers.md, \"The "
               "environment bundle\"). The folder is written beside --out first and replaces it only when complete; "
               "an existing --out must be empty or a previous bundle.")
    s.add_argument("relation", metavar="TABLE_OR_VIEW", help="a tasks relation (columns task_id, env_id, request), "
                                                             "e.g. v_curated_tasks (verified tasks) or tasks")
    s.add_argument("--out", required=True, metavar="DIR", help="the bundle folder")
    s.add_argument("--env", default=None, metavar="NAME", help="only the tasks of this environment (name or id)")
    s.add_argument("--split", choices=["train", "test"], default=None,
                   help="only the tasks of this split (default both)")
    s.add_argument("--limit", type=int, default=None, metavar="N", help="at most N tasks (task-id order, after --env "
                                                                        "and --split)")
