"""``autoforge ...``: the command line. Each command runs library code directly (no Prefect
server needed); the same library functions back the Prefect flows in ``flows/``.

Run ``autoforge --help`` or ``autoforge COMMAND --help``. The rooms:

==================  ===============================================================
module              what it holds
==================  ===============================================================
``parser``          :func:`build_parser` (all groups, or one and stubs), :data:`COMMANDS`
``args``            flag types, defaults read from the stage params models, ``--warehouse``
``output``          tables, CSV and JSON of rows
``failures``        one ``error:`` line and an exit code; the optional extras
``sql``             ``init``, ``sql``, ``export``
``stages``          ``ingest``, ``synthesize``, ``factory``
``learn``           ``eval``, ``train``, ``base-checkpoint``
``serve``           ``serve``, ``mcp``
``demo``            ``demo``
==================  ===============================================================
"""

from __future__ import annotations

import os
import sys
import time

from autoforge.cli.args import FAILED_EXIT_CODE
from autoforge.cli.failures import failure_exit
from autoforge.cli.parser import COMMANDS, build_parser, command_of, subcommand_parser

__all__ = ["COMMANDS", "FAILED_EXIT_CODE", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    from autoforge.settings import get_settings

    argv = sys.argv[1:] if argv is None else argv
    command = command_of(argv)
    parser = build_parser(only=[command] if command else ())  # others: stubs, no flags (no stage loaded)
    args, unknown = parser.parse_known_args(argv)
    if not args.command:
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        parser.print_help()
        return 2
    if unknown:  # said with the subcommand's usage, not the top level's
        subcommand_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    t0 = time.time()
    timing = False
    try:
        settings = get_settings()  # every AUTOFORGE_* setting is checked before the command writes anything
        timing = settings.timing
        if os.environ.get("AUTOFORGE_WAREHOUSE"):  # a database we do not support is refused even under --warehouse
            from autoforge.pipeline.admin import warehouse_url

            warehouse_url(settings.warehouse)
        return COMMANDS[args.command](args) or 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - expected failures become one line; anything else is a bug
        code = failure_exit(exc, args)
        if code is None:
            raise
        return code
    finally:
        if timing:
            print(f"[{args.command} took {time.time() - t0:.2f}s]", file=sys.stderr)
