"""The factory: ingest -> synthesize -> sample -> generate -> verify, as subflows of one batch.

A thin recipe: every stage is a subflow over library functions; the batch id is a hash of the
parameters, so re-running the same batch (after a crash, say) upserts the same rows and adds
none. Per-stage limits are parameters, visible and editable in the Prefect UI.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from autoforge.pipeline import FactoryParams, batch_id_for, funnel_rows
from flows.generate import generate_tasks
from flows.ingest import ingest_tool_docs
from flows.sample import sample_tool_sequences
from flows.synthesize import synthesize_environments
from flows.verify import verify_tasks


@flow(name="factory", flow_run_name="factory-{backend}-seed{seed}-n{tasks_per_env}", log_prints=True)
def factory(
    backend: str = "offline",
    tasks_per_env: int = 110,
    seed: int = 0,
    env: str | None = None,
    paths: list[str] | None = None,
    bundled: bool = True,
    max_envs: int | None = None,
    warehouse: str | None = None,
) -> dict:
    """Run every stage of the AutoForge pipeline on one batch of tool docs.

    backend: "offline" (rules, no network) or "openai" (any OpenAI-compatible server from AUTOFORGE_OPENAI_*).
    tasks_per_env: candidate tasks generated per environment before verification.
    seed: random seed of walks, merges and instantiation; same seed -> same batch -> no new rows.
    env: only this environment (tool set name); None = all.
    paths / bundled: tool docs to ingest (files or folders) and/or the bundled corpus.
    max_envs: cap on environments processed (a per-stage limit for quick runs).
    warehouse: DuckDB file or SQLAlchemy URL (default: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb).
    """
    params = FactoryParams(
        backend=backend, tasks_per_env=tasks_per_env, seed=seed, env=env, paths=paths or [], bundled=bundled,
        max_envs=max_envs, warehouse=warehouse,
    )
    params.validate_for_run()
    logger = get_run_logger()
    batch_id = batch_id_for(params)
    logger.info("factory batch %s", batch_id)
    ingest_tool_docs(paths=params.paths, bundled=params.bundled, warehouse=warehouse, batch_id=batch_id)
    synthesize_environments(env=env, backend=backend, warehouse=warehouse, batch_id=batch_id, max_envs=max_envs)
    sample_tool_sequences(env=env, seed=seed, warehouse=warehouse, batch_id=batch_id, tasks_per_env=tasks_per_env,
                          backend=backend, max_envs=max_envs)
    generate_tasks(env=env, seed=seed, warehouse=warehouse, batch_id=batch_id, tasks_per_env=tasks_per_env,
                   backend=backend, max_envs=max_envs)
    verify_tasks(env=env, warehouse=warehouse, batch_id=batch_id, max_envs=max_envs)
    rows = funnel_rows(warehouse)
    create_table_artifact(key="factory-funnel", table=rows, description=f"Stage funnel after batch {batch_id}")
    create_markdown_artifact(
        key="factory-summary",
        markdown="\n".join([f"# Factory batch `{batch_id}`", ""] + [
            f"- **{r['stage']}**: {r['items_in']} in, {r['items_out']} out" for r in rows
        ]),
    )
    return {"batch_id": batch_id, "funnel": rows}
