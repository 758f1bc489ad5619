"""Numbered SQL migrations from ``sql/``, applied in order and recorded.

``sql/NNN_name.sql`` files hold one relation each. ``apply_migrations`` runs the ones not yet
recorded in ``schema_migrations`` (in one transaction), so ``autoforge init`` twice changes
nothing and an older warehouse is upgraded in place. A recorded file whose text changed is
reported, not re-run: write a new numbered file instead of editing an applied one.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from autoforge.errors import WarehouseError
from autoforge.types import utcnow
from autoforge.warehouse.engine import connect

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
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

    @property
    def text(self) -> str:
        return self.path.read_text()

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def discover(sql_dir: Path | None = None) -> list[Migration]:
    sql_dir = sql_dir or SQL_DIR
    if not sql_dir.is_dir():
        raise WarehouseError(f"migration folder {sql_dir} not found; install autoforge from a source checkout (pip install -e .)")
    found: dict[int, Migration] = {}
    for path in sorted(sql_dir.glob("*.sql")):
        m = _NAME.match(path.name)
        if not m:
            raise WarehouseError(f"{path}: migration files must be named NNN_name.sql (lower case)")
        version = int(m.group(1))
        if version in found:
            raise WarehouseError(f"{path}: version {version:03d} is also used by {found[version].path.name}")
        found[version] = Migration(version, path.name, path)
    return [found[v] for v in sorted(found)]


def split_statements(text: str) -> list[str]:
    """Split a migration into statements on ``;`` at line ends (no procedural SQL here)."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("--")]
    parts = re.split(r";\s*(?:--[^\n]*)?\n|;\s*$", "\n".join(lines) + "\n")
    return [p.strip() for p in parts if p.strip()]


def applied(conn: sa.Connection) -> dict[int, str]:
    conn.exec_driver_sql(_BOOTSTRAP)
    return {int(v): c for v, c in conn.exec_driver_sql("SELECT version, checksum FROM schema_migrations").fetchall()}


def migrate_conn(conn: sa.Connection, sql_dir: Path | None = None) -> dict:
    """Apply pending migrations on an open write connection (inside its transaction)."""
    migrations = discover(sql_dir)
    done = applied(conn)
    pending = [m for m in migrations if m.version not in done]
    changed = [m.name for m in migrations if m.version in done and done[m.version] != m.checksum]
    for m in pending:
        for stmt in split_statements(m.text):
            try:
                conn.exec_driver_sql(stmt)
            except Exception as exc:  # noqa: BLE001
                raise WarehouseError(f"migration {m.name} failed: {exc}") from exc
        conn.execute(
            sa.text("INSERT INTO schema_migrations VALUES (:v, :n, :c, :t)"),
            {"v": m.version, "n": m.name, "c": m.checksum, "t": utcnow()},
        )
    return {"applied": [m.name for m in pending], "already": len(done), "changed": changed}


def apply_migrations(warehouse: str | None = None, sql_dir: Path | None = None) -> dict:
    """Apply pending migrations in order; returns {"applied": [...], "already": n, "changed": [...]}."""
    with connect(warehouse) as conn:
        return migrate_conn(conn, sql_dir)
