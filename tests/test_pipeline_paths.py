"""The Prefect flow path and the library path of the factory are one recipe: for the same batch
they build the same run ids and store the same rows (``FactoryParams.stage_params`` derives every
stage's parameters once). Two sizes: 20 tasks per environment, where the default walk count is
the floor, and 300, where it grows with the target (this is where the two paths once drifted)."""

from __future__ import annotations

import pytest

from autoforge.pipeline import FactoryParams, run_factory
from autoforge.warehouse import apply_migrations, query

ROWS = {
    "runs": "SELECT run_id, stage, batch_id, status, params FROM runs",
    "tool_graphs": "SELECT graph_id, env_id, run_id FROM tool_graphs",
    "tool_sequences": "SELECT seq_id, env_id, run_id FROM tool_sequences",
    "task_dags": "SELECT dag_id, seq_id, run_id FROM task_dags",
    "tasks": "SELECT task_id, dag_id, status, split, run_id FROM tasks",
    "verification_results": 'SELECT task_id, "check", passed, reason, run_id FROM verification_results',
    "rejections": "SELECT rejection_id, stage, reason, run_id FROM rejections",
}


def snapshot(wh: str) -> dict[str, list[tuple]]:
    out = {}
    for table, sql in ROWS.items():
        out[table] = sorted(tuple(str(v) for v in r.values()) for r in query(wh, sql, read_only_check=False))
    return out


@pytest.mark.parametrize("tasks_per_env", [20, pytest.param(300, marks=pytest.mark.slow)])
def test_flow_and_library_store_the_same_rows(prefect_harness, tmp_path, tasks_per_env):
    from flows.factory import factory_flow

    params = {"env": "retail", "tasks_per_env": tasks_per_env, "seed": 0}
    lib, flo = str(tmp_path / "lib.duckdb"), str(tmp_path / "flow.duckdb")
    apply_migrations(lib)
    apply_migrations(flo)
    out_lib = run_factory(FactoryParams(**params, warehouse=lib))
    out_flow = factory_flow(**params, warehouse=flo)
    assert out_lib["batch_id"] == out_flow["batch_id"]
    a, b = snapshot(lib), snapshot(flo)
    assert a["tasks"], "the batch produced no task: the comparison would prove nothing"
    stages = {r[1] for r in a["runs"]}
    assert stages == {"ingest", "synthesize", "sample", "generate", "verify"}
    for table in ROWS:
        assert a[table] == b[table], f"{table} differs between the library path and the flow path"
    walks = [r for r in a["runs"] if r[1] == "sample"][0][4]
    assert f'"walks": {max(40, 2 * tasks_per_env // 3)}' in walks.replace("'", '"')


def test_both_paths_sample_the_sequences_a_policy_requires(prefect_harness, tmp_path):
    """A policy's required sequences reach the sample stage on the flow path too (they once did only on the
    library path): a lead-in's reads and write are a sequence with start rule ``procedure`` on both."""
    from pathlib import Path

    from flows.factory import factory_flow

    folder = str(Path(__file__).parent / "fixtures" / "policy" / "repo_access")
    params = {"paths": [folder], "bundled": False, "tasks_per_env": 10, "seed": 0}
    lib, flo = str(tmp_path / "lib.duckdb"), str(tmp_path / "flow.duckdb")
    apply_migrations(lib)
    apply_migrations(flo)
    run_factory(FactoryParams(**params, warehouse=lib))
    factory_flow(**params, warehouse=flo)
    procs = [query(wh, "SELECT tools FROM tool_sequences WHERE start_rule = 'procedure'", read_only_check=False)
             for wh in (lib, flo)]
    assert procs[0] and procs[0] == procs[1]
    assert snapshot(lib)["tasks"] == snapshot(flo)["tasks"]
