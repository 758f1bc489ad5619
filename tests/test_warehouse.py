"""Warehouse: migrations, upserts, the one-writer rule, the read-only SQL command, export."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from autoforge import types as T
from autoforge.errors import ReadOnlyQueryError, WarehouseBusyError, WarehouseError
from autoforge.warehouse import apply_migrations, query, read_records, write_records
from autoforge.warehouse.export import export_relation
from autoforge.warehouse.migrations import SQL_DIR, discover, split_statements


def _spec(i: int, toolset: str = "shop") -> T.ToolSpec:
    return T.ToolSpec(
        tool_id=f"tool_{i}", toolset=toolset, name=f"tool{i}", doc_id="doc_1",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
    )


def test_init_twice_changes_nothing(tmp_path):
    wh = str(tmp_path / "w.duckdb")
    first = apply_migrations(wh)
    assert len(first["applied"]) == len(discover())
    second = apply_migrations(wh)
    assert second["applied"] == [] and second["already"] == len(discover())


def test_older_schema_is_upgraded_in_place(tmp_path):
    old_dir = tmp_path / "sql_old"
    old_dir.mkdir()
    migrations = discover()
    for m in migrations[:3]:
        (old_dir / m.name).write_text(m.text)
    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh, old_dir)
    write_records(wh, [_spec(1)], migrate=False)
    assert not any(r["table_name"] == "tasks" for r in query(wh, "SELECT table_name FROM information_schema.tables"))
    res = apply_migrations(wh)
    assert res["applied"] == [m.name for m in migrations[3:]]
    assert query(wh, "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 1  # data kept
    assert query(wh, "SELECT count(*) AS n FROM tasks")[0]["n"] == 0


def test_082_drops_the_vocabulary_checks_and_keeps_the_rows(tmp_path):
    """An 081 warehouse upgraded in place: tool_docs and tool_rules keep their rows, the tables take a
    format or rule kind the CHECK lists did not name (the Python registries refuse unknown ones), and
    the lifecycle CHECKs stay."""
    old_dir = tmp_path / "sql_081"
    old_dir.mkdir()
    for m in discover():
        if m.version <= 81:
            (old_dir / m.name).write_text(m.text)
    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh, old_dir)
    doc = T.ToolDoc(doc_id="d1", toolset="s", path="p", content="{}", status="accepted", format="openai", n_tools=1)
    rule = T.ToolRule(rule_id="r1", env_id="e", tool_id="t", tool="get_x", kind="constraint", text="min 1",
                      values=[1], enforcement="code", probe="passed")
    write_records(wh, [doc], migrate=False)
    import duckdb  # the 081 table has the columns of that time (086 added source, tools, guard ...)
    with duckdb.connect(wh) as con:
        con.execute("INSERT INTO tool_rules (rule_id, env_id, tool_id, tool, kind, text, field, \"values\", enforcement, "
                    "probe, probe_detail, run_id) VALUES ('r1', 'e', 't', 'get_x', 'constraint', 'min 1', NULL, '[1]', "
                    "'code', 'passed', NULL, NULL)")
    assert apply_migrations(wh)["applied"] == [m.name for m in discover() if m.version >= 82]  # 082 and any later
    assert read_records(wh, T.ToolDoc) == [doc] and read_records(wh, T.ToolRule) == [rule.model_copy(update={"tools": ["get_x"]})]
    write_records(wh, [doc.model_copy(update={"doc_id": "d2", "format": "graphql"}),
                       rule.model_copy(update={"rule_id": "r2", "kind": "rate_limit"})], migrate=False)
    assert query(wh, "SELECT count(*) AS n FROM tool_docs")[0]["n"] == 2
    with pytest.raises(WarehouseError):
        write_records(wh, [doc.model_copy(update={"doc_id": "d3", "status": "not-a-status"})], migrate=False)
    with pytest.raises(ValueError, match="openapi"):
        T.ToolDoc(doc_id="d4", toolset="s", path="p", content="", status="accepted", format="graphql")


def test_every_stored_model_matches_its_table(warehouse):
    """Each model's fields are exactly the table's columns (the contract between types.py and sql/)."""
    from autoforge.warehouse.store import DERIVED_COLUMNS, TABLES

    cols = query(warehouse, "SELECT table_name, column_name FROM information_schema.columns")
    by_table: dict[str, set[str]] = {}
    for r in cols:
        by_table.setdefault(r["table_name"], set()).add(r["column_name"])
    for model, (table, _pk) in TABLES.items():
        assert set(model.model_fields) | set(DERIVED_COLUMNS.get(table, ())) == by_table[table], table


def test_ddl_has_comment_per_column_and_checks_on_status():
    for m in discover():
        if not m.name.split("_", 1)[1].startswith("v_"):
            body = [ln for ln in m.text.splitlines() if ln.startswith("    ") and not ln.strip().startswith(("PRIMARY", "--"))]
            for ln in body:
                assert "--" in ln, f"{m.name}: column without a comment: {ln.strip()}"
            for ln in body:
                if ln.split()[0] == "status":
                    assert "CHECK" in ln, f"{m.name}: status column without CHECK"


def test_upsert_never_duplicates_and_roundtrips(warehouse):
    run = T.Run.make("ingest", {"paths": ["x"]})
    write_records(warehouse, [_spec(i) for i in range(50)], run=run)
    write_records(warehouse, [_spec(i) for i in range(50)], run=run)
    assert query(warehouse, "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 50
    assert query(warehouse, "SELECT count(*) AS n FROM runs")[0]["n"] == 1
    got = read_records(warehouse, T.ToolSpec, where="name = :n", params={"n": "tool7"})
    assert got == [_spec(7)]
    assert T.Run.make("ingest", {"paths": ["x"]}).run_id == run.run_id


def test_reads_inside_reading_share_one_connection_and_user_sql_gets_its_own(warehouse, monkeypatch):
    """A stage's load asks the warehouse a dozen questions: inside ``reading`` they share one read-only
    connection; user SQL, which needs its own connection with its limits, is refused there with why; a write
    afterwards works."""
    from autoforge.warehouse import reading, store

    write_records(warehouse, [_spec(i) for i in range(3)] + [_task(1)] + _checks("task_1", [True, False]))
    opened = []
    real = store.connect

    def counting(*args, **kw):
        opened.append(kw.get("read_only", False))
        return real(*args, **kw)

    monkeypatch.setattr(store, "connect", counting)
    with reading(warehouse):
        specs = read_records(warehouse, T.ToolSpec)
        n = query(warehouse, "SELECT count(*) AS n FROM tool_specs", read_only_check=False)[0]["n"]
        checks = read_records(warehouse, T.VerificationResult)  # its key has a column named like a keyword (check)
        with reading(warehouse):  # nested: the same connection
            assert query(warehouse, "SELECT 1 AS one", read_only_check=False) == [{"one": 1}]
        assert opened == [True]
        with pytest.raises(WarehouseError, match="user SQL cannot run inside warehouse.reading"):
            query(warehouse, "SELECT count(*) AS n FROM runs")  # user SQL needs its limits: not on this connection
    assert query(warehouse, "SELECT count(*) AS n FROM runs")[0]["n"] == 0 and opened == [True, True]
    assert len(specs) == n == 3 and [c.check for c in checks] == ["policy_rule", "replay_deterministic"]
    write_records(warehouse, [_spec(9)])  # the reader is closed: a writer may open the file
    assert opened[-1] is False and query(warehouse, "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 4


def test_a_failing_batch_keeps_nothing_and_earlier_rows_stay(warehouse):
    write_records(warehouse, [_spec(1)])
    bad = T.ToolDoc(doc_id="d", toolset="s", path="p", content="", status="accepted", format="openai")
    bad_row = bad.model_copy(update={"status": "not-a-status"})  # violates the CHECK constraint
    with pytest.raises(WarehouseError):
        write_records(warehouse, [_spec(2), bad_row])
    names = [r["name"] for r in query(warehouse, "SELECT name FROM tool_specs ORDER BY name")]
    assert names == ["tool1"]


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO runs VALUES ('a')",
        "DROP TABLE runs",
        "COPY runs TO '/tmp/autoforge_x.csv'",
        "ATTACH '/tmp/autoforge_other.duckdb' AS o",
        "SELECT 1; DELETE FROM runs",
        "UPDATE runs SET status = 'failed'",
        "CREATE TABLE x (a INT)",
    ],
)
def test_sql_refuses_writes(warehouse, sql):
    with pytest.raises(ReadOnlyQueryError) as e:
        query(warehouse, sql)
    assert "read-only" in str(e.value)


def test_second_process_gets_a_clear_busy_error(warehouse, tmp_path):
    """While one process holds the file, another's write waits (bounded) then says who holds it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({warehouse!r})
            print("locked", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        from autoforge.warehouse.engine import connect

        with pytest.raises(WarehouseBusyError) as e:
            with connect(warehouse, lock_timeout_s=0.5):
                pass
        assert "in use by process" in str(e.value) and "AUTOFORGE_LOCK_TIMEOUT" in str(e.value)
    finally:
        holder.communicate("\n", timeout=10)
    write_records(warehouse, [_spec(3)])  # the file is intact and writable afterwards
    assert query(warehouse, "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 1


def test_a_new_warehouse_file_is_never_created_by_duckdb_in_place(tmp_path, monkeypatch):
    """DuckDB creating a missing file in place (stat, open, lock, write empty headers) wipes a file
    another process created, committed to and closed in between; so the file must already exist,
    whole, when DuckDB is first asked to open it for writing (and no temporary file is left)."""
    import autoforge.warehouse.engine as engine

    seen = []
    real_open = engine._open

    def spy(eng, url, path, *a, **kw):
        seen.append(path.exists() and path.read_bytes()[8:12] == b"DUCK")
        return real_open(eng, url, path, *a, **kw)

    monkeypatch.setattr(engine, "_open", spy)
    wh = tmp_path / "new" / "w.duckdb"
    write_records(str(wh), [_spec(1)])
    assert seen and all(seen), seen
    assert sorted(p.name for p in wh.parent.iterdir()) == ["w.duckdb"]
    assert query(str(wh), "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 1


def test_a_file_created_meanwhile_by_another_process_is_kept(tmp_path, monkeypatch):
    """The other creator wins the race to the name: its committed rows stay, ours go in beside them."""
    import duckdb

    import autoforge.warehouse.engine as engine

    wh = tmp_path / "w.duckdb"
    real_make = engine.make_engine

    def make(url, **kw):
        if ".creating" in url and not wh.exists():  # our temporary file is being built: the other process creates wh
            con = duckdb.connect(str(wh))
            con.execute("CREATE TABLE theirs AS SELECT 42 AS x")
            con.close()
        return real_make(url, **kw)

    monkeypatch.setattr(engine, "make_engine", make)
    assert engine.create_duckdb_file(wh) is False
    write_records(str(wh), [_spec(1)])
    assert query(str(wh), "SELECT x FROM theirs", read_only_check=False) == [{"x": 42}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.duckdb"]


def test_duckdb_is_not_even_opened_while_another_autoforge_process_holds_the_file(warehouse, monkeypatch):
    """DuckDB reads a file's headers before it takes its lock and trusts them once it has it: a
    connection that read them, then locked after another process committed and closed, writes over
    that commit. So while another process has a connection open, ours waits before DuckDB opens the
    file at all (our own flock), and then says which process holds it."""
    import sqlalchemy as sa

    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from autoforge.warehouse.engine import connect
            with connect({warehouse!r}):
                print("locked", flush=True)
                sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        from autoforge.warehouse.engine import connect

        calls = []
        real_connect = sa.Engine.connect
        monkeypatch.setattr(sa.Engine, "connect", lambda self, *a, **kw: calls.append(1) or real_connect(self, *a, **kw))
        for read_only in (False, True):
            with pytest.raises(WarehouseBusyError) as e:
                with connect(warehouse, read_only=read_only, lock_timeout_s=0.3):
                    pass
            assert f"in use by process {holder.pid}" in str(e.value), str(e.value)
        assert calls == []  # DuckDB never read the headers the holder was about to change
    finally:
        holder.communicate("\n", timeout=30)
    write_records(warehouse, [_spec(3)])
    assert query(warehouse, "SELECT count(*) AS n FROM tool_specs")[0]["n"] == 1


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_export(warehouse, tmp_path, fmt):
    write_records(warehouse, [_spec(i) for i in range(5)])
    out = tmp_path / f"specs.{fmt}"
    assert export_relation(warehouse, "tool_specs", fmt, out) == 5
    assert out.stat().st_size > 0
    if fmt == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == 5 and rows[0]["toolset"] == "shop"


def test_export_unknown_relation_lists_known(warehouse, tmp_path):
    with pytest.raises(WarehouseError, match="known: .*tool_specs"):
        export_relation(warehouse, "nope", "csv", tmp_path / "x.csv")


def test_split_statements():
    assert split_statements("CREATE TABLE a (x INT); -- c\nCREATE VIEW b AS SELECT 1;\n") == [
        "CREATE TABLE a (x INT)", "CREATE VIEW b AS SELECT 1"]


def test_read_only_query_on_missing_file_says_how_to_fix(tmp_path):
    with pytest.raises(WarehouseError, match="autoforge init"):
        query(str(tmp_path / "missing.duckdb"), "SELECT 1")


def test_sql_dir_is_numbered():
    assert SQL_DIR.is_dir() and discover()[0].name.startswith("001_")


def _task(i: int, status: str = "verified") -> T.Task:
    return T.Task(task_id=f"task_{i}", env_id="env_x", dag_id="dag_x", request=f"please do {i}", user_facts={},
                  initial_state={"b": {"z": 1, "a": 2}}, gold_state={}, gold_state_hash="h", gold_calls=[], n_tool_calls=1,
                  dag_depth=1, n_reasoning_nodes=0, n_requirements=1, status=status, split="train")


def _checks(task_id: str, passed: list[bool]) -> list[T.VerificationResult]:
    from autoforge.tasks.checks import CHECKS

    return [T.VerificationResult(task_id=task_id, check=name, passed=p) for name, p in zip(CHECKS, passed)]


def _curated(wh: str) -> dict[str, int]:
    return {r["task_id"]: r["n_checks_passed"] for r in query(wh, "SELECT task_id, n_checks_passed FROM v_curated_tasks")}


def test_curated_check_counts_follow_every_write(warehouse):
    """v_curated_tasks.n_checks_passed (kept on the task row since sql/053) is what verification_results say."""
    write_records(warehouse, [_task(1), _task(2), _task(3, "rejected")])
    assert _curated(warehouse) == {"task_1": 0, "task_2": 0}  # no check recorded yet
    write_records(warehouse, _checks("task_1", [True, True, True]) + _checks("task_3", [True, False]))
    assert _curated(warehouse) == {"task_1": 3, "task_2": 0}
    write_records(warehouse, [_task(2)] + _checks("task_2", [True, False, True]) + _checks("task_1", [True, False]))
    assert _curated(warehouse) == {"task_1": 2, "task_2": 2}  # c0, c1 re-checked: c1 failed, c2 still passed
    write_records(warehouse, [_task(1)])  # the stage re-writing a task keeps its count
    assert _curated(warehouse)["task_1"] == 2
    old = query(warehouse, "SELECT task_id, sum(CASE WHEN passed THEN 1 ELSE 0 END) AS n FROM verification_results "
                           "GROUP BY task_id")
    assert {r["task_id"]: r["n"] for r in old if r["task_id"] != "task_3"} == _curated(warehouse)


def test_an_older_warehouse_gets_its_check_counts_filled_by_the_migration(tmp_path):
    import shutil

    old_sql = tmp_path / "sql"
    old_sql.mkdir()
    for m in discover():
        if m.version < 53 or m.name in ("081_tasks_keys.sql", "088_rule_links.sql"):  # 081, 088: the columns today's Task records write
            shutil.copy(m.path, old_sql / m.name)
    wh = str(tmp_path / "old.duckdb")
    apply_migrations(wh, sql_dir=old_sql)  # a warehouse as it was before sql/053
    write_records(wh, [_task(1), _task(2)] + _checks("task_1", [True, False, True]), migrate=False)
    before = _curated(wh)
    assert before == {"task_1": 2, "task_2": 0}  # the 049 view counted from verification_results
    assert apply_migrations(wh)["applied"][:2] == ["053_tasks_check_counts.sql", "054_v_curated_tasks.sql"]
    assert _curated(wh) == before
