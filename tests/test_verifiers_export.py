"""Issue 35: ``autoforge export --format verifiers`` (:mod:`autoforge.integrations.verifiers_export`), a verifiers
0.4 taskset package. The fast tests need no verifiers: the package's files, and the reward path it runs
(:mod:`autoforge.integrations.verifiers_runtime`) played with AutoForge's code, from a bundle moved away from a
deleted warehouse too. The slow one runs ``benchmarks/interop.py --only verifiers`` (verifiers' own
``vf-validate`` and rollouts, in its cached venv; skipped without it)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import interop  # noqa: E402

PKG = "autoforge_tasks"


def _play(bundle_dir: Path, task_id: str, gold: dict) -> dict:
    """The gold trajectory through the tool server's path (a live episode, each action recorded), then the
    reward's path (the recorded actions replayed in a fresh episode, scored with the final message)."""
    from autoforge.integrations.verifiers_runtime import act, open_episode, score

    recorded = []
    with open_episode(bundle_dir, task_id) as ep:
        for name, args in gold["actions"]:
            recorded.append(act(ep, name, args)[1])
    return score(bundle_dir, task_id, recorded, gold["final"])


def test_verifiers_export_writes_an_installable_taskset_package(three_env_corpus, tmp_path):
    from autoforge.integrations.bundle import Bundle
    from autoforge.integrations.verifiers_export import export_verifiers
    from autoforge.integrations.verifiers_runtime import score

    out = tmp_path / "vf"
    res = export_verifiers(three_env_corpus, "v_curated_tasks", str(out))
    assert res.format == "verifiers" and res.relation == "v_curated_tasks" and sum(res.splits.values()) >= 6
    project = tomllib.loads((out / "pyproject.toml").read_text())
    assert project["project"]["name"] == "autoforge-tasks"
    deps = project["project"]["dependencies"]
    assert "verifiers>=0.4,<0.5" in deps and any(d.startswith("pydantic") for d in deps)
    assert not any(d.split("<")[0].split(">")[0].split("=")[0] in ("prefect", "duckdb", "torch") for d in deps)
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [PKG]
    pkg = out / PKG
    for name in ("verifiers_taskset.py", "verifiers_toolset.py"):  # the templates, verbatim
        assert (pkg / name).read_bytes() == (ROOT / "autoforge" / "integrations" / name).read_bytes()
    init = (pkg / "__init__.py").read_text()
    ast.parse(init)
    assert '__all__ = ["AutoForgeTaskset"]' in init and "_vendor" in init
    vendored = pkg / "_vendor" / "autoforge"
    assert (vendored / "integrations" / "verifiers_runtime.py").is_file()
    assert not (vendored / "data" / "base_policy").exists() and not list(vendored.rglob("__pycache__"))
    assert json.loads((out / "autoforge_export.json").read_text())["format"] == "verifiers"
    assert "vf-validate autoforge-tasks --runtime.type subprocess" in (out / "README.md").read_text()

    bundle = Bundle.load(pkg / "bundle")
    rows = json.loads((pkg / "tasks.json").read_text())
    gold = json.loads((pkg / "gold.json").read_text())
    assert [r["task_id"] for r in rows] == bundle.task_ids() == list(gold)
    assert {"state", "answer"} <= {r["kind"] for r in rows} and len({r["env"] for r in rows}) == 3
    for r in rows:
        assert r["prompt"] and "talk_to_user" in r["system"] and "talk_to_user" in r["tools"]
    # the reward path: gold 1.0 (the replay equal to the live episode), nothing done 0.0, on one task of each kind
    for kind in ("answer", "state", "boundary"):
        tid = next(r["task_id"] for r in rows if r["kind"] == kind)
        played = _play(pkg / "bundle", tid, gold[tid])
        assert played["reward"] == 1.0 and played["replay_matches"] and played["scored"], (kind, played)
        assert score(pkg / "bundle", tid, [], None)["reward"] == 0.0


def test_verifiers_export_from_a_moved_bundle_runs_without_the_warehouse(three_env_corpus, tmp_path):
    """A bundle copied elsewhere, its warehouse deleted: the export reads only the bundle, and the package's own
    copy of AutoForge plays a task from the package's bundle in a process that has no other AutoForge."""
    from autoforge.integrations.bundle import write_bundle
    from autoforge.integrations.verifiers_export import export_verifiers

    wh = tmp_path / "copy.duckdb"
    shutil.copyfile(three_env_corpus, wh)
    write_bundle(str(wh), "v_curated_tasks", tmp_path / "b0", env="effects_calculator")
    moved = tmp_path / "elsewhere" / "bundle"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "b0"), moved)
    wh.unlink()
    out = tmp_path / "vf"
    res = export_verifiers(None, None, str(out), bundle=str(moved))
    assert res.relation == "v_curated_tasks" and sum(res.splits.values()) >= 2
    shutil.rmtree(moved.parent)
    script = (f"import json, sys; sys.path.insert(0, {str(out / PKG / '_vendor')!r})\n"
              "import autoforge\n"
              f"assert autoforge.__file__.startswith({str(out / PKG / '_vendor')!r}), autoforge.__file__\n"
              "from autoforge.integrations.verifiers_runtime import gold, score\n"
              f"pkg = {str(out / PKG)!r}; g = gold(pkg)\n"
              "out = {}\n"
              "for tid, t in list(g.items())[:2]:\n"
              "    acts = [{'name': n, 'arguments': a} for n, a in t['actions']]\n"
              "    out[tid] = [score(pkg + '/bundle', tid, acts, t['final'])['reward'], "
              "score(pkg + '/bundle', tid, [], None)['reward']]\n"
              "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(played) == 2 and all(v == [1.0, 0.0] for v in played.values()), played


@pytest.mark.slow
@pytest.mark.skipif(interop.venv_python("verifiers") is None,
                    reason=f"no verifiers venv at {interop.venv_of('verifiers')} (python benchmarks/interop.py --setup "
                           "--only verifiers)")
def test_verifiers_checks_the_export_with_its_own_code():
    """``vf-validate`` (gold valid, untouched invalid) on every task, then gold and do-nothing rollouts of 2 tasks per
    environment through verifiers' env, null harness and the package's tool server: gold 1.0, noop 0.0."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "interop.py"), "--only", "verifiers", "--json"],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"verifiers 0\.4\.0: gold 1\.0 noop 0\.0 \(\d+ tasks, 3 envs\)", lines[0]), lines
    res = json.loads(lines[1])
    assert not res["bad"] and res["tasks"] >= 6 and {"state", "answer"} <= set(res["kinds"])
    assert res["validate"]["valid"] == res["validate"]["total"] == res["exported"] >= 6
    assert all(r == {"gold": 1.0, "noop": 0.0} for r in res["rewards"].values()) and len(res["rewards"]) == res["tasks"]
    assert any(ln.startswith("rewards agree:") for ln in lines), lines  # the same as AutoForge's own rewards
    for py in (interop.venv_python("verifiers"), Path(sys.executable)):  # neither venv's pins leak into the other
        check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
        assert check.returncode == 0, (py, check.stdout, check.stderr)
