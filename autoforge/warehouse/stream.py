"""User SQL as a stream of row batches (``autoforge sql``): memory that does not grow with the result.

:func:`autoforge.warehouse.store.query` returns a list, which is right for internal readers and
wrong for a user's ``SELECT * FROM range(100000000)``: every row would be a dict in memory
before the first line is printed (~290 MB per million rows). Here the rows come in batches of
``batch_rows`` tuples straight from the driver (DuckDB's streaming result, ``fetchmany``;
psycopg's ``cursor.stream``, one statement over the extended protocol), so the caller can print
each batch and drop it. The same checks and limits as ``query``: the allow-list, a read-only
locked-down connection, and the deadline and memory cap of :mod:`autoforge.warehouse.limits`
(the deadline also counts the time the caller spends printing).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import sqlalchemy as sa

from autoforge.errors import WarehouseError
from autoforge.warehouse.engine import connect, is_duckdb, resolve_url
from autoforge.warehouse.limits import Deadline, is_timeout_text, sql_limits
from autoforge.warehouse.store import _query_error, _refuse_server_file_roles, check_read_only, start_deadline

BATCH_ROWS = 10_000  # rows per fetch: big enough that the per-call cost vanishes, small enough to stay a few MB

R = TypeVar("R")


@dataclass
class RowStream:
    """The columns of a running query and its rows, batch by batch (each batch a list of tuples)."""

    columns: list[str]
    types: list[str]  # the database's type name per column, upper case (``INTEGER``, ``JSON``, ``INTEGER[]``)
    batches: Iterator[list[tuple]]


def _guarded(deadline: Deadline, fn: Callable[[], R]) -> R:
    """``fn()`` with the driver's errors said as ours: past the deadline a QueryTimeoutError, else one line."""
    if deadline.passed():
        raise deadline.error()
    try:
        return fn()
    except WarehouseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors vary by backend
        if deadline.fired or is_timeout_text(str(exc)):
            raise deadline.error() from exc
        raise _query_error(exc) from exc


def _duckdb_stream(conn: sa.Connection, sql: str, deadline: Deadline, batch_rows: int) -> RowStream:
    raw = conn.connection.driver_connection
    _guarded(deadline, lambda: raw.execute(sql))
    desc = raw.description or []
    types = [str(d[1]).upper() for d in desc]
    json_cols = [i for i, t in enumerate(types) if t == "JSON"]  # parsed, as query() returns them

    def batches() -> Iterator[list[tuple]]:
        if not desc:
            return
        while True:
            rows = _guarded(deadline, lambda: raw.fetchmany(batch_rows))
            if not rows:
                return
            if json_cols:
                rows = [_decode_json(r, json_cols) for r in rows]
            yield rows

    return RowStream([d[0] for d in desc], types, batches())


def _decode_json(row: tuple, cols: list[int]) -> tuple:
    out = list(row)
    for i in cols:
        if isinstance(out[i], str):
            try:
                out[i] = json.loads(out[i])
            except ValueError:
                pass
    return tuple(out)


def _pg_stream(conn: sa.Connection, sql: str, deadline: Deadline, batch_rows: int, check_role: bool = True) -> RowStream:
    if check_role:
        _guarded(deadline, lambda: _refuse_server_file_roles(conn))
    cur = conn.connection.driver_connection.cursor()
    rows = cur.stream(sql, size=batch_rows)  # extended protocol: the server runs one statement at most
    first: list[tuple] = []
    for row in _guarded(deadline, lambda: _take(rows, 1)):
        first.append(tuple(row))
    desc = cur.description or []

    def batches() -> Iterator[list[tuple]]:
        batch = first
        while True:
            more = _guarded(deadline, lambda: _take(rows, batch_rows - len(batch)))
            batch += [tuple(r) for r in more]
            if not batch:
                return
            yield batch
            if len(batch) < batch_rows:
                return
            batch = []

    return RowStream([d.name for d in desc], [_pg_type(conn, d.type_code) for d in desc], batches())


def _take(rows: Iterator[Any], n: int) -> list[Any]:
    out = []
    for row in rows:
        out.append(row)
        if len(out) >= n:
            break
    return out


def _pg_type(conn: sa.Connection, oid: int) -> str:
    info = conn.connection.driver_connection.adapters.types.get(oid)
    return (info.name if info is not None else str(oid)).upper()


@contextlib.contextmanager
def stream_query(warehouse: str | None, sql: str, *, timeout_s: float | None = None,
                 batch_rows: int = BATCH_ROWS, user: bool = True) -> Iterator[RowStream]:
    """Run one user statement (checked as ``query`` checks it) and give its rows in batches.

    The connection stays open while the block runs; leaving the block early (enough rows read)
    ends the query. ``timeout_s`` (``--timeout``; default ``AUTOFORGE_SQL_TIMEOUT``) covers the
    block: past it, the next batch raises QueryTimeoutError. ``user=False``: an internal reader
    with its own fixed SQL (``autoforge export`` on PostgreSQL): no allow-list check, no limits.
    """
    url = resolve_url(warehouse)
    if user:
        check_read_only(sql)  # before opening anything
    limits = sql_limits(timeout_s) if user else None
    with connect(url, read_only=True, memory_mb=limits.memory_mb if limits else None) as conn:
        deadline = start_deadline(conn, url, limits) if limits else Deadline(float("inf"), None)
        try:
            if is_duckdb(url):
                yield _duckdb_stream(conn, sql, deadline, batch_rows)
            elif user:
                yield _pg_stream(conn, sql, deadline, batch_rows)
            else:
                yield _pg_stream(conn, sql, deadline, batch_rows, check_role=False)
        finally:
            deadline.stop()  # before the connection closes
