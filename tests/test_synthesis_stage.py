"""run_synthesis over a warehouse: one write, v_environments, re-runs upsert, loud errors."""

from __future__ import annotations

import pytest

from autoforge.pipeline import run_synthesis
from autoforge.errors import ConfigError
from autoforge.pipeline import run_ingest
from autoforge.warehouse import query


def n(warehouse, table):
    return query(warehouse, f"SELECT count(*) AS n FROM {table}")[0]["n"]


def test_run_synthesis_writes_environments_tools_and_view(warehouse):
    with pytest.raises(ConfigError, match="ingest"):
        run_synthesis(warehouse)
    ingested = run_ingest(warehouse, bundled=True)
    out = run_synthesis(warehouse)
    assert out["counts"]["environments"] == ingested["n_toolsets"] >= 10
    assert out["counts"]["tools"] == ingested["n_tools"]
    rows = query(warehouse, "SELECT * FROM v_environments ORDER BY name")
    assert len(rows) == ingested["n_toolsets"]
    for row in rows:
        assert row["n_tools_accepted"] / row["n_tools"] >= 0.9 and row["status"] in ("ready", "partial")
        assert row["backend"] == "offline" and row["n_collections"] >= 2
        assert row["n_read_tools"] + row["n_write_tools"] == row["n_tools_accepted"]
    assert n(warehouse, "tool_code") == ingested["n_tools"]
    code = query(warehouse, "SELECT name, kind, effect, collection, source FROM tool_code WHERE name = 'find_user_id_by_email' LIMIT 1")[0]
    assert code["kind"] == "lookup" and code["effect"] == "read" and code["source"].startswith("def find_user_id_by_email(")
    run = query(warehouse, "SELECT * FROM runs WHERE stage = 'synthesize'")
    assert len(run) == 1 and run[0]["status"] == "completed"

    again = run_synthesis(warehouse)  # content-hash ids: a re-run upserts
    assert again["run_id"] == out["run_id"]
    assert n(warehouse, "environments") == len(rows) and n(warehouse, "tool_code") == ingested["n_tools"]

    one = run_synthesis(warehouse, env="hotel")
    assert [e["env"] for e in one["environments"]] == ["hotel"]
    with pytest.raises(ConfigError, match="unknown environment 'nope'.*hotel"):
        run_synthesis(warehouse, env="nope")
