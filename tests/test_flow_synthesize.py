"""The synthesize flow under Prefect's test harness: one task per environment, one write, a table artifact."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

pytestmark = pytest.mark.prefect


def test_synthesize_flow_fans_out_and_persists_once(prefect_harness, warehouse):
    import anyio
    from prefect.client.orchestration import get_client

    from autoforge.pipeline import run_ingest
    from autoforge.warehouse import query
    from flows.synthesize import synthesize_flow

    run_ingest(warehouse, bundled=True)
    out = synthesize_flow(warehouse=warehouse, max_envs=3)
    assert len(out["environments"]) == 3 and out["counts"]["environments"] == 3
    assert out["written"]["environments"] == 3 and out["written"]["runs"] == 1
    assert query(warehouse, "SELECT count(*) AS n FROM v_environments")[0]["n"] == 3
    assert all(e["acceptance"] >= 0.9 for e in out["environments"])

    async def artifact():
        async with get_client() as client:
            return await client.read_artifacts()

    arts = [a for a in anyio.run(artifact) if a.key == "synthesize-environments"]
    assert arts and "accepted" in str(arts[0].data)
