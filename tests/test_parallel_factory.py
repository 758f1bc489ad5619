"""The library path's worker processes (autoforge/pipeline/parallel.py): the factory run with
``AUTOFORGE_STAGE_WORKERS=2`` stores exactly the rows of the serial run (``AUTOFORGE_STAGE_WORKERS=1``) on a
3-environment batch; units come back in input order whatever order they ran in; a worker's exception
arrives with its own type, message and attributes (the CLI's exit codes depend on the type); a bad
``AUTOFORGE_STAGE_WORKERS`` is a ConfigError naming it."""

from __future__ import annotations

import os
import pickle
from functools import partial

import pytest

from autoforge.envs._worker_client import WorkerDied
from autoforge.errors import ConfigError, ToolDocError
from autoforge.pipeline import FactoryParams, run_factory
from autoforge.pipeline.parallel import WorkerTraceback, _call, _reraised, map_envs, usable_cpus, workers_for

BATCH = {"max_envs": 3, "tasks_per_env": 6, "seed": 0}


def rows(wh: str) -> dict[str, list]:
    """What a batch stored, without times: every id of every stage, each task's status, split, request
    and states (hashed), each rejection with its reason, and each run's counts."""
    from autoforge.warehouse import query

    def q(sql: str) -> list[tuple]:
        return [tuple(r.values()) for r in query(wh, sql)]

    return {
        "environments": q("SELECT env_id, status, n_tools_accepted FROM environments ORDER BY 1"),
        "tool_code": q("SELECT code_id, status FROM tool_code ORDER BY 1"),
        "graphs": q("SELECT graph_id FROM tool_graphs ORDER BY 1"),
        "sequences": q("SELECT seq_id, source, start_rule FROM tool_sequences ORDER BY 1"),
        "dags": q("SELECT dag_id, seq_id FROM task_dags ORDER BY 1"),
        "tasks": q("SELECT task_id, status, split, kind, request, gold_state_hash, md5(CAST(initial_state AS VARCHAR)), "
                   "md5(CAST(gold_state AS VARCHAR)), duplicate_key FROM tasks ORDER BY 1"),
        "verification": q("SELECT task_id, \"check\", passed, reason FROM verification_results ORDER BY 1, 2"),
        "rejections": q("SELECT stage, item_id, reason, detail FROM rejections ORDER BY 1, 2, 3"),
        "per_reason": q("SELECT stage, reason, count(*) FROM rejections GROUP BY 1, 2 ORDER BY 1, 2"),
        "runs": [(r["run_id"], r["stage"], r["status"], {k: v for k, v in r["counts"].items() if k != "seconds"})
                 for r in query(wh, "SELECT run_id, stage, status, counts FROM runs ORDER BY 1")],
    }


@pytest.mark.slow
def test_two_workers_store_exactly_what_one_stores(tmp_path, monkeypatch):
    from autoforge.pipeline import parallel

    pools, fanned = [], []
    real_pool, real_run = parallel.ProcessPoolExecutor, parallel._run
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", lambda **kw: pools.append(kw) or real_pool(**kw))
    monkeypatch.setattr(parallel, "_run", lambda ex, units, order: fanned.append(len(units)) or real_run(ex, units, order))
    stored = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", workers)
        wh = str(tmp_path / f"w{workers}.duckdb")
        out = run_factory(FactoryParams(**BATCH, warehouse=wh))
        assert len(out["environments"]) == 3
        stored[workers] = rows(wh)
        if workers == "1":
            assert not pools and not fanned  # serial: no worker process at all
    assert fanned == [3, 3, 3, 3]  # synthesize, sample, generate, verify: 3 environments each, in workers
    assert [p["max_workers"] for p in pools] == [2]  # one pool for the whole run
    serial, parallel = stored["1"], stored["2"]
    assert sum(t[1] == "verified" for t in serial["tasks"]) >= 6, serial["per_reason"]
    for table in serial:
        assert parallel[table] == serial[table], table


# --------------------------------------------------------------------------- map_envs, fast


ERRORS = {  # built in the worker: some of them do not survive a plain pickle (the point of the test)
    "worker_died": lambda: WorkerDied("timeout", "the tool call ran past 2 s"),  # __init__(kind, message)
    "tool_doc": lambda: ToolDocError("bad JSON", path="x.json", location="line 3"),  # keyword-only fields
    "config": lambda: ConfigError("a bad setting"),
    "key": lambda: KeyError("env_1"),
    "os": lambda: OSError(28, "No space left on device"),
}


def _raise(name: str) -> None:
    raise ERRORS[name]()


def test_results_come_back_in_input_order_and_run_in_workers(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "2")
    units = [partial(pow, i, 2) for i in range(5)]
    assert map_envs(units, sizes=[1, 5, 2, 4, 3]) == [0, 1, 4, 9, 16]  # started 1, 3, 4, 2, 0
    pids = map_envs([os.getpid, os.getpid, os.getpid])
    assert os.getpid() not in pids
    assert map_envs([os.getpid, os.getpid], local=True) == [os.getpid()] * 2  # a stage's client stays here
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "1")
    assert map_envs([os.getpid, os.getpid]) == [os.getpid()] * 2  # 1: serial, in this process


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_an_exception_survives_the_trip_with_its_type_message_and_attributes(name):
    """What a worker sends back (``_call``), pickled as the pool pickles it, re-raised here (``_reraised``)."""
    exc = ERRORS[name]()
    good, sent = pickle.loads(pickle.dumps(_call(partial(_raise, name))))
    got = _reraised(*sent)
    assert not good and type(got) is type(exc) and str(got) == str(exc) and vars(got) == vars(exc)
    assert isinstance(got.__cause__, WorkerTraceback) and "_raise" in str(got.__cause__)


def test_a_workers_exception_is_raised_here_and_stops_the_stage(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "2")
    with pytest.raises(WorkerDied) as got:  # its __init__(kind, message) defeats a plain pickle
        map_envs([partial(pow, 2, 3), partial(_raise, "worker_died")])
    assert got.value.kind == "timeout" and str(got.value) == "the tool call ran past 2 s"
    assert isinstance(got.value.__cause__, WorkerTraceback) and "_raise" in str(got.value.__cause__)


def test_workers_setting_defaults_to_the_usable_cores_and_bad_values_are_refused(monkeypatch):
    monkeypatch.delenv("AUTOFORGE_STAGE_WORKERS", raising=False)
    assert workers_for(1000) == min(usable_cpus(), 1000) and workers_for(1) == 1
    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "8")
    assert workers_for(3) == 3 and workers_for(20) == 8  # never more workers than environments
    for bad, why in (("0", "out of range"), ("-2", "out of range"), ("1.5", "not a whole number"), ("two", "not a number"),
                     ("", "empty"), ("257", "out of range")):
        monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", bad)
        with pytest.raises(ConfigError, match=r"AUTOFORGE_STAGE_WORKERS must be .*\[1, 256\].*e\.g\. AUTOFORGE_STAGE_WORKERS=2") as e:
            workers_for(3)
        assert why in str(e.value)
        with pytest.raises(ConfigError, match="AUTOFORGE_STAGE_WORKERS"):  # the factory refuses it before writing anything
            FactoryParams(**BATCH, warehouse="unused.duckdb").validate_for_run()
