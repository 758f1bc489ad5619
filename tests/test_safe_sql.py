"""User SQL under limits (issue 36, "safe to serve"): ``autoforge sql`` and ``query(..., read_only_check=True)``.

- a query that never ends stops at its deadline (``--timeout`` / ``AUTOFORGE_SQL_TIMEOUT``) with one
  line naming the limit and how to raise it, exit 2 (PostgreSQL too: statement_timeout);
- the DuckDB connection of user SQL has a memory cap (``AUTOFORGE_SQL_MEMORY_MB``);
- rows stream: the peak memory of ``autoforge sql ... --format csv`` does not grow with the row count
  (before: ~290 MB per million rows, every row a dict before the first line was printed);
- the table format shows the first rows and says how many more there are.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoforge.cli import main
from autoforge.errors import ConfigError
from autoforge.warehouse import apply_migrations, query
from autoforge.warehouse.limits import QueryTimeoutError

ROOT = Path(__file__).resolve().parents[1]
FOREVER = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("wh") / "w.duckdb")
    apply_migrations(path)
    return path


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def child_peak_rss_mb(argv: list[str], stdout: str = os.devnull) -> tuple[int, float]:
    """Run ``python -m autoforge ARGV`` in a wrapper process that reports its only child's peak RSS (MB),
    so other tests' children never count; (peak MB, seconds)."""
    code = ("import resource, subprocess, sys, time; t = time.monotonic(); "
            "rc = subprocess.run([sys.executable, '-m', 'autoforge', *sys.argv[2:]], stdout=open(sys.argv[1], 'w')).returncode; "
            "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - t)")
    done = subprocess.run([sys.executable, "-c", code, stdout, *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=1800)
    rc, kb, seconds = done.stdout.split()
    assert rc == "0", done.stderr
    return int(kb) // 1024, float(seconds)


# ----------------------------------------------------------------------------- the deadline


def test_a_never_ending_query_stops_at_the_deadline_with_one_line_and_exit_2(wh, capsys):
    start = time.monotonic()
    assert main(["sql", "--warehouse", wh, "--timeout", "2", FOREVER]) == 2
    took = time.monotonic() - start
    line = one_error_line(capsys.readouterr().err)
    assert "time limit of 2 s" in line and "--timeout SECONDS" in line and "AUTOFORGE_SQL_TIMEOUT" in line
    assert 2 <= took < 20, took  # the interrupt lands within moments of the deadline (20 s: a loaded 2-core host)


def test_the_deadline_comes_from_the_setting_and_covers_the_library_path(wh, monkeypatch):
    monkeypatch.setenv("AUTOFORGE_SQL_TIMEOUT", "1")
    start = time.monotonic()
    with pytest.raises(QueryTimeoutError, match="time limit of 1 s"):
        query(wh, FOREVER)  # query(read_only_check=True): the user-SQL path of the library (pipeline.export.user_sql)
    assert time.monotonic() - start < 20
    assert query(wh, "SELECT 42 AS n") == [{"n": 42}]  # a quick query is untouched
    assert query(wh, FOREVER.replace("SELECT 1 UNION", "SELECT 1 WHERE false UNION"), read_only_check=False)  # internal: no limit


def test_a_bad_timeout_is_refused_before_anything_runs(wh, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["sql", "--warehouse", wh, "--timeout", "0", "SELECT 1"])
    assert stop.value.code == 2 and "--timeout" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"--timeout must be a finite number in \[0.1, 86400\]"):
        query(wh, "SELECT 1", timeout_s=float("inf"))


def test_user_sql_has_a_memory_cap_from_the_setting(wh, monkeypatch, capsys):
    assert query(wh, "SELECT current_setting('memory_limit') AS m") == [{"m": "2.0 GiB"}]  # the default, 2048 MB
    monkeypatch.setenv("AUTOFORGE_SQL_MEMORY_MB", "64")
    assert query(wh, "SELECT current_setting('memory_limit') AS m") == [{"m": "64.0 MiB"}]
    big = "SELECT count(*) FROM (SELECT DISTINCT i::VARCHAR || 'abcdefgh' FROM range(10000000) t(i))"
    assert main(["sql", "--warehouse", wh, big]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "needs more memory" in line and "AUTOFORGE_SQL_MEMORY_MB" in line
    # a memory_limit in the warehouse URL still wins (documented in docs/hardening.md)
    assert query(f"duckdb:///{wh}?memory_limit=1GB", "SELECT current_setting('memory_limit') AS m") == [{"m": "953.6 MiB"}]
    monkeypatch.setenv("AUTOFORGE_SQL_MEMORY_MB", "0")
    assert main(["sql", "--warehouse", wh, "SELECT 1"]) == 2
    assert "AUTOFORGE_SQL_MEMORY_MB" in one_error_line(capsys.readouterr().err)


# ----------------------------------------------------------------------------- streaming


def test_csv_and_json_print_the_same_text_as_before_for_every_kind_of_value(wh, capsys):
    """The streamed writers print what ``print_rows`` printed from the whole list (nested values as JSON)."""
    from autoforge.cli.output import print_rows
    from autoforge.cli.sql import write_csv, write_json
    from autoforge.pipeline.export import user_sql
    from autoforge.pipeline.export import stream_query

    sql = ("SELECT i, 'a,\"b\"' AS s, [i, 2] AS l, '{\"k\": [1, {\"x\": null}]}'::JSON AS j, {'x': i} AS st, "
           "TIMESTAMP '2024-01-02 03:04:05' + INTERVAL (i) DAY AS t, DATE '2024-01-01' AS d, 'ab'::BLOB AS b, "
           "1.5::DECIMAL(4, 2) AS dec, NULL AS n, i / 3 AS f, i % 2 = 0 AS even FROM range(4000) r(i)")
    for fmt, write in (("csv", write_csv), ("json", write_json)):
        before = io.StringIO()
        print_rows(user_sql(wh, sql), fmt, file=before)
        now = io.StringIO()
        with stream_query(wh, sql, batch_rows=1000) as rows:
            assert write(rows, now) == 4000
        assert now.getvalue() == before.getvalue(), fmt
    for fmt, empty in (("csv", ""), ("json", "[]\n")):
        assert main(["sql", "--warehouse", wh, "--format", fmt, "SELECT 1 AS a WHERE false"]) == 0
        assert capsys.readouterr().out == empty


def test_csv_memory_does_not_grow_with_the_rows(wh, tmp_path):
    """A million rows: before ~400 MB peak (every row a dict first); streamed, ~110 MB (the interpreter and DuckDB)."""
    out = tmp_path / "rows.csv"
    peak, _ = child_peak_rss_mb(["sql", "--warehouse", wh, "--format", "csv", "SELECT * FROM range(1000000)"], str(out))
    with out.open() as f:
        assert f.readline() == "range\n" and sum(1 for _ in f) == 1_000_000
    assert peak < 250, f"peak RSS {peak} MB"


@pytest.mark.slow
def test_a_hundred_million_row_csv_stays_under_300_mb(wh):
    """The done-when of issue 36: 10**8 rows to /dev/null under ~300 MB (before: ~29 GB extrapolated, i.e. killed)."""
    peak, seconds = child_peak_rss_mb(["sql", "--warehouse", wh, "--format", "csv", "--timeout", "3600",
                                       "SELECT * FROM range(100000000)"])
    print(f"10**8 rows as CSV: peak RSS {peak} MB, {seconds:.0f} s")
    assert peak < 300, f"peak RSS {peak} MB"


def test_the_table_shows_the_first_rows_and_says_how_many_more(wh, capsys):
    assert main(["sql", "--warehouse", wh, "SELECT * FROM range(250)"]) == 0
    out = capsys.readouterr().out
    assert "│ 99 " in out and "│ 100 " not in out
    assert "... and 150 more rows (shown: the first 100; --max-rows N shows more" in out
    assert main(["sql", "--warehouse", wh, "--max-rows", "3", "SELECT * FROM range(4)"]) == 0
    assert "... and 1 more row (shown: the first 3;" in capsys.readouterr().out
    assert main(["sql", "--warehouse", wh, "SELECT * FROM range(7)"]) == 0
    assert "more row" not in capsys.readouterr().out  # all shown: nothing to add
    assert main(["sql", "--warehouse", wh, "SELECT * FROM range(3000000)"]) == 0  # counted up to a cap, then "more than"
    assert "... and more than 1,000,000 more rows" in capsys.readouterr().out


def test_json_streams_a_valid_array(wh, capsys):
    assert main(["sql", "--warehouse", wh, "--format", "json", "SELECT i, [i] AS l FROM range(3) r(i)"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"i": i, "l": [i]} for i in range(3)]


# ----------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def pg_reader():
    sys.path.insert(0, str(Path(__file__).parent))
    from pg_server import PgServer, unavailable

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with PgServer() as server:
        server.execute("CREATE TABLE items AS SELECT i AS id, 'n' || i AS name FROM generate_series(1, 25000) i",
                       "CREATE ROLE reader LOGIN", "GRANT SELECT ON items TO reader")
        yield server.url(user="reader")


def test_postgres_user_sql_streams_and_stops_at_the_deadline(pg_reader, capsys):
    assert main(["sql", "--warehouse", pg_reader, "--format", "csv", "SELECT id, name FROM items ORDER BY id"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,name" and lines[1] == "1,n1" and len(lines) == 25001
    assert main(["sql", "--warehouse", pg_reader, "SHOW transaction_read_only"]) == 0
    assert "on" in capsys.readouterr().out
    start = time.monotonic()
    assert main(["sql", "--warehouse", pg_reader, "--timeout", "1", "SELECT pg_sleep(30)"]) == 2
    assert "time limit of 1 s" in one_error_line(capsys.readouterr().err) and time.monotonic() - start < 15
    with pytest.raises(QueryTimeoutError):
        query(pg_reader, "SELECT pg_sleep(30)", timeout_s=1)
    assert query(pg_reader, "SELECT count(*) AS n FROM items") == [{"n": 25000}]
