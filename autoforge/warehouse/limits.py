"""The limits of user SQL (``autoforge sql``, ``query(..., read_only_check=True)``): a deadline and a memory cap.

A query typed by a user can run forever (``WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1
FROM r) SELECT count(*) FROM r``) or ask for more memory than the machine has. So every user
query runs under

- a **deadline** (``AUTOFORGE_SQL_TIMEOUT``, default 60 s; ``autoforge sql --timeout SECONDS``) that
  covers the whole query, the rows printed included: on DuckDB a timer thread calls the
  connection's ``interrupt()``; on PostgreSQL the transaction gets ``SET LOCAL statement_timeout``
  and the same timer cancels the connection. Either way the query ends with
  :class:`QueryTimeoutError`, one line naming the limit and how to raise it;
- a **memory cap** on its DuckDB connection (``AUTOFORGE_SQL_MEMORY_MB``, default 2048; a
  ``duckdb:///PATH?memory_limit=...`` URL overrides it). Readers never spill to disk, so a query
  over the cap fails with "needs more memory", not with the machine swapping.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from autoforge.errors import ConfigError, WarehouseError
from autoforge.settings import VARS, get_settings, range_message


class QueryTimeoutError(WarehouseError):
    """User SQL ran past its deadline (``--timeout`` / ``AUTOFORGE_SQL_TIMEOUT``); the CLI exits 2 with this line."""


@dataclass(frozen=True)
class SqlLimits:
    """The deadline (seconds, rows printed included) and the DuckDB memory cap (MB) of one user query."""

    timeout_s: float
    memory_mb: int


def sql_limits(timeout_s: float | None = None) -> SqlLimits:
    """The settings' limits, with ``timeout_s`` (a ``--timeout`` flag, checked against the same range) instead."""
    s = get_settings()
    if timeout_s is None:
        return SqlLimits(s.sql_timeout_s, s.sql_memory_mb)
    rng = VARS["sql_timeout_s"].range
    why = rng.problem(timeout_s)
    if why:
        raise ConfigError(f"--timeout {range_message(rng, timeout_s, why, '--timeout 60')}")
    return SqlLimits(float(timeout_s), s.sql_memory_mb)


def timeout_message(seconds: float) -> str:
    return (f"query stopped at its time limit of {seconds:g} s (AUTOFORGE_SQL_TIMEOUT, default "
            f"{VARS['sql_timeout_s'].default:g} s); raise it with `autoforge sql --timeout SECONDS` or "
            "AUTOFORGE_SQL_TIMEOUT, or make the query cheaper (a LIMIT, an aggregate); to write a whole table use "
            "`autoforge export TABLE_OR_VIEW --format parquet|jsonl|csv --out PATH`")


def is_timeout_text(text: str) -> bool:
    """Whether a driver's error says the statement was cancelled by a time limit (PostgreSQL's statement_timeout)."""
    return "statement timeout" in text.lower()


class Deadline:
    """Interrupts a running query at ``seconds`` from now (a daemon timer thread calls ``interrupt``).

    ``interrupt`` is the driver's own cancel (DuckDB ``connection.interrupt()``, psycopg
    ``connection.cancel()``): safe from another thread, and it makes the blocked call raise. The
    timer is stopped before the connection closes (:meth:`stop`, under a lock), so it never touches a
    closed connection. :meth:`check` is for the loop that fetches rows: a deadline passed while
    rows were being printed (outside the driver) ends the query too.
    """

    def __init__(self, seconds: float, interrupt: Callable[[], Any] | None) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.fired = False
        self._interrupt = interrupt
        self._lock = threading.Lock()
        self._live = True
        self._timer: threading.Timer | None = None
        if interrupt is not None:
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._live:
                return
            self.fired = True
            try:
                self._interrupt()  # type: ignore[misc]
            except Exception:  # noqa: BLE001 - the connection went away meanwhile: nothing left to stop
                pass

    def stop(self) -> None:
        with self._lock:
            self._live = False
        if self._timer is not None:
            self._timer.cancel()

    def passed(self) -> bool:
        return self.fired or time.monotonic() >= self.end

    def error(self) -> QueryTimeoutError:
        return QueryTimeoutError(timeout_message(self.seconds))

    def check(self) -> None:
        if self.passed():
            raise self.error()


def driver_interrupt(conn: Any) -> Callable[[], Any] | None:
    """The cancel of a SQLAlchemy connection's driver connection: DuckDB's ``interrupt``, psycopg's ``cancel_safe``/``cancel``."""
    raw = conn.connection.driver_connection
    for name in ("interrupt", "cancel_safe", "cancel"):
        fn = getattr(raw, name, None)
        if callable(fn):
            return fn
    return None
