"""The ``autoforge`` argument parser: the top level, then each command group adds its commands.

:func:`build_parser` returns it (a test reads every subcommand's defaults from it and compares
them with the stage params models); :data:`COMMANDS` maps each command to its function.
"""

from __future__ import annotations

import argparse
from typing import Callable

from autoforge.cli import demo, learn, serve, sql, stages
from autoforge.cli.args import common_parser
from autoforge.cli.failures import EXIT_CODES

GROUPS = (sql, stages, learn, serve, demo)  # command groups, in the order --help lists them
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: fn for group in GROUPS for name, fn in group.COMMANDS.items()}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="autoforge",
        description=(
            "AutoForge: tool docs -> simulated environments -> verified multi-step tasks -> ERPO training "
            "(arXiv 2512.22857). Every stage writes to a DuckDB warehouse you can query with `autoforge sql`."
        ),
        epilog=f"Start with `autoforge demo`. Each command has its own --help. Exit codes: {EXIT_CODES}.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    common = common_parser()
    for group in GROUPS:
        group.add_parsers(sub, common)
    missing = set(COMMANDS) ^ set(sub.choices)
    if missing:  # a command without a parser, or a parser without a command
        raise RuntimeError(f"commands and parsers differ: {sorted(missing)}")
    return p


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand (its usage is the one an error about its flags shows)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]
