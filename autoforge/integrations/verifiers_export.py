"""``autoforge export RELATION --format verifiers --out DIR``: an installable verifiers 0.4 taskset package (issue 35)::

    DIR/pyproject.toml                          the distribution (autoforge-tasks): verifiers 0.4 and the bundle
                                                runtime's dependencies; hatchling builds it
    DIR/README.md                               what it is, how to install, validate and evaluate it
    DIR/autoforge_tasks/__init__.py             exports AutoForgeTaskset (verifiers loads a taskset by package name)
    DIR/autoforge_tasks/verifiers_taskset.py    the Task (setup, @vf.reward, validate, toolsets) and the Taskset
    DIR/autoforge_tasks/verifiers_toolset.py    the per-rollout vf.Toolset: the environment's tools + talk_to_user
    DIR/autoforge_tasks/tasks.json              the tasks: id, environment, kind, split, system text, opening request
    DIR/autoforge_tasks/gold.json               the oracle's trajectory per task (vf-validate's gold check)
    DIR/autoforge_tasks/bundle/                 the environment bundle (no warehouse needed)
    DIR/autoforge_tasks/_vendor/autoforge/      AutoForge's Python code (the package imports this copy)

``pip install DIR`` (or ``PYTHONPATH=DIR``), then ``vf-validate autoforge-tasks --runtime.type subprocess`` and
``vf-eval autoforge-tasks --env.agent.harness.id null ...``. The two verifiers modules are copies of
:mod:`autoforge.integrations.verifiers_taskset` and :mod:`autoforge.integrations.verifiers_toolset`; what they
run of AutoForge is :mod:`autoforge.integrations.verifiers_runtime`. ``benchmarks/interop_verifiers.py`` checks
the package with verifiers' own code (docs/trainers.md, "verifiers").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from autoforge.errors import ConfigError
from autoforge.integrations.bundle import Bundle
from autoforge.integrations.harbor import _copy_code, gold_trajectories, runtime_requirements
from autoforge.integrations.hf import ExportResult
from autoforge.integrations.outdir import staged_dir, write_marker
from autoforge.integrations.verifiers_runtime import GOLD_FILE, TASKS_FILE, task_table

PACKAGE = "autoforge_tasks"
VERIFIERS_REQUIREMENT = "verifiers>=0.4,<0.5"
TEMPLATES = ("verifiers_taskset.py", "verifiers_toolset.py")  # copied from autoforge/integrations into the package
STAGED_BUNDLE = ".bundle"

INIT = '''"""AutoForge tasks as a verifiers 0.4 taskset (written by `autoforge export --format verifiers`).

Importing it puts the vendored copy of AutoForge's code (_vendor/) first on sys.path, unless an `autoforge`
is already imported in this process.
"""

import sys
from pathlib import Path

_VENDOR = Path(__file__).resolve().parent / "_vendor"
if "autoforge" not in sys.modules and (_VENDOR / "autoforge").is_dir() and str(_VENDOR) not in sys.path:
    sys.path.insert(0, str(_VENDOR))

from .verifiers_taskset import AutoForgeTaskset  # noqa: E402

__all__ = ["AutoForgeTaskset"]
'''

PYPROJECT = """[project]
name = "{dist}"
version = "0.1.0"
description = "AutoForge environments and tasks as a verifiers 0.4 taskset ({n_tasks} tasks, {n_envs} environments)"
requires-python = ">=3.11"
dependencies = [
{deps}
]

[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["{package}"]
"""

README = """# {dist}

AutoForge environments as a [verifiers](https://github.com/PrimeIntellect-ai/verifiers) 0.4 taskset, written by
`autoforge export {relation} --format verifiers`: {n_tasks} tasks of {n_envs} environments ({envs}); splits
{splits}.

Each task's prompt is the simulated user's opening request; a rollout's tool server (`{package}.verifiers_toolset`,
an MCP server) opens a live AutoForge episode of the task (a fresh copy of its initial state) and offers the
environment's tools plus `talk_to_user`, the simulated user. The reward `autoforge` (1.0 / 0.0) plays the rollout's
calls again in a fresh episode and scores it as AutoForge's episode engine does, with the model's last message
(written without a tool call) as its final word. `validate` (the gold check of `vf-validate`) scores the oracle's
trajectory (`{package}/gold.json`). The package carries the environment bundle (`{package}/bundle/`) and a copy of
AutoForge's code (`{package}/_vendor/`): no warehouse is needed.

```bash
pip install .                                              # or: export PYTHONPATH=$PWD
vf-validate {dist} --runtime.type subprocess               # gold valid, untouched invalid, every task
vf-eval {dist} --env.agent.harness.id null --env.agent.runtime.type subprocess \\
    --model MODEL --client.base-url http://127.0.0.1:8000/v1 -n 5
```

`--env.taskset.split train|test`, `--env.taskset.env NAME` and `--env.taskset.kind state|answer|boundary` narrow
the tasks. Use a harness that offers MCP tools to the model (`null`: a plain chat loop; `bash` adds its own tools).
"""


def write_package(root: Path, bundle_dir: Path, *, package: str = PACKAGE, relation: str = "") -> dict:
    """Write the package around the bundle already at ``bundle_dir`` (moved into it); ``{"tasks", "envs",
    "splits"}``."""
    b = Bundle.load(bundle_dir)
    golds = gold_trajectories(b)
    bad = {t: f"reward {g['reward']}, ended {g['ended']}" for t, g in golds.items() if g["reward"] != 1.0}
    if bad:
        raise ConfigError(f"the oracle's trajectory does not score 1.0 on {len(bad)} task(s) ({bad}); vf-validate's "
                          "gold check would fail on them")
    rows = task_table(b)
    pkg = root / package
    pkg.mkdir(parents=True)
    here = Path(__file__).resolve().parent
    for name in TEMPLATES:
        shutil.copyfile(here / name, pkg / name)
    (pkg / "__init__.py").write_text(INIT)
    (pkg / TASKS_FILE).write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    (pkg / GOLD_FILE).write_text(json.dumps({t: {"actions": [[n, a] for n, a in g["actions"]], "final": g["final"]}
                                             for t, g in golds.items()}, indent=1, ensure_ascii=False) + "\n")
    _copy_code(pkg / "_vendor" / "autoforge")
    shutil.move(str(bundle_dir), str(pkg / "bundle"))
    splits: dict[str, int] = {}
    for r in rows:
        splits[r["split"]] = splits.get(r["split"], 0) + 1
    envs = sorted({r["env"] for r in rows})
    dist = package.replace("_", "-")
    deps = [VERIFIERS_REQUIREMENT, *runtime_requirements()]
    (root / "pyproject.toml").write_text(PYPROJECT.format(dist=dist, package=package, n_tasks=len(rows),
                                                          n_envs=len(envs),
                                                          deps="\n".join(f'  "{d}",' for d in deps)))
    (root / "README.md").write_text(README.format(dist=dist, package=package, relation=relation or "RELATION",
                                                  n_tasks=len(rows), n_envs=len(envs), envs=", ".join(envs),
                                                  splits=", ".join(f"{k} {v}" for k, v in sorted(splits.items()))))
    return {"tasks": len(rows), "envs": envs, "splits": splits}


def export_verifiers(warehouse: str | None, relation: str | None, out: str, *,
                     bundle: str | None = None) -> ExportResult:
    """Write the verifiers package (see the module docstring) of ``relation`` (a tasks relation of the
    warehouse), or, with ``bundle``, of that bundle's tasks (no warehouse read)."""
    from autoforge.integrations.harbor import stage_bundle
    from autoforge.integrations.verl import export_source

    target, source = export_source(warehouse, relation, out, "verifiers", bundle)
    with staged_dir(target) as tmp:
        rel = stage_bundle(tmp, warehouse, relation, source, STAGED_BUNDLE).manifest.source.relation or ""
        info = write_package(tmp, tmp / STAGED_BUNDLE, relation=rel)
        write_marker(tmp, "verifiers", {"relation": rel, "splits": info["splits"], "tasks": info["tasks"],
                                        "environments": len(info["envs"]), "package": PACKAGE,
                                        "taskset_id": PACKAGE.replace("_", "-")})
    return ExportResult(format="verifiers", relation=rel, out=str(target), splits=info["splits"], columns=[],
                        json_columns=[], task_rows=True)
