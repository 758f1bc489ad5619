"""Read and write typed records. One writer: stages return records, ``write_records`` persists a
batch in one transaction.

Every model in ``autoforge.types`` that is stored has one table (``TABLES``); its fields are
the columns, dict/list fields are JSON. Writes are upserts on the primary key (ids are
content hashes), so re-running a stage never duplicates a row.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
import typing
from collections import defaultdict
from typing import Any, Iterable, Iterator, Sequence, TypeVar

import orjson
import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.dialects.postgresql import insert as pg_insert

from autoforge import types as T
from autoforge.errors import ReadOnlyQueryError, WarehouseError
from autoforge.warehouse.engine import connect, duckdb_path, is_duckdb, resolve_url
from autoforge.warehouse.limits import Deadline, SqlLimits, driver_interrupt, is_timeout_text, sql_limits

M = TypeVar("M", bound=T.Record)

# model -> (table, primary key columns)
TABLES: dict[type[T.Record], tuple[str, tuple[str, ...]]] = {
    T.Run: ("runs", ("run_id",)),
    T.ToolDoc: ("tool_docs", ("doc_id",)),
    T.ToolSpec: ("tool_specs", ("tool_id",)),
    T.ToolSet: ("toolsets", ("toolset_id",)),
    T.PolicyDoc: ("policy_docs", ("policy_id",)),
    T.EnvironmentRecord: ("environments", ("env_id",)),
    T.ToolCode: ("tool_code", ("code_id",)),
    T.ToolRule: ("tool_rules", ("rule_id",)),
    T.ToolGraph: ("tool_graphs", ("graph_id",)),
    T.ToolSequence: ("tool_sequences", ("seq_id",)),
    T.TaskDag: ("task_dags", ("dag_id",)),
    T.Task: ("tasks", ("task_id",)),
    T.VerificationResult: ("verification_results", ("task_id", "check")),
    T.Rejection: ("rejections", ("rejection_id",)),
    T.WorldCheck: ("world_checks", ("check_id",)),
    T.Episode: ("episodes", ("episode_id",)),
    T.EvalResult: ("eval_results", ("result_id",)),
    T.TrainingRun: ("training_runs", ("train_run_id",)),
    T.TrainingStep: ("training_steps", ("train_run_id", "phase", "step")),
    T.TaskPassRate: ("task_pass_rates", ("train_run_id", "point", "source", "task_id")),
    T.LLMCall: ("llm_calls", ("call_id",)),
}
# Columns a table has beyond its model's fields: derived by the writer from other tables, in the same
# transaction (never written by a stage, never read back into a record).
DERIVED_COLUMNS: dict[str, tuple[str, ...]] = {"tasks": ("n_checks_passed",)}  # sql/053: passed verification checks
# Tables whose rows are written once: the id is a hash of every column that matters, so a re-write of the
# same id keeps the first row (its run and time) instead of updating it.
WRITE_ONCE: frozenset[type[T.Record]] = frozenset({T.PolicyDoc})
_CHUNK = 500  # rows per multi-row INSERT: one statement per chunk is ~10x faster than executemany on DuckDB


def table_of(model: type[T.Record]) -> str:
    try:
        return TABLES[model][0]
    except KeyError:
        raise WarehouseError(f"{model.__name__} has no warehouse table; known: {sorted(m.__name__ for m in TABLES)}") from None


def _json_text(value: Any) -> str:
    """A JSON column's text: orjson's compact form (~10x faster than ``json.dumps``: a factory run writes ~25k
    rows), ``json.dumps`` for what orjson cannot encode (an integer beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, ensure_ascii=False)


def _to_row(rec: T.Record) -> dict[str, Any]:
    row = rec.model_dump(mode="json")
    for k, v in row.items():
        if isinstance(v, (dict, list)):
            row[k] = _json_text(v)
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
    # Tables in TABLES' order and, on PostgreSQL, rows in key order: every writer takes row locks in the same
    # order, so two writers upserting overlapping rows wait for each other instead of deadlocking. DuckDB (one
    # writer) keeps the order the stage made them in: an environment's tasks stay together in the file, and a
    # read of one environment skips the rest (zone maps).
    url = resolve_url(warehouse)
    order = (lambda keys: keys) if is_duckdb(url) else (lambda keys: sorted(keys, key=_sort_key))
    batches = [(model, [recs[k] for k in order(list(recs))]) for model in TABLES if (recs := by_table.get(model))]
    for attempt in range(_PG_RETRIES + 1):
        try:
            return _write(url, batches, migrate)
        except WarehouseError as exc:
            if is_duckdb(url) or attempt == _PG_RETRIES or not _is_retryable(exc):
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")


_PG_RETRIES = 5  # a PostgreSQL write transaction that hit a deadlock or a serialization failure is re-run this often


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, "" if v is None else str(v)) for v in key)


def _is_retryable(exc: BaseException) -> bool:
    """A PostgreSQL deadlock (40P01) or serialization failure (40001) somewhere in the cause chain."""
    while exc is not None:
        if getattr(exc, "sqlstate", None) in ("40P01", "40001"):
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__
    return False


def _write(url: str, batches: list[tuple[type[T.Record], list[T.Record]]], migrate: bool) -> dict[str, int]:
    counts: dict[str, int] = {}
    duck = is_duckdb(url)
    with connect(url) as conn:
        if migrate:
            from autoforge.warehouse.migrations import migrate_conn

            migrate_conn(conn)
        for model, recs in batches:
            name, pk = TABLES[model]
            columns = list(model.model_fields)
            rows = [_to_row(r) for r in recs]
            upsert = _duckdb_upsert if duck else _values_upsert
            upsert(conn, name, columns, pk, rows, update=model not in WRITE_ONCE)
            counts[name] = len(rows)
            if model is T.PolicyDoc:
                _replace_policies(conn, recs)
        checked = sorted({r.task_id for model, recs in batches if model in (T.Task, T.VerificationResult) for r in recs})
        if checked and _has_column(conn, "tasks", "n_checks_passed"):
            _recount_checks(conn, checked)
    return counts


def _values_upsert(conn: sa.Connection, name: str, columns: list[str], pk: Sequence[str], rows: list[dict[str, Any]],
                   *, update: bool) -> None:
    """Upsert ``rows`` with multi-row ``INSERT ... VALUES ... ON CONFLICT`` statements of :data:`_CHUNK` rows (PostgreSQL)."""
    table = _table(name, columns, pk)
    for i in range(0, len(rows), _CHUNK):
        stmt = pg_insert(table).values(rows[i : i + _CHUNK])
        sets = {c: stmt.excluded[c] for c in columns if c not in pk} if update else {}
        stmt = stmt.on_conflict_do_update(index_elements=list(pk), set_=sets) if sets else stmt.on_conflict_do_nothing()
        try:
            conn.execute(stmt)
        except Exception as exc:  # noqa: BLE001
            raise WarehouseError(f"writing {len(rows)} rows to {name} failed (nothing from this batch was kept): {exc}") from exc


def _duckdb_upsert(conn: sa.Connection, name: str, columns: list[str], pk: Sequence[str], rows: list[dict[str, Any]],
                   *, update: bool) -> None:
    """Upsert ``rows`` into DuckDB table ``name`` in one statement over column arrays (NumPy object arrays, which
    DuckDB scans without copying), in the connection's transaction: ~25x faster than a multi-row VALUES insert,
    whose statement DuckDB has to parse and bind parameter by parameter. Each column's values are first made the
    table column's Python type, so DuckDB's type detection on the arrays cannot pick another."""
    import numpy as np

    raw = conn.connection.driver_connection
    types = _column_types(conn, name)
    batch = {c: np.array([_as_column(r.get(c), types.get(c, "")) for r in rows] if rows else [], dtype=object)
             for c in columns}
    view = f"_af_batch_{name}"
    cols = ", ".join(f'"{c}"' for c in columns)
    keys = ", ".join(f'"{c}"' for c in pk)
    sets = ", ".join(f'"{c}" = excluded."{c}"' for c in columns if c not in pk)
    action = f"DO UPDATE SET {sets}" if update and sets else "DO NOTHING"
    raw.register(view, batch)  # on the transaction's own DuckDB connection (duckdb_engine's cursors share it)
    try:
        conn.execute(sa.text(f'INSERT INTO "{name}" ({cols}) SELECT {cols} FROM "{view}" ON CONFLICT ({keys}) {action}'))
    except Exception as exc:  # noqa: BLE001
        raise WarehouseError(f"writing {len(rows)} rows to {name} failed (nothing from this batch was kept): {exc}") from exc
    raw.unregister(view)  # (after a failure the connection is rolled back and closed, its views with it)


def _column_types(conn: sa.Connection, table: str) -> dict[str, str]:
    rows = conn.execute(sa.text("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = :t "
                                "AND table_schema = current_schema()"), {"t": table})
    return {r[0]: r[1].upper() for r in rows}


_FLOATS = ("DOUBLE", "FLOAT", "REAL", "DECIMAL")
_INTS = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER")


def _as_column(value: Any, sql_type: str) -> Any:
    """``value`` as the Python type of a column of ``sql_type`` (None stays None)."""
    if value is None:
        return None
    if sql_type.startswith(_FLOATS) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if sql_type in _INTS and isinstance(value, float) and value.is_integer():
        return int(value)
    if sql_type in ("VARCHAR", "JSON") and isinstance(value, (dict, list, bool)):  # as DuckDB would cast them
        return _json_text(value)
    return value


_DROP_POLICY = sa.text(
    "DELETE FROM policy_docs WHERE toolset = :toolset AND source = :source AND policy_id <> :policy_id")


def _replace_policies(conn: sa.Connection, recs: list[T.Record]) -> None:
    """A policy text written for (tool set, source) replaces that source's older text: one row per source."""
    for r in recs:
        conn.execute(_DROP_POLICY, {"toolset": r.toolset, "source": r.source, "policy_id": r.policy_id})


_RECOUNT = sa.text(
    "UPDATE tasks SET n_checks_passed = c.n FROM (SELECT task_id, sum(CASE WHEN passed THEN 1 ELSE 0 END) AS n "
    "FROM verification_results WHERE task_id IN :ids GROUP BY task_id) c WHERE c.task_id = tasks.task_id"
).bindparams(sa.bindparam("ids", expanding=True))


def _has_column(conn: sa.Connection, table: str, column: str) -> bool:
    return bool(conn.execute(sa.text("SELECT count(*) FROM information_schema.columns WHERE table_name = :t "
                                     "AND column_name = :c"), {"t": table, "c": column}).scalar())


def _recount_checks(conn: sa.Connection, task_ids: list[str]) -> None:
    """tasks.n_checks_passed of these tasks from their verification_results rows (sql/053), in the write's transaction."""
    for i in range(0, len(task_ids), _CHUNK):
        try:
            conn.execute(_RECOUNT, {"ids": task_ids[i : i + _CHUNK]})
        except Exception as exc:  # noqa: BLE001
            raise WarehouseError(f"recounting the verification checks of {len(task_ids)} tasks failed (nothing from this "
                                 f"batch was kept): {exc}") from exc


# ----------------------------------------------------------------------------- reads


# `autoforge sql` runs exactly one statement of these kinds (as DuckDB's own parser classifies it).
ALLOWED_STATEMENTS = "SELECT, WITH, VALUES, FROM, DESCRIBE, SHOW, SUMMARIZE, or EXPLAIN (without ANALYZE) of one of those"
_EXPORT_HINT = (
    "To write a table or view to a file use `autoforge export TABLE_OR_VIEW --format parquet|jsonl|csv --out PATH`."
)
_EXPLAIN_OPTIONS = frozenset({"format"})  # EXPLAIN (FORMAT json) ...; ANALYZE would run the statement


def _refuse(what: str, sql: str) -> ReadOnlyQueryError:
    snippet = " ".join(sql.split())[:80]
    return ReadOnlyQueryError(
        f"refused {what} ({snippet!r}): `autoforge sql` runs one read-only statement: {ALLOWED_STATEMENTS}. {_EXPORT_HINT}"
    )


def _statements(sql: str) -> list[Any]:
    """DuckDB's parse of ``sql`` into statements; ReadOnlyQueryError if it does not parse."""
    import duckdb

    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ReadOnlyQueryError(f"the query is not valid UTF-8 text ({exc}); remove the character at position {exc.start}.") from exc
    try:
        return list(duckdb.extract_statements(sql))
    except duckdb.Error as exc:
        reason = str(exc).strip().split("\n")[0]
        raise ReadOnlyQueryError(
            f"cannot parse the query ({reason}); `autoforge sql` runs one read-only statement: {ALLOWED_STATEMENTS}."
        ) from exc


def _tokens(sql: str) -> list[tuple[int, str, str]]:
    """(offset, text, kind) of every token DuckDB's tokenizer finds in ``sql``, comments left out."""
    import duckdb

    found = duckdb.tokenize(sql)
    out = []
    for i, (start, kind) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(sql)
        if kind.name != "comment":
            out.append((start, sql[start:end].strip(), kind.name))
    return out


def _parse(sql: str) -> list[Any] | None:
    """DuckDB's statements of ``sql``, or None if it does not parse."""
    try:
        return _statements(sql)
    except ReadOnlyQueryError:
        return None


def _kind(statement: Any) -> str:
    """The StatementType name of one parsed statement ("UNKNOWN" for a kind this duckdb cannot name)."""
    try:
        return statement.type.name
    except ValueError:  # e.g. UPDATE EXTENSIONS: a type number the Python enum lacks
        return "UNKNOWN"


def _one_select(statements: list[Any] | None) -> bool:
    return statements is not None and len(statements) == 1 and _kind(statements[0]) == "SELECT"


def _explain_options_ok(options: list[tuple[int, str, str]]) -> bool:
    """EXPLAIN's ``( ... )`` options: only ``FORMAT value`` groups, comma separated."""
    groups: list[list[str]] = [[]]
    for _, text, kind in options:
        if kind == "operator" and text == ",":
            groups.append([])
        else:
            groups[-1].append(text.strip('"').lower())
    return all(len(g) == 2 and g[0] in _EXPLAIN_OPTIONS for g in groups)


def _check_explain(sql: str) -> None:
    """Allow ``EXPLAIN [(FORMAT x)] <one SELECT-kind statement>``; refuse ANALYZE and anything else.

    Both readings of a ``(`` after EXPLAIN are checked (options, or a parenthesized query),
    and every reading that parses must be safe, so the check never depends on guessing which
    one DuckDB takes.
    """
    tokens = _tokens(sql)
    if len(tokens) < 2 or tokens[0][1].lower() != "explain":
        raise _refuse("an EXPLAIN statement of a form that cannot be checked", sql)
    if tokens[1][1].lower().strip('"') in ("analyze", "analyse"):
        raise _refuse("EXPLAIN ANALYZE (it runs the statement)", sql)
    readings: list[bool] = []
    if _one_select(_parse(sql[tokens[1][0]:])):  # EXPLAIN <query>
        readings.append(True)
    if tokens[1][1] == "(":  # EXPLAIN (options) <query>
        depth = 0
        for i in range(1, len(tokens)):
            _, text, kind = tokens[i]
            if kind == "operator":
                depth += text.count("(") - text.count(")")
            if depth <= 0:
                after = _parse(sql[tokens[i + 1][0]:]) if i + 1 < len(tokens) else None
                if after:
                    readings.append(_one_select(after) and _explain_options_ok(tokens[2:i]))
                break
    if not readings or not all(readings):
        raise _refuse("an EXPLAIN that is not of one SELECT, or with options other than FORMAT", sql)


def check_read_only(sql: str) -> None:
    """Allow exactly one read-only statement (``ALLOWED_STATEMENTS``); refuse anything else.

    The statement is classified by DuckDB's own parser, on exactly the text that will run, so
    comments, string literals, dollar quotes, case and whitespace cannot hide a second
    statement or a write. Raises ReadOnlyQueryError naming the statement kind that was refused.
    """
    if not sql.strip():
        raise ReadOnlyQueryError(f"empty query: give one read-only statement ({ALLOWED_STATEMENTS}).")
    statements = _statements(sql)
    if not statements:
        raise ReadOnlyQueryError(f"the query holds no statement (only comments?): give one read-only statement ({ALLOWED_STATEMENTS}).")
    if len(statements) > 1:
        kinds = ", ".join(_kind(st) for st in statements)
        raise _refuse(f"{len(statements)} statements ({kinds}); run them one at a time", sql)
    st = statements[0]
    kind = _kind(st)
    if kind == "SELECT":
        return
    if kind == "EXPLAIN":
        _check_explain(st.query)
        return
    words = [text.upper() for _, text, tkind in _tokens(st.query)[:2] if tkind in ("keyword", "identifier")]
    raise _refuse(f"{' '.join(words) or 'the statement'} (statement kind {kind})", sql)


def _query_error(exc: BaseException) -> WarehouseError:
    """Map a failed query to an error that says what went wrong and how to fix it."""
    msg = str(getattr(exc, "orig", None) or exc).split("\n[SQL")[0].strip()
    low = msg.lower()
    if "disabled by configuration" in low or "permission error" in low:
        return ReadOnlyQueryError(
            f"refused: the query reaches outside the warehouse ({msg.splitlines()[0]}). `autoforge sql` sees the "
            f"warehouse's own tables and views only; load files with `autoforge ingest`. {_EXPORT_HINT}"
        )
    if "configuration has been locked" in low:
        return ReadOnlyQueryError(f"refused: settings cannot be changed from `autoforge sql` ({msg.splitlines()[0]}).")
    if "exists in the" in low and "extension" in low:
        return ReadOnlyQueryError(
            f"refused: `autoforge sql` loads no extensions ({msg.splitlines()[0]}); it reads the warehouse's own tables and views."
        )
    if "read-only" in low or "read only" in low:
        return ReadOnlyQueryError(f"the warehouse is opened read-only: {msg}")
    if low.startswith("out of memory"):  # a reader never spills to disk: say what to change, in one line
        return WarehouseError(
            f"query failed: it needs more memory than DuckDB may use ({msg.splitlines()[0]}). Aggregate or add a "
            "LIMIT, or raise the limit (AUTOFORGE_SQL_MEMORY_MB=8192 for `autoforge sql`, or the warehouse URL "
            "duckdb:///PATH?memory_limit=8GB); `autoforge sql` never spills to disk."
        )
    return WarehouseError(
        f"query failed: {msg}. Check the SQL against the warehouse's tables and views "
        "(`autoforge sql 'SHOW TABLES'` lists them on DuckDB)."
    )


def _rows(result: sa.CursorResult) -> list[dict]:
    if not result.returns_rows:
        return []
    cur = result.cursor
    keys = [d[0] for d in cur.description]
    if any(str(d[1]).upper() == "JSON" for d in cur.description):  # duckdb_engine parses DuckDB JSON values: keep that
        return [dict(zip(keys, row)) for row in result.fetchall()]
    # Otherwise the driver's own rows, zipped with the names: SQLAlchemy's Row objects cost ~3x more per row
    # (a 500k-row read of v_curated_tasks, benchmarks/query_scale.py) and change no value here.
    return [dict(zip(keys, row)) for row in cur.fetchall()]


def _refuse_server_file_roles(conn: sa.Connection) -> None:
    """On PostgreSQL, refuse to run user SQL as a role that can read or write the server's files."""
    can = conn.exec_driver_sql(
        "SELECT current_user AS who, pg_has_role(current_user, 'pg_read_server_files', 'MEMBER') "
        "OR pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') "
        "OR pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER') AS can"
    ).one()
    if can.can:
        raise ReadOnlyQueryError(
            f"refused: the PostgreSQL role {can.who!r} can read or write the server's files (superuser, or a member of "
            "pg_read_server_files / pg_write_server_files / pg_execute_server_program), so `autoforge sql` will not run "
            "queries as it. Connect as a role that can only read the warehouse, e.g. `CREATE ROLE reader LOGIN; "
            "GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader`, and pass postgresql://reader@HOST/DB."
        )


def _run_user_sql_postgres(conn: sa.Connection, sql: str, params: dict | None) -> list[dict]:
    """One checked statement on PostgreSQL: rendered by psycopg, checked, run as ONE prepared statement."""
    import psycopg

    _refuse_server_file_roles(conn)
    raw = conn.connection.driver_connection
    text = sql
    if params:
        compiled = sa.text(sql).compile(dialect=conn.dialect)
        text = psycopg.ClientCursor(raw).mogrify(compiled.string, compiled.construct_params(params))
    check_read_only(text)
    return _pg_rows(conn, text, prepare=True)  # the extended protocol: the server runs one statement at most


def _pg_rows(conn: sa.Connection, text: str, *, prepare: bool | None = None) -> list[dict]:
    """Rows of ``text`` run as written on PostgreSQL (no parameters, so a ``%`` in it is not a placeholder)."""
    with conn.connection.driver_connection.cursor() as cur:
        cur.execute(text, prepare=prepare)
        if cur.description is None:
            return []
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def start_deadline(conn: sa.Connection, url: str, limits: SqlLimits) -> Deadline:
    """Put ``limits.timeout_s`` on the query about to run on ``conn``: PostgreSQL's own statement_timeout
    (the connection is in its read-only transaction, so SET LOCAL ends with it) and, for both
    databases, a timer that cancels the driver connection (:mod:`autoforge.warehouse.limits`)."""
    if not is_duckdb(url):
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {max(1, int(limits.timeout_s * 1000))}")
    return Deadline(limits.timeout_s, driver_interrupt(conn))


_READER: contextvars.ContextVar[tuple[str, sa.Connection] | None] = contextvars.ContextVar("autoforge_reader", default=None)


@contextlib.contextmanager
def reading(warehouse: str | None) -> Iterator[None]:
    """One read-only connection for the internal reads inside (a stage's ``load``, the factory's reports):
    opening and closing a DuckDB file costs ~20-40 ms, and a stage's load asks it ten questions. Nothing
    inside may write (DuckDB opens a file read-only or read-write per process, not both). User SQL
    (``read_only_check``) still gets its own connection with its limits. PostgreSQL, or a DuckDB file that
    does not exist yet: each read opens its own, as outside."""
    url = resolve_url(warehouse)
    path = duckdb_path(url)
    held = _READER.get()
    if (held is not None and held[0] == url) or path is None or not path.exists():
        yield
        return
    with connect(url, read_only=True) as conn:
        token = _READER.set((url, conn))
        try:
            yield
        finally:
            _READER.reset(token)


@contextlib.contextmanager
def _reader(url: str, *, internal: bool, memory_mb: int | None) -> Iterator[sa.Connection]:
    """The connection of :func:`reading` for an internal read of ``url``, else a new read-only one."""
    held = _READER.get()
    if held is not None and held[0] == url:
        if not internal:  # DuckDB opens a file with one configuration per process: no second one with the limits
            raise WarehouseError("user SQL cannot run inside warehouse.reading(): its connection has no SQL limits and "
                                 "DuckDB allows no second one with them in this process; run the query after the block")
        yield held[1]
        return
    with connect(url, read_only=True, memory_mb=memory_mb) as conn:
        yield conn


def query(warehouse: str | None, sql: str, params: dict | None = None, *, read_only_check: bool = True,
          timeout_s: float | None = None) -> list[dict]:
    """Run one read-only query and return rows as dicts, on a read-only connection.

    ``read_only_check`` (user SQL, ``autoforge sql``): the statement must be one of
    ``ALLOWED_STATEMENTS``; it is classified on exactly the text the database will run. On
    DuckDB the connection cannot reach any file, URL or extension outside the warehouse; on
    PostgreSQL it is a read-only transaction, refused for roles that can read server files.
    User SQL also runs under the limits of :mod:`autoforge.warehouse.limits` (``timeout_s``, or
    ``AUTOFORGE_SQL_TIMEOUT``; ``AUTOFORGE_SQL_MEMORY_MB``): past the deadline it raises
    QueryTimeoutError. Internal readers pass ``read_only_check=False`` with their own fixed SQL.
    """
    url = resolve_url(warehouse)
    if read_only_check and not params:
        check_read_only(sql)  # before opening anything
    limits = sql_limits(timeout_s) if read_only_check else None
    with _reader(url, internal=not read_only_check, memory_mb=limits.memory_mb if limits else None) as conn:
        deadline = start_deadline(conn, url, limits) if limits else None
        try:
            if read_only_check and not is_duckdb(url):
                return _run_user_sql_postgres(conn, sql, params)
            if read_only_check and params:
                check_read_only(sa.text(sql).compile(dialect=conn.dialect).string)  # the text DuckDB receives
            if not params and not is_duckdb(url):
                return _pg_rows(conn, sql)
            result = conn.execute(sa.text(sql), params) if params else conn.exec_driver_sql(sql)
            return _rows(result)
        except WarehouseError:
            raise
        except Exception as exc:  # noqa: BLE001 - driver errors vary by backend
            if deadline is not None and (deadline.fired or is_timeout_text(str(exc))):
                raise deadline.error() from exc
            raise _query_error(exc) from exc
        finally:
            if deadline is not None:
                deadline.stop()  # before the connection closes: the timer never touches a closed one


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
    keys = ", ".join(f'"{c}"' for c in pk)  # quoted: a key column may be named like a keyword (check)
    sql = f"SELECT * FROM {name}" + (f" WHERE {where}" if where else "") + f" ORDER BY {order_by or keys}"
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


def column_exists(warehouse: str | None, table: str, column: str) -> bool:
    """Whether ``table`` has ``column`` (a warehouse written before the migration that adds it has not)."""
    rows = query(warehouse, "SELECT count(*) AS n FROM information_schema.columns WHERE table_name = :t AND column_name = :c",
                 {"t": table, "c": column}, read_only_check=False)
    return bool(rows and rows[0]["n"])


def table_exists(warehouse: str | None, name: str) -> bool:
    rows = query(
        warehouse,
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = :n",
        {"n": name},
        read_only_check=False,
    )
    return bool(rows and rows[0]["n"])
