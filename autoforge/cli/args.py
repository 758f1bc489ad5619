"""What every command group shares: argparse value types, defaults read from the stage params
models, the ``--warehouse`` flag, and small environment set-ups for Prefect and transformers."""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from pydantic import BaseModel

from autoforge.settings import PARAMS, range_message

FAILED_EXIT_CODE = 3  # a stage finished but an environment failed (same code as the factory's empty environment)


def default(model: type[BaseModel], field: str) -> Any:
    """The default of ``model.field``: a CLI flag that mirrors a stage parameter shows this, never its own literal."""
    info = model.model_fields[field]
    return info.default_factory() if info.default_factory is not None else info.default


def share(text: str) -> float:
    """argparse ``type=``: a number from 0 to 1 (e.g. 0.5)."""
    try:
        x = float(text)
    except ValueError:
        x = -1.0
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share from 0 to 1 (e.g. 0.5), got {text!r}")
    return x


def number(key: str, flag: str | None = None) -> Callable[[str], Any]:
    """argparse ``type=``: a number within ``PARAMS[key]``; otherwise usage error naming the range and an example."""
    rng = PARAMS[key]
    flag = flag or "--" + key.replace("_", "-")

    def parse(text: str) -> Any:
        value, why = rng.parse(text)
        if why:
            raise argparse.ArgumentTypeError(range_message(rng, text, why, f"{flag} {rng.example}"))
        return value

    return parse


def warehouse_arg(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must be a DuckDB file path or a duckdb:/// or postgresql:// URL: got {text!r} (empty); e.g. "
                                         "--warehouse data/autoforge.duckdb, or leave it out for $AUTOFORGE_WAREHOUSE "
                                         "or ./autoforge.duckdb")
    return text


def assignment(text: str) -> tuple[str, str]:
    """``--set FIELD=VALUE`` -> ``(field, value)``; the field and value are checked against TrainConfig later."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"must be FIELD=VALUE, a TrainConfig field, '=' and its value: got {text!r}; "
                                         "e.g. --set steps=20 (fields: autoforge/rl/config.py)")
    return key.strip(), value


def common_parser() -> argparse.ArgumentParser:
    """The parent of every command that opens the warehouse: ``--warehouse``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--warehouse",
        metavar="PATH",
        default=None,
        type=warehouse_arg,
        help="DuckDB file, or a postgresql:// URL (default: $AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)",
    )
    return common


def wh(args: argparse.Namespace) -> str | None:
    return getattr(args, "warehouse", None)


def prefect_env() -> None:
    """Offline-friendly Prefect defaults for flows started from the CLI (an ephemeral server if no API URL)."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def quiet_hf() -> None:
    """No per-shard progress bars from transformers in our output (our own progress lines say what happens)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass
