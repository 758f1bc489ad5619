"""The warehouse on a real PostgreSQL 15 server (throwaway, on 127.0.0.1; see tests/pg_server.py).

The same migrations build it (sql/postgresql/ overrides and the apply-time rewrite of
autoforge.warehouse.dialect); the factory writes the same rows as into DuckDB (the same
verified task ids, the same count per table, the same rows in every v_* view); JSON values
round-trip with their key order; eval and training run through it; two factories writing at
once (two batches) give the serial result with no duplicate; and
`autoforge sql` runs one statement in a read-only transaction. Skipped only where no
PostgreSQL server binaries (or no psycopg) exist. ~40 s here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from pg_server import PgServer, unavailable  # noqa: E402

from autoforge import types as T  # noqa: E402
from autoforge.cli import main  # noqa: E402
from autoforge.pipeline import run_factory  # noqa: E402
from autoforge.pipeline.factory import FactoryParams  # noqa: E402
from autoforge.warehouse import apply_migrations, query, read_records, write_records  # noqa: E402
from autoforge.warehouse.migrations import discover  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BATCH = dict(max_envs=2, tasks_per_env=10, seed=0)  # airline, banking
OTHER = dict(env="car_rental", tasks_per_env=10, seed=0)  # another batch, another environment
TABLES = ["runs", "tool_docs", "tool_specs", "toolsets", "environments", "tool_code", "tool_rules", "tool_graphs",
          "tool_sequences", "task_dags", "tasks", "verification_results", "rejections", "llm_calls"]
pytestmark = pytest.mark.slow  # starts a PostgreSQL server (CI runs it in its `-m slow` step)
KEYS = {"verification_results": "task_id, \"check\"", "runs": "run_id"}


@pytest.fixture(scope="module")
def pg():
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with PgServer() as server:
        yield server


@pytest.fixture(scope="module")
def built(pg, tmp_path_factory):
    """The same small factory batch into a DuckDB file and into a PostgreSQL database."""
    duck = str(tmp_path_factory.mktemp("duck") / "w.duckdb")
    pgdb = pg.create_database("factory")
    for wh in (duck, pgdb):
        run_factory(FactoryParams(warehouse=wh, **BATCH))
    return duck, pgdb


def _ids(wh: str) -> list[str]:
    return [r["task_id"] for r in query(wh, "SELECT task_id FROM tasks WHERE status = 'verified' ORDER BY task_id",
                                        read_only_check=False)]


def _views(wh: str) -> list[str]:
    return [r["table_name"] for r in query(wh, "SELECT table_name FROM information_schema.tables WHERE table_type = 'VIEW' "
                                               "AND table_schema = current_schema() ORDER BY table_name", read_only_check=False)]


TIMED = {"v_stage_budget": {"batch_started_at", "seconds", "share", "ms_per_item", "seconds_per_verified_task"}}  # wall clock: differs per run


def _rows(wh: str, relation: str) -> list[str]:
    """Every row of ``relation`` as comparable text (columns by name; JSON text, numbers, NULLs as Python sees them),
    less its wall-clock columns (``TIMED``)."""
    rows = query(wh, f"SELECT * FROM {relation}", read_only_check=False)
    drop = TIMED.get(relation, set())
    return sorted(json.dumps({k: v for k, v in r.items() if k not in drop}, sort_keys=True, default=str) for r in rows)


def test_082_leaves_no_check_list_over_an_open_vocabulary(pg):
    """tool_docs.format and tool_rules.kind lose their CHECK lists (the Python registries validate them);
    the lifecycle CHECKs stay."""
    url = pg.create_database("vocabulary")
    apply_migrations(url)
    checks = {(r["rel"], r["name"]) for r in query(
        url, "SELECT conrelid::regclass::text AS rel, conname AS name FROM pg_constraint WHERE contype = 'c'",
        read_only_check=False)}
    assert {("tool_docs", "tool_docs_status_check"), ("tool_rules", "tool_rules_probe_check")} <= checks
    assert not {("tool_docs", "tool_docs_format_check"), ("tool_rules", "tool_rules_kind_check")} & checks


def test_migrations_build_postgres_and_keep_duckdb_checksums(pg, tmp_path):
    url = pg.create_database("migrations")
    first = apply_migrations(url)
    assert first["applied"] == [m.name for m in discover()] and first["changed"] == []
    assert apply_migrations(url) == {"applied": [], "already": len(discover()), "changed": []}  # idempotent
    duck = str(tmp_path / "w.duckdb")
    apply_migrations(duck)
    rows = {r["version"]: r for r in query(duck, "SELECT * FROM schema_migrations", read_only_check=False)}
    pg_rows = {r["version"]: r for r in query(url, "SELECT * FROM schema_migrations", read_only_check=False)}
    for m in discover():  # DuckDB records each sql/ file's own checksum; PostgreSQL the file it applied
        assert rows[m.version]["checksum"] == m.checksum and rows[m.version]["name"] == m.name
        assert pg_rows[m.version]["checksum"] == m.checksum_for("postgresql")
        assert (pg_rows[m.version]["checksum"] == m.checksum) == (m.pg_path is None)
    types = {r["column_name"]: r["data_type"] for r in query(
        url, "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'episodes'", read_only_check=False)}
    assert types["messages"] == "json" and types["reward"] == "double precision"


def test_the_factory_writes_the_same_rows_into_postgres_as_into_duckdb(built):
    duck, pgdb = built
    ids = _ids(duck)
    assert len(ids) >= 5 and _ids(pgdb) == ids
    for table in TABLES:
        n = [query(wh, f"SELECT count(*) AS n FROM {table}", read_only_check=False)[0]["n"] for wh in built]
        assert n[0] == n[1], f"{table}: DuckDB {n[0]} rows, PostgreSQL {n[1]}"
    views = _views(duck)
    assert views == _views(pgdb) and {"v_curated_tasks", "v_environment_quality", "v_integrity"} <= set(views)
    for view in views:  # the same rows, values and types as Python reads them (floats, counts, JSON text)
        assert _rows(duck, view) == _rows(pgdb, view), view
    assert query(pgdb, "SELECT * FROM v_integrity", read_only_check=False) == []
    funnel = query(pgdb, "SELECT * FROM v_stage_funnel", read_only_check=False)
    assert all(type(r["n_rejected"]) is int for r in funnel)


def test_json_values_round_trip_with_their_key_order(built):
    duck, pgdb = built
    a, b = (read_records(wh, T.Task) for wh in built)
    assert a == b and a
    for x, y in zip(a, b):  # dict equality ignores order; the factory does not: key order is kept too
        assert json.dumps(x.model_dump(mode="json")) == json.dumps(y.model_dump(mode="json"))
    odd = {"zeta": 1, "a": [1.5, None, True], "ünï": "çödé ' \" \\", "m": {"b": 2, "a": 1}}
    tool = read_records(pgdb, T.ToolCode)[0]
    write_records(pgdb, [tool.model_copy(update={"output_schema": odd})])
    back = read_records(pgdb, T.ToolCode, where="code_id = :c", params={"c": tool.code_id})[0]
    assert json.dumps(back.output_schema) == json.dumps(odd)
    write_records(pgdb, [tool])  # as it was, for the other tests


def test_eval_and_training_run_through_postgres(built, tmp_path, capsys):
    import torch

    from autoforge.pipeline.train import run_training
    from autoforge.rl.config import TrainConfig

    _, pgdb = built
    # the split is drawn from each task id's hash: a 20-task batch may hold no test task at all
    held = query(pgdb, "SELECT count(*) AS n FROM tasks WHERE status = 'verified' AND split = 'test'",
                 read_only_check=False)[0]["n"]
    split = "test" if held else "train"
    assert main(["eval", "--warehouse", pgdb, "--agent", "oracle", "--split", split, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    overall = [r for r in summary["results"] if r.get("env_id") is None]
    assert overall and overall[0]["pass_hat_k"] == 1.0  # the oracle solves every held-out task
    rows = query(pgdb, "SELECT * FROM v_eval_results WHERE env_id IS NULL", read_only_check=False)
    assert len(rows) == 1 and rows[0]["pass_hat_k"] == 1.0 and rows[0]["n_episodes"] >= 1
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = TrainConfig(tiny_vocab_size=600, tiny_hidden_size=32, tiny_num_layers=2, tiny_num_heads=2, device="cpu",
                          prompt_tools="used", max_train_tasks=2, max_eval_tasks=1, tasks_per_batch=1,
                          rollouts_per_task=2, max_turns=2, max_new_tokens=12, max_episode_tokens=24, steps=1, lr=1e-2,
                          micro_batch_size=4, sft_epochs=1, sft_batch_size=2, sft_max_examples=2, eval_at=[],
                          checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, rollout_concurrency=4, seed=1,
                          torch_threads=1)
        out = run_training(pgdb, cfg, out_dir=tmp_path / "out")
    finally:
        torch.set_num_threads(n)
    run = query(pgdb, "SELECT status, config FROM training_runs WHERE train_run_id = :r", {"r": out["train_run_id"]},
                read_only_check=False)
    assert run and run[0]["status"] == "completed" and run[0]["config"]["steps"] == 1
    phases = {r["phase"] for r in query(pgdb, "SELECT phase FROM training_steps WHERE train_run_id = :r",
                                        {"r": out["train_run_id"]}, read_only_check=False)}
    assert phases == {"sft", "erpo"}


_CHILD = """
import sys
from autoforge.pipeline import run_factory
from autoforge.pipeline.factory import FactoryParams
run_factory(FactoryParams(warehouse=sys.argv[1], **{kw}))
"""


def test_two_factories_writing_at_once_give_the_serial_result(pg, built, tmp_path):
    """Two processes of two batches, at once, into one empty database (migrations included): they share the
    ingested docs and tool sets, and each writes its own environments."""
    duck, _ = built
    run_factory(FactoryParams(warehouse=duck, **OTHER))  # the serial reference: BATCH, then OTHER
    url = pg.create_database("concurrent")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD.format(kw=kw), url], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for kw in (BATCH, OTHER)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n\n".join(o[-3000:] for o in outs)
    assert _ids(url) == _ids(duck)
    assert query(url, "SELECT * FROM v_integrity", read_only_check=False) == []
    for table in TABLES:
        n = [query(wh, f"SELECT count(*) AS n FROM {table}", read_only_check=False)[0]["n"] for wh in (duck, url)]
        assert n[0] == n[1], f"{table}: serial DuckDB {n[0]} rows, concurrent PostgreSQL {n[1]}"
    versions = query(url, "SELECT count(*) AS n, count(DISTINCT version) AS d FROM schema_migrations", read_only_check=False)
    assert versions[0]["n"] == versions[0]["d"] == len(discover())


def test_autoforge_sql_is_read_only_on_postgres(pg, built, capsys):
    _, pgdb = built
    reader = pg.create_reader("factory")
    n_tasks = query(pgdb, "SELECT count(*) AS n FROM v_curated_tasks", read_only_check=False)[0]["n"]
    assert main(["sql", "--warehouse", reader, "--format", "json", "SELECT count(*) AS n FROM v_curated_tasks"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": n_tasks}]
    assert main(["sql", "--warehouse", reader, "SELECT current_setting('transaction_read_only') AS ro"]) == 0
    assert "on" in capsys.readouterr().out
    assert main(["sql", "--warehouse", reader, "DELETE FROM tasks"]) != 0  # refused before it reaches the server
    assert "read-only statement" in capsys.readouterr().err
    # a data-modifying CTE parses as a SELECT: the read-only transaction stops it
    assert main(["sql", "--warehouse", reader, "WITH d AS (DELETE FROM tasks RETURNING task_id) SELECT count(*) FROM d"]) != 0
    assert "read-only transaction" in capsys.readouterr().err
    assert query(pgdb, "SELECT count(*) AS n FROM v_curated_tasks", read_only_check=False)[0]["n"] == n_tasks
