"""Stage 5 flow: verify generated tasks and curate them.

One Prefect task per environment (replays in one sandboxed environment), ONE persistence step
(tasks with their status, one verification row per check, rejections), and a table artifact;
the recipe is :mod:`autoforge.pipeline.verify`.
"""

from __future__ import annotations

from collections import Counter

from prefect import flow, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import Packed, check_flow_inputs, choose_runner, fan_out, persist_stage, stage_runner, unpack
from flows._params import model_flow

from autoforge.pipeline import verify as stage
from autoforge.pipeline.common import finish
from autoforge.tasks.generate import StageResult, stage_counts
from autoforge.types import EnvironmentRecord


@task(name="verify-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="verify-{env.name}")
def verify_task(env: EnvironmentRecord, inp: stage.VerifyInputs, run_id: str) -> StageResult:
    return stage.run_one(env, unpack(inp), run_id)


@flow(name="verify-tasks", flow_run_name="verify-env-{env}", log_prints=True)
@model_flow(stage.VerifyParams, exclude={"env_ids"})
def verify_flow(params: stage.VerifyParams, warehouse: str | None, batch_id: str | None, task_runner: str | None,
                dask_address: str | None) -> dict:
    """Run every check on the tasks still 'generated' (all tasks with recheck) and mark them verified or rejected."""
    check_flow_inputs(params)
    runner_kind, address = choose_runner(task_runner, dask_address)
    run = params.run_row(batch_id)
    inp = stage.load(warehouse, params)
    todo = inp.todo()
    with stage_runner(runner_kind, address) as runner:
        results: list[StageResult] = fan_out(runner, verify_task, [
            {"env": e, "inp": Packed(inp.only(e)), "run_id": run.run_id} for e in todo], [f"verifying {e.name}" for e in todo])
    counts = stage_counts(results, 0.0)
    persist_stage(quote(results), finish(run, counts, failed=len(results) < len(todo)), warehouse)
    names = {e.env_id: e.name for e in inp.envs}
    table = [{"environment": names.get(r.env_id, r.env_id), "checked": r.attempts,
              "verified": sum(t.status == "verified" for t in r.tasks),
              "failed_checks": ", ".join(f"{k} ({v})" for k, v in Counter(x.reason for x in r.rejections).most_common(3)) or "-"}
             for r in results]
    create_table_artifact(key="verify-tasks", table=table or [{"environment": "(none)", "checked": 0, "verified": 0, "failed_checks": "-"}],
                          description=f"Tasks verified by run {run.run_id}")
    return counts
