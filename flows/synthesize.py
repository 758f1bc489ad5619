"""Stage 2 flow: tool sets -> environments (state schema + checked tool code).

A thin recipe over :mod:`autoforge.pipeline.synthesize`: read the tool sets, synthesize each
environment in its own Prefect task (a failure in one environment does not stop the others),
persist every result in ONE transaction (under the keep rule of the stage module), publish a table artifact with each environment's
tools, accepted count and rejection reasons.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import Packed, check_flow_inputs, choose_runner, fan_out, stage_runner, unpack
from flows._params import model_flow

from autoforge.envs.synthesis import SynthesisResult, acceptance_table
from autoforge.pipeline import synthesize as stage
from autoforge.types import Run, ToolSet, ToolSpec


@task(name="synthesize-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="synthesize-{toolset.name}")
def synthesize_task(toolset: ToolSet, specs: list[ToolSpec], backend: str, run_id: str, cache: Any,
                    policies: Any = None) -> SynthesisResult:
    return stage.synthesize_one(toolset, unpack(specs), backend, run_id, cache=unpack(cache), policies=unpack(policies))


@task(name="persist-stage", task_run_name="persist-synthesize", cache_policy=NO_CACHE)
def persist_synthesis(results: list[SynthesisResult], run: Run, warehouse: str | None, failed: bool):
    """The stage's one write under the keep rule (a ready environment is never replaced by a worse one)."""
    return stage.persist_results(warehouse, results, run, failed=failed)


@flow(name="synthesize-environments", flow_run_name="synthesize-{backend}-env-{env}", log_prints=True)
@model_flow(stage.SynthesizeParams)
def synthesize_flow(params: stage.SynthesizeParams, warehouse: str | None, batch_id: str | None,
                    task_runner: str | None, dask_address: str | None) -> dict:
    """Synthesize an executable environment for every tool set in the warehouse."""
    check_flow_inputs(params)
    runner_kind, address = choose_runner(task_runner, dask_address)
    logger = get_run_logger()
    todo = stage.load(warehouse, params)
    run = params.run_row(batch_id)
    cache = stage.load_cache(warehouse, params.backend)
    with stage_runner(runner_kind, address) as runner:
        results: list[SynthesisResult] = fan_out(runner, synthesize_task, [
            {"toolset": ts, "specs": Packed(specs), "backend": params.backend, "run_id": run.run_id, "cache": Packed(cache),
             "policies": Packed(policies)}
            for ts, specs, policies in todo], [f"environment {ts.name}" for ts, _, _ in todo])
    run, written, kept = persist_synthesis(quote(results), run, warehouse, failed=len(results) < len(todo))
    for why in kept.values():
        logger.warning("kept the stored environment: %s", why)
    table = acceptance_table(results)
    for row in table:
        logger.info("%s: %s/%s tools accepted (%s)", row["environment"], row["accepted"], row["tools"], row["status"])
    create_table_artifact(
        key="synthesize-environments",
        table=table or [{"environment": "(none)", "status": "-", "tools": 0, "accepted": 0, "acceptance": "-", "rejected": "-"}],
        description=f"Environments synthesized by run {run.run_id} ({params.backend})",
    )
    return stage.summary(results, run, written, kept)
