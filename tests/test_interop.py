"""Issue 35: the verl export checked by verl's own code (``benchmarks/interop.py``), in verl's cached venv outside
the repository (``$AUTOFORGE_INTEROP_DIR``, default ``/work/.cache/autoforge-interop``; made by
``python benchmarks/interop.py --setup``). Skipped where that venv is missing. ~35 s: a 3-environment corpus,
its export, then verl's ``load_all_tools`` -> ``RLHFDataset`` -> ``ToolAgentLoop.run`` (gold and do-nothing
trajectories) -> the naive reward manager over ``reward.py``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import interop  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.skipif(interop.venv_python("verl") is None,
                    reason=f"no verl venv at {interop.venv_of('verl')} (python benchmarks/interop.py --setup)")
def test_verl_runs_the_export_with_its_own_code():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "interop.py"), "--only", "verl", "--json"],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"verl 0\.9\.1: gold 1\.0 noop 0\.0 \(\d+ tasks, 3 envs\)", lines[0]), lines
    res = json.loads(lines[1])
    assert res["live_equals_score"] and not res["bad"] and res["tasks"] >= 6
    assert any(ln.startswith("rewards agree:") for ln in lines), lines  # the bundle runtime's and TRL's rewards
    assert {"state", "answer"} <= set(res["kinds"])
    for py in (interop.venv_python("verl"), Path(sys.executable)):  # neither venv's pins leak into the other
        check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
        assert check.returncode == 0, (py, check.stdout, check.stderr)


@pytest.mark.skipif(interop.venv_python("harbor") is None,
                    reason=f"no Harbor venv at {interop.venv_of('harbor')} (python benchmarks/interop.py --setup)")
def test_harbor_checks_the_export_with_its_own_code():
    """``harbor lint`` clean and ``Task(dir)`` for every exported task folder (Harbor 0.25.0, Python 3.12 venv);
    then, without Docker, solve.sh + test.sh write 1.0 and test.sh alone 0.0 on 2 tasks per environment."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "interop.py"), "--only", "harbor", "--json",
                          "--tasks-per-env", "all"],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"harbor 0\.25\.0: gold 1\.0 noop 0\.0 \(\d+ tasks, 3 envs\)", lines[0]), lines
    res = json.loads(lines[1])
    assert not res["bad"] and res["lint_findings"] == 0 and res["loaded"] == res["exported"] >= 6
    assert res["tasks"] == res["exported"]  # every exported task played, gold and do-nothing
    assert any(ln.startswith("rewards agree:") for ln in lines), lines  # the bundle runtime's and TRL's rewards
    assert {"state", "answer"} <= set(res["kinds"])
    check = subprocess.run([str(interop.venv_python("harbor")), "-m", "pip", "check"], capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 0, (check.stdout, check.stderr)


def test_harbor_export_plays_without_harbor(three_env_corpus, tmp_path):
    """The task folders alone (no Harbor installed): the layout, and one answer task played with its own
    environment/ copy of AutoForge and the bundle: gold 1.0, do-nothing 0.0."""
    from autoforge.integrations.harbor import export_harbor

    out = tmp_path / "harbor"
    export_harbor(three_env_corpus, "v_curated_tasks", str(out))
    dirs = sorted(p for p in out.iterdir() if (p / "task.toml").is_file())
    assert len(dirs) >= 6
    for d in dirs:
        for f in ("instruction.md", "environment/Dockerfile", "environment/requirements.txt",
                  "environment/bundle/manifest.json", "environment/autoforge/integrations/harbor_cli.py",
                  "tests/test.sh", "solution/solve.sh"):
            assert (d / f).is_file(), (d, f)
        assert "harbor_cli call" in (d / "instruction.md").read_text()
    answer = next(d for d in dirs if 'autoforge_kind = "answer"' in (d / "task.toml").read_text())
    assert interop.play_harbor_task(answer, tmp_path / "gold", gold=True) == 1.0
    assert interop.play_harbor_task(answer, tmp_path / "noop", gold=False) == 0.0


def test_harbor_export_of_a_moved_bundle_plays_with_the_warehouse_deleted(three_env_corpus, tmp_path):
    """Issue 35's done-when for Harbor: a bundle written, its warehouse deleted, the bundle moved; the export from it
    still plays: a state task's solve.sh + test.sh 1.0, test.sh alone 0.0."""
    import shutil

    from autoforge.integrations.bundle import write_bundle
    from autoforge.integrations.harbor import export_harbor

    copy = tmp_path / "wh.duckdb"
    shutil.copyfile(three_env_corpus, copy)
    write_bundle(str(copy), "v_curated_tasks", tmp_path / "b1")
    copy.unlink()
    shutil.move(str(tmp_path / "b1"), str(tmp_path / "moved"))
    out = tmp_path / "harbor"
    export_harbor(None, None, str(out), bundle=str(tmp_path / "moved"))
    state = next(d for d in sorted(out.iterdir())
                 if (d / "task.toml").is_file() and 'autoforge_kind = "state"' in (d / "task.toml").read_text())
    assert interop.play_harbor_task(state, tmp_path / "gold", gold=True) == 1.0
    assert interop.play_harbor_task(state, tmp_path / "noop", gold=False) == 0.0
