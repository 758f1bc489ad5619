"""Safe to stop, safe to load (issue 36): checkpoints and model folders are data, never code; a damaged
or foreign one is one line and exit 2; a training run killed at any instant resumes from its last
complete checkpoint and leaves no half-written file.

* A planted pickle (``trainer_state.pt`` in a checkpoint, ``pytorch_model.bin`` in a model folder)
  whose unpickling would create a sentinel file never runs: on resume, on ``autoforge train`` and on
  ``autoforge eval --agent hf:DIR``.
* ``latest.json`` naming ``../elsewhere``, an absolute path or a symlink leading out is refused.
* Truncated safetensors, garbage JSON, garbage trainer state, wrong shapes: one ``error:`` line naming
  the file, exit 2, no traceback (the CLI as a subprocess for the pickle and truncation cases).
* SIGKILL at several points of a checkpoint save, and in the middle of the run's evaluation
  write, then a resume: it continues from the last complete checkpoint, ends with the weights of an
  uninterrupted run, and nothing half-written is left.

Crash points are deterministic the way tests/test_faults.py makes them: the child process parks at
the chosen point (writes a marker file, then sleeps) and the test SIGKILLs it there.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from autoforge.errors import CheckpointError
from autoforge import atomic
from autoforge.rl import checkpoint as ckpt
from autoforge.rl.config import TrainConfig
from autoforge.rl.policy import load_policy
from autoforge.rl.synthetic import make_synthetic_rollout_fn, synthetic_tasks
from autoforge.rl.trainer import make_optimizer, train

from test_rl_run import ENV, one_thread, one_torch_thread, wh  # noqa: F401  (the one-environment factory warehouse, one torch thread)
from test_rl_trainer import base_dir  # noqa: F401  (the tiny policy folder)

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


# --------------------------------------------------------------------------- helpers


class Planted:
    """Unpickling this creates ``path``: what a malicious checkpoint would do instead (os.system ...)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def plant_pickle(target: Path, sentinel: Path, zipped: bool) -> None:
    """A file at ``target`` whose unpickling creates ``sentinel`` (torch's zip format or a bare pickle)."""
    if zipped:
        torch.save({"phase": "erpo", "step": 1, "payload": Planted(sentinel)}, target)
    else:
        target.write_bytes(pickle.dumps({"phase": "erpo", "step": 1, "payload": Planted(sentinel)}))


def _cfg(tmp_path: Path, **kw) -> TrainConfig:
    base = dict(steps=3, tasks_per_batch=2, rollouts_per_task=4, micro_batch_size=8, lr=1e-3, max_new_tokens=6,
                checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, device="cpu", sft_epochs=0, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def one_checkpoint(base_dir: Path, root: Path) -> Path:
    """A checkpoint (erpo-000001) of the tiny policy with a real AdamW state, saved without training."""
    pol = load_policy(base_dir, device="cpu")
    opt = make_optimizer(pol.model, 1e-3, _cfg(root))
    pol.model(input_ids=torch.tensor([[1, 2, 3]])).logits.sum().backward()
    opt.step()
    return ckpt.save_checkpoint(root, "erpo", 1, pol.model, pol.tokenizer, opt, {"seed": 3}, [{"phase": "erpo",
                                                                                               "step": 1}], True)


def leftovers(root: Path) -> list[str]:
    """Staging folders and temp files anywhere under ``root``: what a cut-short write leaves."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.startswith((ckpt.STAGING, ckpt.REPLACED)) or p.name.endswith(atomic.TMP_SUFFIX))


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "autoforge.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def one_error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


# --------------------------------------------------------------------------- the format: data, not code


def test_a_checkpoint_is_json_and_safetensors_and_reads_back_exactly(base_dir, tmp_path):
    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    names = sorted(p.name for p in path.iterdir())
    assert {ckpt.STATE_JSON, ckpt.STATE_TENSORS, "model.safetensors", "config.json"} <= set(names)
    assert not [n for n in names if n.endswith(ckpt.PICKLE_SUFFIXES)], names  # nothing that would be unpickled
    doc = json.loads((path / ckpt.STATE_JSON).read_text())
    assert doc["format"] == "autoforge-trainer-state" and doc["version"] == 2 and doc["phase"] == "erpo"
    state = ckpt.load_trainer_state(path)
    assert state["step"] == 1 and state["sft_done"] is True and state["history"] == [{"phase": "erpo", "step": 1}]
    assert isinstance(state["rng"]["python"], tuple) and state["rng"]["torch"].dtype == torch.uint8
    # the optimizer state goes back into a fresh optimizer of the same model and equals what was saved
    pol = load_policy(base_dir, device="cpu")
    opt = make_optimizer(pol.model, 1e-3, _cfg(tmp_path))
    ckpt.restore_optimizer(opt, state["optimizer"], state["source"])
    saved = opt.state_dict()
    assert saved["param_groups"][0]["betas"] == tuple(_cfg(tmp_path).adam_betas)
    assert all(torch.equal(saved["state"][k]["exp_avg"], state["optimizer"]["state"][k]["exp_avg"])
               for k in saved["state"])
    ckpt.set_rng_state(state["rng"], path)
    assert ckpt.latest_checkpoint(tmp_path / "ckpt") == path


def test_an_old_trainer_state_pt_is_read_with_weights_only(base_dir, tmp_path):
    """Format 1 (a torch pickle of plain data) still resumes: torch's restricted unpickler reads it."""
    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    state = ckpt.load_trainer_state(path)
    legacy = {k: state[k] for k in ("phase", "step", "sft_done", "optimizer", "rng", "config", "history")}
    torch.save(legacy, path / ckpt.LEGACY_STATE)
    (path / ckpt.STATE_JSON).unlink()
    (path / ckpt.STATE_TENSORS).unlink()
    again = ckpt.load_trainer_state(path)
    assert again["step"] == 1 and again["rng"]["python"] == state["rng"]["python"]
    assert ckpt.latest_checkpoint(tmp_path / "ckpt") == path


@pytest.mark.parametrize("zipped", [True, False], ids=["torch-zip", "bare-pickle"])
def test_a_planted_trainer_state_pickle_never_runs_on_resume(base_dir, tmp_path, zipped):
    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    (path / ckpt.STATE_JSON).unlink()
    (path / ckpt.STATE_TENSORS).unlink()
    sentinel = tmp_path / "PWNED"
    plant_pickle(path / ckpt.LEGACY_STATE, sentinel, zipped)
    cfg = _cfg(tmp_path, steps=1)
    with pytest.raises(CheckpointError, match=r"trainer_state\.pt: refused.*never runs pickled code"):
        train(load_policy(base_dir, device="cpu"), synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=4), cfg)
    assert not sentinel.exists()


# --------------------------------------------------------------------------- latest.json stays inside


@pytest.mark.parametrize("pointer", ["../elsewhere/erpo-000001", "/tmp/erpo-000001", "..", "erpo-000001/../..",
                                     "symlink"])
def test_latest_json_may_only_name_a_folder_inside_the_checkpoint_folder(base_dir, tmp_path, pointer):
    elsewhere = one_checkpoint(base_dir, tmp_path / "elsewhere")  # a complete checkpoint outside ckpt/
    root = tmp_path / "ckpt"
    root.mkdir()
    if pointer == "symlink":
        (root / "erpo-000001").symlink_to(elsewhere, target_is_directory=True)
        pointer = "erpo-000001"
    (root / "latest.json").write_text(json.dumps({"path": pointer, "phase": "erpo", "step": 1}))
    with pytest.raises(CheckpointError, match="refusing to follow it") as e:
        ckpt.latest_checkpoint(root)
    assert str(root / "latest.json") in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------- damaged files: one line, exit 2


def _damage(path: Path, what: str) -> str:
    """Damage the checkpoint folder ``path`` as ``what``; returns the file the error must name."""
    if what == "garbage-latest":
        (path.parent / "latest.json").write_text("{not json")
        return "latest.json: not JSON"
    if what == "latest-not-object":
        (path.parent / "latest.json").write_text("[1, 2]")
        return "latest.json: expected"
    if what == "garbage-state-json":
        (path / ckpt.STATE_JSON).write_text("\x00\x01 garbage")
        return "trainer_state.json: not JSON"
    if what == "wrong-state-fields":
        doc = json.loads((path / ckpt.STATE_JSON).read_text())
        doc["step"] = "many"
        (path / ckpt.STATE_JSON).write_text(json.dumps(doc))
        return "trainer_state.json: field 'step'"
    if what == "truncated-state-tensors":
        f = path / ckpt.STATE_TENSORS
        f.write_bytes(f.read_bytes()[:1000])
        return "trainer_state.safetensors: not a complete safetensors file"
    if what == "garbage-legacy-state":
        (path / ckpt.STATE_JSON).unlink()
        (path / ckpt.STATE_TENSORS).unlink()
        (path / ckpt.LEGACY_STATE).write_bytes(b"PK\x03\x04 this is not a torch file")
        return "trainer_state.pt: refused"
    if what == "truncated-weights":
        f = path / "model.safetensors"
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
        return "model.safetensors: not a complete safetensors file"
    raise ValueError(what)


DAMAGE = ["garbage-latest", "latest-not-object", "garbage-state-json", "wrong-state-fields", "truncated-state-tensors",
          "garbage-legacy-state", "truncated-weights"]


@pytest.mark.parametrize("what", DAMAGE)
def test_a_damaged_checkpoint_is_one_line_naming_the_file_exit_2(wh, base_dir, tmp_path, capsys, what):
    """`autoforge train` on a checkpoint folder damaged one way: checked whole before any work."""
    from autoforge.cli import main

    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    says = _damage(path, what)
    code = main(["train", "--warehouse", wh, "--set", f"checkpoint_dir={tmp_path / 'ckpt'}", "--set", "steps=1",
                 "--set", "sft_epochs=0", "--set", f"envs=[{ENV}]", "--set", "max_train_tasks=2",
                 "--out", str(tmp_path / "out")])
    line = one_error_line(capsys.readouterr().err)
    assert code == 2 and says in line, line
    assert "delete" in line  # and says what to do


def test_a_checkpoint_of_another_model_is_refused_on_resume(base_dir, tmp_path):
    """Wrong shapes: a checkpoint whose weights or optimizer belong to another model."""
    from autoforge.rl.policy import build_tiny_policy

    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    other = load_policy(build_tiny_policy(tmp_path / "other", ["a b c d e f g"] * 50, vocab_size=300, hidden_size=32,
                                          num_layers=1, num_heads=2), device="cpu")
    with pytest.raises(CheckpointError, match="does not match the model"):
        ckpt.load_weights(path, other.model)
    state = ckpt.load_trainer_state(path)
    with pytest.raises(CheckpointError, match="optimizer state"):
        ckpt.restore_optimizer(make_optimizer(other.model, 1e-3, _cfg(tmp_path)), state["optimizer"], str(path))


@pytest.mark.slow
def test_the_train_command_never_runs_a_planted_pickle(wh, base_dir, tmp_path):
    """The CLI as a subprocess: a planted trainer_state.pt is refused, one line, exit 2, no traceback."""
    path = one_checkpoint(base_dir, tmp_path / "ckpt")
    (path / ckpt.STATE_JSON).unlink()
    (path / ckpt.STATE_TENSORS).unlink()
    sentinel = tmp_path / "PWNED"
    plant_pickle(path / ckpt.LEGACY_STATE, sentinel, zipped=True)
    out = cli("train", "--warehouse", wh, "--set", f"checkpoint_dir={tmp_path / 'ckpt'}", "--set", "steps=1",
              "--set", "sft_epochs=0", "--set", f"envs=[{ENV}]", "--out", str(tmp_path / "out"), cwd=tmp_path)
    line = one_error_line(out.stderr)
    assert out.returncode == 2 and "trainer_state.pt: refused" in line, out.stderr
    assert not sentinel.exists()


# --------------------------------------------------------------------------- model folders: eval --agent hf:DIR


def _model_copy(base_dir: Path, tmp_path: Path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(base_dir, d)
    return d


@pytest.mark.parametrize("zipped", [True, False], ids=["torch-zip", "bare-pickle"])
def test_pickle_weights_in_a_model_folder_are_refused_not_run(base_dir, tmp_path, zipped):
    d = _model_copy(base_dir, tmp_path)
    (d / "model.safetensors").unlink()
    sentinel = tmp_path / "PWNED"
    plant_pickle(d / "pytorch_model.bin", sentinel, zipped)
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: pickle weights are refused.*safetensors"):
        load_policy(d, device="cpu")
    assert not sentinel.exists()


@pytest.mark.parametrize("what,says", [
    ("truncated", "model.safetensors: not a complete safetensors file"),
    ("no-config", "config.json: missing"),
    ("garbage-config", "config.json: not JSON"),
    ("garbage-tokenizer", "cannot load the tokenizer"),
    ("wrong-shapes", "cannot load the model"),
    ("foreign-weights", "the weights do not match config.json"),
])
def test_a_damaged_model_folder_is_one_line_naming_the_file(base_dir, tmp_path, what, says):
    from safetensors.torch import save_file

    d = _model_copy(base_dir, tmp_path)
    if what == "truncated":
        (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:5000])
    elif what == "no-config":
        (d / "config.json").unlink()
    elif what == "garbage-config":
        (d / "config.json").write_text("{oops")
    elif what == "garbage-tokenizer":
        (d / "tokenizer.json").write_text("{oops")
    elif what == "wrong-shapes":
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(hidden_size=cfg["hidden_size"] * 2)
        (d / "config.json").write_text(json.dumps(cfg))
    elif what == "foreign-weights":
        save_file({"foo.weight": torch.zeros(3, 3)}, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError) as e:
        load_policy(d, device="cpu")
    assert says in str(e.value) and str(d) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["truncated", "pickle"])
def test_the_eval_command_on_a_damaged_model_folder_is_one_line_exit_2(warehouse, base_dir, tmp_path, what):
    """`autoforge eval --agent hf:DIR` as a subprocess: a truncated model.safetensors, a planted
    pytorch_model.bin: one line, exit 2, no traceback, the pickle never ran."""
    d = _model_copy(base_dir, tmp_path)
    sentinel = tmp_path / "PWNED"
    if what == "truncated":
        (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:5000])
    else:
        (d / "model.safetensors").unlink()
        plant_pickle(d / "pytorch_model.bin", sentinel, zipped=True)
    out = cli("eval", "--agent", f"hf:{d}", "--warehouse", warehouse, "--limit", "1", cwd=tmp_path)
    line = one_error_line(out.stderr)
    assert out.returncode == 2, out.stderr
    assert ("model.safetensors: not a complete safetensors file" if what == "truncated"
            else "pytorch_model.bin: pickle weights are refused") in line
    assert not sentinel.exists()


# --------------------------------------------------------------------------- all-or-nothing writes


def test_an_atomic_write_cut_short_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "evals.json"
    atomic.write_text(target, '{"start": {}}')

    def killed(*a, **kw):
        raise KeyboardInterrupt("killed between the write and the rename")

    monkeypatch.setattr(atomic.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_text(target, '{"start": {}, "end": {}}')
    assert target.read_text() == '{"start": {}}' and sorted(p.name for p in tmp_path.iterdir()) == ["evals.json"]


def test_clean_staging_removes_unfinished_saves_and_restores_a_replaced_folder(tmp_path):
    root = tmp_path / "ckpt"
    (root / ".tmp-erpo-000003").mkdir(parents=True)  # a save cut short
    (root / ".old-reference").mkdir()  # killed between moving the old copy aside and renaming the new one in
    (root / ".old-reference" / "config.json").write_text("{}")
    (root / ".old-erpo-000002").mkdir()  # killed after the new copy was renamed in
    (root / "erpo-000002").mkdir()
    (root / ".evals.json.123.tmp").write_text("{half")
    done = ckpt.clean_staging(root)
    assert sorted(p.name for p in root.iterdir()) == ["erpo-000002", "reference"]
    assert (root / "reference" / "config.json").is_file() and len(done) == 4


# --------------------------------------------------------------------------- SIGKILL, then resume


def child_main(spec_json: str) -> None:
    """A tiny training run in a child process that parks at ``spec["point"]`` (step ``spec["step"]``)."""
    spec = json.loads(spec_json)
    marker = Path(spec["marker"])
    torch.set_num_threads(1)

    def park() -> None:
        marker.write_text(str(os.getpid()))
        time.sleep(600)  # the test SIGKILLs us here

    point, at = spec["point"], f"erpo-{spec['step']:06d}"
    if point == "weights-staged":  # model files written into .tmp-<name>, trainer state not yet
        original = ckpt._write_trainer_state

        def write_state(folder, state):
            if folder.name == ckpt.STAGING + at:
                park()
            return original(folder, state)

        ckpt._write_trainer_state = write_state
    elif point == "before-pointer":  # the checkpoint folder is in place; latest.json still names the one before
        original_point = ckpt._point_latest

        def point_latest(root, name, phase, step):
            if name == at:
                park()
            return original_point(root, name, phase, step)

        ckpt._point_latest = point_latest
    elif point == "before-prune":  # latest.json names the new checkpoint; the old ones are not yet pruned
        original_prune = ckpt._prune

        def prune(root, keep, current):
            if current.name == at:
                park()
            return original_prune(root, keep, current)

        ckpt._prune = prune
    elif point == "evals-rename":  # run_training: evals.json's temp file written, not yet renamed in
        original_replace = os.replace

        def replace(src, dst, *a, **kw):
            if str(dst).endswith("evals.json") and "end" in json.loads(Path(src).read_text()):
                park()
            return original_replace(src, dst, *a, **kw)

        os.replace = replace
        from autoforge.pipeline.train import run_training

        run_training(spec["wh"], TrainConfig(**spec["cfg"]), out_dir=spec["out"])
        return
    else:
        raise ValueError(point)
    train(load_policy(spec["base"], device="cpu"), synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=6),
          TrainConfig(**spec["cfg"]))


def kill_at(tmp_path: Path, spec: dict, name: str) -> None:
    """Run :func:`child_main` in a child process, wait until it parks, SIGKILL it."""
    marker = tmp_path / f"{name}.parked"
    spec = {**spec, "marker": str(marker)}
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_safe_checkpoints as t; t.child_main(sys.argv[1])"
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(spec)], cwd=tmp_path, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    deadline = time.monotonic() + 300
    try:
        while not marker.exists():
            assert proc.poll() is None, f"child exited before its crash point:\n{log_path.read_text()[-4000:]}"
            assert time.monotonic() < deadline, "child never reached its crash point"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def straight(base_dir, tmp_path_factory):
    """The uninterrupted 3-step run every killed-and-resumed run must end equal to, on one thread as the killed
    child (OMP_NUM_THREADS=1) and the resumed run (the autouse ``one_thread``, which a module fixture set up
    before it does not get): a thread count changes the float rounding, and on an AVX-512 host two threads
    sampled other tokens than one."""
    with one_torch_thread():
        pol = load_policy(base_dir, device="cpu")
        res = train(pol, synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=6),
                    _cfg(tmp_path_factory.mktemp("straight")))
    return pol, res


@pytest.mark.slow
@pytest.mark.parametrize("point,resumes_from", [("weights-staged", "erpo-000001"), ("before-pointer", "erpo-000001"),
                                                ("before-prune", "erpo-000002")])
def test_a_run_killed_while_saving_resumes_from_the_last_complete_checkpoint(base_dir, straight, tmp_path, point,
                                                                            resumes_from):
    cfg = _cfg(tmp_path)
    kill_at(tmp_path, {"point": point, "step": 2, "base": str(base_dir), "cfg": cfg.model_dump(mode="json")}, point)
    root = Path(cfg.checkpoint_dir)
    assert ckpt.latest_checkpoint(root).name == resumes_from  # the pointer never names an incomplete folder
    ckpt.verify_checkpoint(ckpt.latest_checkpoint(root))
    if point == "weights-staged":
        assert (root / ".tmp-erpo-000002").is_dir()  # what the kill left

    pol = load_policy(base_dir, device="cpu")
    logged: list[int] = []
    res = train(pol, synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=6), cfg,
                log_fn=lambda s, ph, m: logged.append(s))
    assert res.resumed_from.name == resumes_from
    assert logged == list(range(int(resumes_from[-1]) + 1, 4))  # finished steps were not redone
    assert [r["step"] for r in res.history] == [1, 2, 3] and res.last_checkpoint.name == "erpo-000003"
    assert bool(res.cleaned) == (point == "weights-staged")
    assert leftovers(root) == []
    assert sorted(p.name for p in root.iterdir() if ckpt.CHECKPOINT_NAME.match(p.name)) == ["erpo-000002", "erpo-000003"]
    ref_pol, ref = straight
    for a, b in zip(pol.model.parameters(), ref_pol.model.parameters()):
        assert torch.allclose(a, b, atol=1e-5)
    assert [r["reward_mean"] for r in res.history] == [r["reward_mean"] for r in ref.history]


@pytest.mark.slow
def test_a_run_killed_while_writing_its_evaluation_leaves_nothing_half_written(wh, tmp_path):
    """Killed between writing the final evaluation's temp file and renaming it over evals.json: evals.json
    is the previous whole file, no curve or table is half there, and the rerun finishes without
    training again and removes the temp file."""
    from autoforge.pipeline.train import run_training

    cfg = TrainConfig(tiny_vocab_size=600, tiny_hidden_size=32, tiny_num_layers=2, tiny_num_heads=2, device="cpu",
                      envs=[ENV], max_tool_calls=3, prompt_tools="used", max_train_tasks=4, max_eval_tasks=2,
                      tasks_per_batch=2, rollouts_per_task=2, max_turns=2, max_new_tokens=8, max_episode_tokens=16,
                      steps=1, lr=1e-2, micro_batch_size=4, sft_epochs=0, pass_rate_samples=0,
                      checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, eval_at=["start", "end"],
                      rollout_concurrency=4, seed=1, torch_threads=1)
    out = tmp_path / "out"
    kill_at(tmp_path, {"point": "evals-rename", "step": 1, "wh": wh, "cfg": cfg.model_dump(mode="json"),
                       "out": str(out)}, "eval")
    root = Path(cfg.checkpoint_dir)
    assert set(json.loads((root / "evals.json").read_text())) == {"start"}  # the previous whole file
    assert [p for p in leftovers(root) if "evals.json" in p]  # the temp file the kill left
    assert not (out / "learning_curve.png").exists() and not (out / "before_after.md").exists()
    assert ckpt.latest_checkpoint(root).name == "erpo-000001"

    events: list[tuple[str, int]] = []
    res = run_training(wh, cfg, progress=lambda ph, s, tot, m: events.append((ph, s)), out_dir=out)
    assert res["resumed_from"].endswith("erpo-000001") and not any(ph == "erpo" for ph, _ in events)
    assert set(json.loads((root / "evals.json").read_text())) == {"start", "end"}
    assert leftovers(root) == [] and leftovers(out) == []
    assert (out / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
