"""The ingest flow under Prefect's test harness: writes tool sets to the warehouse, publishes a table
artifact, records rejected documents, and re-running adds no rows."""

from __future__ import annotations

import json
import os

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

pytestmark = pytest.mark.prefect


def counts(warehouse: str) -> dict[str, int]:
    from autoforge.warehouse import query

    return {t: query(warehouse, f"SELECT count(*) AS n FROM {t}")[0]["n"]
            for t in ("tool_docs", "tool_specs", "toolsets", "rejections", "runs")}


def test_ingest_bundled_flow_writes_warehouse_and_artifact(prefect_harness, warehouse):
    from prefect.client.orchestration import get_client

    from flows.ingest import ingest_flow

    summary = ingest_flow(bundled=True, warehouse=warehouse)
    assert summary["toolsets"] and len(summary["toolsets"]) >= 10
    assert summary["rejected"] == 0 and summary["errors"] == []
    assert sum(r["tools"] for r in summary["toolsets"]) == summary["tools"]
    first = counts(warehouse)
    assert first["toolsets"] == len(summary["toolsets"]) and first["tool_specs"] == summary["tools"]
    assert first["runs"] == 1

    again = ingest_flow(bundled=True, warehouse=warehouse)
    assert again["run_id"] == summary["run_id"]
    assert counts(warehouse) == first  # content-hash ids: re-running upserts, never duplicates

    import anyio

    async def latest_artifact():
        async with get_client() as client:
            from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

            arts = await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["ingest-toolsets"])))
            return arts

    arts = anyio.run(latest_artifact)
    assert arts and arts[0].type == "table"
    table = arts[0].data if isinstance(arts[0].data, list) else json.loads(arts[0].data)
    assert {row["toolset"] for row in table} == {r["toolset"] for r in summary["toolsets"]}


def test_ingest_flow_records_rejections_and_keeps_good_docs(prefect_harness, warehouse, tmp_path):
    from autoforge.warehouse import query
    from flows.ingest import ingest_flow

    folder = tmp_path / "shop"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps([{"name": "get_order", "parameters": {"properties": {"order_id": {"type": "string"}}}}]))
    (folder / "bad.json").write_text('{"name": "cancel_order", "parameters": {"$ref": "#/$defs/Nope"}}')
    summary = ingest_flow(paths=[str(folder)], warehouse=warehouse, batch_id="batch_test")
    assert summary["tools"] == 1 and summary["rejected"] == 1
    assert "unresolvable $ref" in summary["errors"][0] and "bad.json" in summary["errors"][0]
    rows = query(warehouse, "SELECT status, error FROM tool_docs ORDER BY path")
    assert [r["status"] for r in rows] == ["rejected", "accepted"]
    [rej] = query(warehouse, "SELECT stage, reason FROM rejections")
    assert rej == {"stage": "ingest", "reason": "unresolvable_ref"}
    [run] = query(warehouse, "SELECT batch_id, status FROM runs")
    assert run == {"batch_id": "batch_test", "status": "completed"}


def test_ingest_flow_without_input_is_a_config_error(prefect_harness):
    from autoforge.errors import ConfigError
    from flows.ingest import ingest_flow

    with pytest.raises(ConfigError):
        ingest_flow()
