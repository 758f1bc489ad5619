"""Stages 3-5 over a warehouse (sample -> generate -> verify) on the mock shop, through the real
sandbox runtime: rows, idempotent re-runs, a crash mid-stage, the views, and the Prefect flows."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dags_mock as m
from autoforge.pipeline import run_generate, run_sample, run_verify
from autoforge.warehouse.store import query, read_records, write_records
from autoforge.types import Task
from autoforge.tasks.verify import CHECKS

COUNTS = ("SELECT (SELECT count(*) FROM tool_graphs) g, (SELECT count(*) FROM tool_sequences) s, "
          "(SELECT count(*) FROM task_dags) d, (SELECT count(*) FROM tasks) t, (SELECT count(*) FROM rejections) r, "
          "(SELECT count(*) FROM verification_results) v")


@pytest.fixture
def shop(warehouse):
    write_records(warehouse, [m.make_env(), *m.make_tools()])
    return warehouse


def run_all(wh, seed=1, n=20):
    return (run_sample(wh, seed, walks=15, merges=15), run_generate(wh, seed, tasks_per_env=n), run_verify(wh))


def test_stages_write_rows_and_rerun_adds_none(shop):
    s, g, v = run_all(shop)
    assert s["out"] > 0 and g["tasks"] == 20 and v["in"] == 20 and v["verified"] >= 18
    before = query(shop, COUNTS)[0]
    tasks = read_records(shop, Task)
    assert len(tasks) == 20 and {t.status for t in tasks} <= {"verified", "rejected"}
    s2, g2, v2 = run_all(shop)
    assert query(shop, COUNTS)[0] == before  # same seed: same ids, upserts only
    assert g2["tasks"] == 0 and v2["in"] == 0  # nothing re-generated, nothing reset to 'generated'
    assert {t.task_id: t.status for t in read_records(shop, Task)} == {t.task_id: t.status for t in tasks}
    runs = query(shop, "SELECT stage, status FROM runs ORDER BY stage")
    assert [r["stage"] for r in runs] == ["generate", "sample", "verify"] and {r["status"] for r in runs} == {"completed"}


def test_crash_mid_stage_writes_nothing_then_rerun_completes(shop):
    run_sample(shop, 1, walks=15, merges=15)

    class Boom(m.LocalEnvironment):
        calls = 0

        def call(self, name, arguments):
            Boom.calls += 1
            if Boom.calls > 40:
                raise RuntimeError("killed")
            return super().call(name, arguments)

    with pytest.raises(RuntimeError):
        run_generate(shop, 1, tasks_per_env=20, env_factory=Boom)
    assert query(shop, "SELECT count(*) n FROM tasks")[0]["n"] == 0
    run_generate(shop, 1, tasks_per_env=20)
    run_verify(shop)
    ids = [r["task_id"] for r in query(shop, "SELECT task_id FROM tasks")]
    assert len(ids) == len(set(ids)) == 20


def test_views_curated_and_funnel(shop):
    run_all(shop)
    cur = query(shop, "SELECT * FROM v_curated_tasks")
    n_verified = query(shop, "SELECT count(*) n FROM tasks WHERE status = 'verified'")[0]["n"]
    assert len(cur) == n_verified > 0
    row = cur[0]
    for col in ("task_id", "env_id", "n_tool_calls", "dag_depth", "n_reasoning_nodes", "n_requirements", "split"):
        assert col in row
    assert row["env_name"] == "mock_shop" and row["n_checks_passed"] == len(CHECKS)
    funnel = {r["stage"]: r for r in query(shop, "SELECT * FROM v_stage_funnel")}
    assert list(funnel) == ["ingest", "synthesize", "sample", "generate", "verify"]
    gen = funnel["generate"]
    assert gen["items_out"] == 20 and gen["items_in"] == 20 + gen["n_rejected"]
    assert gen["n_rejected"] == 0 or gen["top_reasons"]
    assert funnel["verify"]["items_in"] == 20 and funnel["verify"]["items_out"] == n_verified


def test_library_never_imports_prefect():
    root = Path(__file__).resolve().parents[1] / "autoforge"
    for sub in ("dags", "tasks"):
        for path in (root / sub).glob("*.py"):
            tree = ast.parse(path.read_text())
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not any(x.split(".")[0] == "prefect" for x in names), path


def test_prefect_flows_chain(prefect_harness, shop):
    from flows.generate import generate_flow
    from flows.sample import sample_flow
    from flows.verify import verify_flow

    s = sample_flow(seed=2, warehouse=shop, tasks_per_env=15, walks=12, merges=12)
    g = generate_flow(seed=2, warehouse=shop, tasks_per_env=15)
    v = verify_flow(warehouse=shop)
    assert s["out"] > 0 and g["tasks"] == 15 and v["in"] == 15 and v["verified"] >= 13
    assert query(shop, "SELECT count(*) n FROM v_curated_tasks")[0]["n"] == v["verified"]
