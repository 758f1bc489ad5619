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
    assert {"state", "answer"} <= set(res["kinds"])
    for py in (interop.venv_python("verl"), Path(sys.executable)):  # neither venv's pins leak into the other
        check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
        assert check.returncode == 0, (py, check.stdout, check.stderr)
