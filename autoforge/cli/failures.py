"""How a command fails: one ``error: ...`` line and an exit code instead of a traceback.

Exit codes (the top-level ``--help`` lists them, docs/hardening.md explains them): 0 done; 1 the
operating system refused (disk full, permission denied, read-only disk); 2 a bad setting, flag or
input, or an optional extra a command needs is not installed; 3 a stage finished but an
environment yielded nothing or failed; 130 interrupted; 141 stdout closed early (``| head``).

Optional extras (``pyproject.toml``'s ``[project.optional-dependencies]``) are listed once in
:data:`EXTRAS`: a command checks the one it needs up front (:func:`require_extra`), and a lazy
import of one of their packages that fails anyway ends the same way (:func:`missing_extra`).
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import re
import sys
from pathlib import Path

from autoforge.cli.args import wh
from autoforge.errors import AutoforgeError, ConfigError

EXIT_CODES = ("0 done; 1 the operating system refused (disk full, permission denied, ...); 2 a bad setting "
              "(AUTOFORGE_*), flag or input, or a missing optional extra; 3 a stage finished but an environment "
              "yielded nothing or failed; 130 interrupted; 141 the output pipe closed early")

# extra -> the top-level packages it installs that the code imports lazily
EXTRAS: dict[str, tuple[str, ...]] = {
    "hf": ("datasets", "pyarrow"),
    "mcp": ("mcp", "mcp_types"),
    "trl": ("trl", "datasets"),
    "dask": ("prefect_dask", "distributed", "dask"),
    "postgres": ("psycopg",),
}


class MissingExtraError(ConfigError):
    """An optional extra a command needs is not installed (exit 2, with the pip command)."""


def extra_message(extra: str, what: str, package: str) -> str:
    return (f"{what} needs the optional {extra!r} extra (package {package!r} is not installed): "
            f'pip install -e ".[{extra}]" in a checkout, or pip install "autoforge[{extra}]"')


def require_extra(extra: str, what: str) -> None:
    """MissingExtraError unless every package of ``extra`` can be imported (checked before any work)."""
    if extra not in EXTRAS:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    for package in EXTRAS[extra]:
        if importlib.util.find_spec(package) is None:
            raise MissingExtraError(extra_message(extra, what, package))


def missing_extra(exc: BaseException, command: str | None) -> str | None:
    """The one-line message for an import of an extra's package that failed (None: not an extra's)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    package = exc.name.split(".")[0]
    extra = next((e for e, packages in EXTRAS.items() if package in packages), None)
    if extra is None:
        return None
    return extra_message(extra, f"autoforge {command}" if command else "this command", package)


# What an operating-system failure looks like inside a DuckDB / SQLAlchemy error (no OSError there).
_IO_WORDS = (("no space left on device", errno.ENOSPC), ("disk quota exceeded", errno.EDQUOT),
             ("read-only file system", errno.EROFS), ("permission denied", errno.EACCES),
             ("operation not permitted", errno.EPERM))
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_REFUSED = (*_DISK_FULL, errno.EACCES, errno.EPERM, errno.EROFS)  # also said for a WarehouseError's cause


def _os_failure(exc: BaseException) -> tuple[int | None, str | None, str] | None:
    """``(errno, file, reason)`` of the operating-system failure behind ``exc`` (an OSError, or an I/O
    error of the DuckDB driver, possibly wrapped by SQLAlchemy or a WarehouseError), else None.

    Under one of our own errors (a WarehouseError wrapping the driver's) only a full disk, a
    permission or a read-only disk counts, and only causes given with ``raise ... from`` are
    followed; a ConfigError already says what to change."""
    if isinstance(exc, ConfigError):
        return None
    ours = isinstance(exc, AutoforgeError)
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        found: tuple[int | None, str | None, str] | None = None
        if isinstance(e, OSError):
            found = e.errno, e.filename, e.strerror or str(e)
        elif type(e).__module__.lstrip("_").split(".")[0] in ("duckdb", "sqlalchemy"):
            text = str(e)
            words, code = next(((w, c) for w, c in _IO_WORDS if w in text.lower()), (None, None))
            if code is not None or type(e).__name__ == "IOException":
                quoted = re.search(r'"(/[^"]+)"', text)
                found = code, quoted.group(1) if quoted else None, words.capitalize() if words else text.split("\n")[0]
        if found and (not ours or found[0] in _REFUSED):
            return found
        todo += [getattr(e, "orig", None), e.__cause__] + ([] if ours else [e.__context__])
    return None


def _warehouse_dir(args: argparse.Namespace) -> str | None:
    """The folder of the DuckDB warehouse file of this command, if it is one."""
    from autoforge.settings import get_settings

    try:
        value = wh(args) or get_settings().warehouse
    except AutoforgeError:
        return None
    if "://" in value:
        if not value.startswith("duckdb:///"):
            return None
        value = value[len("duckdb:///"):].split("?", 1)[0]
    return str(Path(value).expanduser().resolve().parent)


def _os_message(code: int | None, file: str | None, reason: str, args: argparse.Namespace) -> str:
    """One line: what the system refused, on which file, and what to do."""
    where = f" on {file}" if file else ""
    flags = "--warehouse" + (" / --out" if hasattr(args, "out") else "")
    if code in _DISK_FULL:
        folder = str(Path(file).parent) if file else _warehouse_dir(args) or "the disk being written"
        return (f"disk full ({reason}){where}: free space at {folder} or point {flags} elsewhere; the warehouse lost "
                "nothing already written (each write is one transaction: the failed one was rolled back)")
    if code in (errno.EACCES, errno.EPERM):
        return (f"permission denied ({reason}){where}: make it readable/writable for this user, or point {flags} "
                "at a location you can write")
    if code == errno.EROFS:
        return f"read-only file system ({reason}){where}: point {flags} at a writable disk"
    if code == errno.ENOENT:
        return f"no such file or directory{where}: check the path, or create the folder first"
    name = errno.errorcode.get(code, "I/O error") if code is not None else "I/O error"
    return f"{name} ({reason}){where}: the operating system refused the operation; check the disk and the path"


def failure_exit(exc: Exception, args: argparse.Namespace) -> int | None:
    """Print one ``error: ...`` line for an expected failure and return the exit code; None: a bug (re-raise)."""
    extra = missing_extra(exc, getattr(args, "command", None))
    if extra is not None:
        print(f"error: {extra}", file=sys.stderr)
        return 2
    failure = _os_failure(exc)
    if failure is not None and failure[0] == errno.EPIPE:  # stdout closed (`autoforge sql ... | head`)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141
    if failure is not None:
        print(f"error: {_os_message(*failure, args)}", file=sys.stderr)
        return 1
    if isinstance(exc, AutoforgeError):
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return None
