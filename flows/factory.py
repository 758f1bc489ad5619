"""The factory: ingest -> synthesize -> sample -> generate -> verify, as subflows of one batch.

A thin recipe: the flow's parameters are the fields of :class:`autoforge.pipeline.FactoryParams`
(flows/_params.py), which derives every stage's parameters (the same derivation
``autoforge.pipeline.run_factory`` uses, so both paths build the same run ids and rows); each stage
runs as its own subflow. The batch id is a hash of the parameters, so
re-running the same batch (after a crash, say) upserts the same rows and adds none.

The task runner (``task_runner``: thread | process | dask, ``dask_address``) is chosen per run
(flows/_common.py) and opened ONCE for the whole batch: every stage subflow submits to the same
thread pool, process pool or Dask cluster, so workers start (and import the package) once, not per
stage.

The default is ``thread``, chosen by measurement (benchmarks/prefect_overhead.py, one run each,
this 2-core machine shared with other jobs, so +-20 points of noise; Prefect's share of the factory
wall time, negative = the flow beat the sequential library path):

    batch                          thread   process   dask (local cluster)
    11 envs x 110 (full corpus)     -38%     -15%      38%
    11 envs x 20                    -28%      43%      34%

The 3-run figure (full corpus, thread, ``--repeat 3``) on a loaded machine (load 8-13): library
125.1 / 43.0 / 43.8 s, flow 69.9 / 53.0 / 62.6 s, shares -79% / 19% / 30%. The same on the quiet
machine (load < 1, 2026-12-01): library 59.4 / 51.1 / 46.1 s, flow 60.7 / 54.9 / 45.0 s, shares
2% / 7% / -2%; median of the shares 2%, share of the medians 7% (target <= 15%: met). What is left
of the flow's extra time: generate's two threads sharing the GIL and ~1-2 s per subflow start and
its artifact.

Two environments run at once, each mostly waiting on its sandbox worker process, so threads
overlap well despite the GIL. Worker processes pay a start-up that 2 cores do not win back: each
imports Prefect and the package and starts its own sandbox and check workers cold (11 x 20 on the
process pool: ingest 0.2 -> 7.5 s, synthesize 5.5 -> 13.5 s); a local Dask cluster also starts a
scheduler and waits for its workers to exit. ``process`` and ``dask`` are for machines with more
cores and for clusters (``dask_address``), where the work spreads further than one process.
"""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from autoforge.pipeline import FactoryParams, environment_yield, funnel_rows
from flows._common import FACTORY_DEFAULT, choose_runner, shared_runner
from flows._params import model_flow
from flows.generate import generate_flow
from flows.ingest import ingest_flow
from flows.sample import sample_flow
from flows.synthesize import synthesize_flow
from flows.verify import verify_flow

SUBFLOWS = {"ingest": ingest_flow, "synthesize": synthesize_flow, "sample": sample_flow, "generate": generate_flow,
            "verify": verify_flow}


@flow(name="factory", flow_run_name="factory-{backend}-seed{seed}-n{tasks_per_env}", log_prints=True)
@model_flow(FactoryParams, run=("task_runner", "dask_address"), run_help={
    "task_runner": "thread | process | dask, one runner for every stage; None: AUTOFORGE_TASK_RUNNER, else thread",
    "dask_address": "the Dask scheduler (tcp://host:8786) of the dask runner; None: AUTOFORGE_DASK_ADDRESS, else a local "
                    "cluster of AUTOFORGE_STAGE_WORKERS worker processes started for this run"})
def factory_flow(params: FactoryParams, task_runner: str | None, dask_address: str | None) -> dict:
    """Run every stage of the AutoForge pipeline on one batch of tool docs."""
    params.validate_for_run()
    warehouse = params.warehouse
    runner_kind, address = choose_runner(task_runner, dask_address, default=FACTORY_DEFAULT)
    batch_id = params.batch_id()
    get_run_logger().info("factory batch %s on the %s task runner%s", batch_id, runner_kind,
                          f" at {address}" if address else "")
    outputs = {}
    with shared_runner(runner_kind, address):
        for name, stage_params in params.stage_params().items():
            fields = stage_params.model_dump(exclude={"env_ids"})  # the flows take a name selection, not ids
            outputs[name] = SUBFLOWS[name](**fields, warehouse=warehouse, batch_id=batch_id, task_runner=runner_kind,
                                           dask_address=address)
    rows = funnel_rows(warehouse)
    create_table_artifact(key="factory-funnel", table=rows, description=f"Stage funnel after batch {batch_id}")
    create_markdown_artifact(
        key="factory-summary",
        markdown="\n".join([f"# Factory batch `{batch_id}`", ""] + [
            f"- **{r['stage']}**: {r['items_in']} in, {r['items_out']} out" for r in rows
        ]),
    )
    names = [e["env"] for e in outputs["synthesize"]["environments"]]
    yields = environment_yield(warehouse, names)
    create_table_artifact(key="factory-environments", table=yields or [{"name": "(none)"}],
                          description=f"Per-environment yield of batch {batch_id} (v_environment_funnel)")
    return {"batch_id": batch_id, "funnel": rows, "environments": names}
