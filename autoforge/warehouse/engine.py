"""SQLAlchemy engines for the warehouse, and the one-writer rule.

DuckDB lets one process hold a file open for writing, and while it does no other process
can open it at all (not even read-only). So every connection here is short-lived (NullPool:
open, do one batch, close), and opening a busy file is retried with a bounded backoff for
``Settings.lock_timeout_s`` seconds (``AUTOFORGE_LOCK_TIMEOUT``, default 30) before a
:class:`~autoforge.errors.WarehouseBusyError` says who holds it. The file is never written
by two processes at once, so it cannot be corrupted by us.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Iterator

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from autoforge.errors import WarehouseBusyError, WarehouseError
from autoforge.settings import get_settings, warehouse_url

# Files are written in a format the stock `duckdb` shell of the 1.5 line can still open.
DUCKDB_STORAGE_VERSION = "v1.5.0"

_LOCK_PATTERNS = ("Could not set lock", "Conflicting lock", "database is locked")


def resolve_url(warehouse: str | None) -> str:
    """``None`` -> the setting (``AUTOFORGE_WAREHOUSE`` or ./autoforge.duckdb); a path -> a DuckDB URL."""
    return warehouse_url(warehouse if warehouse is not None else get_settings().warehouse)


def is_duckdb(url: str) -> bool:
    return url.startswith("duckdb:")


def duckdb_path(url: str) -> Path | None:
    if not is_duckdb(url):
        return None
    path = url.split(":///", 1)[-1].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path)


def make_engine(url: str, *, read_only: bool = False) -> sa.Engine:
    connect_args: dict = {}
    if is_duckdb(url):
        if read_only:
            connect_args["read_only"] = True
        else:
            connect_args["config"] = {"storage_compatibility_version": DUCKDB_STORAGE_VERSION}
    return sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return any(p in text for p in _LOCK_PATTERNS)


def _holder(exc: BaseException) -> str:
    m = re.search(r"held in (.+?) \(PID (\d+)\)", str(exc))
    return f"process {m.group(2)} ({m.group(1)})" if m else "another process"


@contextlib.contextmanager
def connect(
    warehouse: str | None = None,
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = None,
) -> Iterator[sa.Connection]:
    """Open a short-lived connection; a write connection is one transaction (commit on success).

    A busy DuckDB file is retried with backoff up to ``lock_timeout_s``; then WarehouseBusyError.
    """
    url = resolve_url(warehouse)
    timeout = get_settings().lock_timeout_s if lock_timeout_s is None else lock_timeout_s
    path = duckdb_path(url)
    if read_only and path is not None and not path.exists():
        raise WarehouseError(
            f"warehouse {path} does not exist. Create it with `autoforge init --warehouse {path}` "
            "(or point AUTOFORGE_WAREHOUSE / --warehouse at an existing file)."
        )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        engine = make_engine(url, read_only=read_only)
    except (ImportError, sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise WarehouseError(
            f"cannot use warehouse URL {url!r}: {exc}. Install the database driver it names "
            "(e.g. `pip install psycopg` for postgresql://) or use a DuckDB file path."
        ) from exc
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            conn = engine.connect()
            break
        except Exception as exc:  # noqa: BLE001 - driver errors vary by backend
            if not _is_lock_error(exc):
                engine.dispose()
                raise WarehouseError(f"cannot open warehouse {url}: {exc}") from exc
            if time.monotonic() >= deadline:
                engine.dispose()
                raise WarehouseBusyError(
                    f"warehouse {path or url} is in use by {_holder(exc)}; DuckDB allows one process at a "
                    f"time. Waited {timeout:.0f}s. Wait for that run to finish, raise AUTOFORGE_LOCK_TIMEOUT, "
                    "or point --warehouse at another file."
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    try:
        if read_only:
            yield conn
        else:
            with conn.begin():
                yield conn
    finally:
        conn.close()
        engine.dispose()
