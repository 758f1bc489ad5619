"""Exports are all or nothing, and safe to stop (issue 36): ``autoforge export`` killed with SIGKILL at
any point leaves ``--out`` as it was (the previous file or folder, whole, or nothing), and the next
export to the same ``--out`` removes what the killed one left and completes (autoforge/atomic.py).

Kill points are made deterministic as in tests/test_faults.py: a child process parks itself at a
chosen point (writes a marker file, then sleeps) so that the test's SIGKILL lands exactly there;
the mid-write cases instead kill as soon as the export's first bytes appear on disk.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from autoforge.atomic import pid_alive, sweep_stale, temp_beside
from autoforge.cli import main
from autoforge.warehouse import apply_migrations

TESTS = Path(__file__).resolve().parent
ROWS = 1_500_000  # enough that DuckDB is still writing when the test sees the file appear


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    """A migrated warehouse with a plain table ``big`` of ROWS rows."""
    path = str(tmp_path_factory.mktemp("wh") / "w.duckdb")
    apply_migrations(path)
    con = duckdb.connect(path)
    con.execute(f"CREATE TABLE big AS SELECT i, md5(i::VARCHAR) AS h, i * 0.5 AS x FROM range({ROWS}) t(i)")
    con.close()
    return path


def child_main(spec_json: str) -> None:
    """Entry point of an export child: optionally park at a point (module attribute), then run the CLI."""
    spec = json.loads(spec_json)
    if spec.get("park"):
        import importlib

        module_name, attr = spec["park"].rsplit(".", 1)
        module = importlib.import_module(module_name)
        marker = Path(spec["marker"])

        def park(*_a, **_k):
            marker.write_text(str(os.getpid()))
            time.sleep(600)  # the test SIGKILLs us here

        setattr(module, attr, park)
    from autoforge.cli import main as cli_main

    sys.exit(cli_main(spec["argv"]))


def spawn(argv: list[str], tmp: Path, park: str | None = None) -> tuple[subprocess.Popen, Path]:
    marker = tmp / "parked"
    spec = json.dumps({"argv": argv, "park": park, "marker": str(marker)})
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_safe_exports; test_safe_exports.child_main(sys.argv[1])"
    proc = subprocess.Popen([sys.executable, "-c", code, spec], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def kill_when(proc: subprocess.Popen, ready, timeout: float = 120) -> bool:
    """SIGKILL ``proc`` as soon as ``ready()``; False when it exited first."""
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and not ready():
            assert time.monotonic() < deadline, "the export never reached its kill point"
            time.sleep(0.002)
        if proc.poll() is not None:
            return False
        os.kill(proc.pid, signal.SIGKILL)
        return True
    finally:
        proc.wait(timeout=60)


def rows_in(path: Path, fmt: str) -> int:
    con = duckdb.connect()  # the test's own unrestricted connection reads the file back
    try:
        reader = {"csv": "read_csv", "parquet": "read_parquet", "jsonl": "read_json"}[fmt]
        return con.execute(f"SELECT count(*) FROM {reader}('{path}')").fetchone()[0]
    finally:
        con.close()


def leftovers(folder: Path, name: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != name and name in p.name)


def export_argv(wh: str, fmt: str, out: Path, relation: str = "big") -> list[str]:
    return ["export", relation, "--format", fmt, "--out", str(out), "--warehouse", wh]


# ----------------------------------------------------------------------------- files


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("existing", [False, True], ids=["new-path", "existing-path"])
def test_a_file_export_killed_mid_write_leaves_the_final_name_as_it_was(wh, tmp_path, capsys, fmt, existing):
    out = tmp_path / f"big.{fmt}"
    before = None
    if existing:
        assert main(export_argv(wh, fmt, out, relation="runs")) == 0  # a small previous file (0 rows)
        before = out.read_bytes()
    listing = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}

    def writing() -> bool:  # any new or changed file in the folder, with bytes in it: DuckDB is writing
        for p in tmp_path.iterdir():
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            if st.st_size > 0 and listing.get(p.name) != st.st_mtime_ns:
                return True
        return False

    proc, _ = spawn(export_argv(wh, fmt, out), tmp_path)
    killed = kill_when(proc, writing)
    if killed:
        if existing:
            assert out.read_bytes() == before  # the previous file, whole
            assert rows_in(out, fmt) == 0
        else:
            assert not out.exists(), "a part-file under the final name"
    else:  # it finished before the kill: then --out is the whole new file
        assert proc.returncode == 0 and rows_in(out, fmt) == ROWS
    stale = leftovers(tmp_path, out.name)  # the killed run's part-file under its temporary name, if it got that far
    print(f"killed mid-write: {killed}; left beside --out: {stale}", file=sys.__stderr__)
    capsys.readouterr()
    assert main(export_argv(wh, fmt, out)) == 0  # the next export clears the leftovers and completes
    err = capsys.readouterr().err
    assert ("note: removed what an interrupted export left beside" in err) == bool(stale), (stale, err)
    assert rows_in(out, fmt) == ROWS
    assert leftovers(tmp_path, out.name) == []


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_file_export_killed_before_its_rename_changes_nothing_and_the_next_one_cleans_up(wh, tmp_path, capsys, fmt):
    """Parked after the temporary file is complete, just before it takes the final name."""
    out = tmp_path / f"runs.{fmt}"
    new = tmp_path / f"fresh.{fmt}"
    assert main(export_argv(wh, fmt, out, relation="runs")) == 0
    before = out.read_bytes()
    for target in (out, new):
        proc, marker = spawn(export_argv(wh, fmt, target, relation="schema_migrations"), tmp_path,
                             park="autoforge.warehouse.export.publish_file")
        assert kill_when(proc, marker.exists), proc.stderr.read().decode()
        marker.unlink()
    assert out.read_bytes() == before and not new.exists()
    stale = leftovers(tmp_path, out.name)
    assert len(stale) == 1 and stale[0].startswith(f".{out.name}.tmp-"), stale
    capsys.readouterr()
    assert main(export_argv(wh, fmt, out, relation="schema_migrations")) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: removed what an interrupted export left beside") and stale[0] in err
    assert leftovers(tmp_path, out.name) == [] and rows_in(out, fmt) > 0
    assert len(leftovers(tmp_path, new.name)) == 1  # another target's leftovers are that target's business


# ----------------------------------------------------------------------------- folders


@pytest.mark.slow  # ~20 s: the child imports datasets
def test_a_folder_export_killed_leaves_its_staging_and_the_next_export_removes_it(wh, tmp_path, capsys):
    pytest.importorskip("datasets")
    from datasets import load_from_disk

    out = tmp_path / "hf"
    assert main(export_argv(wh, "hf", out, relation="runs")) == 0
    marker_before = (out / "autoforge_export.json").read_text()
    proc, marker = spawn(export_argv(wh, "hf", out, relation="runs"), tmp_path,
                         park="autoforge.integrations.outdir.publish_dir")
    assert kill_when(proc, marker.exists, timeout=300), proc.stderr.read().decode()
    assert (out / "autoforge_export.json").read_text() == marker_before  # the previous export, whole
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".hf.tmp-")]
    assert len(stale) == 1 and stale[0].is_dir() and any(stale[0].iterdir())
    capsys.readouterr()
    assert main(export_argv(wh, "hf", out, relation="runs")) == 0
    err = capsys.readouterr().err
    assert f"note: removed what an interrupted export left beside {out}: {stale[0].name}" in err
    assert sorted(p.name for p in tmp_path.iterdir() if "hf" in p.name) == ["hf"]
    assert load_from_disk(str(out))["train"].num_rows == 0


def test_the_sweep_keeps_live_writers_and_puts_back_a_folder_left_aside(tmp_path, capsys):
    out = tmp_path / "bundle"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    assert not pid_alive(dead_pid)
    live = temp_beside(out)  # this process's own: alive
    live.mkdir()
    aside = tmp_path / f".bundle.old-{dead_pid}-0123abcd"  # died between "previous aside" and "new in"
    aside.mkdir()
    (aside / "manifest.json").write_text("{}")
    gone = tmp_path / f".bundle.tmp-{dead_pid}-89abcdef"
    gone.mkdir()
    other = tmp_path / f".bundles.tmp-{dead_pid}-89abcdef"  # another target's: not ours to touch
    other.mkdir()
    done = sweep_stale(out)
    assert sorted(done) == sorted([gone.name, f"{aside.name} (put back as bundle)"])
    assert (out / "manifest.json").exists() and live.exists() and other.exists() and not gone.exists()
    assert capsys.readouterr().err.count("\n") == 1
    assert sweep_stale(out) == [] and capsys.readouterr().err == ""


def test_an_export_to_a_folder_path_or_the_warehouse_is_refused_with_one_line(wh, tmp_path, capsys):
    assert main(export_argv(wh, "csv", tmp_path, relation="runs")) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(export_argv(wh, "csv", Path(wh), relation="runs")) == 2
    assert "is the warehouse itself" in capsys.readouterr().err
    out = tmp_path / "r.csv"
    assert main(export_argv(wh, "csv", out, relation="runs")) == 0
    with out.open() as f:
        assert next(csv.reader(f))[0] == "run_id"
