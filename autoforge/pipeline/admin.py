"""The warehouse itself: create or upgrade it, say where it is, and write records outside a stage.

``autoforge init`` and ``autoforge demo`` migrate through :func:`init_warehouse`; the folder exports
and the MCP server ask for the warehouse file (:func:`warehouse_file`); benchmarks and fixtures
that fill a warehouse by hand write through :func:`store_records` and :func:`bulk_load`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable, Sequence

from autoforge.types import Record
from autoforge.warehouse import apply_migrations, connect, resolve_url, write_records
from autoforge.warehouse.engine import duckdb_path, is_duckdb, shown_url
from autoforge.warehouse.migrations import discover


def init_warehouse(warehouse: str | None) -> dict:
    """Apply the migrations not yet applied: ``{"applied": [names], "already": n, "changed": [names]}``."""
    return apply_migrations(warehouse)


def warehouse_url(warehouse: str | None) -> str:
    """The warehouse's URL (``None``: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb); WarehouseError for an
    unsupported database."""
    return resolve_url(warehouse)


def shown_warehouse(warehouse: str | None) -> str:
    """The warehouse's URL as a message may show it (any password replaced by ``***``)."""
    return shown_url(resolve_url(warehouse))


def warehouse_file(warehouse: str | None) -> Path | None:
    """The DuckDB file of the warehouse (None for PostgreSQL or an in-memory DuckDB)."""
    return duckdb_path(resolve_url(warehouse))


def migration_files() -> list[Path]:
    """The migration files (``autoforge/sql/NNN_name.sql``), oldest first."""
    return [m.path for m in discover()]


def store_records(warehouse: str | None, records: Iterable[Record]) -> dict[str, int]:
    """Write records outside a stage (fixtures, benchmarks) in one transaction; rows written per table."""
    return write_records(warehouse, list(records))


def bulk_load(warehouse: str | None, statements: Sequence[str]) -> list[float]:
    """Run the caller's own bulk statements (``INSERT ... SELECT``, ``UPDATE``) in order on a migrated
    warehouse, then on PostgreSQL commit and ``VACUUM ANALYZE``; the seconds each statement took."""
    url = resolve_url(warehouse)
    postgres = not is_duckdb(url)
    times = []
    with connect(url) as conn:
        for st in statements:
            t = time.perf_counter()
            if postgres:
                with conn.connection.driver_connection.cursor() as cur:
                    cur.execute(st)
            else:
                conn.exec_driver_sql(st)
            times.append(time.perf_counter() - t)
    if postgres:
        with connect(url) as conn:
            raw = conn.connection.driver_connection
            raw.commit()
            raw.autocommit = True
            raw.execute("VACUUM ANALYZE")
    return times
