"""Read and write typed records. One writer: stages return records, ``write_records`` persists a
batch in one transaction.

Every model in ``autoforge.types`` that is stored has one table (``TABLES``); its fields are
the columns, dict/list fields are JSON. Writes are upserts on the primary key (ids are
content hashes), so re-running a stage never duplicates a row.
"""

from __future__ import annotations

import json
import typing
from collections import defaultdict
from typing import Any, Iterable, Sequence, TypeVar

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.dialects.postgresql import insert as pg_insert

from autoforge import types as T
from autoforge.errors import ReadOnlyQueryError, WarehouseError
from autoforge.warehouse.engine import connect, is_duckdb, resolve_url

M = TypeVar("M", bound=T.Record)

# model -> (table, primary key columns)
TABLES: dict[type[T.Record], tuple[str, tuple[str, ...]]] = {
    T.Run: ("runs", ("run_id",)),
    T.ToolDoc: ("tool_docs", ("doc_id",)),
    T.ToolSpec: ("tool_specs", ("tool_id",)),
    T.ToolSet: ("toolsets", ("toolset_id",)),
    T.EnvironmentRecord: ("environments", ("env_id",)),
    T.ToolCode: ("tool_code", ("code_id",)),
    T.ToolRule: ("tool_rules", ("rule_id",)),
    T.ToolGraph: ("tool_graphs", ("graph_id",)),
    T.ToolSequence: ("tool_sequences", ("seq_id",)),
    T.TaskDag: ("task_dags", ("dag_id",)),
    T.Task: ("tasks", ("task_id",)),
    T.VerificationResult: ("verification_results", ("task_id", "check")),
    T.Rejection: ("rejections", ("rejection_id",)),
    T.Episode: ("episodes", ("episode_id",)),
    T.EvalResult: ("eval_results", ("result_id",)),
    T.TrainingRun: ("training_runs", ("train_run_id",)),
    T.TrainingStep: ("training_steps", ("train_run_id", "phase", "step")),
    T.LLMCall: ("llm_calls", ("call_id",)),
}
_CHUNK = 500  # rows per multi-row INSERT: one statement per chunk is ~10x faster than executemany on DuckDB


def table_of(model: type[T.Record]) -> str:
    try:
        return TABLES[model][0]
    except KeyError:
        raise WarehouseError(f"{model.__name__} has no warehouse table; known: {sorted(m.__name__ for m in TABLES)}") from None


def _to_row(rec: T.Record) -> dict[str, Any]:
    row = rec.model_dump(mode="json")
    for k, v in row.items():
        if isinstance(v, (dict, list)):
            row[k] = json.dumps(v, ensure_ascii=False)
    for name in type(rec).model_fields:  # keep real datetimes for TIMESTAMP columns
        v = getattr(rec, name)
        if hasattr(v, "isoformat") and not isinstance(v, str):
            row[name] = v
    return row


def _table(name: str, columns: Sequence[str], pk: Sequence[str]) -> sa.Table:
    return sa.Table(name, sa.MetaData(), *[sa.Column(c, primary_key=c in pk) for c in columns])


def write_records(
    warehouse: str | None,
    records: Iterable[T.Record],
    run: T.Run | None = None,
    *,
    migrate: bool = True,
) -> dict[str, int]:
    """Upsert ``records`` (and ``run``) in ONE transaction. Returns rows written per table.

    Records of one table with the same key in one batch: the last one wins.
    """
    by_table: dict[type[T.Record], dict[tuple, T.Record]] = defaultdict(dict)
    items = list(records)
    if run is not None:
        items.append(run)
    for rec in items:
        model = type(rec)
        if model not in TABLES:
            table_of(model)  # raises with the list of known models
        pk = TABLES[model][1]
        by_table[model][tuple(getattr(rec, k) for k in pk)] = rec
    counts: dict[str, int] = {}
    with connect(warehouse) as conn:
        if migrate:
            from autoforge.warehouse.migrations import migrate_conn

            migrate_conn(conn)
        for model, recs in by_table.items():
            name, pk = TABLES[model]
            columns = list(model.model_fields)
            table = _table(name, columns, pk)
            rows = [_to_row(r) for r in recs.values()]
            for i in range(0, len(rows), _CHUNK):
                stmt = pg_insert(table).values(rows[i : i + _CHUNK])
                update = {c: stmt.excluded[c] for c in columns if c not in pk}
                stmt = stmt.on_conflict_do_update(index_elements=list(pk), set_=update) if update else stmt.on_conflict_do_nothing()
                try:
                    conn.execute(stmt)
                except Exception as exc:  # noqa: BLE001
                    raise WarehouseError(f"writing {len(rows)} rows to {name} failed (nothing from this batch was kept): {exc}") from exc
            counts[name] = len(rows)
    return counts


# ----------------------------------------------------------------------------- reads


_READ_ONLY_TYPES = {"SELECT", "EXPLAIN", "PRAGMA", "CALL"}
_WRITE_WORDS = ("insert", "update", "delete", "drop", "create", "alter", "copy", "attach", "detach", "install", "load",
                "export", "import", "checkpoint", "vacuum", "truncate", "set", "use", "begin", "commit", "grant", "merge")


def check_read_only(sql: str) -> None:
    """Refuse any statement that could write (INSERT, DROP, COPY TO, ATTACH ...), with a clear message."""
    import re

    parse_sql = re.sub(r"(?<![:\w]):[A-Za-z_]\w*", "NULL", sql)  # :named parameters -> NULL for the parser
    try:
        import duckdb

        statements = duckdb.extract_statements(parse_sql)
    except ImportError:  # pragma: no cover - duckdb is a dependency
        statements = None
    except Exception as exc:  # noqa: BLE001 - a parse error: say so
        raise ReadOnlyQueryError(f"cannot parse query: {exc}") from exc
    if statements is None:
        first = sql.strip().split(None, 1)[0].lower() if sql.strip() else ""
        if first in _WRITE_WORDS:
            raise ReadOnlyQueryError(f"'{first.upper()}' writes; `autoforge sql` runs read-only queries only")
        return
    if not statements:
        raise ReadOnlyQueryError("empty query")
    for st in statements:
        kind = st.type.name
        if kind not in _READ_ONLY_TYPES:
            text = st.query.strip().split("\n")[0][:80]
            raise ReadOnlyQueryError(
                f"refused {kind} statement ({text!r}): `autoforge sql` runs read-only queries only. "
                "Use `autoforge export` to write files; stages write through their own commands."
            )
        if kind == "PRAGMA" and "=" in st.query:
            raise ReadOnlyQueryError(f"refused PRAGMA assignment ({st.query.strip()!r}): read-only queries only")


def query(warehouse: str | None, sql: str, params: dict | None = None, *, read_only_check: bool = True) -> list[dict]:
    """Run one read-only query and return rows as dicts (on a read-only connection)."""
    if read_only_check:
        check_read_only(sql)
    url = resolve_url(warehouse)
    with connect(url, read_only=is_duckdb(url)) as conn:
        try:
            result = conn.execute(sa.text(sql), params or {}) if params else conn.exec_driver_sql(sql)
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).split("\n[SQL")[0]
            if "read-only" in msg.lower():
                raise ReadOnlyQueryError(f"the warehouse is opened read-only: {msg}") from exc
            raise WarehouseError(f"query failed: {msg}") from exc
        if not result.returns_rows:
            return []
        return [dict(r._mapping) for r in result]


def _json_fields(model: type[BaseModel]) -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        origins = {typing.get_origin(a) or a for a in (typing.get_args(ann) or (ann,))} | {typing.get_origin(ann) or ann}
        if ann is typing.Any or any(o in (dict, list, tuple) or (isinstance(o, type) and issubclass(o, BaseModel)) for o in origins):
            out.add(name)
    return out


def read_records(
    warehouse: str | None, model: type[M], where: str | None = None, params: dict | None = None, order_by: str | None = None
) -> list[M]:
    """Load rows of ``model``'s table as validated records (``where`` is a SQL condition with :named params)."""
    name, pk = TABLES[model]
    sql = f"SELECT * FROM {name}" + (f" WHERE {where}" if where else "") + f" ORDER BY {order_by or ', '.join(pk)}"
    rows = query(warehouse, sql, params, read_only_check=False)
    json_fields = _json_fields(model)
    fields = set(model.model_fields)
    out = []
    for row in rows:
        clean = {k: v for k, v in row.items() if k in fields}
        for k in json_fields & clean.keys():
            if isinstance(clean[k], str):
                try:
                    clean[k] = json.loads(clean[k])
                except ValueError:
                    pass
        out.append(model.model_validate(clean))
    return out


def table_exists(warehouse: str | None, name: str) -> bool:
    rows = query(
        warehouse,
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = :n",
        {"n": name},
        read_only_check=False,
    )
    return bool(rows and rows[0]["n"])
