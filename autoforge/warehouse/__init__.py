"""The warehouse (a DuckDB file, or PostgreSQL): engine, migrations, typed reads and writes, the read-only SQL check."""

from autoforge.warehouse.engine import connect, resolve_url
from autoforge.warehouse.migrations import apply_migrations
from autoforge.warehouse.store import (TABLES, check_read_only, column_exists, query, read_records, reading, table_exists,
                                       write_records)

__all__ = [
    "TABLES",
    "apply_migrations",
    "check_read_only",
    "column_exists",
    "connect",
    "query",
    "read_records",
    "reading",
    "resolve_url",
    "table_exists",
    "write_records",
]
