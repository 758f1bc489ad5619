"""Evaluate an agent with a simulated user on curated tasks: pass^k per environment and overall.

A thin recipe over :func:`autoforge.pipeline.evaluate.run` (which loads the curated tasks,
plays the episodes concurrently, judges user errors, and writes episodes + eval_results + the
run in one transaction). The flow's parameters are the fields of
:class:`autoforge.pipeline.evaluate.EvalParams` (flows/_params.py), validated before anything runs;
it adds a table artifact of the pass^k rows and a markdown summary with the failures. For an
``hf:<checkpoint>`` agent with an ``agent.json``, a parameter left at its default takes the value
the checkpoint records (as a flag not given on the command line does).
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from autoforge.pipeline import evaluate as stage
from flows._params import model_flow


@task(name="run-eval", retries=0)
def run_eval_task(warehouse: str | None, params: stage.EvalParams) -> dict:
    return stage.run(warehouse, params)


@flow(name="evaluate", flow_run_name="eval-{agent}-{user}-k{trials}", log_prints=True)
@model_flow(stage.EvalParams, run=("warehouse",))
def evaluate_flow(params: stage.EvalParams, warehouse: str | None) -> dict:
    """Play ``trials`` episodes of every curated task and store pass^k for k = 1..trials."""
    params.validate_for_run()
    params = stage.EvalParams(**params.model_dump(exclude_defaults=True))  # set = not left at its default
    logger = get_run_logger()
    summary = run_eval_task(warehouse, params)
    logger.info("eval %s: success rate %s over %d episodes", summary["eval_id"], summary["success_rate"],
                summary["n_episodes"])
    create_table_artifact(key="eval-pass-hat-k", table=[{"env_id": r["env_id"] or "(overall)", **{
        k: v for k, v in r.items() if k != "env_id"}} for r in summary["results"]],
        description=f"pass^k of {summary['agent']} with {summary['user_sim']}")
    create_markdown_artifact(key="eval-summary", markdown="```\n" + stage.format_report(summary) + "\n```")
    return summary
