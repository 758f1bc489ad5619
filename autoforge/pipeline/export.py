"""Relations as a user names them: ``autoforge sql`` (read-only user SQL), ``autoforge export`` to a
file, and the relation reads the folder exports (``autoforge.integrations``) build on.

Thin functions over the warehouse's read-only user-SQL path and export machinery, so that the
CLI and the integrations need not import the warehouse.
"""

from __future__ import annotations

from pathlib import Path

from autoforge.errors import WarehouseError
from autoforge.types import Task
from autoforge.warehouse import export as file_export
from autoforge.warehouse import query, read_records
from autoforge.warehouse.export import FORMATS, relations
from autoforge.warehouse.stream import stream_query  # noqa: F401  (autoforge sql: rows in batches, under the limits)

__all__ = ["FORMATS", "column_types", "export_file", "quoted", "relation_columns", "relation_rows", "relations",
           "tasks_in", "user_sql"]


def user_sql(warehouse: str | None, sql: str) -> list[dict]:
    """A user's query (``autoforge sql``): one read-only statement, checked before anything runs
    (ReadOnlyQueryError otherwise), on a connection that reaches nothing outside the warehouse."""
    return query(warehouse, sql)


def export_file(warehouse: str | None, relation: str, fmt: str, out: str | Path) -> int:
    """Every row of ``relation`` to one ``fmt`` file (:data:`FORMATS`) at ``out``; the number of rows."""
    return file_export.export_relation(warehouse, relation, fmt, out)


def quoted(relation: str) -> str:
    """A relation name as a SQL identifier."""
    return '"' + relation.replace('"', '""') + '"'


def relation_columns(warehouse: str | None, relation: str) -> list[str]:
    """The columns of a table or view, in order; WarehouseError listing the relations when it does not exist."""
    known = relations(warehouse)
    if relation not in known:
        raise WarehouseError(f"no table or view named {relation!r}; known: {', '.join(known)}")
    rows = query(warehouse, "SELECT column_name FROM information_schema.columns WHERE table_name = :r "
                            "ORDER BY ordinal_position", {"r": relation}, read_only_check=False)
    return [r["column_name"] for r in rows]


def column_types(warehouse: str | None, relation: str) -> dict[str, str]:
    """Column -> its database type name, upper case (``VARCHAR``, ``JSON``, ``INTEGER[]``, ...)."""
    return {r["column_name"]: str(r["data_type"]).upper() for r in query(
        warehouse, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = :r",
        {"r": relation}, read_only_check=False)}


def relation_rows(warehouse: str | None, relation: str, order_by: str | None = None) -> list[dict]:
    """Every row of ``relation`` (``order_by``: a column of it, e.g. ``task_id``; None: the database's order)."""
    order = f" ORDER BY {quoted(order_by)}" if order_by else ""
    return query(warehouse, f"SELECT * FROM {quoted(relation)}{order}", read_only_check=False)


def tasks_in(warehouse: str | None, relation: str) -> dict[str, Task]:
    """Task id -> task of every ``tasks`` row whose id the task-shaped ``relation`` names."""
    rows = read_records(warehouse, Task, where=f"task_id IN (SELECT task_id FROM {quoted(relation)})")
    return {t.task_id: t for t in rows}
