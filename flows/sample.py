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

from autoforge.dags.sample import SampleResult, sample_counts
from autoforge.pipeline import sample as stage
from autoforge.pipeline.common import finish
from autoforge.types import EnvironmentRecord, ToolCode


@task(name="sample-environment", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=2,
      task_run_name="sample-{env.name}")
def sample_task(env: EnvironmentRecord, tools: list[ToolCode], params: stage.SampleParams, run_id: str) -> SampleResult:
    return stage.run_one(env, unpack(tools), params, run_id)


@flow(name="sample-tool-sequences", flow_run_name="sample-seed{seed}-env-{env}", log_prints=True)
def sample_flow(
    env: str | None = None,
    seed: int = 0,
    tasks_per_env: int = 120,
    backend: str = "offline",
    max_envs: int | None = None,
    walks: int | None = None,
    merges: int | None = None,
    min_len: int = 2,
    max_len: int = 5,
    start: str = "auto",
    dag_variants: int = 2,
    warehouse: str | None = None,
    batch_id: str | None = None,
    task_runner: str | None = None,
    dask_address: str | None = None,
) -> dict:
    """Build each environment's tool graph, sample walks, merge pairs and turn them into DAGs.

    env: only this environment (by name); None = all usable ones.
    seed: random seed of the walks, merges and reasoning choices (same seed -> same rows).
    tasks_per_env: the task target downstream; walks and merges default to max(40, 2 * tasks_per_env // 3) each.
    backend: "offline" (name/type binding) or "openai" (the LLM judges candidate edges).
    min_len / max_len: walk lengths, in tool calls (paper Sec. 3.2).
    start: auto (lookup, else any read, else any tool with no required id) | lookup | read | entry | any.
    dag_variants: DAGs per sequence (different reasoning choices).
    task_runner: thread | process | dask; None = AUTOFORGE_TASK_RUNNER, else thread (flows/_common.py).
    dask_address: the Dask scheduler (tcp://host:8786) of the dask runner; None = AUTOFORGE_DASK_ADDRESS, else a local cluster.
    """
    check_flow_inputs(seed=seed, tasks_per_env=tasks_per_env, max_envs=max_envs, walks=walks, merges=merges,
                      min_len=min_len, max_len=max_len, dag_variants=dag_variants)
    runner_kind, address = choose_runner(task_runner, dask_address)
    params = stage.SampleParams(env=env, seed=seed, tasks_per_env=tasks_per_env, backend=backend, max_envs=max_envs,
                                walks=walks, merges=merges, min_len=min_len, max_len=max_len, start=start,
                                dag_variants=dag_variants)
    run = params.run_row(batch_id)
    inp = stage.load(warehouse, params)
    with stage_runner(runner_kind, address) as runner:
        results: list[SampleResult] = fan_out(runner, sample_task, [
            {"env": e, "tools": Packed(inp.tools.get(e.env_id, [])), "params": params, "run_id": run.run_id}
            for e in inp.envs], [f"sampling {e.name}" for e in inp.envs])
    counts = sample_counts(results, 0.0)
    persist_stage(quote(results), finish(run, counts, failed=len(results) < len(inp.envs)), warehouse)
    names = {e.env_id: e.name for e in inp.envs}
    table = [r.row(names.get(r.env_id, "")) for r in results]
    create_table_artifact(key="sample-tool-sequences",
                          table=table or [{"environment": "(none)", "edges": 0, "walks": 0, "merged": 0, "dags": 0, "rejected": 0}],
                          description=f"Tool graphs, sequences and DAGs of run {run.run_id}")
    return counts
