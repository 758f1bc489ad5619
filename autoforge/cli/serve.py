"""``autoforge serve`` and ``mcp``: the Prefect deployments from one process, one environment as an MCP server."""

from __future__ import annotations

import argparse
import os

from autoforge.cli.args import number, prefect_env, wh
from autoforge.cli.failures import require_extra


def cmd_mcp(args: argparse.Namespace) -> int:
    require_extra("mcp", "autoforge mcp")
    from autoforge.errors import ConfigError
    from autoforge.integrations import mcp, mcp_access
    from autoforge.settings import get_settings, mcp_allow_hosts

    access = None
    if args.http is None:
        given = [f for f, v in (("--token", args.token), ("--token-file", args.token_file), ("--allow-host", args.allow_host),
                                ("--max-sessions-per-client", args.max_sessions_per_client)) if v]
        if given:
            raise ConfigError(f"{', '.join(given)} apply to --http only (stdio serves the one process that started "
                              "it); add --http HOST:PORT or leave them out")
    else:  # who may connect is settled before the warehouse is opened: a refusal costs nothing
        host, port = mcp.parse_host_port(args.http)
        token = mcp_access.resolve_token(args.token, args.token_file, get_settings().mcp_token)
        access = mcp_access.http_access(host, token=token, allow_hosts=[*mcp_allow_hosts(), *(args.allow_host or [])])
    served = mcp.load_served(wh(args), args.env, args.task)
    mcp.check_served(served)
    if access is None:
        mcp.announce(served, "serving over stdio")
        mcp.serve_stdio(served)
        return 0
    exposed = mcp_access.exposure(access)
    mcp.serve_http(served, host, port, max_sessions=args.max_sessions, access=access,
                   per_client=args.max_sessions_per_client, unused_s=args.unused_timeout,
                   ready=lambda url: mcp.announce(served, f"serving at {url} (Ctrl-C stops); {exposed}"))
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
    from autoforge.integrations.mcp_sessions import MAX_SESSIONS, UNUSED_SESSION_S

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
                   help="with --http: sessions at once, each with its own sandbox worker (default %(default)s); when all "
                        "are taken an idle one gives way to a new client, which otherwise waits (up to 120 s) for one")
    s.add_argument("--max-sessions-per-client", type=number("max_sessions_per_client"), default=None, metavar="N",
                   help="with --http: the share of one client address (IPv6: its /64) when all sessions are taken: an "
                        "address holding N can only push out its own idle sessions (default max(4, max-sessions / 4))")
    s.add_argument("--unused-timeout", type=number("unused_timeout_s", "--unused-timeout"), default=UNUSED_SESSION_S,
                   metavar="SECONDS",
                   help="with --http: a session that has made no tool call ends after this long without a request "
                        "(default %(default)g); one that has made calls may give way to a new client after this long idle")
    s.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port). Every "
                        "request's Host (and Origin) must name this server (421/403: no DNS rebinding); beyond loopback "
                        "(0.0.0.0, a LAN address) a bearer token is required or the command refuses to start (exit 2)")
    s.add_argument("--token-file", metavar="FILE", default=None,
                   help="with --http: the bearer token (first line of FILE) every request must send as `Authorization: "
                        "Bearer TOKEN` (else 401); required beyond loopback. Or set AUTOFORGE_MCP_TOKEN")
    s.add_argument("--token", metavar="TOKEN", default=None,
                   help="with --http: the bearer token on the command line (visible in `ps`: prefer --token-file or "
                        "AUTOFORGE_MCP_TOKEN); at least 16 characters, e.g. python -c \"import secrets; "
                        "print(secrets.token_urlsafe(32))\"")
    s.add_argument("--allow-host", metavar="NAME", action="append", default=None,
                   help="with --http: one more Host name (or address) to answer, e.g. a reverse proxy's public name "
                        "(repeatable; also AUTOFORGE_MCP_ALLOW_HOSTS=a,b). Answered anyway: the bound name and address; "
                        "on loopback localhost, 127.0.0.1, ::1; on 0.0.0.0 / :: this machine's host name and addresses")

