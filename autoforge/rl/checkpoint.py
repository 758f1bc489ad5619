"""Checkpoints: model + tokenizer (a loadable model directory), optimizer, RNG, phase/step, config.

Layout under ``checkpoint_dir``::

    sft-000004/    model.safetensors, config.json, tokenizer files, trainer_state.pt
    erpo-000010/   ...
    latest.json    {"path": "erpo-000010", "phase": "erpo", "step": 10}   (written last, atomically)

A checkpoint directory is complete before ``latest.json`` points to it, so a run killed
mid-save resumes from the previous one. ``step`` counts finished optimizer steps of the phase.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from autoforge.errors import ConfigError

PHASES = ("sft", "erpo")


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(root: str | Path, phase: str, step: int, model, tokenizer, optimizer, config: dict,
                    history: list[dict], sft_done: bool, keep: int = 2) -> Path:
    if phase not in PHASES:
        raise ConfigError(f"save_checkpoint: phase must be one of {PHASES}, got {phase!r}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{phase}-{step:06d}"
    tmp, final = root / f".tmp-{name}", root / name
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save(
        {
            "phase": phase,
            "step": step,
            "sft_done": sft_done,
            "optimizer": optimizer.state_dict() if optimizer is not None else None,
            "rng": rng_state(),
            "config": config,
            "history": history,
        },
        tmp / "trainer_state.pt",
    )
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    pointer = root / ".latest.json.tmp"
    pointer.write_text(json.dumps({"path": name, "phase": phase, "step": step}))
    os.replace(pointer, root / "latest.json")
    _prune(root, keep, final)
    return final


def _prune(root: Path, keep: int, current: Path) -> None:
    ckpts = sorted((p for p in root.iterdir() if p.is_dir() and p.name.split("-")[0] in PHASES),
                   key=lambda p: (PHASES.index(p.name.split("-")[0]), int(p.name.split("-")[1])))
    for p in ckpts[:-keep]:
        if p != current:
            shutil.rmtree(p, ignore_errors=True)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None when there is none."""
    pointer = Path(root) / "latest.json"
    if not pointer.is_file():
        return None
    path = Path(root) / json.loads(pointer.read_text())["path"]
    if not (path / "trainer_state.pt").is_file():
        raise ConfigError(f"checkpoint {path} named in {pointer} is incomplete; delete latest.json to start over")
    return path


def load_weights(path: str | Path, model) -> None:
    """Load a checkpoint's safetensors weights into ``model`` in place (tied weights allowed missing)."""
    from safetensors.torch import load_file

    files = sorted(Path(path).glob("*.safetensors"))
    if not files:
        raise ConfigError(f"checkpoint {path} has no *.safetensors weights")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(f)))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise ConfigError(f"checkpoint {path} does not match the model: missing {sorted(set(missing) - tied)[:5]}, "
                          f"unexpected {sorted(unexpected)[:5]}; resume with the same model config")


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    # Our own file (optimizer tensors, python RNG tuple): not a foreign pickle.
    return torch.load(Path(path) / "trainer_state.pt", map_location="cpu", weights_only=False)
