"""The command line: init, sql, export, errors; the library never imports prefect."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from autoforge.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_library_never_imports_prefect():
    offenders = []
    for path in (ROOT / "autoforge").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "prefect"]
    assert offenders == []


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("init", "sql", "export", "ingest"):
        assert cmd in out


def test_init_sql_export(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["init", "--warehouse", wh]) == 0
    assert "applied" in capsys.readouterr().out
    assert main(["init", "--warehouse", wh]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["sql", "--warehouse", wh, "--format", "json", "SELECT count(*) AS n FROM schema_migrations"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["n"] >= 17
    assert main(["sql", "--warehouse", wh, "--format", "csv", "SELECT 1 AS a, 'x' AS b"]) == 0
    assert capsys.readouterr().out.splitlines() == ["a,b", "1,x"]
    assert main(["sql", "--warehouse", wh, "DROP TABLE runs"]) == 2
    assert "read-only" in capsys.readouterr().err
    out = tmp_path / "runs.csv"
    assert main(["export", "runs", "--warehouse", wh, "--format", "csv", "--out", str(out)]) == 0
    assert out.exists()


def test_warehouse_from_environment(tmp_path, monkeypatch, capsys):
    wh = tmp_path / "env.duckdb"
    monkeypatch.setenv("AUTOFORGE_WAREHOUSE", str(wh))
    assert main(["init"]) == 0
    assert wh.exists()


def test_file_opens_in_stock_duckdb_shell(tmp_path):
    exe = shutil.which("duckdb") or str(Path(__import__("sys").executable).parent / "duckdb")
    if not Path(exe).exists():
        pytest.skip("the duckdb shell (pip package duckdb-cli) is not installed")
    wh = tmp_path / "w.duckdb"
    assert main(["init", "--warehouse", str(wh)]) == 0
    res = subprocess.run([exe, str(wh), "-csv", "-c", "SELECT count(*) FROM schema_migrations"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.splitlines()[-1]) >= 17


def test_ingest_bundled_then_count(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["init", "--warehouse", wh]) == 0
    assert main(["ingest", "--bundled", "--warehouse", wh]) == 0
    capsys.readouterr()
    assert main(["sql", "--warehouse", wh, "--format", "json", "SELECT count(*) AS n, count(DISTINCT toolset) AS s FROM tool_specs"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["s"] >= 10 and row["n"] >= 100


def test_ingest_bad_docs_exit_1_and_keep_good_ones(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.json").write_text(json.dumps([{
        "name": "get_user", "description": "Get a user by id",
        "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]},
    }]))
    (docs / "broken.json").write_text('{"name": "x", "parameters": {')
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "list_items", "description": "List items",
                                 "parameters": {"type": "object", "properties": {}}}))
    wh = str(tmp_path / "w.duckdb")
    assert main(["ingest", str(docs), str(other), "--warehouse", wh]) == 1
    err = capsys.readouterr().err
    assert "broken.json" in err
    capsys.readouterr()
    main(["sql", "--warehouse", wh, "--format", "json", "SELECT name FROM tool_specs ORDER BY name"])
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["get_user", "list_items"]
    main(["sql", "--warehouse", wh, "--format", "json", "SELECT status, error FROM tool_docs WHERE status = 'rejected'"])
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 1 and "broken.json" in rows[0]["error"]


def test_factory_then_eval_prints_pass_k_by_environment_name(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["factory", "--no-prefect", "--warehouse", wh, "--env", "retail", "--tasks-per-env", "4"]) == 0
    capsys.readouterr()
    assert main(["eval", "--warehouse", wh, "--agent", "oracle", "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "retail" in out and "(overall)" in out and "pass^k" in out
    assert main(["eval", "--warehouse", wh, "--agent", "random", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    overall = [r for r in summary["results"] if r["env_id"] is None]
    assert overall and overall[0]["pass_hat_k"] == 0.0
