"""The factory under the faults that happen in practice (issue 7), through the library path
(``autoforge.pipeline.run_factory``: same stages, batch id and rows as the ``factory`` flow):

* a run SIGKILLed mid-stage (and mid-transaction) and started again completes the batch with the
  same rows as an uninterrupted run: same count per table, same task ids, nothing duplicated;
* two factory processes on one DuckDB file at once both finish and leave it consistent
  (``v_integrity``, sql/070, is empty);
* model-server faults during online synthesis (500s, malformed bodies, timeouts, slow replies,
  invalid JSON) are retried, then recorded; the run completes with a partial yield and says so;
* bad parameters (as typed into the Prefect UI) fail fast with a message that says what to change.

Crash points are made deterministic by a child process that parks itself at a chosen point
(writes a marker file, then sleeps) so that the test's SIGKILL lands exactly there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autoforge.errors import AutoforgeError, ConfigError
from autoforge.pipeline import FactoryParams, run_factory

TESTS = Path(__file__).resolve().parent
FAST = {"max_envs": 2, "tasks_per_env": 4, "seed": 0}
TABLES = ("runs", "tool_docs", "tool_specs", "toolsets", "environments", "tool_code", "tool_graphs", "tool_sequences",
          "task_dags", "tasks", "verification_results", "rejections", "llm_calls")


# --------------------------------------------------------------------------- helpers


def snapshot(warehouse: str) -> dict:
    """Rows per table, task ids with their status, the DAGs the sample stage stored, and the integrity violations."""
    from autoforge.warehouse import query

    return {
        "counts": {t: query(warehouse, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in TABLES},
        "tasks": {r["task_id"]: r["status"] for r in query(warehouse, "SELECT task_id, status FROM tasks")},
        "sample_dags": query(warehouse, "SELECT count(*) AS n FROM task_dags WHERE run_id IN "
                                        "(SELECT run_id FROM runs WHERE stage = 'sample')")[0]["n"],
        "violations": query(warehouse, "SELECT * FROM v_integrity"),
    }


def child_main(spec_json: str) -> None:
    """Entry point of a factory child process: optionally park at a crash point, then run."""
    spec = json.loads(spec_json)
    if spec.get("pause"):
        _install_pause(spec["pause"], Path(spec["marker"]))
    out = run_factory(FactoryParams(**spec["params"]))
    print(json.dumps({"batch_id": out["batch_id"], "stages": list(out["stages"])}))


def _install_pause(point: str, marker: Path) -> None:
    def park() -> None:
        marker.write_text(str(os.getpid()))
        time.sleep(600)  # the test SIGKILLs us here

    if point == "generate":  # mid-stage: sample is stored, generate has read its inputs and started
        import autoforge.pipeline.generate as stages

        original = stages.generate_env
        calls = {"n": 0}

        def generate_env(*a, **kw):
            calls["n"] += 1
            if calls["n"] == 2:
                park()
            return original(*a, **kw)

        stages.generate_env = generate_env
    elif point == "verify-write":  # mid-transaction: task statuses upserted, verification rows not yet
        import autoforge.types as types
        import autoforge.warehouse.store as store

        original_row = store._to_row

        def to_row(rec):
            if isinstance(rec, types.VerificationResult):
                park()
            return original_row(rec)

        store._to_row = to_row
    else:
        raise ValueError(point)


def spawn(params: dict, tmp: Path, name: str, pause: str | None = None) -> tuple[subprocess.Popen, Path]:
    marker = tmp / f"{name}.parked"
    spec = json.dumps({"params": params, "pause": pause, "marker": str(marker)})
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_faults; test_faults.child_main(sys.argv[1])"
    env = {**os.environ, "AUTOFORGE_LOCK_TIMEOUT": "120"}
    if pause == "generate":  # the crash point is patched into this process: its units must run here, not in workers
        env["AUTOFORGE_STAGE_WORKERS"] = "1"
    log = open(tmp / f"{name}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-c", code, spec], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    return proc, marker


def wait_exit(proc: subprocess.Popen, tmp: Path, name: str, timeout: float = 180) -> None:
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert rc == 0, (tmp / f"{name}.log").read_text()[-4000:]


def wait_parked(proc: subprocess.Popen, marker: Path, tmp: Path, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, f"child exited before its crash point:\n{(tmp / f'{name}.log').read_text()[-4000:]}"
        assert time.monotonic() < deadline, "child never reached its crash point"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """An uninterrupted run of the same batch, in its own warehouse."""
    wh = str(tmp_path_factory.mktemp("ref") / "ref.duckdb")
    run_factory(FactoryParams(**FAST, warehouse=wh))
    snap = snapshot(wh)
    assert snap["counts"]["tasks"] > 0 and not snap["violations"]
    return snap


# --------------------------------------------------------------------------- re-run


def test_rerunning_the_same_batch_adds_no_rows(reference, tmp_path):
    """Same parameters -> same batch id and content-hash ids: a second run upserts, adds nothing."""
    wh = str(tmp_path / "twice.duckdb")
    first = run_factory(FactoryParams(**FAST, warehouse=wh))
    once = snapshot(wh)
    second = run_factory(FactoryParams(**FAST, warehouse=wh))
    assert second["batch_id"] == first["batch_id"]
    assert snapshot(wh) == once
    assert once["counts"] == reference["counts"] and once["tasks"] == reference["tasks"]


# --------------------------------------------------------------------------- crash


@pytest.mark.slow
@pytest.mark.parametrize("point", ["generate", "verify-write"])
def test_sigkill_mid_stage_then_rerun_completes_the_batch_without_duplicates(point, reference, tmp_path):
    wh = str(tmp_path / "crash.duckdb")
    params = {**FAST, "warehouse": wh}
    proc, marker = spawn(params, tmp_path, "crashed", pause=point)
    wait_parked(proc, marker, tmp_path, "crashed")
    os.killpg(proc.pid, signal.SIGKILL)  # no cleanup, no rollback by us: DuckDB must drop the open transaction
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL

    partial = snapshot(wh)
    assert not partial["violations"]
    if point == "generate":
        assert partial["sample_dags"] == reference["sample_dags"] > 0  # sample was stored (generate adds boundary DAGs)
        assert partial["counts"]["tasks"] == 0  # generate was not
    else:
        assert set(partial["tasks"]) == set(reference["tasks"])  # generate was stored
        assert set(partial["tasks"].values()) == {"generated"}  # the killed transaction left nothing
        assert partial["counts"]["verification_results"] == 0

    proc, _ = spawn(params, tmp_path, "rerun")
    wait_exit(proc, tmp_path, "rerun")
    done = snapshot(wh)
    assert done["counts"] == reference["counts"]
    assert done["tasks"] == reference["tasks"]  # same task ids, same verdicts
    assert not done["violations"]


# --------------------------------------------------------------------------- concurrency


@pytest.mark.slow
def test_two_factory_processes_on_one_warehouse_both_finish_consistent(reference, tmp_path):
    from autoforge.warehouse import query

    wh = str(tmp_path / "shared.duckdb")
    runs = [spawn({**FAST, "seed": seed, "warehouse": wh}, tmp_path, f"seed{seed}") for seed in (0, 1)]
    for seed, (proc, _) in zip((0, 1), runs):
        wait_exit(proc, tmp_path, f"seed{seed}")  # both complete: the file lock serializes the writes
    snap = snapshot(wh)
    assert not snap["violations"], snap["violations"][:10]
    batches = {seed: FactoryParams(**{**FAST, "seed": seed, "warehouse": wh}).batch_id() for seed in (0, 1)}
    for seed, batch in batches.items():
        stages = query(wh, "SELECT stage, status FROM runs WHERE batch_id = :b", {"b": batch})
        assert sorted(s["stage"] for s in stages) == ["generate", "ingest", "sample", "synthesize", "verify"], seed
        assert all(s["status"] == "completed" for s in stages), stages
        n = query(wh, "SELECT count(*) AS n FROM tasks WHERE batch_id = :b", {"b": batch})[0]["n"]
        assert n > 0, f"batch of seed {seed} left no tasks"
    # the two batches really ran at the same time (their stage intervals overlap)
    spans = [query(wh, "SELECT min(started_at) AS a, max(finished_at) AS b FROM runs WHERE batch_id = :b", {"b": b})[0]
             for b in batches.values()]
    assert spans[0]["a"] < spans[1]["b"] and spans[1]["a"] < spans[0]["b"], spans
    # Not asserted: seed 0's tasks equal the solo reference. Stages read every DAG stored for an
    # environment, so the other batch's DAGs feed this one's generate stage (reported, issue 7).


# --------------------------------------------------------------------------- model-server faults

SHOP_DOC = {
    "description": "A small shop: users and orders. Ids: users U0001, orders O0001.",
    "tools": [
        {"type": "function", "function": {
            "name": "get_user", "description": "Get a user's profile by id.",
            "parameters": {"type": "object", "properties": {"user_id": {"type": "string", "description": "User id, e.g. 'U0001'."}},
                           "required": ["user_id"]}}},
        {"type": "function", "function": {
            "name": "cancel_order", "description": "Cancel a pending or processing order.",
            "parameters": {"type": "object", "properties": {
                "order_id": {"type": "string", "description": "Order id, e.g. 'O0001'."},
                "reason": {"type": "string", "description": "Why the order is cancelled."}},
                "required": ["order_id"]}}},
        {"type": "function", "function": {
            "name": "find_user_id_by_email", "description": "Find a user's id from their email address.",
            "parameters": {"type": "object", "properties": {"email": {"type": "string", "description": "Email address."}},
                           "required": ["email"]}}},
    ],
}
SCHEMA = {"collections": [
    {"name": "users", "entity": "user", "primary_key": "user_id", "id_prefix": "U",
     "fields": [{"name": "user_id"}, {"name": "name"}, {"name": "email", "format": "email"}]},
    {"name": "orders", "entity": "order", "primary_key": "order_id", "id_prefix": "O",
     "fields": [{"name": "order_id"}, {"name": "user_id", "ref": "users"},
                {"name": "status", "enum": ["pending", "processing", "shipped", "cancelled"]}]},
]}
GET_USER = '''
def get_user(state, user_id):
    user = state["users"].get(user_id)
    if user is None:
        return error(f"user {user_id} not found")
    return copy(user)
'''
CANCEL_ORDER = '''
def cancel_order(state, order_id, reason=None):
    order = state["orders"].get(order_id)
    if order is None:
        return error(f"order {order_id} not found")
    if order["status"] not in ("pending", "processing"):
        return error(f"order {order_id} is {order['status']}")
    order["status"] = "cancelled"
    return copy(order)
'''


def _request_key(body: dict) -> str:
    """'state_schema' or the tool name a chat-completions request is about."""
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        try:
            payload = json.loads(m["content"])
        except (TypeError, ValueError):
            continue
        if isinstance(payload, dict) and isinstance(payload.get("tool"), dict):
            return payload["tool"].get("name", "?")
        if isinstance(payload, dict) and "toolset" in payload:
            return "state_schema"
    return "?"


def test_model_server_faults_are_retried_then_recorded_and_the_run_reports_a_partial_yield(tmp_path):
    from stub_openai_server import StubOpenAIServer, error, json_reply, malformed, reply, slow

    from autoforge.pipeline import run_synthesis
    from autoforge.pipeline import run_ingest
    from autoforge.settings import get_settings
    from autoforge.warehouse import query

    docs = tmp_path / "docs" / "shop"
    docs.mkdir(parents=True)
    (docs / "tools.json").write_text(json.dumps(SHOP_DOC))
    wh = str(tmp_path / "faults.duckdb")
    assert run_ingest(wh, paths=[str(docs)])["n_tools"] == 3

    good = {
        "state_schema": json_reply(SCHEMA),
        "get_user": json_reply({"source": GET_USER, "effect": "read", "collection": "users"}),
        "cancel_order": json_reply({"source": CANCEL_ORDER, "effect": "write", "collection": "orders"}),
    }
    faults = {
        "state_schema": [error(500, "overloaded"), malformed()],     # 5xx, then a body that is not JSON
        "get_user": [slow(good["get_user"], 3.0)],                  # slower than the 1 s client timeout
        "cancel_order": [reply("Sure! Here is the code: def cancel_order(...")],  # 200, content not JSON
        "find_user_id_by_email": [error(500)] * 10,                 # never recovers
    }

    def answer(body: dict):
        key = _request_key(body)
        if faults.get(key):
            return faults[key].pop(0)
        return good.get(key) or error(503, f"stub: no answer for {key}")

    with StubOpenAIServer(default=answer) as srv:
        settings = get_settings(openai_base_url=srv.base_url, openai_model="stub-model", llm_timeout_s=1.0,
                                llm_max_retries=2, llm_max_repairs=1)
        t0 = time.monotonic()
        summary = run_synthesis(wh, backend="openai", settings=settings)
        elapsed = time.monotonic() - t0
        keys = [_request_key(b) for b in srv.requests]

    # retried: every fault but the permanent one was followed by a good answer
    assert keys.count("state_schema") == 3 and keys.count("get_user") == 2 and keys.count("cancel_order") == 2
    assert keys.count("find_user_id_by_email") == 3  # 1 + llm_max_retries, then given up (bounded)
    assert elapsed < 30
    # the run completes with a partial yield and says so
    env = summary["environments"][0]
    assert summary["counts"]["partial"] == 1 and summary["counts"]["tools_accepted"] == 2
    assert summary["table"][0]["status"] == "partial" and "find_user_id_by_email" in summary["table"][0]["rejected"]
    stored = query(wh, "SELECT status, n_tools, n_tools_accepted, reason FROM environments")
    assert [(r["status"], r["n_tools"], r["n_tools_accepted"]) for r in stored] == [("partial", 3, 2)]
    assert "find_user_id_by_email" in stored[0]["reason"]
    rej = query(wh, "SELECT reason, detail FROM rejections WHERE stage = 'synthesize'")
    assert [r["reason"] for r in rej] == ["llm_error"] and "500" in rej[0]["detail"]
    # every failed attempt is on record with its outcome (token/latency accounting, debugging)
    calls = query(wh, "SELECT step, outcome FROM llm_calls")
    assert len(calls) == len(keys), (calls, keys)
    assert sorted(c["outcome"] for c in calls if c["outcome"] == "ok") == ["ok"] * 3  # schema, get_user, cancel_order
    assert {c["outcome"] for c in calls} - {"ok"}, "failed attempts were not recorded"
    assert env["status"] == "partial"


# --------------------------------------------------------------------------- bad parameters


@pytest.mark.parametrize("params, says", [
    ({"tasks_per_env": -3}, "tasks_per_env must be a positive"),
    ({"tasks_per_env": 0}, "tasks_per_env must be a positive"),
    ({"max_envs": -1}, "max_envs must be positive"),
    ({"seed": -1}, "seed must be >= 0"),
    ({"backend": "vllm"}, "choose one of offline, openai"),
    ({"paths": ["/no/such/docs"], "bundled": False}, "does not exist"),
    ({"bundled": False}, "give paths"),
])
def test_bad_parameters_fail_before_any_work_with_what_to_change(params, says, tmp_path):
    wh = tmp_path / "never.duckdb"
    with pytest.raises(ConfigError, match=says):
        run_factory(FactoryParams(**params, warehouse=str(wh)))
    assert not wh.exists()  # nothing was started


def test_openai_backend_without_a_server_url_says_which_variable_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("AUTOFORGE_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="AUTOFORGE_OPENAI_BASE_URL"):
        FactoryParams(backend="openai", warehouse=str(tmp_path / "w.duckdb")).validate_for_run()


def test_unknown_environment_names_the_valid_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown environment 'atlantis'.*airline.*retail"):
        run_factory(FactoryParams(env="atlantis", tasks_per_env=2, warehouse=str(tmp_path / "w.duckdb")))


def test_unknown_environment_fails_before_any_work(tmp_path):
    wh = tmp_path / "w.duckdb"
    with pytest.raises(ConfigError):
        run_factory(FactoryParams(env="atlantis", tasks_per_env=2, warehouse=str(wh)))
    assert not wh.exists()


def _init(path: Path) -> bool:
    from autoforge.warehouse import apply_migrations

    apply_migrations(str(path))
    return True


def test_stage_on_a_missing_or_empty_warehouse_says_what_to_run_first(tmp_path):
    from autoforge.pipeline import run_synthesis

    with pytest.raises(AutoforgeError, match="does not exist"):
        run_synthesis(str(tmp_path / "missing.duckdb"))
    with pytest.raises(ConfigError, match="ingest"):  # an empty warehouse: run ingest first
        run_synthesis(str(tmp_path / "empty.duckdb") if _init(tmp_path / "empty.duckdb") else "")


@pytest.mark.parametrize("where", ["dir", "empty"])
def test_unusable_warehouse_fails_fast_with_what_to_change(where, tmp_path):
    value = str(tmp_path) if where == "dir" else ""
    with pytest.raises(ConfigError, match="warehouse"):
        FactoryParams(warehouse=value, max_envs=1, tasks_per_env=2).validate_for_run()


def test_unusable_warehouse_is_at_least_an_autoforge_error(tmp_path):
    with pytest.raises(AutoforgeError, match="warehouse"):
        run_factory(FactoryParams(warehouse=str(tmp_path), max_envs=1, tasks_per_env=2))
