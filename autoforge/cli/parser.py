"""The ``autoforge`` argument parser: the top level, then each command group adds its commands.

:func:`build_parser` returns it (a test reads every subcommand's defaults from it and compares
them with the stage params models); :data:`COMMANDS` maps each command to its function.

A group's flags take their defaults from the stage params models, and importing those loads the
stages (their LLM client, the warehouse). So :func:`main` builds only the group of the command it
runs (:func:`command_of`); every other command is a stub that carries just its one-line help
(the group's ``HELP``), which is all the top-level ``--help`` shows of it.
"""

from __future__ import annotations

import argparse
from typing import Callable, Collection

from autoforge.cli import demo, learn, serve, sql, stages
from autoforge.cli.args import common_parser
from autoforge.cli.failures import EXIT_CODES

GROUPS = (sql, stages, learn, serve, demo)  # command groups, in the order --help lists them
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: fn for group in GROUPS for name, fn in group.COMMANDS.items()}


def command_of(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is not a flag), if it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser. ``only``: build just the groups of these commands, the others as stubs
    with their one-line help (``()``: every command a stub, enough for ``autoforge --help``)."""
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
        if only is None or not set(only).isdisjoint(group.COMMANDS):
            group.add_parsers(sub, common)
        else:
            for name, text in group.HELP.items():
                sub.add_parser(name, help=text)
    missing = set(COMMANDS) ^ set(sub.choices)
    if missing:  # a command without a parser, or a parser without a command
        raise RuntimeError(f"commands and parsers differ: {sorted(missing)}")
    return p


def subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of one subcommand (its usage is the one an error about its flags shows)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]
