"""Checkpoints: model + tokenizer (a loadable model directory), optimizer, RNG, phase/step, config.

Layout under ``checkpoint_dir``::

    sft-000004/    model.safetensors, config.json, tokenizer files, trainer_state.pt, agent.json
    erpo-000010/   ...
    agent.json     the run's agent card (autoforge.rl.agent_card), copied into each checkpoint saved
    latest.json    {"path": "erpo-000010", "phase": "erpo", "step": 10}   (written last, atomically)

A checkpoint directory is complete before ``latest.json`` points to it, so a run killed
mid-save resumes from the previous one. ``step`` counts finished optimizer steps of the phase.
"""

from __future__ import annotations

import errno
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


DISK_FULL_BYTES = 64 * 1024 * 1024  # a failed save with less free space than this was the disk filling up


def _disk_full(exc: BaseException, where: Path) -> OSError | None:
    """``exc`` as the OSError(ENOSPC) it is when a model save ran out of disk: safetensors and
    torch wrap the system error in their own types (or, for torch, lose its text)."""
    text = str(exc).lower()
    try:
        free = shutil.disk_usage(where if where.exists() else where.parent).free
    except OSError:
        free = None
    if "no space left" in text or "os error 28" in text or (free is not None and free < DISK_FULL_BYTES):
        return OSError(errno.ENOSPC, "No space left on device", str(where))
    return None


def save_model_dir(out: str | Path, model, tokenizer=None, extra: dict[str, Any] | None = None,
                   files: dict[str, str] | None = None) -> Path:
    """Write a loadable model directory (weights, config, tokenizer, ``extra`` as trainer_state.pt,
    ``files``: name -> text) into ``out``, all or nothing: it is built beside ``out`` and renamed into
    place, so a save cut short (killed, disk full) leaves no half-written directory. A full disk is
    OSError(ENOSPC)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".tmp-{out.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if extra is not None:
            torch.save(extra, tmp / "trainer_state.pt")
        for name, text in (files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - whatever the library raised, the half-written copy goes
        shutil.rmtree(tmp, ignore_errors=True)
        full = _disk_full(exc, out.parent)
        if full is not None:
            raise full from exc
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def save_checkpoint(root: str | Path, phase: str, step: int, model, tokenizer, optimizer, config: dict,
                    history: list[dict], sft_done: bool, keep: int = 2) -> Path:
    if phase not in PHASES:
        raise ConfigError(f"save_checkpoint: phase must be one of {PHASES}, got {phase!r}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = f"{phase}-{step:06d}"
    final = save_model_dir(root / name, model, tokenizer, {
        "phase": phase,
        "step": step,
        "sft_done": sft_done,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "rng": rng_state(),
        "config": config,
        "history": history,
    }, files=_agent_card_file(root, phase, step))
    pointer = root / ".latest.json.tmp"
    pointer.write_text(json.dumps({"path": name, "phase": phase, "step": step}))
    os.replace(pointer, root / "latest.json")
    _prune(root, keep, final)
    return final


def _agent_card_file(root: Path, phase: str, step: int) -> dict[str, str] | None:
    """The run's agent card (``root/agent.json``, written by the driver) stamped with this checkpoint."""
    from autoforge.rl.agent_card import AGENT_CARD, card_text, for_checkpoint

    path = root / AGENT_CARD
    if not path.is_file():
        return None
    return {AGENT_CARD: card_text(for_checkpoint(json.loads(path.read_text(encoding="utf-8")), phase, step))}


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
