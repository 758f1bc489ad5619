"""What a factory batch reads grows with the batch, not with the warehouse (issue 16).

Generate draws from the DAGs its own batch's sample stage stored (``GenerateParams.from_batch``).
Verify stores each task's duplicate and blueprint keys on its row (sql/081), and a later batch reads
those two strings per verified task instead of every stored task's states and DAG. A warehouse
written before sql/081 (keys NULL) gets the keys derived from the records, as before; both give the
same rows."""

from __future__ import annotations

import shutil

from autoforge.pipeline import FactoryParams, generate, run_factory, sample, verify
from autoforge.tasks.generate import blueprint_key, duplicate_key
from autoforge.types import Task, TaskDag
from autoforge.warehouse import apply_migrations, connect, query, read_records, write_records

ENV = "retail"


def _batch(wh: str, seed: int) -> None:
    run_factory(FactoryParams(env=ENV, tasks_per_env=40, seed=seed, warehouse=wh))


def _rows(wh: str) -> list[tuple]:
    return sorted(tuple(map(str, r.values())) for r in query(
        wh, 'SELECT t.task_id, t.status, v."check", v.passed, v.reason FROM tasks t JOIN verification_results v USING (task_id)',
        read_only_check=False))


def test_verify_stores_the_keys_it_checked_with(tmp_path):
    wh = str(tmp_path / "wh.duckdb")
    apply_migrations(wh)
    _batch(wh, 0)
    dags = {d.dag_id: d for d in read_records(wh, TaskDag)}
    done = read_records(wh, Task, "status = 'verified'")
    assert len(done) >= 10
    for t in done:
        assert t.duplicate_key == duplicate_key(t, dags[t.dag_id])
        assert t.blueprint_key == blueprint_key(t.env_id, dags[t.dag_id])


def test_a_later_batch_reads_keys_not_records_and_matches_the_derived_keys(tmp_path):
    keyed = str(tmp_path / "keyed.duckdb")
    apply_migrations(keyed)
    _batch(keyed, 0)
    legacy = str(tmp_path / "legacy.duckdb")
    shutil.copy(keyed, legacy)
    with connect(legacy) as conn:  # as if verified before sql/081: no keys on the rows
        conn.exec_driver_sql("UPDATE tasks SET duplicate_key = NULL, blueprint_key = NULL")

    first = read_records(keyed, Task, "status = 'verified'")[0]
    twin = first.model_copy(update={"task_id": "task_twin", "status": "generated", "duplicate_key": None,
                                    "blueprint_key": None})  # the same DAG and state change as a verified task
    inp = {}
    for wh in (keyed, legacy):  # the second batch's tasks are generated, not yet verified
        sp = FactoryParams(env=ENV, tasks_per_env=40, seed=1, warehouse=wh).stage_params()
        sample.run(wh, sp["sample"])
        generate.run(wh, sp["generate"])
        write_records(wh, [twin])
        inp[wh] = verify.load(wh, verify.VerifyParams(env=ENV))
    a, b = inp[keyed], inp[legacy]
    assert a.existing_keys == b.existing_keys and a.blueprints == b.blueprints
    n_verified = query(keyed, "SELECT count(*) AS n FROM tasks WHERE status = 'verified'", read_only_check=False)[0]["n"]
    assert sum(len(k) for k in a.existing_keys.values()) == n_verified > 0
    todo = [t for ts in a.tasks.values() for t in ts]
    assert todo and all(t.status == "generated" for t in todo)  # verified tasks' records are not read
    assert {d.dag_id for ds in a.dags.values() for d in ds} == {t.dag_id for t in todo}  # only the DAGs to replay

    for wh in (keyed, legacy):
        verify.run(wh, verify.VerifyParams(env=ENV))
    assert _rows(keyed) == _rows(legacy)
    for wh in (keyed, legacy):
        caught = query(wh, "SELECT reason FROM verification_results WHERE task_id = 'task_twin' AND \"check\" = 'not_duplicate'",
                       read_only_check=False)
        assert len(caught) == 1 and caught[0]["reason"].startswith("same ") and caught[0]["reason"].endswith(
            f" as {first.task_id}"), caught  # rejected as the verified task's twin, from its stored or derived key


def test_a_factory_batch_generates_from_its_own_dags(tmp_path):
    wh = str(tmp_path / "wh.duckdb")
    apply_migrations(wh)
    _batch(wh, 0)
    _batch(wh, 1)
    second = FactoryParams(env=ENV, tasks_per_env=40, seed=1, warehouse=wh)
    gp = second.stage_params()["generate"]
    assert gp.from_batch == second.batch_id()
    mine = {r["run_id"] for r in query(wh, "SELECT run_id FROM runs WHERE stage = 'sample' AND batch_id = :b",
                                       {"b": second.batch_id()}, read_only_check=False)}
    used = [d for ds in generate.load(wh, gp).dags.values() for d in ds]
    stored = read_records(wh, TaskDag)
    assert used and {d.run_id for d in used} == mine
    assert sorted(d.dag_id for d in used) == sorted(d.dag_id for d in stored if d.run_id in mine)
    assert len(used) < len(stored)  # the first batch's DAGs (not sampled again) stay out
    top_up = FactoryParams(env=ENV, tasks_per_env=40, seed=1, warehouse=wh, all_dags=True)  # --all-dags, the demo's top-up
    assert top_up.stage_params()["generate"].from_batch is None and top_up.batch_id() != second.batch_id()
    everything = generate.load(wh, top_up.stage_params()["generate"]).dags  # as `autoforge generate`: all of them
    assert sum(map(len, everything.values())) == len(stored)
