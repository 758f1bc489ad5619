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
