"""``autoforge init``, ``sql`` and ``export``: the warehouse itself, a user's query, a relation written out."""

from __future__ import annotations

import argparse
import json
import sys

from autoforge.cli.args import wh
from autoforge.cli.failures import require_extra
from autoforge.cli.output import print_rows

# folders for other trainers (autoforge/integrations; docs/trainers.md): the format, then what --format's help and
# the export's closing line say it writes. Every one but hf reads a tasks relation or --bundle DIR.
TRAINER_FORMATS = {
    "verl": "tools.yaml, train/test.parquet, reward.py and the bundle, for verl's ToolAgentLoop",
    "openenv": "one installable OpenEnv environment package per environment (openenv.yaml, server, client, bundle)",
    "verifiers": "an installable verifiers 0.4 taskset package (Task, reward, per-rollout MCP toolset, bundle)",
    "harbor": "one Harbor task folder per task (task.toml, instruction.md, environment/, tests/, solution/)",
    "nemo-gym": "a NeMo Gym resources server (resources_servers/autoforge: app.py, configs/, data/*.jsonl, bundle)",
}
FOLDER_FORMATS = ("hf", *TRAINER_FORMATS)


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


TABLE_ROWS = 100  # rows the table format shows unless --max-rows says otherwise
COUNT_CAP = 1_000_000  # rows past those the table format counts before it says "more than"


def cmd_sql(args: argparse.Namespace) -> int:
    """Rows are printed batch by batch as they arrive, so memory stays flat for any result size; the
    deadline (--timeout) covers the printing too. Past it: one error line, exit 2 (rows already printed stay)."""
    from autoforge.pipeline.export import stream_query

    sql = args.query if args.query != "-" else sys.stdin.read()
    with stream_query(wh(args), sql, timeout_s=args.timeout) as rows:
        if args.format == "csv":
            write_csv(rows, sys.stdout)
        elif args.format == "json":
            write_json(rows, sys.stdout)
        else:
            write_table(rows, sys.stdout, args.max_rows)
    return 0


def _plain(type_name: str) -> bool:
    """A column whose values the csv module writes as they come (numbers, text, booleans)."""
    return type_name in _PLAIN_TYPES or type_name.startswith(("DECIMAL", "NUMERIC", "VARCHAR"))


_PLAIN_TYPES = frozenset({"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
                          "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE", "REAL", "TEXT", "INT2", "INT4",
                          "INT8", "FLOAT4", "FLOAT8", "BOOL"})


def _csv_value(v):
    from autoforge.cli.output import _jsonable

    return json.dumps(v) if isinstance(v, (dict, list)) else _jsonable(v)


def write_csv(rows, file) -> int:
    """CSV as ``print_rows`` writes it (a header, then JSON text for nested values), one batch at a time;
    the number of rows. No rows: nothing, as before."""
    import csv

    writer = csv.writer(file)
    convert = [i for i, t in enumerate(rows.types) if not _plain(t)]
    n = 0
    for batch in rows.batches:
        if n == 0:
            writer.writerow(rows.columns)
        if convert:
            batch = [tuple(_csv_value(v) if i in convert else v for i, v in enumerate(r)) for r in batch]
        writer.writerows(batch)
        n += len(batch)
    return n


def write_json(rows, file) -> int:
    """The JSON array ``print_rows`` prints (indent 2), written one row at a time; the number of rows."""
    import textwrap

    from autoforge.cli.output import _jsonable

    n = 0
    for batch in rows.batches:
        for r in batch:
            text = json.dumps({k: _jsonable(v) for k, v in zip(rows.columns, r)}, indent=2, default=str)
            file.write(("[\n" if n == 0 else ",\n") + textwrap.indent(text, "  "))
            n += 1
    file.write("\n]\n" if n else "[]\n")
    return n


def write_table(rows, file, most: int = TABLE_ROWS) -> int:
    """The first ``most`` rows as a table, then how many more there are: counted as they stream past,
    up to COUNT_CAP (then "more than"), never all held at once. Returns the rows seen."""
    shown: list[tuple] = []
    seen = 0
    for batch in rows.batches:
        if len(shown) < most:
            shown += batch[:most - len(shown)]
        seen += len(batch)
        if seen > most + COUNT_CAP:
            break
    print_rows([dict(zip(rows.columns, r)) for r in shown], "table", file=file)
    rest = seen - len(shown)
    if rest > 0:
        many = f"more than {COUNT_CAP:,}" if rest > COUNT_CAP else f"{rest:,}"
        print(f"... and {many} more row{'s' if rest != 1 else ''} (shown: the first {len(shown):,}; --max-rows N "
              "shows more, --format csv or json prints them all, a LIMIT or an aggregate makes the query cheaper)",
              file=file)
    return seen


def cmd_export(args: argparse.Namespace) -> int:
    from autoforge.errors import ConfigError

    if args.bundle is not None and args.format not in TRAINER_FORMATS:
        raise ConfigError(f"--bundle is read by the trainer formats ({', '.join(TRAINER_FORMATS)}), not --format "
                          f"{args.format}")
    if args.bundle is not None and args.relation is not None:
        raise ConfigError(f"--bundle exports the bundle's own tasks; drop {args.relation!r} (or drop --bundle to "
                          "export the relation from the warehouse)")
    if args.relation is None and args.bundle is None:
        raise ConfigError("name the table or view to export (e.g. v_curated_tasks), or, with a trainer format "
                          f"({', '.join(TRAINER_FORMATS)}), pass --bundle DIR")
    if args.format in ("openenv", "verifiers", "harbor", "nemo-gym"):
        res = _trainer_export(args.format)(wh(args), args.relation, args.out, bundle=args.bundle)
        parts = ", ".join(f"{s} {n}" for s, n in res.splits.items())
        print(f"wrote {sum(res.splits.values())} tasks of {res.relation or 'the bundle'} to {res.out}/ "
              f"({args.format}: {parts}; {TRAINER_FORMATS[args.format]}; docs/trainers.md)")
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


def _trainer_export(fmt: str):
    """The export function of a trainer format that needs no extra (verl and hf need the hf extra)."""
    if fmt == "openenv":
        from autoforge.integrations.openenv import export_openenv
        return export_openenv
    if fmt == "verifiers":
        from autoforge.integrations.verifiers_export import export_verifiers
        return export_verifiers
    if fmt == "nemo-gym":
        from autoforge.integrations.nemo_gym import export_nemo_gym
        return export_nemo_gym
    from autoforge.integrations.harbor import export_harbor
    return export_harbor


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
    "export": ("write a table or view to parquet, jsonl or csv, or a folder for other trainers (hf, verl, openenv, "
               "verifiers, harbor, nemo-gym)"),
    "bundle": ("write tasks and their environments (tool code, schemas, rules, states, gold outcomes) to one folder "
               "that plays with no warehouse"),
}
COMMANDS = {"init": cmd_init, "sql": cmd_sql, "export": cmd_export, "bundle": cmd_bundle}


def _timeout(text: str) -> float:
    """argparse ``type=`` of ``--timeout``: seconds within AUTOFORGE_SQL_TIMEOUT's range."""
    from autoforge.settings import VARS, range_message

    rng = VARS["sql_timeout_s"].range
    value, why = rng.parse(text)
    if why:
        raise argparse.ArgumentTypeError(range_message(rng, text, why, "--timeout 60"))
    return value


def _max_rows(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 10**6:
        raise argparse.ArgumentTypeError(f"must be a whole number in [1, 1000000]: got {text!r}; e.g. --max-rows 100")
    return int(text)


class _Lines(argparse.HelpFormatter):
    """Help text whose lines are kept (``--format``'s one line per format), each wrapped on its own."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return [w for line in text.splitlines()
                for w in textwrap.wrap(line, width, subsequent_indent=" " * 12 if line.startswith("  ") else "") or [""]]


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.pipeline.export import FORMATS

    sub.add_parser("init", parents=[common], help=HELP["init"],
                   description="Create the warehouse (default ./autoforge.duckdb) or apply the migrations it lacks; "
                               "running it again changes nothing.")
    s = sub.add_parser("sql", parents=[common], help=HELP["sql"],
                       description="Run one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, ...) on the "
                                   "warehouse and print the rows; anything that writes is refused before it runs. "
                                   "The query runs under a time limit (--timeout, $AUTOFORGE_SQL_TIMEOUT, default 60 s) "
                                   "and, on DuckDB, a memory limit ($AUTOFORGE_SQL_MEMORY_MB, default 2048); rows "
                                   "are printed as they arrive, so any result size fits in memory.")
    s.add_argument("query", help='SQL text, e.g. "SELECT count(*) FROM tool_specs" ("-" reads stdin)')
    s.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="how rows are printed (default table); csv and json print every row, as it arrives")
    s.add_argument("--timeout", type=_timeout, default=None, metavar="SECONDS",
                   help="stop the query after this many seconds, rows printed included (default "
                        "$AUTOFORGE_SQL_TIMEOUT or 60); past it: one error line, exit 2")
    s.add_argument("--max-rows", type=_max_rows, default=TABLE_ROWS, metavar="N",
                   help=f"table format: show the first N rows and say how many more there are (default {TABLE_ROWS})")
    s = sub.add_parser("export", parents=[common], help=HELP["export"], formatter_class=_Lines,
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
                              'pip install "autoforge[hf]". openenv, verifiers, harbor and nemo-gym take a tasks '
                              "relation or --bundle DIR and need no extra; docs/trainers.md gives each one's layout, "
                              "the lines of its config to change and the check its library's own code runs.")
    s.add_argument("relation", metavar="TABLE_OR_VIEW", nargs="?", default=None,
                   help="the table or view (verl: a tasks relation such as v_curated_tasks; not needed with --bundle)")
    formats = "\n".join(f"  {f:<9} {what}" for f, what in
                         [("parquet", "one Parquet file"), ("jsonl", "one JSON Lines file"), ("csv", "one CSV file"),
                          ("hf", "a datasets.load_from_disk folder (train/test, dataset card)"),
                          *TRAINER_FORMATS.items()])
    s.add_argument("--format", choices=[*FORMATS, *FOLDER_FORMATS], required=True,
                   help="one of:\n" + formats)
    s.add_argument("--out", required=True, metavar="PATH",
                   help="the file (parquet, jsonl, csv) or folder (every other format)")
    s.add_argument("--bundle", default=None, metavar="DIR",
                   help=f"{', '.join(TRAINER_FORMATS)}: export this environment bundle (autoforge bundle) instead of "
                        "reading the warehouse")
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
