"""Checkpoints: model + tokenizer (a loadable model directory), optimizer, RNG, phase/step, config.

Layout under ``checkpoint_dir``::

    sft-000004/    model.safetensors, config.json, tokenizer files, agent.json,
                   trainer_state.json         phase, step, sft_done, config, history, Python RNG state,
                                              the optimizer's param groups and non-tensor state
                   trainer_state.safetensors  the optimizer's tensors (optimizer.<param>.<name>) and the
                                              torch / CUDA RNG states (rng.torch, rng.cuda.<i>)
    erpo-000010/   ...
    agent.json     the run's agent card (autoforge.rl.agent_card), copied into each checkpoint saved
    latest.json    {"path": "erpo-000010", "phase": "erpo", "step": 10}   (written last, atomically)

Data, not code: nothing in a checkpoint folder is ever unpickled, because unpickling a file runs
whatever it says (a planted ``trainer_state.pt`` would run on resume). Trainer state is JSON +
safetensors (format 2). Checkpoints of format 1 (``trainer_state.pt``, a torch pickle) are still
read, with ``torch.load(weights_only=True)``: torch's restricted unpickler builds tensors and plain
containers and refuses anything else before running it; a refused file is a
:class:`~autoforge.errors.CheckpointError`. ``latest.json`` may only name a checkpoint folder
directly inside ``checkpoint_dir`` (no ``..``, no absolute path, no symlink), so a damaged or
planted pointer cannot send a resume elsewhere on the disk.

All or nothing: a checkpoint folder is built beside its place (``.tmp-<name>``), fsynced and
renamed in, and only then does ``latest.json`` (itself written to a temp name and renamed) point to
it, so a run killed at any instant resumes from the last complete checkpoint. The next run removes
what a kill left behind (:func:`clean_staging`). ``step`` counts finished optimizer steps of the phase.

Every damaged or foreign file (truncated safetensors, garbage JSON, wrong shapes, a refused pickle)
is one CheckpointError line naming the file, what is wrong and what to do (the CLI exits 2).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autoforge.errors import CheckpointError, ConfigError
from autoforge import atomic

PHASES = ("sft", "erpo")
STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
LEGACY_STATE = "trainer_state.pt"  # format 1: a torch pickle, read only with weights_only=True
STATE_FORMAT = "autoforge-trainer-state"
STATE_VERSION = 2
POINTER = "latest.json"
STAGING = ".tmp-"  # a model folder being written: .tmp-<name>
REPLACED = ".old-"  # a model folder being replaced by a new copy: .old-<name>
CHECKPOINT_NAME = re.compile(r"^(sft|erpo)-(\d{6,})$")
MAX_HEADER = 100 * 1024 * 1024  # a safetensors header larger than this is not one (the format caps it the same)
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], where: str | Path | None = None) -> None:
    """Restore RNG states from :func:`rng_state` (or a loaded checkpoint); a malformed one is a
    CheckpointError naming ``where`` instead of a TypeError deep in ``random``."""
    try:
        random.setstate(state["python"])
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{where or 'trainer state'}: the saved random-number state cannot be restored "
                              f"({_first_line(exc)}); the file is damaged: delete that checkpoint folder to resume "
                              "from the one before, or the checkpoint folder to start over") from None


DISK_FULL_BYTES = 64 * 1024 * 1024  # a failed save with less free space than this was the disk filling up


def _first_line(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "..."


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


def _fsync_tree(folder: Path) -> None:
    """fsync every file under ``folder`` and the folders themselves: the rename that publishes it must
    not reach the disk before its contents (a power cut would leave a named but empty checkpoint)."""
    for dirpath, _, names in os.walk(folder):
        for name in names:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        atomic.fsync_dir(dirpath)


def save_model_dir(out: str | Path, model, tokenizer=None, extra: dict[str, Any] | None = None,
                   files: dict[str, str] | None = None) -> Path:
    """Write a loadable model directory (weights, config, tokenizer, ``extra`` as the trainer state
    files, ``files``: name -> text) into ``out``, all or nothing: it is built beside ``out``
    (``.tmp-<name>``), fsynced and renamed into place, so a save cut short (killed, disk full)
    leaves no half-written directory. A folder already at ``out`` is moved aside (``.old-<name>``)
    for the rename and removed after; a kill in between is undone by :func:`clean_staging`. A full
    disk is OSError(ENOSPC)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f"{STAGING}{out.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if extra is not None:
            _write_trainer_state(tmp, extra)
        for name, text in (files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
        _fsync_tree(tmp)
    except Exception as exc:  # noqa: BLE001 - whatever the library raised, the half-written copy goes
        shutil.rmtree(tmp, ignore_errors=True)
        full = _disk_full(exc, out.parent)
        if full is not None:
            raise full from exc
        raise
    old = out.parent / f"{REPLACED}{out.name}"
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(out, old)
    os.replace(tmp, out)
    atomic.fsync_dir(out.parent)
    shutil.rmtree(old, ignore_errors=True)
    return out


def clean_staging(root: str | Path) -> list[str]:
    """Remove what a run killed mid-save left in ``root``, before a new run writes there; returns
    what was done, one phrase per item (the trainer reports them).

    ``.tmp-<name>`` folders (a model folder being built) and ``.<file>.<pid>.tmp`` files (an atomic
    write, :mod:`autoforge.atomic`) are incomplete by construction and removed. A
    ``.old-<name>`` folder is the previous complete copy of ``<name>`` during its replacement: it is
    put back when ``<name>`` is missing (killed between the two renames), else removed."""
    root = Path(root)
    if not root.is_dir():
        return []
    done = []
    for p in sorted(root.iterdir()):
        if p.is_symlink():
            continue
        if p.is_dir() and p.name.startswith(STAGING):
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed the unfinished save {p.name}")
        elif p.is_dir() and p.name.startswith(REPLACED):
            target = root / p.name[len(REPLACED):]
            if target.exists():
                shutil.rmtree(p, ignore_errors=True)
                done.append(f"removed the replaced copy {p.name}")
            else:
                os.replace(p, target)
                done.append(f"restored {target.name} from {p.name} (a replacement was cut short)")
        elif p.is_file() and p.name.startswith(".") and p.name.endswith(atomic.TMP_SUFFIX):
            p.unlink(missing_ok=True)
            done.append(f"removed the unfinished write {p.name}")
    return done


# --------------------------------------------------------------------------- trainer state: JSON + safetensors


class OptimizerParamState(BaseModel):
    """One parameter's optimizer state: the names of its tensors (in trainer_state.safetensors as
    ``optimizer.<param>.<name>``) and its plain values."""

    model_config = ConfigDict(extra="forbid")

    tensors: list[str] = Field(default_factory=list)
    values: dict[str, bool | int | float | str | None] = Field(default_factory=dict)


class OptimizerRecord(BaseModel):
    """``optimizer.state_dict()`` without its tensors."""

    model_config = ConfigDict(extra="forbid")

    param_groups: list[dict[str, Any]]
    state: dict[int, OptimizerParamState]


class RngRecord(BaseModel):
    """``random.getstate()``; the torch / CUDA states are tensors (rng.torch, rng.cuda.<i>)."""

    model_config = ConfigDict(extra="forbid")

    python: tuple[int, list[int], float | None]
    cuda_devices: int = Field(0, ge=0)


class TrainerStateRecord(BaseModel):
    """What ``trainer_state.json`` holds (format version 2)."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["autoforge-trainer-state"]
    version: int = Field(ge=STATE_VERSION)
    phase: Literal["sft", "erpo"]
    step: int = Field(ge=0)
    sft_done: bool
    config: dict[str, Any]
    history: list[dict[str, Any]]
    rng: RngRecord
    optimizer: OptimizerRecord | None


def _plain(value: Any, where: str) -> Any:
    """A param-group value as JSON (tuples as lists); anything else is a bug in what we save."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    raise TypeError(f"{where}: {type(value).__name__} cannot be stored in {STATE_JSON}")


def encode_trainer_state(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """``(trainer_state.json document, trainer_state.safetensors tensors)`` of a trainer state dict
    (``{"phase", "step", "sft_done", "optimizer", "rng", "config", "history"}``)."""
    tensors: dict[str, torch.Tensor] = {}
    rng = state["rng"]
    tensors["rng.torch"] = rng["torch"]
    cuda = list(rng.get("cuda") or [])
    for i, t in enumerate(cuda):
        tensors[f"rng.cuda.{i}"] = t
    version, internal, gauss = rng["python"]
    opt = state.get("optimizer")
    record = None
    if opt is not None:
        per_param = {}
        for pid, entries in opt["state"].items():
            names, values = [], {}
            for name, v in entries.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"optimizer.{int(pid)}.{name}"] = v
                    names.append(name)
                else:
                    values[name] = _plain(v, f"optimizer state {pid}.{name}")
            per_param[str(int(pid))] = {"tensors": names, "values": values}
        groups = [{k: _plain(v, f"optimizer param group {k}") for k, v in g.items()} for g in opt["param_groups"]]
        record = {"param_groups": groups, "state": per_param}
    doc = {"format": STATE_FORMAT, "version": STATE_VERSION, "phase": state["phase"], "step": int(state["step"]),
           "sft_done": bool(state["sft_done"]), "config": state.get("config") or {},
           "history": list(state.get("history") or []),
           "rng": {"python": [int(version), [int(x) for x in internal], gauss], "cuda_devices": len(cuda)},
           "optimizer": record}
    return doc, {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}


def _json_default(value: Any) -> Any:
    if hasattr(value, "__float__"):
        return float(value)
    return str(value)


def _write_trainer_state(folder: Path, state: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    doc, tensors = encode_trainer_state(state)
    save_file(tensors, str(folder / STATE_TENSORS), metadata={"format": STATE_FORMAT, "version": str(STATE_VERSION)})
    (folder / STATE_JSON).write_text(json.dumps(doc, default=_json_default), encoding="utf-8")


def decode_trainer_state(doc: Any, tensors: dict[str, torch.Tensor], where: Path) -> dict[str, Any]:
    """The trainer state dict of a trainer_state.json document and its tensors, checked field by
    field; anything missing or malformed is one CheckpointError line naming ``where``."""
    fix = (f"the file is damaged or not an autoforge checkpoint: delete {where.parent} to resume from the checkpoint "
           f"before it, or the checkpoint folder to start over")
    if not isinstance(doc, dict):
        raise CheckpointError(f"{where}: expected a JSON object, got {type(doc).__name__}; {fix}")
    if doc.get("format") != STATE_FORMAT:
        raise CheckpointError(f"{where}: 'format' is {doc.get('format')!r}, not {STATE_FORMAT!r}; {fix}")
    if isinstance(doc.get("version"), int) and doc["version"] > STATE_VERSION:
        raise CheckpointError(f"{where}: format version {doc['version']} is newer than this autoforge reads "
                              f"({STATE_VERSION}); upgrade autoforge")
    try:
        rec = TrainerStateRecord.model_validate(doc)
    except ValidationError as exc:
        errs = exc.errors()
        loc = ".".join(str(p) for p in errs[0]["loc"]) or "(top level)"
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise CheckpointError(f"{where}: field {loc!r}: {errs[0]['msg']}{more}; {fix}") from None

    def tensor(key: str) -> torch.Tensor:
        if key not in tensors:
            raise CheckpointError(f"{where.with_name(STATE_TENSORS)}: tensor {key!r} named in {where.name} is "
                                  f"missing; {fix}")
        return tensors[key]

    gen = tensor("rng.torch")
    if gen.dtype != torch.uint8 or gen.dim() != 1:
        raise CheckpointError(f"{where.with_name(STATE_TENSORS)}: 'rng.torch' is {gen.dtype} {list(gen.shape)}, "
                              f"not a uint8 vector; {fix}")
    version, internal, gauss = rec.rng.python
    rng: dict[str, Any] = {"python": (version, tuple(internal), gauss), "torch": gen}
    if rec.rng.cuda_devices:
        rng["cuda"] = [tensor(f"rng.cuda.{i}") for i in range(rec.rng.cuda_devices)]
    optimizer = None
    if rec.optimizer is not None:
        groups = []
        for i, g in enumerate(rec.optimizer.param_groups):
            params = g.get("params")
            if not isinstance(params, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in params):
                raise CheckpointError(f"{where}: optimizer param group {i} has no list of parameter indices; {fix}")
            groups.append({k: (tuple(v) if isinstance(v, list) and k != "params" else v) for k, v in g.items()})
        state = {pid: {**{name: tensor(f"optimizer.{pid}.{name}") for name in entry.tensors}, **entry.values}
                 for pid, entry in rec.optimizer.state.items()}
        optimizer = {"state": state, "param_groups": groups}
    return {"phase": rec.phase, "step": rec.step, "sft_done": rec.sft_done, "optimizer": optimizer, "rng": rng,
            "config": rec.config, "history": rec.history}


def check_safetensors(path: Path, fix: str) -> dict[str, Any]:
    """The header of the safetensors file ``path`` after checking the file is whole: a valid header
    whose tensors cover the data exactly (a truncated or padded file fails here, in one line, before
    any loader sees it). OS errors pass through (the CLI says them as such)."""
    if path.is_symlink():
        raise CheckpointError(f"{path}: is a symbolic link; a checkpoint or model folder holds its own files, "
                              f"not links to files elsewhere; {fix}")
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{path}: not a complete safetensors file ({size} bytes: shorter than its "
                                  f"8-byte header length); {fix}")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, MAX_HEADER):
            raise CheckpointError(f"{path}: not a complete safetensors file (its header says {n} bytes, the file "
                                  f"has {size}: cut short or not safetensors); {fix}")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not JSON); {fix}") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file (its header is not a JSON object); {fix}")
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise CheckpointError(f"{path}: not a valid safetensors file (tensor {name!r} has no valid data "
                                  f"offsets); {fix}")
        end = max(end, offsets[1])
    if 8 + n + end != size:
        raise CheckpointError(f"{path}: not a complete safetensors file (its tensors need {8 + n + end} bytes, the "
                              f"file has {size}: the write was cut short or the file was damaged); {fix}")
    return header


def _read_json(path: Path, fix: str) -> Any:
    if path.is_symlink():
        raise CheckpointError(f"{path}: is a symbolic link; {fix}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text, so not the JSON it should be; {fix}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {fix}") from None


def _read_tensors(path: Path, fix: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    check_safetensors(path, fix)
    try:
        return load_file(str(path), device="cpu")
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - safetensors' own error type: a damaged file
        raise CheckpointError(f"{path}: cannot be read as safetensors ({_first_line(exc)}); {fix}") from None


def _read_legacy(path: Path, fix: str) -> dict[str, Any]:
    """A format-1 ``trainer_state.pt``, through torch's restricted unpickler only."""
    if path.is_symlink():
        raise CheckpointError(f"{path}: is a symbolic link; {fix}")
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        if exc.errno is not None:
            raise
        raise CheckpointError(f"{path}: cannot be read ({_first_line(exc)}); {fix}") from None
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, RuntimeError, EOFError ...: refused, not run
        raise CheckpointError(f"{path}: refused, it is not a plain-data torch file ({_first_line(exc, 120)}); "
                              "autoforge never runs pickled code from a checkpoint; " + fix) from None
    try:
        doc, tensors = encode_trainer_state(raw)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{path}: not an autoforge trainer state ({type(exc).__name__}: {_first_line(exc)}); "
                              f"{fix}") from None
    return decode_trainer_state(doc, tensors, path)


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    """The trainer state of the checkpoint folder ``path``: ``{"phase", "step", "sft_done", "optimizer",
    "rng", "config", "history", "source"}``. Reads format 2 (JSON + safetensors), or format 1's
    ``trainer_state.pt`` with ``weights_only=True``; never a full unpickle (see the module docstring)."""
    path = Path(path)
    fix = (f"delete {path} to resume from the checkpoint before it, or the whole checkpoint folder "
           f"{path.parent} to start over")
    js, ts, legacy = path / STATE_JSON, path / STATE_TENSORS, path / LEGACY_STATE
    if js.exists() or ts.exists():
        for f in (js, ts):
            if not f.is_file():
                raise CheckpointError(f"{f}: missing (its companion {(ts if f is js else js).name} is there); the "
                                      f"checkpoint is incomplete; {fix}")
        state = decode_trainer_state(_read_json(js, fix), _read_tensors(ts, fix), js)
    elif legacy.is_file():
        state = _read_legacy(legacy, fix)
    else:
        raise CheckpointError(f"{path}: holds no trainer state ({STATE_JSON} + {STATE_TENSORS}); {fix}")
    state["source"] = str(path)
    return state


def restore_optimizer(opt: torch.optim.Optimizer, saved: dict[str, Any] | None, where: str | None = None) -> None:
    """Load a checkpoint's optimizer state into ``opt`` after checking it belongs to the same
    parameters: torch's own load checks only group sizes, and a moment tensor of the wrong shape
    would otherwise fail later, inside the optimizer step, as a traceback."""
    if saved is None:
        return
    src = where or "the checkpoint"
    fix = "resume with the model and config that wrote it, or point checkpoint_dir at a new folder"
    groups, saved_groups = opt.param_groups, saved["param_groups"]
    sizes, saved_sizes = [len(g["params"]) for g in groups], [len(g["params"]) for g in saved_groups]
    if sizes != saved_sizes:
        raise CheckpointError(f"{src}: the optimizer state is for parameter groups of sizes {saved_sizes}, the model "
                              f"has {sizes}; {fix}")
    by_id = dict(zip((i for g in saved_groups for i in g["params"]), (p for g in groups for p in g["params"])))
    for pid, entries in saved["state"].items():
        param = by_id.get(pid)
        if param is None:
            raise CheckpointError(f"{src}: the optimizer state names parameter {pid}, which no group lists; {fix}")
        for name, value in entries.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != param.shape:
                raise CheckpointError(f"{src}: optimizer state {name!r} of parameter {pid} has shape "
                                      f"{list(value.shape)}, the parameter {list(param.shape)}; {fix}")
    try:
        opt.load_state_dict(saved)
    except (ValueError, KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{src}: the optimizer state cannot be loaded ({_first_line(exc)}); {fix}") from None


# --------------------------------------------------------------------------- saving, pointing, pruning


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
    _point_latest(root, name, phase, step)
    _prune(root, keep, final)
    return final


def _point_latest(root: Path, name: str, phase: str, step: int) -> None:
    """Point latest.json at the complete checkpoint ``name`` (atomic: the old pointer or the new one)."""
    atomic.write_text(root / POINTER, json.dumps({"path": name, "phase": phase, "step": step}))


def _agent_card_file(root: Path, phase: str, step: int) -> dict[str, str] | None:
    """The run's agent card (``root/agent.json``, written by the driver) stamped with this checkpoint."""
    from autoforge.rl.agent_card import AGENT_CARD, card_text, for_checkpoint

    path = root / AGENT_CARD
    if not path.is_file():
        return None
    card = _read_json(path, "delete it (the training driver writes it again) or rerun `autoforge train`")
    if not isinstance(card, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(card).__name__}; delete it (the training "
                              "driver writes it again)")
    return {AGENT_CARD: card_text(for_checkpoint(card, phase, step))}


def _checkpoint_order(p: Path) -> tuple[int, int] | None:
    m = CHECKPOINT_NAME.match(p.name)
    return (PHASES.index(m.group(1)), int(m.group(2))) if m else None


def _prune(root: Path, keep: int, current: Path) -> None:
    ckpts = sorted((p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and _checkpoint_order(p)),
                   key=_checkpoint_order)
    for p in ckpts[:-keep]:
        if p != current:
            shutil.rmtree(p, ignore_errors=True)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None when there is none.

    ``latest.json`` must be a JSON object whose ``path`` names a checkpoint folder (``<phase>-<step>``)
    directly inside ``root``: not absolute, no ``..``, not a symlink, resolving inside ``root``."""
    root = Path(root)
    pointer = root / POINTER
    if not pointer.is_file() and not pointer.is_symlink():
        return None
    fix = (f"delete {pointer} to start the run over, or point its 'path' at a checkpoint folder inside {root} "
           "(e.g. {\"path\": \"erpo-000010\"})")
    doc = _read_json(pointer, fix)
    name = doc.get("path") if isinstance(doc, dict) else None
    if not isinstance(name, str):
        raise CheckpointError(f"{pointer}: expected {{\"path\": \"<phase>-<step>\", ...}}, got "
                              f"{json.dumps(doc)[:80]}; {fix}")
    if not CHECKPOINT_NAME.match(name):
        raise CheckpointError(f"{pointer}: 'path' must name a checkpoint folder like erpo-000010 directly inside "
                              f"{root}, got {name!r}; refusing to follow it; {fix}")
    path = root / name
    if path.is_symlink() or (path.exists() and path.resolve().parent != root.resolve()):
        raise CheckpointError(f"{pointer}: 'path' {name!r} is a symbolic link leading outside {root}; refusing to "
                              f"follow it; {fix}")
    if not path.is_dir():
        raise CheckpointError(f"{pointer}: names {name!r}, which is not a folder in {root}; {fix}")
    if not any((path / f).is_file() for f in (STATE_JSON, LEGACY_STATE)):
        raise CheckpointError(f"checkpoint {path} named in {pointer} is incomplete (no {STATE_JSON}); {fix}")
    return path


def verify_checkpoint(path: str | Path) -> dict[str, Any]:
    """The trainer state of the checkpoint folder ``path`` after checking the whole folder the way a
    resume will read it (trainer state, config.json, every weights file's header and size): cheap,
    and done before a run spends minutes on replays and evaluations only to fail on a damaged file."""
    path = Path(path)
    state = load_trainer_state(path)
    fix = (f"delete {path} to resume from the checkpoint before it, or the whole checkpoint folder {path.parent} "
           "to start over")
    config = _read_json(path / "config.json", fix) if (path / "config.json").is_file() else None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path / 'config.json'}: missing or not a JSON object; {fix}")
    files = sorted(f for f in path.glob("*.safetensors") if f.name != STATE_TENSORS)
    if not files:
        raise CheckpointError(f"checkpoint {path} has no *.safetensors weights; {fix}")
    for f in files:
        check_safetensors(f, fix)
    return state


def load_weights(path: str | Path, model) -> None:
    """Load a checkpoint's safetensors weights into ``model`` in place (tied weights allowed missing)."""
    from safetensors.torch import load_file

    path = Path(path)
    fix = (f"delete {path} to resume from the checkpoint before it, or the whole checkpoint folder {path.parent} "
           "to start over")
    files = sorted(f for f in path.glob("*.safetensors") if f.name != STATE_TENSORS)
    if not files:
        raise CheckpointError(f"checkpoint {path} has no *.safetensors weights; {fix}")
    state: dict[str, torch.Tensor] = {}
    for f in files:
        check_safetensors(f, fix)
        try:
            state.update(load_file(str(f)))
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - safetensors' own error type: a damaged file
            raise CheckpointError(f"{f}: cannot be read as safetensors ({_first_line(exc)}); {fix}") from None
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # size mismatch
        detail = next((ln.strip() for ln in str(exc).splitlines() if "size mismatch" in ln), _first_line(exc))
        raise CheckpointError(f"checkpoint {path} does not match the model ({detail}); resume with the same model "
                              "config, or point checkpoint_dir at a new folder") from None
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise CheckpointError(f"checkpoint {path} does not match the model: missing {sorted(set(missing) - tied)[:5]}, "
                              f"unexpected {sorted(unexpected)[:5]}; resume with the same model config")
