"""Stage 7 flow: curated tasks -> SFT cold start -> ERPO -> before/after evaluation
(docs/design.md#stage-7-erpo-training).

A thin recipe over :func:`autoforge.pipeline.train.run_training`, which reads curated tasks through
``v_curated_tasks`` (train split trained on, test split held out), builds or loads the
policy, trains, evaluates held-out pass^1 before and after, writes ``training_runs`` /
``training_steps`` rows and checkpoints (a re-run with the same config resumes). The flow
adds a progress artifact, the learning curve (markdown, PNG embedded) and the before/after
table as artifacts.
"""

from __future__ import annotations

import base64
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, create_table_artifact, \
    update_progress_artifact
from prefect.cache_policies import NO_CACHE

from flows._common import check_flow_inputs

from autoforge.pipeline.train import run_training, train_config


@task(name="train-policy", cache_policy=NO_CACHE, retries=0)
def train_policy(warehouse: str | None, config: dict, out_dir: str | None, run_id: str | None) -> dict:
    logger = get_run_logger()
    cfg = train_config(config)
    progress_id = create_progress_artifact(progress=0.0, key="train-progress",
                                           description="SFT + ERPO optimizer steps done (%)")
    state = {"sft_total": 0, "last": -1.0}

    def progress(phase: str, step: int, total: int, metrics: dict) -> None:
        if phase == "sft":
            state["sft_total"] = total
        if phase in ("sft", "erpo"):
            done = step + (state["sft_total"] if phase == "erpo" else 0)
            pct = 100.0 * done / max(state["sft_total"] + cfg.steps, 1)
            if pct - state["last"] >= 5 or phase == "erpo":
                update_progress_artifact(progress_id, progress=min(pct, 100.0))
                state["last"] = pct
            keys = ("loss", "reward_mean", "masked_frac", "dropped_tasks", "tokens_per_s")
            logger.info("%s step %d/%d %s", phase, step, total,
                        {k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items() if k in keys})
        elif phase.startswith("eval:") and "success_rate" in metrics:
            logger.info("%s held-out pass^1 = %s", phase, metrics["success_rate"])
        elif phase == "setup":
            logger.info("%s", metrics)

    out = run_training(warehouse, cfg, progress=progress, run_id=run_id, out_dir=out_dir)
    update_progress_artifact(progress_id, progress=100.0)
    return out


@flow(name="train-erpo", flow_run_name="train-erpo", log_prints=True)
def train_flow(
    config: str | None = None,
    warehouse: str | None = None,
    overrides: dict | None = None,
    out_dir: str | None = None,
) -> dict:
    """Train a policy with SFT cold start then ERPO on the warehouse's curated tasks.

    config: a YAML/JSON TrainConfig file (None: the defaults; see autoforge.rl.config.TrainConfig).
    warehouse: DuckDB file or postgresql:// URL (default: AUTOFORGE_WAREHOUSE or ./autoforge.duckdb).
    overrides: TrainConfig fields that replace the file's values (e.g. {"steps": 20, "user_error_rate": 0.2}).
    out_dir: where learning_curve.png and before_after.md go (default: the config's checkpoint_dir).
    """
    from prefect.runtime import flow_run

    check_flow_inputs()
    cfg = train_config(config, overrides)
    out = train_policy(warehouse, cfg.model_dump(mode="json"), out_dir, str(flow_run.get_id() or "") or None)

    png = Path(out["curve"])
    img = base64.b64encode(png.read_bytes()).decode() if png.is_file() else ""
    create_markdown_artifact(
        key="train-learning-curve",
        markdown=f"## Learning curve of {out['train_run_id']}\n\nFile: `{png}`\n\n"
                 + (f"![learning curve](data:image/png;base64,{img})\n" if img else ""),
        description="reward / loss / entropy / clip per step (SFT, then ERPO)")
    if out["table"]:
        create_table_artifact(key="train-before-after", table=out["table"],
                              description=f"held-out pass^1 of {out['train_run_id']}: before training, after SFT, "
                                          "after ERPO")
    create_markdown_artifact(
        key="train-summary",
        markdown=f"### {out['train_run_id']}\n\n{out['table_markdown']}\n\n"
                 f"timings (s): `{out['timings']}`\n\nthroughput (tokens/s): `{out['throughput']}`\n")
    return {k: v for k, v in out.items() if k != "history"}
