"""The ``evaluate`` Prefect flow (flows/evaluate.py:evaluate_flow): a thin recipe over
autoforge.pipeline.evaluate.run that publishes the pass^k table and the report."""

from __future__ import annotations

from test_rollout_support import make_env, make_tools, tasks_and_dags

from autoforge.warehouse import query, write_records


def test_evaluate_flow_stores_results_and_publishes_artifacts(prefect_harness, warehouse):
    import asyncio

    from prefect.client.orchestration import get_client

    from flows.evaluate import evaluate_flow

    tasks, dags = tasks_and_dags()
    write_records(warehouse, [make_env(), *make_tools(), *dags.values(), *tasks])
    s = evaluate_flow(agent="oracle", user="offline", trials=2, split=None, concurrency=2, warehouse=warehouse)
    assert s["n_episodes"] == 6 and s["success_rate"] == 1.0
    rows = query(warehouse, "SELECT count(*) AS n FROM eval_results WHERE eval_id = :e", {"e": s["eval_id"]})
    assert rows[0]["n"] == 4  # k = 1, 2; per environment and overall

    async def artifacts():
        async with get_client() as client:
            return await client.read_artifacts()

    arts = {a.key: a for a in asyncio.run(artifacts()) if a.key}
    assert {"eval-pass-hat-k", "eval-summary"} <= set(arts)
    assert "(overall)" in str(arts["eval-pass-hat-k"].data)
