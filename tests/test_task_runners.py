"""The factory on each task runner (flows/_common.py): a REAL ``distributed`` cluster (a scheduler and
2 worker processes on 127.0.0.1) reached through ``autoforge factory --dask-address``, and Prefect's
process pool, store the same verified task ids and row counts as the thread runner on the same
batch; a Dask worker killed mid-stage fails only its environment's task, which runs again, and the
batch completes with the same ids. Plus the choice rules (parameters, settings, errors), fast."""

from __future__ import annotations

import os
import pickle
import signal

import pytest

from autoforge.errors import ConfigError

BATCH = {"max_envs": 2, "tasks_per_env": 5, "seed": 0}
TABLES = ("tool_specs", "environments", "tool_code", "tool_graphs", "tool_sequences", "task_dags", "tasks",
          "verification_results", "rejections")


def stored(wh: str) -> tuple[list[str], dict[str, int]]:
    """(verified task ids, rows per table) of a warehouse."""
    from autoforge.warehouse import query

    ids = [r["task_id"] for r in query(wh, "SELECT task_id FROM tasks WHERE status = 'verified' ORDER BY 1")]
    return ids, {t: query(wh, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in TABLES}


# --------------------------------------------------------------------------- choosing a runner (no Prefect run)


def test_runner_choice_parameters_beat_settings_and_bad_choices_say_what_to_change(monkeypatch):
    from flows._common import FACTORY_DEFAULT, STAGE_DEFAULT, choose_runner

    monkeypatch.delenv("AUTOFORGE_TASK_RUNNER", raising=False)
    monkeypatch.delenv("AUTOFORGE_DASK_ADDRESS", raising=False)
    assert choose_runner(None, None) == (STAGE_DEFAULT, None)
    assert choose_runner(None, None, default=FACTORY_DEFAULT) == (FACTORY_DEFAULT, None)
    assert choose_runner(None, None, default="process") == ("process", None)
    assert choose_runner(None, "tcp://10.0.0.5:8786") == ("dask", "tcp://10.0.0.5:8786")  # an address implies dask
    monkeypatch.setenv("AUTOFORGE_TASK_RUNNER", "dask")
    monkeypatch.setenv("AUTOFORGE_DASK_ADDRESS", "tcp://sched:8786")
    assert choose_runner(None, None) == ("dask", "tcp://sched:8786")
    assert choose_runner("thread", None) == ("thread", None)  # the parameter wins; the address is not used
    with pytest.raises(ConfigError, match="choose one of thread, process, dask"):
        choose_runner("ray", None)
    with pytest.raises(ConfigError, match="needs task_runner 'dask'"):
        choose_runner("process", "tcp://127.0.0.1:8786")
    with pytest.raises(ConfigError, match=r"dask_address 'http://x:1' .* e.g. tcp://127.0.0.1:8786"):
        choose_runner(None, "http://x:1")
    monkeypatch.setenv("AUTOFORGE_TASK_RUNNER", "threads")
    with pytest.raises(ConfigError, match="AUTOFORGE_TASK_RUNNER .* one of thread, process, dask"):
        choose_runner(None, None)


def test_cli_refuses_a_task_runner_for_the_library_path(tmp_path, capsys):
    from autoforge.cli import main

    wh = tmp_path / "w.duckdb"
    assert main(["factory", "--no-prefect", "--task-runner", "dask", "--max-envs", "1", "--warehouse", str(wh)]) == 2
    assert "drop --no-prefect" in capsys.readouterr().err


def test_large_inputs_travel_boxed_even_when_empty():
    from flows._common import Packed, unpack

    for value in (None, [], {"a": [1, 2]}):
        assert unpack(pickle.loads(pickle.dumps(Packed(value)))) == value  # a None cache survives the trip
    assert unpack([1]) == [1]


# --------------------------------------------------------------------------- real runs


@pytest.fixture(scope="module")
def cluster():
    """A real distributed cluster: a scheduler and 2 worker processes (one thread each) on 127.0.0.1."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, scheduler_port=0) as c, distributed.Client(c) as client:
        yield c.scheduler_address, client


@pytest.fixture(scope="module")
def thread_run(prefect_harness, tmp_path_factory):
    from flows.factory import factory_flow

    wh = str(tmp_path_factory.mktemp("thread") / "w.duckdb")
    factory_flow(**BATCH, warehouse=wh, task_runner="thread")
    ids, counts = stored(wh)
    assert len(ids) >= 4, counts
    return ids, counts


@pytest.mark.slow
@pytest.mark.prefect
def test_factory_on_a_dask_cluster_stores_what_the_thread_runner_stores(thread_run, cluster, tmp_path, monkeypatch):
    from autoforge.cli import main

    address, client = cluster
    monkeypatch.setenv("AUTOFORGE_TOOL_TIMEOUT", "3.5")  # set after the workers started: must reach them anyway
    wh = str(tmp_path / "dask.duckdb")
    code = main(["factory", "--max-envs", "2", "--tasks-per-env", "5", "--seed", "0", "--dask-address", address,
                 "--warehouse", wh])
    assert code == 0
    assert stored(wh) == thread_run
    assert set(client.run(lambda: os.environ.get("AUTOFORGE_TOOL_TIMEOUT")).values()) == {"3.5"}


@pytest.mark.slow
@pytest.mark.prefect
def test_factory_on_the_process_pool_stores_what_the_thread_runner_stores(thread_run, tmp_path, monkeypatch):
    from flows.factory import factory_flow

    monkeypatch.setenv("AUTOFORGE_STAGE_WORKERS", "1")  # one worker process is enough to show the rows travel intact
    wh = str(tmp_path / "process.duckdb")
    factory_flow(**BATCH, warehouse=wh, task_runner="process")
    assert stored(wh) == thread_run


class KillOnce:
    """A Dask worker plugin: the first worker to start a ``generate_task`` kills its own process
    (SIGKILL, mid-stage: the task is executing), once across the cluster (an O_EXCL marker file)."""

    name = "kill-once"

    def __init__(self, marker: str, prefix: str = "generate_task"):
        self.marker, self.prefix = marker, prefix

    def transition(self, key, start, finish, **kwargs):
        name = key[0] if isinstance(key, tuple) else key
        if finish != "executing" or not str(name).startswith(self.prefix):
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.prefect
def test_a_worker_killed_mid_stage_fails_only_its_environment_and_the_batch_completes(thread_run, cluster, tmp_path):
    from distributed.diagnostics.plugin import WorkerPlugin

    from flows.factory import factory_flow

    address, client = cluster
    marker = tmp_path / "killed.pid"
    plugin = type("KillOncePlugin", (KillOnce, WorkerPlugin), {})(str(marker))
    client.register_plugin(plugin, name=KillOnce.name)
    try:
        before = set(client.scheduler_info()["workers"])
        wh = str(tmp_path / "killed.duckdb")
        factory_flow(**BATCH, warehouse=wh, task_runner="dask", dask_address=address)
    finally:
        client.unregister_worker_plugin(KillOnce.name)
    assert marker.exists(), "no worker was killed: the test did not test anything"
    killed = int(marker.read_text())
    client.wait_for_workers(2, timeout=60)
    assert killed not in client.run(os.getpid).values()  # the nanny started a new worker process
    assert set(client.scheduler_info()["workers"]) != before
    assert stored(wh) == thread_run  # the killed environment's task ran again; nothing lost, nothing doubled


def test_fan_out_resubmits_a_task_whose_worker_was_lost_and_leaves_out_a_failed_one():
    from flows._common import fan_out, lost_worker

    class KilledWorker(Exception):  # what distributed raises when a task's workers kept dying
        pass

    class Future:
        def __init__(self, outcome):
            self.outcome = outcome

        def result(self):
            if isinstance(self.outcome, BaseException):
                raise self.outcome
            return self.outcome

    class Runner:
        def __init__(self):
            self.submitted = []

        def submit(self, task, params):
            self.submitted.append(params["env"])
            n = self.submitted.count(params["env"])
            if params["env"] == "lost" and n == 1:
                return Future(KilledWorker("worker tcp://127.0.0.1:1 died"))
            if params["env"] == "broken":
                return Future(ValueError("bad environment"))
            return Future(f"{params['env']} done")

    class Task:
        retries = 1

    runner = Runner()
    out = fan_out(runner, Task(), [{"env": "a"}, {"env": "lost"}, {"env": "broken"}], ["a", "lost", "broken"])
    assert out == ["a done", "lost done"]  # the lost one ran again; the broken one is left out, not retried
    assert runner.submitted == ["a", "lost", "broken", "lost"]
    assert lost_worker(KilledWorker()) and not lost_worker(ValueError())
