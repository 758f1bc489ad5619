"""v_stage_budget (sql/093): where a factory batch's time went, per stage, from the runs table.

A tiny factory batch (tests/test_faults.py's FAST) gives one row per stage, then `other` and
`total`; every figure is recomputed here in Python from the batch's run rows. Hand-made run rows
with fixed timestamps pin the exact values, the order (oldest batch first) and a stage run
outside a batch, on DuckDB and (slow; skipped without server binaries) on PostgreSQL, where
the same rows must come back. `autoforge sql` reads the view.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_faults import FAST  # noqa: E402  the small batch (2 environments, 4 tasks each)

from autoforge import types as T  # noqa: E402
from autoforge.cli import main  # noqa: E402
from autoforge.pipeline import FactoryParams, run_factory  # noqa: E402
from autoforge.warehouse import apply_migrations, query, write_records  # noqa: E402

STAGES = ["ingest", "synthesize", "sample", "generate", "verify"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    wh = str(tmp_path_factory.mktemp("budget") / "w.duckdb")
    out = run_factory(FactoryParams(**FAST, warehouse=wh))
    return wh, out["batch_id"]


def _view(wh: str, batch: str | None = None) -> list[dict]:
    rows = query(wh, "SELECT * FROM v_stage_budget", read_only_check=False)
    return [r for r in rows if batch is None or r["batch_id"] == batch]


def test_one_row_per_stage_and_the_figures_of_the_run_rows(built):
    wh, batch = built
    rows = _view(wh, batch)
    assert [r["stage"] for r in rows] == [*STAGES, "other", "total"]
    by = {r["stage"]: r for r in rows}
    runs = {r["stage"]: r for r in query(wh, "SELECT stage, counts, started_at, finished_at FROM runs WHERE batch_id = :b",
                                         {"b": batch}, read_only_check=False)}
    assert set(runs) == set(STAGES)
    counts = {s: (r["counts"] if isinstance(r["counts"], dict) else json.loads(r["counts"])) for s, r in runs.items()}
    seconds = {s: (r["finished_at"] - r["started_at"]).total_seconds() for s, r in runs.items()}
    wall = (max(r["finished_at"] for r in runs.values()) - min(r["started_at"] for r in runs.values())).total_seconds()
    verified = counts["verify"]["verified"]
    assert verified > 0 and by["generate"]["seconds"] > 0 and by["verify"]["seconds"] > 0

    for s in STAGES:
        r = by[s]
        assert r["status"] == "completed" and r["verified"] == verified
        assert r["seconds"] == pytest.approx(seconds[s], abs=6e-4)
        assert r["seconds_per_verified_task"] == pytest.approx(seconds[s] / verified, abs=6e-5)
        assert r["ms_per_item"] == pytest.approx(1000 * seconds[s] / r["items_in"], abs=6e-4, rel=1e-6)
    # items: generate = candidates tried (tasks + generate rejections) -> tasks; verify = tasks checked -> verified
    tasks = query(wh, "SELECT count(*) AS n FROM tasks", read_only_check=False)[0]["n"]
    dropped = query(wh, "SELECT count(*) AS n FROM rejections WHERE stage = 'generate'", read_only_check=False)[0]["n"]
    assert (by["generate"]["items_in"], by["generate"]["items_out"]) == (tasks + dropped, tasks)
    assert (by["verify"]["items_in"], by["verify"]["items_out"]) == (tasks, verified)
    assert by["synthesize"]["items_in"] == counts["synthesize"]["tools"]
    assert by["ingest"]["items_in"] == counts["ingest"]["docs_in"]

    total, other = by["total"], by["other"]
    assert total["seconds"] == pytest.approx(wall, abs=6e-4) and total["share"] == 1.0
    assert total["seconds_per_verified_task"] == pytest.approx(wall / verified, abs=6e-5)
    assert other["seconds"] == pytest.approx(wall - sum(seconds.values()), abs=6e-4)
    assert sum(by[s]["seconds"] for s in [*STAGES, "other"]) == pytest.approx(total["seconds"], abs=5e-3)
    assert sum(by[s]["share"] for s in [*STAGES, "other"]) == pytest.approx(1.0, abs=5e-3)


def test_autoforge_sql_reads_the_view(built, capsys):
    wh, batch = built
    capsys.readouterr()
    assert main(["sql", "--warehouse", wh, "--format", "json",
                 "SELECT stage, seconds, ms_per_item, seconds_per_verified_task FROM v_stage_budget "
                 "WHERE stage IN ('generate', 'verify', 'total')"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["stage"] for r in rows] == ["generate", "verify", "total"]
    assert all(r["seconds"] > 0 and r["seconds_per_verified_task"] > 0 for r in rows)


T0 = datetime(2026, 1, 2, 3, 4, 5)


def _run(stage: str, batch: str | None, start: float, seconds: float | None, counts: dict, status: str = "completed") -> T.Run:
    run = T.Run.make(stage, {"x": start}, batch)
    started = T0 + timedelta(seconds=start)
    return run.model_copy(update={"status": status, "counts": counts, "started_at": started,
                                  "finished_at": None if seconds is None else started + timedelta(seconds=seconds)})


def _made_runs() -> list[T.Run]:
    """Batch 'b_late' (run second, id sorts first), batch 'z_early' (run first), and a lone generate run."""
    def batch(name: str, at: float, verified: int) -> list[T.Run]:
        return [_run("ingest", name, at, 1.0, {"docs_in": 10, "docs_rejected": 2, "toolsets": 1, "tools": 5}),
                _run("synthesize", name, at + 1.5, 4.0, {"tools": 20, "tools_accepted": 16}),
                _run("sample", name, at + 6.0, 2.0, {"in": 100, "out": 80, "seconds": 2.0}),
                _run("generate", name, at + 8.5, 5.0, {"in": 250, "out": 50, "tasks": 50, "rejected": 200}),
                _run("verify", name, at + 14.0, 2.5, {"in": 50, "out": verified, "tasks": 50, "verified": verified})]
    lone = _run("generate", None, 500.0, 3.0, {"in": 30, "out": 6, "tasks": 6, "rejected": 24})
    return [*batch("b_late", 100.0, 40), *batch("z_early", 0.0, 0), lone]


def _check_made(wh: str) -> list[dict]:
    rows = _view(wh)
    key = [(r["batch_id"], r["stage"]) for r in rows]
    lone = [r for r in rows if r["batch_id"].startswith("run_")]
    assert key[:7] == [("z_early", s) for s in [*STAGES, "other", "total"]]
    assert key[7:14] == [("b_late", s) for s in [*STAGES, "other", "total"]]
    assert [r["stage"] for r in lone] == ["generate", "other", "total"] and len(rows) == 17
    late = {r["stage"]: r for r in rows if r["batch_id"] == "b_late"}
    assert late["ingest"]["batch_started_at"] == T0 + timedelta(seconds=100)
    assert [late[s]["seconds"] for s in [*STAGES, "other", "total"]] == [1.0, 4.0, 2.0, 5.0, 2.5, 2.0, 16.5]
    assert [(late[s]["items_in"], late[s]["items_out"]) for s in STAGES] == [(10, 8), (20, 16), (100, 80), (250, 50), (50, 40)]
    assert late["generate"]["ms_per_item"] == 20.0 and late["verify"]["ms_per_item"] == 50.0
    assert late["generate"]["seconds_per_verified_task"] == 0.125 and late["total"]["seconds_per_verified_task"] == 0.4125
    assert late["generate"]["share"] == round(5 / 16.5, 3) and late["total"]["items_in"] is None
    assert all(r["verified"] == 40 for r in late.values())
    early = [r for r in rows if r["batch_id"] == "z_early"]
    assert all(r["verified"] == 0 and r["seconds_per_verified_task"] is None for r in early)
    assert lone[0]["seconds"] == 3.0 and lone[0]["ms_per_item"] == 100.0 and lone[0]["verified"] is None
    return rows


def test_made_run_rows_give_exact_figures_oldest_batch_first(tmp_path):
    wh = str(tmp_path / "made.duckdb")
    apply_migrations(wh)
    write_records(wh, _made_runs())
    _check_made(wh)
    running = _run("verify", "b_late", 114.0, None, {}, status="running")  # the same run id: a re-run in progress; total = so far
    write_records(wh, [running])
    late = {r["stage"]: r for r in _view(wh) if r["batch_id"] == "b_late"}
    assert late["total"]["status"] == late["verify"]["status"] == "running" and late["verify"]["seconds"] is None
    assert late["total"]["seconds"] == 13.5 and late["generate"]["seconds_per_verified_task"] is None


@pytest.mark.slow
def test_postgres_gives_the_same_rows(tmp_path):
    from pg_server import PgServer, unavailable

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    duck = str(tmp_path / "made.duckdb")
    with PgServer() as server:
        pgdb = server.create_database("budget")
        for wh in (duck, pgdb):
            apply_migrations(wh)
            write_records(wh, _made_runs())
        assert _check_made(pgdb) == _check_made(duck)
