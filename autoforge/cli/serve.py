"""``autoforge serve`` and ``mcp``: the Prefect deployments from one process, one environment as an MCP server."""

from __future__ import annotations

import argparse
import os

from autoforge.cli.args import number, prefect_env, wh
from autoforge.cli.failures import require_extra


def cmd_mcp(args: argparse.Namespace) -> int:
    require_extra("mcp", "autoforge mcp")
    from autoforge.integrations import mcp

    served = mcp.load_served(wh(args), args.env, args.task)
    mcp.check_served(served)
    if args.http is None:
        mcp.announce(served, "serving over stdio")
        mcp.serve_stdio(served)
        return 0
    host, port = mcp.parse_host_port(args.http)
    mcp.serve_http(served, host, port, max_sessions=args.max_sessions,
                   ready=lambda url: mcp.announce(served, f"serving at {url} (Ctrl-C stops)"))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    prefect_env()
    os.environ["PREFECT_LOGGING_LEVEL"] = "INFO"
    from flows.serve import serve_all

    print("serving the deployments of deployments/prefect.yaml from this process (Ctrl-C stops; schedules "
          f"{'on' if not args.no_schedules else 'off'}). Set PREFECT_API_URL to use a running Prefect server/UI.")
    serve_all(wh(args), limit=args.limit, names=args.names or None, schedules=not args.no_schedules)
    return 0


# each command's one-line help in the `autoforge --help` list (add_parsers below gives it, or parser.py's
# stub when this group is not built)
HELP = {
    "serve": "serve every Prefect deployment with its schedule from one process",
    "mcp": "serve one environment as an MCP server (stdio, or HTTP with --http)",
}
COMMANDS = {"serve": cmd_serve, "mcp": cmd_mcp}


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.integrations.mcp import MAX_SESSIONS

    s = sub.add_parser("serve", parents=[common], help=HELP["serve"],
                       description="The single-process alternative to work pools and workers: serves the deployments "
                                   "of deployments/prefect.yaml (factory nightly, training weekly, every stage on "
                                   "demand) until interrupted. Trigger runs from the Prefect UI or `prefect deployment run`.")
    s.add_argument("names", nargs="*", metavar="DEPLOYMENT", help="only these deployments (default: all)")
    s.add_argument("--limit", type=number("serve_limit", "--limit"), default=1,
                   help="flow runs at once in this process (default 1: DuckDB has one writer)")
    s.add_argument("--no-schedules", action="store_true", help="serve without schedules (runs only when triggered)")

    s = sub.add_parser("mcp", parents=[common], help=HELP["mcp"],
                       description="Serve one synthesized environment's tools to any MCP client (official mcp SDK): "
                                   "tools/list gives the tools with their JSON schemas and descriptions, tools/call runs "
                                   "them in the sandbox. Each client session gets its own copy of the starting state "
                                   "(--task's initial state, else the environment's sample state) and a `reset` tool; "
                                   "sessions never see each other's writes. A failed call is an MCP tool error (isError).",
                       epilog="Client config (stdio): {\"command\": \"autoforge\", \"args\": [\"mcp\", \"--env\", "
                              "\"NAME\", \"--warehouse\", \"/abs/path/autoforge.duckdb\"]}. Over HTTP point the client "
                              "at http://HOST:PORT/mcp (streamable HTTP). Tool limits: AUTOFORGE_TOOL_TIMEOUT, "
                              "AUTOFORGE_TOOL_MEMORY_MB. Needs the mcp extra: pip install -e \".[mcp]\" (a checkout) "
                              "or pip install \"autoforge[mcp]\".")
    s.add_argument("--env", required=True, metavar="NAME", help="the environment (name or env id; `autoforge sql "
                   "\"SELECT name FROM environments\"` lists them)")
    s.add_argument("--task", metavar="TASK_ID", default=None,
                   help="start every session from this task's initial state (default: the environment's sample state)")
    s.add_argument("--max-sessions", type=number("max_sessions"), default=MAX_SESSIONS,
                   help="with --http: sessions at once, each with its own sandbox worker (default %(default)s; more get HTTP 503)")
    s.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port; "
                        "127.0.0.1/localhost get DNS-rebinding protection; there is no authentication, so bind "
                        "another host only on a network you trust)")

