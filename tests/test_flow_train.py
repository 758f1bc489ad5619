"""The train-erpo Prefect flow (flows/train.py:train_flow): a thin recipe over run_training that
publishes the curve and the table."""

from __future__ import annotations

import json

import pytest

from autoforge.warehouse import query


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    from autoforge.pipeline import run_factory

    path = str(tmp_path_factory.mktemp("wh") / "factory.duckdb")
    run_factory(warehouse=path, env="hr", tasks_per_env=60)
    return path


def test_train_flow_publishes_curve_and_table(prefect_harness, wh, tmp_path):
    from prefect.client.orchestration import get_client

    from autoforge.rl.config import TrainConfig
    from flows.train import train_flow

    cfg = TrainConfig(tiny_vocab_size=600, tiny_hidden_size=32, tiny_num_layers=2, tiny_num_heads=2, device="cpu",
                      max_tool_calls=3, prompt_tools="used", max_train_tasks=4, max_eval_tasks=2, tasks_per_batch=2,
                      rollouts_per_task=2, max_turns=2, max_new_tokens=10, max_episode_tokens=20, steps=1,
                      sft_epochs=1, sft_batch_size=4, sft_max_examples=4, eval_at=["start", "end"],
                      checkpoint_dir=str(tmp_path / "ckpt"), rollout_concurrency=4, torch_threads=1)
    path = cfg.to_file(tmp_path / "train.yaml")
    out = train_flow(config=str(path), warehouse=wh, overrides={"user_error_rate": 0.2})
    assert out["table"][0]["point"] == "before training" and out["table"][-1]["point"] == "after ERPO"
    row = query(wh, "SELECT status, config FROM training_runs WHERE train_run_id = :r", {"r": out["train_run_id"]})[0]
    stored = json.loads(row["config"]) if isinstance(row["config"], str) else row["config"]
    assert row["status"] == "completed" and stored["user_error_rate"] == 0.2 and stored["data"]["test_tasks"] >= 1

    async def artifacts():
        async with get_client() as client:
            return await client.read_artifacts()

    import asyncio

    arts = {a.key: a for a in asyncio.run(artifacts()) if a.key}
    assert {"train-learning-curve", "train-before-after", "train-summary", "train-progress"} <= set(arts)
    assert "data:image/png;base64," in arts["train-learning-curve"].data
    assert "after ERPO" in str(arts["train-before-after"].data)
