"""``autoforge eval`` under the faults that happen in practice (issue 36), in the style of the kill -9
tests of tests/test_faults.py (factory stages), tests/test_safe_exports.py and tests/test_safe_checkpoints.py:

* an evaluation SIGKILLed while it plays its episodes, in the middle of its one write transaction
  (the ``runs`` row, marked completed, and the episodes already inserted; the ``eval_results`` rows not
  yet), or just after that transaction committed, leaves a warehouse that opens, whose ``v_integrity``
  (sql/070) is empty, and that holds either the whole evaluation or nothing of it (no ``eval`` run
  reported complete without its episodes and results); running the same evaluation again completes
  it with exactly the rows of an uninterrupted run (same ids, no duplicates);
* a second writer during the evaluation: the evaluation holds no connection while it plays (every
  connection is short-lived, autoforge/warehouse/engine.py), so an ``autoforge ingest`` or a second
  ``autoforge eval`` then simply runs; while the evaluation holds the file in its write transaction,
  another process waits up to ``AUTOFORGE_LOCK_TIMEOUT`` seconds, then fails with one ``error:
  warehouse ... is in use by process PID ...`` line and exit code 2 (cli/failures.py), having written
  nothing; one that waits long enough finishes after it. Either way nothing is lost.

Crash points are deterministic as in tests/test_faults.py: the evaluation runs in a child process
(``autoforge.cli.main``, as ``autoforge eval`` does) that parks itself at a chosen point (writes a
marker file, then waits) so that the test's SIGKILL, or the second writer, lands exactly there; a
parked child that is not killed goes on when the test creates its release file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoforge.pipeline import FactoryParams, run_factory
from test_faults import FAST, SHOP_DOC  # the small batch (8 curated tasks) and the second writer's tool doc
from test_faults import TABLES as FAULT_TABLES

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
TABLES = (*FAULT_TABLES, "episodes", "eval_results")
EVAL_TABLES = ("episodes", "eval_results")


# --------------------------------------------------------------------------- helpers


def snapshot(warehouse: str) -> dict:
    """Rows per table, the eval runs, episode and result ids (with their scores), integrity violations."""
    from autoforge.warehouse import query

    return {
        "counts": {t: query(warehouse, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in TABLES},
        "eval_runs": sorted((r["run_id"], r["status"]) for r in
                            query(warehouse, "SELECT run_id, status FROM runs WHERE stage = 'eval'")),
        "episodes": sorted((r["episode_id"], r["task_id"], r["trial"], r["reward"]) for r in
                           query(warehouse, "SELECT episode_id, task_id, trial, reward FROM episodes")),
        "results": sorted((r["result_id"], r["env_id"] or "", r["k"], r["pass_hat_k"]) for r in
                          query(warehouse, "SELECT result_id, env_id, k, pass_hat_k FROM eval_results")),
        "violations": query(warehouse, "SELECT * FROM v_integrity"),
    }


def unscored(warehouse: str) -> str:
    """How every episode that did not score 1.0 ended (the message when a snapshot differs: a failed oracle
    episode on a loaded machine says why)."""
    from autoforge.warehouse import query

    rows = query(warehouse, "SELECT task_id, trial, reward, termination, termination_detail FROM episodes "
                            "WHERE reward IS NULL OR reward < 1 ORDER BY task_id, trial")
    return "\n".join(f"{r['task_id']} trial {r['trial']}: reward {r['reward']}, {r['termination']}: "
                     f"{r['termination_detail']}" for r in rows)


def eval_argv(warehouse: str) -> list[str]:
    return ["eval", "--agent", "oracle", "--trials", "2", "--concurrency", "2", "--warehouse", warehouse]


def child_main(spec_json: str) -> None:
    """Entry point of an eval child: optionally park at a point, then run the CLI (``autoforge eval ...``)."""
    spec = json.loads(spec_json)
    if spec.get("pause"):
        _install_pause(spec["pause"], Path(spec["marker"]), Path(spec["release"]))
    from autoforge.cli import main

    sys.exit(main(spec["argv"]))


def _install_pause(point: str, marker: Path, release: Path) -> None:
    def park() -> None:
        marker.write_text(str(os.getpid()))
        deadline = time.monotonic() + 600
        while not release.exists() and time.monotonic() < deadline:  # the test SIGKILLs us here, or releases us
            time.sleep(0.05)

    if point == "play":  # mid-play: inputs read, some episodes played, nothing written (no connection held)
        import autoforge.rollout.batch as batch

        original_episode = batch.run_episode
        calls = {"n": 0}

        def run_episode(*a, **kw):
            calls["n"] += 1
            if calls["n"] == 5:  # of 16 (8 tasks x 2 trials)
                park()
            return original_episode(*a, **kw)

        batch.run_episode = run_episode
    elif point == "write":  # mid-transaction: the runs row (completed) and the episodes upserted, results not yet
        import autoforge.types as types
        import autoforge.warehouse.store as store

        original_row = store._to_row
        parked = {"done": False}

        def to_row(rec):
            if isinstance(rec, types.EvalResult) and not parked["done"]:
                parked["done"] = True
                park()
            return original_row(rec)

        store._to_row = to_row
    elif point == "committed":  # the write transaction committed, the report not yet printed
        import autoforge.pipeline.evaluate as stage

        original_write = stage.write_records

        def write_records(*a, **kw):
            out = original_write(*a, **kw)
            park()
            return out

        stage.write_records = write_records
    else:
        raise ValueError(point)


class Child:
    """A ``python -c`` child running one autoforge command (optionally parked), in its own process group."""

    def __init__(self, argv: list[str], tmp: Path, name: str, *, pause: str | None = None, lock_timeout: float = 120):
        self.tmp, self.name = tmp, name
        self.marker, self.release = tmp / f"{name}.parked", tmp / f"{name}.release"
        self.log = tmp / f"{name}.log"
        spec = json.dumps({"argv": argv, "pause": pause, "marker": str(self.marker), "release": str(self.release)})
        code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_safe_eval; "
                "test_safe_eval.child_main(sys.argv[1])")
        env = {**os.environ, "AUTOFORGE_LOCK_TIMEOUT": str(lock_timeout)}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", code, spec], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_parked(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.marker.exists():
            assert self.proc.poll() is None, f"{self.name} exited before its pause point:\n{self.output()[-4000:]}"
            assert time.monotonic() < deadline, f"{self.name} never reached its pause point"
            time.sleep(0.05)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # no cleanup, no rollback by us (its sandbox workers go too)
        self.proc.wait(30)
        assert self.proc.returncode == -signal.SIGKILL

    def go_on(self) -> None:
        self.release.write_text("go")

    def wait(self, timeout: float = 180) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise

    def finish(self, timeout: float = 180) -> None:
        rc = self.wait(timeout)
        assert rc == 0, f"{self.name} exited {rc}:\n{self.output()[-4000:]}"


@pytest.fixture(scope="module")
def factory_wh(tmp_path_factory) -> str:
    """A small factory warehouse (8 curated tasks in 2 environments), built once; tests work on copies."""
    wh = str(tmp_path_factory.mktemp("factory") / "factory.duckdb")
    run_factory(FactoryParams(**FAST, warehouse=wh))
    assert not Path(f"{wh}.wal").exists()  # closed cleanly: the file alone is the warehouse
    return wh


@pytest.fixture(scope="module")
def before(factory_wh) -> dict:
    """The factory warehouse before any evaluation."""
    snap = snapshot(factory_wh)
    assert snap["counts"]["tasks"] > 0 and not snap["violations"]
    assert snap["counts"]["episodes"] == 0 and not snap["eval_runs"]
    return snap


@pytest.fixture(scope="module")
def reference(factory_wh, tmp_path_factory) -> dict:
    """An uninterrupted `autoforge eval` of the same agent and tasks, on its own copy."""
    tmp = tmp_path_factory.mktemp("ref")
    wh = str(tmp / "ref.duckdb")
    shutil.copy(factory_wh, wh)
    Child(eval_argv(wh), tmp, "reference").finish()
    snap = snapshot(wh)
    assert not snap["violations"]
    assert snap["counts"]["episodes"] == 16 and snap["counts"]["eval_results"] == 6  # 2 envs + overall, k = 1, 2
    assert [s for _, s in snap["eval_runs"]] == ["completed"]
    return snap


@pytest.fixture
def wh(factory_wh, tmp_path) -> str:
    path = str(tmp_path / "eval.duckdb")
    shutil.copy(factory_wh, path)
    return path


def assert_opens_for_writing(warehouse: str) -> None:
    from autoforge.warehouse.engine import connect

    with connect(warehouse, lock_timeout_s=5) as conn:  # a write connection: the file is not held or damaged
        conn.exec_driver_sql("SELECT 1")


# --------------------------------------------------------------------------- SIGKILL


@pytest.mark.parametrize("point", ["play", "write", "committed"])
def test_sigkill_mid_eval_then_rerun_completes_it_without_duplicates(point, wh, before, reference, tmp_path):
    crashed = Child(eval_argv(wh), tmp_path, "crashed", pause=point)
    crashed.wait_parked()
    crashed.kill()

    assert_opens_for_writing(wh)
    partial = snapshot(wh)
    assert not partial["violations"], partial["violations"][:10]
    if point == "committed":  # the one transaction committed before the kill: the whole evaluation is there
        assert partial == reference, unscored(wh)
    else:  # nothing of it: no eval run reported complete, no orphan episodes, no results
        assert partial == before, {t: (n, before["counts"][t]) for t, n in partial["counts"].items()
                                   if n != before["counts"][t]}
        from autoforge.warehouse import query

        assert query(wh, "SELECT count(*) AS n FROM v_eval_results")[0]["n"] == 0

    Child(eval_argv(wh), tmp_path, "rerun").finish()
    done = snapshot(wh)
    assert done == reference, unscored(wh)  # same rows per table, same run, episode and result ids and scores: no duplicates
    assert not done["violations"]


# --------------------------------------------------------------------------- a second writer


def _shop_docs(tmp: Path) -> Path:
    docs = tmp / "docs" / "shop"
    docs.mkdir(parents=True)
    (docs / "tools.json").write_text(json.dumps(SHOP_DOC))
    return docs


def _ingest_argv(docs: Path, warehouse: str) -> list[str]:
    return ["ingest", str(docs), "--warehouse", warehouse]


def _eval_rows(snap: dict) -> dict:
    return {k: snap[k] for k in ("eval_runs", "episodes", "results")} | {
        "counts": {t: snap["counts"][t] for t in EVAL_TABLES}}


def _shop(warehouse: str) -> list[dict]:
    from autoforge.warehouse import query

    return query(warehouse, "SELECT name, n_tools FROM toolsets WHERE name = 'shop'")


def test_ingest_while_eval_plays_runs_at_once_and_both_finish(wh, before, reference, tmp_path):
    """While it plays, the evaluation holds no connection: a writer then runs without waiting."""
    docs = _shop_docs(tmp_path)
    ev = Child(eval_argv(wh), tmp_path, "eval", pause="play")
    ev.wait_parked()
    ingest = Child(_ingest_argv(docs, wh), tmp_path, "ingest", lock_timeout=5)  # would fail if it had to wait 5 s
    ingest.finish(60)
    assert ev.proc.poll() is None  # still parked, mid-play
    ev.go_on()
    ev.finish()

    snap = snapshot(wh)
    assert not snap["violations"], snap["violations"][:10]
    assert _eval_rows(snap) == _eval_rows(reference)  # the evaluation is whole, and once
    assert _shop(wh) == [{"name": "shop", "n_tools": len(SHOP_DOC["tools"])}]  # the ingest is there, and once
    assert snap["counts"]["tool_docs"] == before["counts"]["tool_docs"] + 1
    assert snap["counts"]["tool_specs"] == before["counts"]["tool_specs"] + len(SHOP_DOC["tools"])


def test_writer_during_the_eval_write_gets_the_busy_error_or_waits_and_nothing_is_lost(wh, before, reference,
                                                                                        tmp_path):
    """While the evaluation holds the file in its write transaction, a writer that waits at most
    AUTOFORGE_LOCK_TIMEOUT=1 s fails with one error line naming the holder (exit 2) and writes nothing;
    one that may wait longer finishes after the evaluation."""
    docs = _shop_docs(tmp_path)
    ev = Child(eval_argv(wh), tmp_path, "eval", pause="write")
    ev.wait_parked()

    impatient = Child(_ingest_argv(docs, wh), tmp_path, "impatient", lock_timeout=1)
    assert impatient.wait(60) == 2, impatient.output()[-4000:]  # exit code 2: cli/failures.py, an AutoforgeError
    out = impatient.output()
    assert "Traceback" not in out, out[-4000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"error: warehouse {wh} is in use by process {ev.proc.pid} "), last
    assert "DuckDB allows one process at a time" in last and "AUTOFORGE_LOCK_TIMEOUT" in last, last

    patient = Child(_ingest_argv(docs, wh), tmp_path, "patient", lock_timeout=120)
    time.sleep(2)
    assert patient.proc.poll() is None, patient.output()[-4000:]  # waiting for the lock, not failed
    ev.go_on()
    ev.finish()
    patient.finish(120)

    snap = snapshot(wh)
    assert not snap["violations"], snap["violations"][:10]
    assert _eval_rows(snap) == _eval_rows(reference)
    assert _shop(wh) == [{"name": "shop", "n_tools": len(SHOP_DOC["tools"])}]  # the patient ingest, once; the impatient one left nothing
    assert snap["counts"]["tool_docs"] == before["counts"]["tool_docs"] + 1
    for table in ("tasks", "task_dags", "environments", "tool_code", "verification_results"):
        assert snap["counts"][table] == before["counts"][table], table  # the factory's rows are all still there


def test_second_eval_while_the_first_plays_both_finish_without_duplicates(wh, reference, tmp_path):
    """Two evaluations of the same agent on one warehouse at once: the second runs and writes while
    the first is mid-play; the first then writes the same ids (upsert). Both finish, rows once."""
    first = Child(eval_argv(wh), tmp_path, "first", pause="play")
    first.wait_parked()
    second = Child(eval_argv(wh), tmp_path, "second")
    second.finish()
    assert first.proc.poll() is None
    assert snapshot(wh) == reference, unscored(wh)  # the second evaluation is complete on its own
    first.go_on()
    first.finish()
    snap = snapshot(wh)
    assert snap == reference, unscored(wh)
    assert not snap["violations"]
