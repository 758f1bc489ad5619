"""Numbered SQL migrations from the package's ``autoforge/sql/``, applied in order and recorded.

``sql/NNN_name.sql`` files hold one relation each; they ship inside the package (read with
:mod:`importlib.resources`), so a wheel installed without the source tree builds a warehouse too. ``apply_migrations`` runs the ones not yet
recorded in ``schema_migrations`` (in one transaction), so ``autoforge init`` twice changes
nothing and an older warehouse is upgraded in place. A recorded file whose text changed is
reported, not re-run: write a new numbered file instead of editing an applied one.

The same files build a PostgreSQL warehouse: ``sql/postgresql/NNN_name.sql`` replaces
``sql/NNN_name.sql`` there when it exists, any other file is rewritten by
:func:`autoforge.warehouse.dialect.to_postgres` (types, ``json_array_length``, replacing views).
The checksum recorded is that of the file applied (the override where there is one), so a
DuckDB warehouse's rows in ``schema_migrations`` are exactly what they always were. On
PostgreSQL concurrent writers take a transaction-level advisory lock before migrating, so two
factories starting at once on an empty database apply each file once.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import sqlalchemy as sa

from autoforge.errors import WarehouseError
from autoforge.types import utcnow
from autoforge.warehouse.dialect import dialect_of, to_postgres
from autoforge.warehouse.engine import connect

SQL_DIR = Path(str(resources.files("autoforge") / "sql"))  # package data: autoforge/sql/*.sql
PG_DIR_NAME = "postgresql"  # sql/postgresql/NNN_name.sql: the file PostgreSQL applies instead of sql/NNN_name.sql
_PG_LOCK_KEY = 0x4175746F466F7267  # pg_advisory_xact_lock key of the migrator ("AutoForg")
_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,  -- the NNN of sql/NNN_name.sql
    name       VARCHAR NOT NULL,     -- file name
    checksum   VARCHAR NOT NULL,     -- sha256 of the file text when applied
    applied_at TIMESTAMP NOT NULL    -- UTC
)
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path
    pg_path: Path | None = None  # sql/postgresql/<name>, applied on PostgreSQL instead of path

    def source(self, dialect: str = "duckdb") -> Path:
        """The file applied on ``dialect``."""
        return self.pg_path if dialect == "postgresql" and self.pg_path is not None else self.path

    @property
    def text(self) -> str:
        return self.path.read_text()

    @property
    def checksum(self) -> str:
        return self.checksum_for("duckdb")

    def checksum_for(self, dialect: str) -> str:
        """sha256 of the text of the file applied on ``dialect`` (what schema_migrations records)."""
        return hashlib.sha256(self.source(dialect).read_text().encode()).hexdigest()

    def statements(self, dialect: str = "duckdb") -> list[str]:
        """The statements to run on ``dialect``: the file's own, the override's, or the rewrite's."""
        stmts = split_statements(self.source(dialect).read_text())
        if dialect != "postgresql" or self.pg_path is not None:
            return stmts
        return [pg for st in stmts for pg in to_postgres(st)]


def discover(sql_dir: Path | None = None) -> list[Migration]:
    sql_dir = sql_dir or SQL_DIR
    if not sql_dir.is_dir():
        raise WarehouseError(f"migration folder {sql_dir} not found; the package is incomplete: reinstall autoforge (pip install --force-reinstall autoforge, or pip install -e . in a checkout)")
    found: dict[int, Migration] = {}
    for path in sorted(sql_dir.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise WarehouseError(f"{path}: migration files must be named NNN_name.sql (lower case)")
        version = int(m.group(1))
        if version in found:
            raise WarehouseError(f"{path}: version {version:03d} is also used by {found[version].path.name}")
        found[version] = Migration(version, path.name, path)
    pg_dir = sql_dir / PG_DIR_NAME
    for path in sorted(pg_dir.glob("*.sql")) if pg_dir.is_dir() else []:
        m = _NAME.match(path.name)
        base = found.get(int(m.group(1))) if m else None
        if base is None or base.name != path.name:
            raise WarehouseError(
                f"{path}: a PostgreSQL override must have the name of the sql/ file it replaces"
                + (f" ({base.name})" if base is not None else "; there is no sql/" + path.name)
            )
        found[base.version] = Migration(base.version, base.name, base.path, path)
    return [found[v] for v in sorted(found)]


def split_statements(text: str) -> list[str]:
    """Split a migration into statements on ``;`` at line ends (no procedural SQL here)."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("--")]
    parts = re.split(r";\s*(?:--[^\n]*)?\n|;\s*$", "\n".join(lines) + "\n")
    return [p.strip() for p in parts if p.strip()]


def applied(conn: sa.Connection) -> dict[int, str]:
    conn.exec_driver_sql(_BOOTSTRAP)
    return {int(v): c for v, c in conn.exec_driver_sql("SELECT version, checksum FROM schema_migrations").fetchall()}


def _execute(conn: sa.Connection, stmt: str, dialect: str) -> None:
    """Run one migration statement as written (psycopg would read a ``%`` in it as a placeholder)."""
    if dialect == "postgresql":
        with conn.connection.driver_connection.cursor() as cur:
            cur.execute(stmt)
    else:
        conn.exec_driver_sql(stmt)


def _recorded(conn: sa.Connection) -> dict[int, str] | None:
    """schema_migrations on PostgreSQL without creating it (None: not there yet)."""
    if conn.exec_driver_sql("SELECT to_regclass('schema_migrations')").scalar() is None:
        return None
    return {int(v): c for v, c in conn.exec_driver_sql("SELECT version, checksum FROM schema_migrations").fetchall()}


def migrate_conn(conn: sa.Connection, sql_dir: Path | None = None) -> dict:
    """Apply pending migrations on an open write connection (inside its transaction)."""
    migrations = discover(sql_dir)
    dialect = dialect_of(conn.dialect.name)
    if dialect == "postgresql":
        done = _recorded(conn)
        if done is None or any(m.version not in done for m in migrations):
            # Someone has to migrate: one writer at a time (held to the end of this transaction), then look again.
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
            done = applied(conn)
    else:
        done = applied(conn)
    pending = [m for m in migrations if m.version not in done]
    changed = [m.name for m in migrations if m.version in done and done[m.version] != m.checksum_for(dialect)]
    for m in pending:
        source = m.source(dialect)
        for stmt in m.statements(dialect):
            try:
                _execute(conn, stmt, dialect)
            except Exception as exc:  # noqa: BLE001
                where = f"{source.parent.name}/{source.name}" if source != m.path else m.name
                raise WarehouseError(f"migration {where} failed on {dialect}: {exc}") from exc
        conn.execute(
            sa.text("INSERT INTO schema_migrations VALUES (:v, :n, :c, :t)"),
            {"v": m.version, "n": m.name, "c": m.checksum_for(dialect), "t": utcnow()},
        )
    return {"applied": [m.name for m in pending], "already": len(done), "changed": changed}


def apply_migrations(warehouse: str | None = None, sql_dir: Path | None = None) -> dict:
    """Apply pending migrations in order; returns {"applied": [...], "already": n, "changed": [...]}."""
    with connect(warehouse) as conn:
        return migrate_conn(conn, sql_dir)
