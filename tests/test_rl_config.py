"""TrainConfig: every knob documented with its source; YAML/JSON loading fails loudly on bad input."""

from __future__ import annotations

import json

import pytest

from autoforge.errors import ConfigError
from autoforge.rl.config import TrainConfig

SOURCES = ("paper", "DAPO", "GRPO", "ours", "Ours")


def test_every_field_has_a_description_with_a_source():
    desc = TrainConfig.describe()
    assert len(desc) >= 30
    for name, text in desc.items():
        assert len(text) > 20, f"{name} has no real description"
        assert any(s in text for s in SOURCES), f"{name}: description names no source ({SOURCES})"


def test_paper_values_are_quoted_and_defaults_are_erpo():
    cfg = TrainConfig()
    assert "32" in TrainConfig.describe()["tasks_per_batch"] and "8" in TrainConfig.describe()["rollouts_per_task"]
    assert cfg.advantage_level == "env" and cfg.mask_user_errors and cfg.dynamic_sampling and cfg.beta == 0.0


def test_from_file_yaml_and_json(tmp_path):
    y = tmp_path / "train.yaml"
    y.write_text("steps: 3\nadvantage_level: task\nclip_eps_high: 0.2\nadam_betas: [0.9, 0.95]\n")
    cfg = TrainConfig.from_file(y)
    assert cfg.steps == 3 and cfg.advantage_level == "task" and cfg.adam_betas == (0.9, 0.95)
    j = cfg.to_file(tmp_path / "train.json")
    assert TrainConfig.from_file(j) == cfg
    assert json.loads(j.read_text())["steps"] == 3
    assert TrainConfig.from_file(cfg.to_file(tmp_path / "again.yaml")) == cfg


@pytest.mark.parametrize(
    "text,match",
    [
        ("stepz: 3\n", "stepz"),
        ("advantage_level: batch\n", "advantage_level"),
        ("rollouts_per_task: 1\n", "rollouts_per_task"),
        ("tiny_hidden_size: 100\ntiny_num_heads: 3\n", "divisible"),
        ("steps: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_config_raises_config_error(tmp_path, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        TrainConfig.from_file(p)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        TrainConfig.from_file(tmp_path / "nope.yaml")
