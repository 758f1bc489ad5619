"""Stage 5 flow: verify generated tasks and curate them (DESIGN.md stage 5).

One Prefect task per environment (replays in one sandboxed environment), ONE persistence step
(tasks with their status, one verification row per check, rejections), and a table artifact.
"""

from __future__ import annotations

from collections import Counter

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote  # large record lists: Prefect need not walk them for futures

from flows._common import persist_stage, stage_task_runner

from autoforge.tasks.stages import StageResult, finish, load_inputs, run_record, stage_counts, verify_env
from autoforge.types import EnvironmentRecord, Task, TaskDag, ToolCode


@task(name="verify-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="verify-{env.name}")
def verify_task(env: EnvironmentRecord, tools: list[ToolCode], tasks: list[Task], dags: list[TaskDag],
                existing: dict[str, str], run_id: str) -> StageResult:
    return verify_env(env, tools, tasks, dags, existing=existing, run_id=run_id)


@flow(name="verify-tasks", flow_run_name="verify-env-{env}", log_prints=True, task_runner=stage_task_runner())
def verify_tasks(
    env: str | None = None,
    warehouse: str | None = None,
    batch_id: str | None = None,
    max_envs: int | None = None,
    recheck: bool = False,
) -> dict:
    """Run every check on the tasks still 'generated' (all tasks with recheck) and mark them verified or rejected."""
    logger = get_run_logger()
    run = run_record("verify", batch_id, {"env": env, "env_ids": [], "max_envs": max_envs, "recheck": recheck})
    inp = load_inputs(warehouse, "verify", env=env, max_envs=max_envs, recheck=recheck)
    todo = [e for e in inp.envs if inp.tasks.get(e.env_id)]
    futures = [verify_task.submit(e, inp.tools.get(e.env_id, []), inp.tasks[e.env_id], inp.dags.get(e.env_id, []),
                                  inp.existing_keys, run.run_id) for e in todo]
    results: list[StageResult] = []
    for e, fut in zip(todo, futures):
        try:
            results.append(fut.result())
        except Exception as exc:  # noqa: BLE001 - one broken environment must not sink the batch
            logger.error("verifying %s failed: %s", e.name, exc)
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
