"""``autoforge ...``: the command line. Each command runs library code directly (no Prefect
server needed); the same library functions back the Prefect flows in ``flows/``.

Run ``autoforge --help`` or ``autoforge COMMAND --help``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from autoforge.errors import AutoforgeError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


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
    from autoforge.envs.stage import run_synthesis

    summary = run_synthesis(_wh(args), env=args.env, backend=args.backend, max_envs=args.max_envs)
    print_rows(summary["table"], title="synthesized environments")
    c = summary["counts"]
    print(", ".join(f"{k}={v}" for k, v in c.items()))
    return 0


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        metavar="PATH",
        default=None,
        help="DuckDB file or SQLAlchemy URL (default: $AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)",
    )
    p = argparse.ArgumentParser(
        prog="autoforge",
        description=(
            "AutoForge: tool docs -> simulated environments -> verified multi-step tasks -> ERPO training "
            "(arXiv 2512.22857). Every stage writes to a DuckDB warehouse you can query with `autoforge sql`."
        ),
        epilog="Start with `autoforge demo`. Each command has its own --help.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("init", parents=[common], help="create or upgrade the warehouse schema (idempotent)")
    s = sub.add_parser("sql", parents=[common], help="run a read-only SQL query and print the result")
    s.add_argument("query", help='SQL text, e.g. "SELECT count(*) FROM tool_specs" ("-" reads stdin)')
    s.add_argument("--format", choices=["table", "csv", "json"], default="table")
    s = sub.add_parser("export", parents=[common], help="write a table or view to parquet, jsonl or csv")
    s.add_argument("relation", metavar="TABLE_OR_VIEW")
    s.add_argument("--format", choices=["parquet", "jsonl", "csv"], required=True)
    s.add_argument("--out", required=True, metavar="PATH")

    s = sub.add_parser("ingest", parents=[common], help="parse tool documentation into tool sets (candidate environments)")
    s.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (a folder = one tool set)")
    s.add_argument("--bundled", action="store_true", help="ingest the bundled corpus of 10+ domains")

    s = sub.add_parser("synthesize", parents=[common], help="generate state schema + checked tool code per tool set")
    s.add_argument("--env", metavar="NAME", help="only this tool set (default: all)")
    s.add_argument("--backend", choices=["offline", "openai"], default="offline",
                   help="offline rules/templates (default) or an OpenAI-compatible server (AUTOFORGE_OPENAI_*)")
    s.add_argument("--max-envs", type=int, default=None, help="at most this many tool sets")

    for extra in EXTRA_PARSERS:
        extra(sub, common)
    return p


EXTRA_PARSERS: list[Callable[[Any, argparse.ArgumentParser], None]] = []


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    t0 = time.time()
    try:
        return COMMANDS[args.command](args) or 0
    except AutoforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if os.environ.get("AUTOFORGE_TIMING"):
            print(f"[{args.command} took {time.time() - t0:.2f}s]", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
