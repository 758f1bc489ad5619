"""Hardening of the read-only SQL path (``autoforge sql`` -> ``autoforge.warehouse.query``).

The query tool sees the warehouse and nothing else: no file read or written through DuckDB's
table functions or statement forms, exactly one allow-listed statement, no extension fetched,
no setting changed. Also: only DuckDB and PostgreSQL URLs are accepted, and a damaged
warehouse file gives a clear error and stays as it was.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Iterator

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoforge import types as T
from autoforge.errors import ReadOnlyQueryError, WarehouseError
from autoforge.warehouse import apply_migrations, query, write_records
from autoforge.warehouse.engine import connect, resolve_url
from autoforge.warehouse.export import export_relation

SECRET = "SENTINEL-7f3a9c-DO-NOT-LEAK"


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    """One migrated warehouse for the module, with a few rows."""
    path = str(tmp_path_factory.mktemp("wh") / "w.duckdb")
    apply_migrations(path)
    specs = [
        T.ToolSpec(tool_id=f"tool_{i}", toolset="shop", name=f"tool{i}", doc_id="doc_1", parameters={"type": "object"})
        for i in range(3)
    ]
    write_records(path, specs)
    return path


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A folder outside the warehouse holding files with SECRET in them, in every format DuckDB reads."""
    d = tmp_path_factory.mktemp("outside")
    (d / "secret.txt").write_text(SECRET + "\n")
    (d / "secret.csv").write_text(f"k,v\nsecret,{SECRET}\n")
    (d / "secret.json").write_text(f'{{"v": "{SECRET}"}}\n')
    con = duckdb.connect(str(d / "secret.duckdb"))  # a plain, unrestricted connection made by the test itself
    con.execute(f"CREATE TABLE s AS SELECT '{SECRET}' AS v")
    con.execute(f"COPY (SELECT '{SECRET}' AS v) TO '{d / 'secret.parquet'}' (FORMAT parquet)")
    con.close()
    imp = d / "import_me"  # what PRAGMA import_database would run: it writes a file and attaches read-write
    imp.mkdir()
    (imp / "schema.sql").write_text(f"ATTACH '{d / 'attached.duckdb'}' AS a (READ_WRITE);\n"
                                    f"COPY (SELECT 1) TO '{d / 'imported.csv'}';\n")
    (imp / "load.sql").write_text("")
    return d


def _listing(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(wh: str, sql: str) -> ReadOnlyQueryError:
    with pytest.raises(ReadOnlyQueryError) as e:
        query(wh, sql)
    assert SECRET not in str(e.value)
    return e.value


# ----------------------------------------------------------------------------- reading files


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT content FROM read_text('{d}/secret.txt')",
        "SELECT content FROM read_text('/proc/self/environ')",
        "SELECT * FROM read_text('/etc/shadow')",
        "SELECT * FROM read_csv('{d}/secret.csv')",
        "SELECT * FROM read_csv_auto(['{d}/secret.csv'])",
        "SELECT * FROM sniff_csv('{d}/secret.csv')",
        "SELECT content FROM read_blob('{d}/secret.txt')",
        "SELECT * FROM glob('/**')",
        "SELECT * FROM glob('{d}/*')",
        "SELECT * FROM read_parquet('{d}/secret.parquet')",
        "SELECT * FROM parquet_scan('{d}/secret.parquet')",
        "SELECT * FROM parquet_metadata('{d}/secret.parquet')",
        "SELECT * FROM read_json('{d}/secret.json')",
        "SELECT * FROM '{d}/secret.csv'",
        "FROM '{d}/secret.parquet'",
        "SUMMARIZE SELECT * FROM read_csv('{d}/secret.csv')",
        "DESCRIBE SELECT * FROM read_text('{d}/secret.txt')",
        "WITH x AS (SELECT * FROM read_text('{d}/secret.txt')) SELECT * FROM x",
        "SELECT * FROM query('SELECT * FROM read_text(''{d}/secret.txt'')')",
        "SELECT * FROM 'https://127.0.0.1:1/x.csv'",
    ],
)
def test_table_functions_cannot_read_files(wh, outside, sql):
    err = _refused(wh, sql.format(d=outside))
    assert "outside the warehouse" in str(err) and "autoforge export" in str(err)


def test_internal_readers_cannot_read_files_either(wh, outside):
    """The lockdown is the connection's, not only the statement check's: read_only_check=False is locked too."""
    with pytest.raises(ReadOnlyQueryError, match="outside the warehouse"):
        query(wh, f"SELECT content FROM read_text('{outside}/secret.txt')", read_only_check=False)
    with pytest.raises(WarehouseError):
        query(wh, f"COPY (SELECT 1) TO '{outside}/internal.csv'", read_only_check=False)
    assert not (outside / "internal.csv").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM sqlite_scan('{d}/x.sqlite', 't')",
        "SELECT * FROM sqlite_attach('{d}/x.sqlite')",
        "SELECT * FROM postgres_scan('host=127.0.0.1', 'public', 't')",
        "SELECT * FROM read_xlsx('{d}/x.xlsx')",
    ],
)
def test_extensions_are_never_installed_or_loaded(wh, outside, sql):
    before = _listing(outside)
    with pytest.raises(WarehouseError) as e:  # "loads no extensions", or no such function: never a download
        query(wh, sql.format(d=outside))
    assert "extension" in str(e.value) or "does not exist" in str(e.value)
    assert _listing(outside) == before


# ----------------------------------------------------------------------------- statement forms


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("COPY tool_specs TO '{d}/new_copy.csv'", "COPY"),
        ("COPY (SELECT * FROM tool_specs) TO '{d}/new_copy.parquet' (FORMAT parquet)", "COPY"),
        ("COPY tool_specs FROM '{d}/secret.csv'", "COPY"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{d}/new_explain.csv'", "EXPLAIN ANALYZE"),
        ("explain analyse copy (select 1) to '{d}/new_explain.csv'", "EXPLAIN ANALYZE"),
        ("EXPLAIN COPY (SELECT 1) TO '{d}/new_explain.csv'", "EXPLAIN"),
        ("EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{d}/new_explain.csv'", "EXPLAIN"),
        ("EXPLAIN (ANALYZE false) SELECT 1", "EXPLAIN"),
        ('EXPLAIN ("analyze", FORMAT json) SELECT 1', "EXPLAIN"),
        ("EXPLAIN ANALYZE SELECT * FROM tool_specs", "EXPLAIN ANALYZE"),
        ("PRAGMA import_database('{d}/import_me')", "PRAGMA"),
        ("IMPORT DATABASE '{d}/import_me'", "PRAGMA"),
        ("EXPORT DATABASE '{d}/new_export'", "EXPORT"),
        ("ATTACH '{d}/secret.duckdb' AS s", "ATTACH"),
        ("ATTACH '{d}/new_attached.duckdb' AS a (READ_WRITE)", "ATTACH"),
        ("ATTACH '{d}/x.sqlite' AS s (TYPE sqlite)", "ATTACH"),
        ("DETACH w", "DETACH"),
        ("INSTALL sqlite", "LOAD"),
        ("FORCE INSTALL httpfs", "LOAD"),
        ("LOAD parquet", "LOAD"),
        ("LOAD '{d}/evil.duckdb_extension'", "LOAD"),
        ("SET enable_external_access = true", "SET"),
        ("SET GLOBAL lock_configuration = false", "SET"),
        ("RESET enable_external_access", "SET"),
        ("SET VARIABLE x = 1", "SET"),
        ("USE memory", "SET"),
        ("PRAGMA enable_profiling", "PRAGMA"),
        ("PRAGMA threads = 1", "PRAGMA"),
        ("CALL pragma_version()", "CALL"),
        ("CHECKPOINT", "CALL"),
        ("INSERT INTO runs (run_id) VALUES ('x')", "INSERT"),
        ("CREATE TABLE x AS SELECT 1", "CREATE"),
        ("CREATE SECRET s (TYPE s3)", "CREATE"),
        ("PREPARE p AS SELECT 1", "PREPARE"),
        ("BEGIN TRANSACTION", "TRANSACTION"),
        ("VACUUM", "VACUUM"),
        ("PIVOT tool_specs ON toolset", "MULTI"),
        ("UPDATE EXTENSIONS", "UPDATE"),
    ],
)
def test_statements_other_than_reads_are_refused_and_write_nothing(wh, outside, sql, kind):
    before = _listing(outside)
    err = _refused(wh, sql.format(d=outside))
    text = str(err)
    assert kind in text and "read-only" in text
    assert "autoforge export TABLE_OR_VIEW --format parquet|jsonl|csv --out PATH" in text
    assert _listing(outside) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1; COPY (SELECT 1) TO '{d}/new_chain.csv'",
        "select 1 ;copy (select 1) to '{d}/new_chain.csv'",
        "SELECT ';'; COPY (SELECT 1) TO '{d}/new_chain.csv'",
        "SELECT $$x$$; COPY (SELECT 1) TO '{d}/new_chain.csv'",
        "SELECT 1 /* ; */ ; COPY (SELECT 1) TO '{d}/new_chain.csv' -- ;",
        "SELECT 1;\u3000COPY (SELECT 1) TO '{d}/new_chain.csv'",
        "(SELECT 1); INSTALL sqlite",
        "SELECT 1; SELECT 2",
        "WITH a AS (SELECT 1) SELECT * FROM a; SET threads = 1",
        "EXPLAIN SELECT 1; PRAGMA import_database('{d}/import_me')",
    ],
)
def test_multiple_statements_are_refused(wh, outside, sql):
    before = _listing(outside)
    err = _refused(wh, sql.format(d=outside))
    assert "statements" in str(err) and "one at a time" in str(err)
    assert _listing(outside) == before


@pytest.mark.parametrize("sql", ["", "  \n", "-- only a comment\n", "/* c */", "SELECT '\ud800'", "SELEC 1", "EXPLAIN EXPLAIN SELECT 1"])
def test_empty_unparsable_or_invalid_text_is_refused_clearly(wh, sql):
    err = _refused(wh, sql)
    assert "read-only statement" in str(err) or "UTF-8" in str(err)


def test_named_parameters_are_checked_on_the_text_that_runs(wh, outside):
    rows = query(wh, "SELECT name FROM tool_specs WHERE name = :n", {"n": "tool1"})
    assert rows == [{"name": "tool1"}]
    assert query(wh, "SELECT count(*) AS n FROM tool_specs WHERE name = :n", {"n": "x'; DROP TABLE runs; --"}) == [{"n": 0}]
    with pytest.raises(ReadOnlyQueryError, match="2 statements"):
        query(wh, f"SELECT :n; COPY (SELECT 1) TO '{outside}/new_param.csv'", {"n": 1})
    assert not (outside / "new_param.csv").exists()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM v_stage_funnel",
        "select stage, items_out from V_STAGE_FUNNEL order by stage",
        "WITH t AS (SELECT name FROM tool_specs) SELECT count(*) AS n FROM t",
        "VALUES (1, 'a'), (2, 'b')",
        "(SELECT name FROM tool_specs ORDER BY name LIMIT 1)",
        "FROM tool_specs SELECT name",
        "DESCRIBE tool_specs",
        "DESCRIBE v_stage_funnel",
        "SHOW TABLES",
        "SHOW ALL TABLES",
        "SUMMARIZE tool_specs",
        "EXPLAIN SELECT * FROM v_stage_funnel",
        "EXPLAIN (FORMAT json) SELECT * FROM tool_specs",
        "explain (select 1) union all (select 2)",
        "/* leading comment */ SELECT 1 AS one -- trailing comment",
        "\tSELECT\u00a01 AS one;",
        "SELECT 'COPY x TO y; ATTACH z' AS s",
        "SELECT current_setting('enable_external_access') AS ext",
    ],
)
def test_allow_listed_statements_still_work(wh, sql):
    rows = query(wh, sql)
    assert isinstance(rows, list)


def test_allow_listed_statements_return_the_warehouse_rows(wh):
    assert [r["name"] for r in query(wh, "SELECT name FROM tool_specs ORDER BY name")] == ["tool0", "tool1", "tool2"]
    assert {"tool_specs", "v_stage_funnel"} <= {r["name"] for r in query(wh, "SHOW TABLES")}
    assert query(wh, "SELECT current_setting('enable_external_access') AS ext") == [{"ext": False}]


def test_export_writes_only_its_target_and_never_the_warehouse(wh, tmp_path):
    out = tmp_path / "specs.csv"
    assert export_relation(wh, "tool_specs", "csv", out) == 3
    assert export_relation(wh, "tool_specs", "csv", out) == 3  # again: DuckDB writes tmp_specs.csv first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specs.csv"]
    before = Path(wh).read_bytes()
    with pytest.raises(WarehouseError, match="is the warehouse itself"):
        export_relation(wh, "tool_specs", "csv", wh)
    assert Path(wh).read_bytes() == before


# ----------------------------------------------------------------------------- property


_ALLOWED = [
    "SELECT * FROM v_stage_funnel",
    "SELECT name FROM tool_specs ORDER BY name",
    "WITH t AS (SELECT name FROM tool_specs) SELECT count(*) AS n FROM t",
    "VALUES (1), (2)",
    "(SELECT 1 AS one)",
    "DESCRIBE tool_specs",
    "SHOW TABLES",
    "SUMMARIZE tool_specs",
    "EXPLAIN SELECT * FROM tool_specs",
    "EXPLAIN (FORMAT json) SELECT 1",
]
# {d}: the folder outside; {n}: a fresh name, so every example aims at a file that does not exist yet.
_DANGEROUS = [
    "SELECT content FROM read_text('{d}/secret.txt')",
    "SELECT * FROM read_csv('{d}/secret.csv')",
    "SELECT content FROM read_blob('{d}/secret.txt')",
    "SELECT * FROM glob('{d}/*')",
    "SELECT * FROM read_parquet('{d}/secret.parquet')",
    "SELECT * FROM '{d}/secret.json'",
    "SELECT * FROM sqlite_scan('{d}/secret.duckdb', 's')",
    "COPY (SELECT 1) TO '{d}/{n}.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{d}/{n}.csv'",
    "EXPLAIN (ANALYZE) COPY (SELECT 1) TO '{d}/{n}.csv'",
    "PRAGMA import_database('{d}/import_me')",
    "EXPORT DATABASE '{d}/{n}'",
    "ATTACH '{d}/secret.duckdb' AS s",
    "ATTACH '{d}/{n}.duckdb' AS a (READ_WRITE)",
    "INSTALL sqlite",
    "LOAD parquet",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "CALL pragma_version()",
    "CREATE TABLE {n} AS SELECT 1",
]
_SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", " /* c */ ", " -- c\n", "\r\n"]


def _recase(text: str, flips: list[bool]) -> str:
    """Flip the case of letters outside '...' literals (paths keep their case)."""
    parts = text.split("'")
    out = []
    k = 0
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part)
            continue
        chars = []
        for ch in part:
            chars.append(ch.swapcase() if flips[k % len(flips)] else ch)
            k += 1
        out.append("".join(chars))
    return "'".join(out)


def _respace(text: str, picks: list[int]) -> str:
    """Replace each space outside '...' literals with some whitespace or a comment."""
    parts = text.split("'")
    k = 0
    for i in range(0, len(parts), 2):
        pieces = parts[i].split(" ")
        joined = pieces[0]
        for piece in pieces[1:]:
            joined += _SPACES[picks[k % len(picks)]] + piece
            k += 1
        parts[i] = joined
    return "'".join(parts)


@st.composite
def statements(draw) -> tuple[str, bool]:
    """(sql, whether it is exactly one allow-listed statement)."""
    name = "new_" + draw(st.text("abcdefghij", min_size=6, max_size=6))

    def one() -> tuple[str, bool]:
        if draw(st.booleans()):
            return draw(st.sampled_from(_ALLOWED)), True
        return draw(st.sampled_from(_DANGEROUS)), False

    sql, ok = one()
    chain = draw(st.sampled_from(["none", "none", "after", "before"]))
    if chain != "none":
        other, _ = one()
        sql = f"{sql}; {other}" if chain == "after" else f"{other}; {sql}"
        ok = False
    if draw(st.booleans()):
        sql += ";"
    flips = draw(st.lists(st.booleans(), min_size=1, max_size=8))
    picks = draw(st.lists(st.integers(0, len(_SPACES) - 1), min_size=1, max_size=8))
    sql = _respace(_recase(sql, flips), picks)
    if draw(st.booleans()):
        sql = draw(st.sampled_from(["/* x */ ", "-- x\n", "\n\t", "\u3000"])) + sql
    return sql.replace("{n}", name), ok


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=statements())
def test_property_only_allow_listed_statements_run_and_nothing_outside_is_touched(wh, outside, case):
    template, ok = case
    sql = template.replace("{d}", str(outside))
    before = _listing(outside)
    if ok:
        rows = query(wh, sql)
        assert SECRET not in repr(rows)
    else:
        with pytest.raises(WarehouseError) as e:
            query(wh, sql)
        assert SECRET not in str(e.value)
    assert _listing(outside) == before


# ----------------------------------------------------------------------------- supported databases


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{d}/x.db",
        "sqlite://",
        "mysql://u@127.0.0.1/db",
        "mssql+pyodbc://u@dsn",
        "postgres://u@127.0.0.1/db",
        "postgresql+psycopg2://u@127.0.0.1/db",
        "duckdb:///md:my_db",
        "duckdb://relative.duckdb",
        "duckdb:///{d}/x.duckdb?enable_external_access=true",
        "duckdb:///{d}/x.duckdb?lock_configuration=false",
        "duckdb:///{d}/x.duckdb?allowed_directories=/",
    ],
)
def test_other_databases_are_refused_up_front(tmp_path, url):
    url = url.format(d=tmp_path)
    for call in (lambda: resolve_url(url), lambda: apply_migrations(url), lambda: query(url, "SELECT 1")):
        with pytest.raises(WarehouseError) as e:
            call()
        text = str(e.value)
        assert "not supported" in text and "DuckDB" in text and "postgresql://" in text
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_a_password_in_a_refused_url_is_not_shown():
    with pytest.raises(WarehouseError) as e:
        resolve_url("mysql://user:hunter2@127.0.0.1/db")
    assert "hunter2" not in str(e.value)


def test_supported_urls_resolve(tmp_path):
    assert resolve_url(str(tmp_path / "w.duckdb")).startswith("duckdb:///")
    assert resolve_url(f"duckdb:///{tmp_path}/w.duckdb?threads=2").endswith("?threads=2")
    assert resolve_url(f"DuckDB:///{tmp_path}/w.duckdb") == f"duckdb:///{tmp_path}/w.duckdb"
    assert resolve_url("postgresql://u@127.0.0.1/db") == "postgresql+psycopg://u@127.0.0.1/db"


# ----------------------------------------------------------------------------- damaged files


def _damaged(kind: str, good: bytes) -> bytes:
    return {
        "half": good[: len(good) // 2],
        "header_only": good[:12288],
        "random": os.urandom(64 * 1024),
        "empty": b"",
        "tiny": good[:100],
        "text": b"not a database\n" * 100,
    }[kind]


@pytest.mark.parametrize("kind", ["half", "header_only", "random", "empty", "tiny", "text"])
def test_a_damaged_warehouse_gives_a_clear_error_and_is_left_untouched(wh, tmp_path, kind):
    path = tmp_path / "broken.duckdb"
    path.write_bytes(_damaged(kind, Path(wh).read_bytes()))
    before = path.read_bytes()
    def open_and_close(read_only: bool) -> None:
        with connect(str(path), read_only=read_only):
            pass

    attempts = [
        lambda: open_and_close(True),
        lambda: open_and_close(False),
        lambda: query(str(path), "SELECT 1"),
        lambda: apply_migrations(str(path)),
        lambda: write_records(str(path), [T.ToolSpec(tool_id="t", toolset="s", name="n", doc_id="d", parameters={})]),
    ]
    for attempt in attempts:
        with pytest.raises(WarehouseError) as e:
            attempt()
        text = str(e.value)
        assert "not a readable DuckDB database" in text and str(path) in text
        assert "autoforge init" in text and "--warehouse" in text
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.duckdb"]  # no .wal, no replacement file


def test_a_folder_as_warehouse_is_refused(tmp_path):
    with pytest.raises(WarehouseError, match="is a folder"):
        query(str(tmp_path), "SELECT 1")


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL 15 on 127.0.0.1 (tests/pg_server.py) with a table, a superuser URL and a read-only role URL."""
    sys.path.insert(0, str(Path(__file__).parent))
    from pg_server import PgServer, unavailable

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with PgServer() as server:
        server.execute("CREATE TABLE items (id int PRIMARY KEY, name text)",
                       "INSERT INTO items VALUES (1, 'one'), (2, 'two')",
                       "CREATE ROLE reader LOGIN",
                       "GRANT SELECT ON items TO reader",
                       "GRANT CREATE ON SCHEMA public TO reader")  # so only the read-only transaction stops a CREATE
        yield {"admin": server.url(), "reader": server.url(user="reader")}


def test_postgres_query_runs_in_a_read_only_transaction(postgres):
    import psycopg

    reader = postgres["reader"]
    assert query(reader, "SELECT name FROM items WHERE id = :i", {"i": 2}) == [{"name": "two"}]
    assert query(reader, "SELECT '100%' AS p") == [{"p": "100%"}]
    assert query(reader, "SELECT current_setting('transaction_read_only') AS ro") == [{"ro": "on"}]
    assert query(postgres["admin"], "SELECT current_setting('transaction_read_only') AS ro", read_only_check=False) == [{"ro": "on"}]
    with pytest.raises(WarehouseError):  # a data-modifying CTE parses as a SELECT; the transaction stops it
        query(reader, "WITH d AS (DELETE FROM items RETURNING *) SELECT * FROM d")
    with pytest.raises(WarehouseError):  # nor can the transaction be made read-write from inside
        query(reader, "SELECT set_config('transaction_read_only', 'off', true)")
    with pytest.raises(ReadOnlyQueryError, match="2 statements"):
        query(reader, "SELECT 1; CREATE TABLE z (a int)")
    with pytest.raises(ReadOnlyQueryError, match="statement kind CREATE"):
        query(reader, "CREATE TABLE z (a int)")
    with pytest.raises(ReadOnlyQueryError, match="2 statements"):  # E'' escapes are read as PostgreSQL reads them
        query(reader, r"SELECT E'\'' ; CREATE TABLE z (a int)")
    with pytest.raises(WarehouseError):
        query(reader, "SELECT pg_read_file('/etc/passwd')")
    with psycopg.connect(postgres["admin"]) as c:
        assert c.execute("SELECT count(*) FROM items").fetchone() == (2,)
        assert c.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'z'").fetchone() == (0,)


def test_postgres_user_sql_is_refused_for_roles_that_can_read_server_files(postgres):
    with pytest.raises(ReadOnlyQueryError) as e:
        query(postgres["admin"], "SELECT pg_read_file('/etc/passwd')")
    assert "can read or write the server's files" in str(e.value) and "CREATE ROLE" in str(e.value)


def test_a_healthy_file_shorter_than_its_block_count_is_not_called_damaged():
    """DuckDB truncates free blocks off the end, so block_count * alloc is no lower bound on the size."""
    import struct

    from autoforge.warehouse.engine import _size_problem

    head = bytearray(12288)
    head[8:12] = b"DUCK"
    struct.pack_into("<6Q", head, 4096, 0, 5, 0, 0, 24, 262144)  # newest header: catalog in block 0, 24 blocks
    struct.pack_into("<6Q", head, 8192, 0, 4, 3, 0, 24, 262144)
    assert _size_problem(bytes(head), 12288 + 21 * 262144) is None  # three free blocks truncated off
    assert "whole" in _size_problem(bytes(head), 12288 + 21 * 262144 // 2)
    struct.pack_into("<6Q", head, 4096, 0, 5, 20, 0, 24, 262144)  # catalog in block 20
    assert "catalog" in _size_problem(bytes(head), 12288 + 10 * 262144)


def test_a_checkpoint_cut_off_by_a_full_disk_is_left_to_duckdb_to_finish(wh, tmp_path):
    """A full disk can stop DuckDB mid-checkpoint: the file ends mid-block, the WAL holds the
    data, and DuckDB finishes the checkpoint on the next open. Only without a WAL is that damage."""
    from autoforge.warehouse.engine import check_duckdb_file

    path = tmp_path / "cut.duckdb"
    path.write_bytes(Path(wh).read_bytes() + b"\0" * 1000)  # extended part-way into a new block
    with pytest.raises(WarehouseError, match="cut short"):
        check_duckdb_file(path)
    Path(f"{path}.wal").write_bytes(b"")
    check_duckdb_file(path)  # no error: DuckDB replays the WAL


@pytest.mark.parametrize("setting", ["temp_directory=/", "temp_directory=%2Ftmp", "max_temp_directory_size=1GB"])
def test_a_temp_directory_in_the_url_cannot_open_a_folder_to_reads(wh, outside, setting):
    """DuckDB lets a locked-down connection read its temp directory, so the URL may not name one."""
    with pytest.raises(WarehouseError, match="cannot be set from the URL") as e:
        query(f"duckdb:///{wh}?{setting}", f"SELECT content FROM read_text('{outside / 'secret.txt'}')")
    assert SECRET not in str(e.value)


def test_a_reader_never_spills_to_disk_and_says_what_to_do(wh):
    before = set(Path(wh).parent.iterdir())
    big = "SELECT count(*) FROM (SELECT i, md5(i::varchar) m FROM range(3000000) t(i) ORDER BY m)"
    with pytest.raises(WarehouseError) as e:
        query(f"duckdb:///{wh}?memory_limit=30MB", big)
    text = str(e.value)
    assert "\n" not in text and "memory_limit=" in text and "never spills" in text
    assert set(Path(wh).parent.iterdir()) == before  # no temp folder, no spill file
    assert query(wh, "SELECT name, value FROM duckdb_settings() WHERE name = 'allowed_directories'")[0]["value"] == "[]"
