"""Stage 3 flow: tool graphs -> random walks -> merged sequences -> task DAGs.

A thin recipe over :mod:`autoforge.pipeline.sample`: read the environments, fan out one Prefect
task per environment (not per record: Prefect's per-task overhead stays a small share), persist
everything in ONE transaction, and publish a table artifact with each environment's yield.
"""

from __future__ import annotations

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import Packed, check_flow_inputs, choose_runner, fan_out, persist_stage, stage_runner, unpack
from flows._params import model_flow

from autoforge.dags.sample import SampleResult, sample_counts
from autoforge.pipeline import sample as stage
from autoforge.pipeline.common import finish
from autoforge.types import EnvironmentRecord, ToolCode


@task(name="sample-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="sample-{env.name}")
def sample_task(env: EnvironmentRecord, tools: list[ToolCode], params: stage.SampleParams, run_id: str,
                procedures: list[list[str]] | None = None) -> SampleResult:
    return stage.run_one(env, unpack(tools), params, run_id, procedures=procedures)


@flow(name="sample-tool-sequences", flow_run_name="sample-seed{seed}-env-{env}", log_prints=True)
@model_flow(stage.SampleParams, exclude={"env_ids"})
def sample_flow(params: stage.SampleParams, warehouse: str | None, batch_id: str | None, task_runner: str | None,
                dask_address: str | None) -> dict:
    """Build each environment's tool graph, sample walks, merge pairs and turn them into DAGs."""
    check_flow_inputs(params)
    runner_kind, address = choose_runner(task_runner, dask_address)
    run = params.run_row(batch_id)
    inp = stage.load(warehouse, params)
    with stage_runner(runner_kind, address) as runner:
        results: list[SampleResult] = fan_out(runner, sample_task, [
            {"env": e, "tools": Packed(inp.tools.get(e.env_id, [])), "params": params, "run_id": run.run_id,
             "procedures": inp.procedures.get(e.env_id)}
            for e in inp.envs], [f"sampling {e.name}" for e in inp.envs])
    counts = sample_counts(results, 0.0)
    persist_stage(quote(results), finish(run, counts, failed=len(results) < len(inp.envs)), warehouse)
    names = {e.env_id: e.name for e in inp.envs}
    table = [r.row(names.get(r.env_id, "")) for r in results]
    create_table_artifact(key="sample-tool-sequences",
                          table=table or [{"environment": "(none)", "edges": 0, "walks": 0, "merged": 0, "dags": 0, "rejected": 0}],
                          description=f"Tool graphs, sequences and DAGs of run {run.run_id}")
    return counts
