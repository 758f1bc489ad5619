"""Stage 2 flow: tool sets -> environments (state schema + checked tool code) (DESIGN.md stage 2).

A thin recipe over :mod:`autoforge.envs.stage`: read the tool sets, synthesize each
environment in its own Prefect task (fan-out; a failure in one environment does not stop the
others), persist every result in ONE transaction through the single writer, and publish a
table artifact with each environment's tools, accepted count and rejection reasons.
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import persist_stage, stage_task_runner

from autoforge.envs.stage import STAGE, finish_run, load_inputs, summary, synthesize_one
from autoforge.envs.synthesis import SynthesisResult, acceptance_table, toolset_specs
from autoforge.types import Run, ToolSet, ToolSpec


@task(name="synthesize-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="synthesize-{toolset.name}")
def synthesize_task(toolset: ToolSet, specs: list[ToolSpec], backend: str, run_id: str) -> SynthesisResult:
    return synthesize_one(toolset, specs, backend, run_id)


@flow(name="synthesize-environments", flow_run_name="synthesize-{backend}-env-{env}", log_prints=True, task_runner=stage_task_runner())
def synthesize_environments(
    env: str | None = None,
    backend: str = "offline",
    warehouse: str | None = None,
    batch_id: str | None = None,
    max_envs: int | None = None,
) -> dict:
    """Synthesize an executable environment for every tool set in the warehouse.

    env: only this tool set (by name); None = all.
    backend: "offline" (templates, no network) or "openai" (LLM code with bounded repair; AUTOFORGE_OPENAI_*).
    warehouse: DuckDB file or SQLAlchemy URL (default: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb).
    batch_id: the factory batch this run belongs to (lineage); None when run on its own.
    max_envs: at most this many tool sets (a limit for quick runs).
    """
    logger = get_run_logger()
    toolsets, specs = load_inputs(warehouse, env, max_envs)
    run = Run.make(STAGE, {"env": env, "backend": backend, "max_envs": max_envs}, batch_id)
    todo = [(ts, toolset_specs(ts, specs)) for ts in toolsets]
    futures = [synthesize_task.submit(ts, mine, backend, run.run_id) for ts, mine in todo if mine]
    results: list[SynthesisResult] = []
    for (ts, _), fut in zip([t for t in todo if t[1]], futures):
        try:
            results.append(fut.result())
        except Exception as exc:  # noqa: BLE001 - one broken environment must not sink the batch
            logger.error("environment %s failed: %s", ts.name, exc)
    run = finish_run(run, results)
    written = persist_stage(quote(results), run, warehouse)
    table = acceptance_table(results)
    for row in table:
        logger.info("%s: %s/%s tools accepted (%s)", row["environment"], row["accepted"], row["tools"], row["status"])
    create_table_artifact(
        key="synthesize-environments",
        table=table or [{"environment": "(none)", "status": "-", "tools": 0, "accepted": 0, "acceptance": "-", "rejected": "-"}],
        description=f"Environments synthesized by run {run.run_id} ({backend})",
    )
    return summary(results, run, written)
