"""Issue 35: ``autoforge export --format openenv`` (one OpenEnv environment package per AutoForge environment).

The fast tests need no OpenEnv: the files of each package (openenv.yaml, pyproject's ``server`` script, the
server modules, the vendored AutoForge code) and its bundle, played from the package alone; and an export from
a bundle that was moved after its warehouse was deleted. The slow tests run OpenEnv's own code in its cached venv
(``python benchmarks/interop.py --setup --only openenv``; skipped without it): install, serve, validate, and the
gold / do-nothing trajectories through ``MCPToolClient``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import interop  # noqa: E402

NO_VENV = interop.venv_python("openenv") is None
SKIP = f"no OpenEnv venv at {interop.venv_of('openenv')} (python benchmarks/interop.py --setup --only openenv)"


def _packages(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if (p / "openenv.yaml").is_file())


def _gold_then_noop(pkg: Path, task_id: str) -> tuple[float | None, float | None]:
    """The gold trajectory and a do-nothing one played in the package's own bundle, as its server plays them."""
    from autoforge.integrations.bundle import Bundle
    from autoforge.integrations.harbor import DONE, gold_trajectories

    b = Bundle.load(pkg / "bundle")
    gold = gold_trajectories(b)[task_id]
    with b.episode(task_id) as ep:
        for name, args in gold["actions"]:
            ep.call(name, args)
        good = ep.reward()
    with b.episode(task_id) as ep:
        ep.call("talk_to_user", {"message": DONE})
        none = ep.reward()
    return good, none


def test_openenv_packages_layout(three_env_corpus, tmp_path):
    from autoforge.integrations.bundle import Bundle
    from autoforge.integrations.openenv import export_openenv

    out = tmp_path / "openenv"
    res = export_openenv(three_env_corpus, "v_curated_tasks", str(out))
    assert res.format == "openenv" and res.relation == "v_curated_tasks" and sum(res.splits.values()) >= 6
    marker = json.loads((out / "autoforge_export.json").read_text())
    assert marker["format"] == "openenv" and marker["environments"] == 3
    pkgs = _packages(out)
    assert [p.name for p in pkgs] == sorted(f"autoforge_{e}_env" for e in ("effects_calculator", "hr", "library"))
    kinds, n_tasks = set(), 0
    models = (ROOT / "autoforge" / "integrations" / "openenv_models.py").read_text()
    for pkg in pkgs:
        m = pkg.name
        manifest = yaml.safe_load((pkg / "openenv.yaml").read_text())
        assert manifest == {"spec_version": 1, "name": m, "type": "space", "runtime": "fastapi",
                            "app": "server.app:app", "port": 8000}
        project = tomllib.loads((pkg / "pyproject.toml").read_text())
        assert project["project"]["name"] == f"openenv-{m}"
        assert project["project"]["scripts"] == {"server": f"{m}.server.app:main"}
        deps = project["project"]["dependencies"]
        assert "openenv-core==0.3.0" in deps and any(d.startswith("pydantic") for d in deps)
        assert project["tool"]["setuptools"]["package-dir"] == {m: ".", f"{m}.server": "server"}
        app = (pkg / "server" / "app.py").read_text()
        assert "def main(" in app and 'if __name__ == "__main__":\n    main()' in app and "make_app(" in app
        assert "(AutoForgeMCPEnvironment)" in (pkg / "server" / "environment.py").read_text()
        assert (pkg / "models.py").read_text() == models
        assert "MCPToolClient" in (pkg / "client.py").read_text()
        assert (pkg / "vendor" / "autoforge" / "integrations" / "openenv_server.py").is_file()
        assert not (pkg / "vendor" / "autoforge" / "data" / "base_policy").exists()
        for f in ("__init__.py", "client.py", "models.py", "server/__init__.py", "server/environment.py",
                  "server/app.py"):
            compile((pkg / f).read_text(), str(pkg / f), "exec")
        b = Bundle.load(pkg / "bundle")  # this environment only, every file checked
        assert len(b.environments) == 1 and b.manifest.source.env == b.env(b.environments[0]).name
        assert m == f"autoforge_{b.env(b.environments[0]).name}_env"
        kinds |= {b.task(t).kind for t in b.task_ids()}
        n_tasks += len(b.task_ids())
    assert n_tasks == marker["tasks"] and {"state", "answer"} <= kinds
    calc = out / "autoforge_effects_calculator_env"
    answer = Bundle.load(calc / "bundle").task_ids(kind="answer")[0]
    assert _gold_then_noop(calc, answer) == (1.0, 0.0)


def test_openenv_export_from_a_moved_bundle_without_its_warehouse(three_env_corpus, tmp_path):
    """A bundle written from a warehouse that is then deleted, moved to another folder: the export reads only the
    bundle, and a state task of the exported package plays gold 1.0 / do-nothing 0.0 from the package alone."""
    from autoforge.integrations.bundle import Bundle, write_bundle
    from autoforge.integrations.openenv import export_openenv

    wh = tmp_path / "wh.duckdb"
    shutil.copyfile(three_env_corpus, wh)
    write_bundle(str(wh), "v_curated_tasks", tmp_path / "first")
    wh.unlink()
    moved = tmp_path / "elsewhere" / "bundle"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "first"), moved)
    out = tmp_path / "openenv"
    res = export_openenv(None, None, str(out), bundle=str(moved))
    assert res.relation == "v_curated_tasks" and len(_packages(out)) == 3
    lib = out / "autoforge_library_env"
    state = Bundle.load(lib / "bundle").task_ids(kind="state")[0]
    assert _gold_then_noop(lib, state) == (1.0, 0.0)
    again = export_openenv(None, None, str(out), bundle=str(moved))  # a previous openenv export is replaced
    assert again.out == res.out and len(_packages(out)) == 3


@pytest.mark.slow
@pytest.mark.skipif(NO_VENV, reason=SKIP)
def test_openenv_runs_the_export_with_its_own_code():
    """``benchmarks/interop.py --only openenv``: each package installed and served, OpenEnv's validators pass,
    MCPToolClient's gold trajectories score 1.0 and do-nothing ones 0.0 on every exported task, the same rewards as
    the bundle runtime's and TRL's."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "interop.py"), "--only", "openenv", "--json",
                          "--tasks-per-env", "all"],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"openenv 0\.3\.0: gold 1\.0 noop 0\.0 \(\d+ tasks, 3 envs\)", lines[0]), lines
    res = json.loads(lines[1])
    assert not res["bad"] and res["tasks"] >= 6 and res["envs"] >= 3 and {"state", "answer"} <= set(res["kinds"])
    assert all(r == {"gold": 1.0, "noop": 0.0} for r in
               ({"gold": v["gold"], "noop": v["noop"]} for v in res["rewards"].values()))
    assert all(v["passed"] for v in res["validate"].values()) and len(res["validate"]) == 3
    assert any(ln.startswith("rewards agree:") for ln in lines), lines
    for py in (interop.venv_python("openenv"), Path(sys.executable)):  # the installs went to throwaway folders
        check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
        assert check.returncode == 0, (py, check.stdout, check.stderr)


@pytest.mark.slow
@pytest.mark.skipif(NO_VENV, reason=SKIP)
def test_openenv_serves_an_export_of_a_moved_bundle(three_env_corpus, tmp_path):
    """The bundle moved and its warehouse deleted: the exported packages still install, serve and score (1 task
    per environment)."""
    import interop_openenv

    from autoforge.integrations.bundle import write_bundle

    wh = tmp_path / "wh.duckdb"
    shutil.copyfile(three_env_corpus, wh)
    write_bundle(str(wh), "v_curated_tasks", tmp_path / "first")
    wh.unlink()
    moved = tmp_path / "moved" / "bundle"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "first"), moved)
    res = interop_openenv.run(None, None, tmp_path / "work", per_env=1, bundle=str(moved))
    assert not res["bad"] and res["gold"] == 1.0 and res["noop"] == 0.0 and res["envs"] == 3, res
