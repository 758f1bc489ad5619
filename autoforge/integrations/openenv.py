"""``autoforge export RELATION --format openenv --out DIR``: one OpenEnv environment package per AutoForge
environment (issue 35)::

    DIR/README.md                      the packages, how to serve and call them
    DIR/autoforge_export.json          the export's marker (relation, counts)
    DIR/<module>/                      one installable OpenEnv environment (<module>: autoforge_<env>_env)
        openenv.yaml                   OpenEnv's manifest (spec_version 1, fastapi app server.app:app, port 8000)
        pyproject.toml                 package openenv-<module>: openenv-core 0.3.0 and the bundle runtime's
                                       dependencies; [project.scripts] server = "<module>.server.app:main"
        __init__.py                    exports the client and the models
        client.py                      <Name>Env, OpenEnv's MCPToolClient that also reads reset's task observation
        models.py                      AutoForgeObservation / AutoForgeState (autoforge/integrations/openenv_models.py)
        server/app.py                  app = create_app(...), main() (--host, --port)
        server/environment.py          <Name>Environment: the MCPEnvironment (autoforge.integrations.openenv_server)
        bundle/                        the environment bundle of this environment's tasks (manifest-checked)
        vendor/autoforge/              AutoForge's Python code (the bundle runtime); put first on sys.path by
                                       server/__init__.py, so the package runs without AutoForge installed
        README.md

One server per environment, because OpenEnv lists an environment's MCP tools once per session and clients cache
them; ``reset(task_id=...)`` picks the task (or ``seed`` the seed-th task, ``split`` train / test, else a random
one). The MCP tools are the environment's tools plus ``talk_to_user`` (the simulated user); each tool call's
observation carries the episode's reward as it stands and ``done`` once the user ended the conversation
(:mod:`autoforge.integrations.openenv_server`). ``benchmarks/interop_openenv.py`` checks the packages with
OpenEnv's own code (docs/trainers.md, "OpenEnv").
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from autoforge.errors import ConfigError
from autoforge.integrations.bundle import MANIFEST, Bundle, BundleFile, BundleSource, _dump, _readme
from autoforge.integrations.hf import ExportResult
from autoforge.integrations.outdir import staged_dir, write_marker

OPENENV_VERSION = "0.3.0"
STAGED_BUNDLE = ".bundle"
RESERVED = frozenset({"reset", "step", "state", "close"})  # OpenEnv's RESERVED_TOOL_NAMES
RUNTIME_PACKAGES = ("pydantic", "networkx", "jsonschema", "pyyaml", "orjson", "regex", "google-re2", "openai")
_HERE = Path(__file__).resolve().parent

OPENENV_YAML = """# OpenEnv manifest of the AutoForge environment {env} (autoforge export --format openenv)
spec_version: 1
name: {module}
type: space
runtime: fastapi
app: server.app:app
port: 8000
"""

PYPROJECT = """[build-system]
requires = ["setuptools>=64", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "openenv-{module}"
version = "{version}"
description = "AutoForge environment {env} for OpenEnv: {n_tools} MCP tools and talk_to_user, {n_tasks} tasks"
requires-python = ">=3.10"
dependencies = [
{deps}
]

[project.scripts]
server = "{module}.server.app:main"

[tool.setuptools]
packages = ["{module}", "{module}.server"]
package-dir = {{ "{module}" = ".", "{module}.server" = "server" }}

[tool.setuptools.package-data]
{module} = ["openenv.yaml", "README.md", "bundle/**/*", "vendor/**/*"]
"""

INIT = '''"""AutoForge environment {env} for OpenEnv: the client and the models (the server: {module}.server.app)."""

from .client import {cls}Env
from .models import AutoForgeAction as {cls}Action, AutoForgeObservation as {cls}Observation, AutoForgeState

__all__ = ["{cls}Env", "{cls}Action", "{cls}Observation", "AutoForgeState"]
'''

CLIENT = '''"""The client of the AutoForge environment {env}: OpenEnv's MCPToolClient, which also reads the task observation
``reset`` returns (system text, the user's opening request, the tools as OpenAI function schemas)."""

from typing import Any, Dict

from openenv.core.client_types import StepResult
from openenv.core.mcp_client import MCPToolClient

try:
    from .models import AutoForgeObservation, AutoForgeState
except ImportError:  # run from the package folder
    from models import AutoForgeObservation, AutoForgeState


class {cls}Env(MCPToolClient):
    """``async with {cls}Env(base_url="http://127.0.0.1:8000") as env``: ``await env.reset(task_id=...)``
    (``.observation``: :class:`AutoForgeObservation`), ``await env.list_tools()``, ``await env.step(
    CallToolAction(tool_name=..., arguments={{...}}))`` (``.reward``: the episode's reward now, ``.done``), or
    ``await env.call_tool(name, **arguments)`` (the observation text). ``.sync()`` for a blocking client."""

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult:
        obs = payload.get("observation", {{}})
        if "task_id" in obs and "tool_name" not in obs:
            observation = AutoForgeObservation(**{{**obs, "done": payload.get("done", False),
                                                   "reward": payload.get("reward")}})
            return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))
        return super()._parse_result(payload)

    def _parse_state(self, payload: Dict[str, Any]) -> AutoForgeState:
        return AutoForgeState(**payload)
'''

SERVER_INIT = '''"""The server of the AutoForge environment {env}. AutoForge's code comes from ``vendor/`` (first on sys.path,
unless autoforge was imported already or AUTOFORGE_OPENENV_VENDOR=0)."""

import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
BUNDLE = PACKAGE / "bundle"
_VENDOR = PACKAGE / "vendor"
if _VENDOR.is_dir() and os.environ.get("AUTOFORGE_OPENENV_VENDOR", "1") != "0" and str(_VENDOR) not in sys.path:
    sys.path.insert(0, str(_VENDOR))
'''

ENVIRONMENT = '''"""The MCPEnvironment of the AutoForge environment {env}: its tools and talk_to_user over MCP, reset(task_id=...)
starts an episode of the bundled task, each tool call's observation carries the episode's reward (see
autoforge/integrations/openenv_server.py in vendor/)."""

try:
    from . import BUNDLE
except ImportError:  # python -m server.app from the package folder
    from server import BUNDLE

from autoforge.integrations.openenv_server import AutoForgeMCPEnvironment


class {cls}Environment(AutoForgeMCPEnvironment):
    BUNDLE = str(BUNDLE)
    ENV = {env_json}
'''

APP = '''"""OpenEnv's FastAPI app of the AutoForge environment {env}: ``server`` (the package's script), ``python -m
{module}.server.app --port 8000``, or ``uvicorn {module}.server.app:app``. AUTOFORGE_OPENENV_MAX_SESSIONS: how
many WebSocket sessions at once (default 8; each holds an episode and a sandbox worker)."""

import argparse
import os

try:
    from .environment import {cls}Environment
except ImportError:  # python -m server.app from the package folder
    from server.environment import {cls}Environment

from autoforge.integrations.openenv_server import make_app

app = make_app({cls}Environment.BUNDLE, {cls}Environment.ENV, env_class={cls}Environment,
               max_concurrent_envs=int(os.environ.get("AUTOFORGE_OPENENV_MAX_SESSIONS", "8")))


def main(argv=None):
    """Serve the app with uvicorn (--host, default 0.0.0.0; --port, default $PORT or 8000)."""
    import uvicorn

    ap = argparse.ArgumentParser(description="AutoForge environment {env} for OpenEnv")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = ap.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
'''

PACKAGE_README = """# AutoForge environment `{env}` for OpenEnv

{n_tools} MCP tools of the AutoForge environment `{env}` and `talk_to_user` (the simulated user), {n_tasks} tasks
({kinds}). Written by `autoforge export --format openenv`; `bundle/` holds the tasks, `vendor/autoforge/` the
code that plays them.

```bash
pip install .            # or: PYTHONPATH=$PWD/.. python -m {module}.server.app --port 8000
server --port 8000       # OpenEnv's app: /ws, /reset, /step, /state, /mcp, /schema, /metadata, /health
```

```python
from openenv.core.env_server.mcp_types import CallToolAction
from {module} import {cls}Env

with {cls}Env(base_url="http://127.0.0.1:8000").sync() as env:
    first = env.reset(task_id="{first_task}").observation    # .system, .user, .tool_schemas, .kind
    print([t.name for t in env.list_tools()])
    step = env.step(CallToolAction(tool_name="talk_to_user", arguments={{"message": "How can I help?"}}))
    print(step.observation.result["data"], step.reward, step.done)  # the user's reply; the episode's reward now
    print(env.call_tool("talk_to_user", message="Done."))      # the observation text alone (no reward)
```

The reward on each tool call's observation is the episode's as it stands (1.0 when the final state matches
the task's gold state and, for answer and boundary tasks, the last message said to the user states the
answer; 0.0 after a broken rule): use the last step's, do not sum them. `done` is true once the user ended
the conversation. Tasks: {tasks}
"""

TOP_README = """# AutoForge environments for OpenEnv

One OpenEnv environment package per AutoForge environment (`autoforge export --format openenv`), from
`{relation}`:

| environment | package folder | tools | tasks |
|---|---|---:|---:|
{rows}

Serve one: `cd <folder> && pip install . && server --port 8000` (or `PYTHONPATH=$PWD python -m
<folder>.server.app --port 8000` from here), then use its client (`<folder>/README.md`).
"""


def module_name(env_name: str) -> str:
    """The package (and OpenEnv environment) name of an AutoForge environment: ``autoforge_<env>_env``."""
    base = re.sub(r"[^a-z0-9]+", "_", env_name.lower()).strip("_") or "env"
    return f"autoforge_{base}_env"


def class_name(module: str) -> str:
    """OpenEnv's naming (``openenv.auto``): autoforge_hr_env -> AutoforgeHr (+ Env / Action / Observation)."""
    return "".join(w.capitalize() for w in module[: -len("_env")].split("_"))


def sub_bundle(bundle: Bundle, env_id: str, dst: Path) -> Bundle:
    """A bundle at ``dst`` of one environment of ``bundle`` (its files as they are, a manifest of them: what
    ``autoforge bundle --env`` would write)."""
    info = next(e for e in bundle.manifest.environments if e.env_id == env_id)
    files = {rel: f for rel, f in bundle.manifest.files.items() if rel.startswith(info.folder + "/")}
    for rel in files:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle.root / rel, dst / rel)
    kinds: dict[str, int] = {}
    for t in info.tasks:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    m = bundle.manifest.model_copy(deep=True)
    m.source = BundleSource(**{**m.source.model_dump(), "env": info.name})
    m.environments = [info]
    m.counts = {"environments": 1, "tasks": len(info.tasks),
                "splits": {s: sum(1 for t in info.tasks if t.split == s) for s in ("train", "test")},
                "kinds": dict(sorted(kinds.items()))}
    readme = _readme(m).encode()
    (dst / "README.md").write_bytes(readme)
    files["README.md"] = BundleFile(sha256=hashlib.sha256(readme).hexdigest(), bytes=len(readme))
    m.files = dict(sorted(files.items()))
    (dst / MANIFEST).write_bytes(_dump(m))
    return Bundle.load(dst)


def _copy_code(dst: Path) -> None:
    shutil.copytree(_HERE.parent, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "base_policy"))


def write_package(b: Bundle, env_id: str, d: Path, code: Path, deps: list[str]) -> dict[str, Any]:
    """One environment's package at ``d`` (see the module docstring); what it holds."""
    env = b.env(env_id)
    names = [s.get("function", s)["name"] for s in env.schemas]
    clash = sorted(set(names) & (RESERVED | {"talk_to_user"}))
    if clash:
        raise ConfigError(f"environment {env.name} has tools named {clash}: OpenEnv reserves reset, step, state and "
                          "close, and talk_to_user is the simulated user's; it cannot be exported for OpenEnv")
    module = d.name
    cls = class_name(module)
    (d / "server").mkdir(parents=True)
    sub = sub_bundle(b, env_id, d / "bundle")
    shutil.copytree(code, d / "vendor" / "autoforge")
    tasks = sub.task_ids()
    kinds = sub.manifest.counts["kinds"]
    fmt = {"env": env.name, "module": module, "cls": cls, "env_json": json.dumps(env.name)}
    (d / "openenv.yaml").write_text(OPENENV_YAML.format(**fmt))
    (d / "pyproject.toml").write_text(PYPROJECT.format(
        **fmt, version=b.manifest.autoforge_version, n_tools=len(names), n_tasks=len(tasks),
        deps="\n".join(f"    {json.dumps(x)}," for x in [f"openenv-core=={OPENENV_VERSION}", *deps])))
    (d / "__init__.py").write_text(INIT.format(**fmt))
    (d / "client.py").write_text(CLIENT.format(**fmt))
    shutil.copyfile(_HERE / "openenv_models.py", d / "models.py")
    (d / "server" / "__init__.py").write_text(SERVER_INIT.format(**fmt))
    (d / "server" / "environment.py").write_text(ENVIRONMENT.format(**fmt))
    (d / "server" / "app.py").write_text(APP.format(**fmt))
    (d / "README.md").write_text(PACKAGE_README.format(
        **fmt, n_tools=len(names), n_tasks=len(tasks), first_task=tasks[0],
        kinds=", ".join(f"{n} {k}" for k, n in kinds.items()), tasks=", ".join(f"`{t}`" for t in tasks)))
    return {"env": env.name, "module": module, "tools": len(names), "tasks": len(tasks)}


def export_openenv(warehouse: str | None, relation: str | None, out: str, *, bundle: str | None = None) -> ExportResult:
    """Write the OpenEnv environment packages (see the module docstring) of ``relation`` (a tasks relation of the
    warehouse), or, with ``bundle``, of that bundle's tasks (no warehouse read)."""
    from autoforge.integrations.harbor import checked_golds, runtime_requirements, stage_bundle
    from autoforge.integrations.verl import export_source

    target, source = export_source(warehouse, relation, out, "openenv", bundle)
    deps = runtime_requirements()
    with staged_dir(target) as tmp:
        b = stage_bundle(tmp, warehouse, relation, source, STAGED_BUNDLE)
        checked_golds(b, "their environments would not be solvable")
        modules: dict[str, str] = {}
        for info in b.manifest.environments:
            module = module_name(info.name)
            modules[info.env_id] = module if module not in modules.values() else \
                module[: -len("_env")] + "_" + re.sub(r"[^a-z0-9]+", "_", info.env_id.lower()) + "_env"
        code = tmp / ".autoforge-code"
        _copy_code(code)
        written = [write_package(b, e, tmp / modules[e], code, deps) for e in b.environments]
        shutil.rmtree(code)
        shutil.rmtree(tmp / STAGED_BUNDLE)
        rows = "\n".join(f"| {w['env']} | `{w['module']}/` | {w['tools']} | {w['tasks']} |" for w in written)
        (tmp / "README.md").write_text(TOP_README.format(relation=b.manifest.source.relation, rows=rows))
        splits = {s: n for s, n in b.manifest.counts.get("splits", {}).items()}
        write_marker(tmp, "openenv", {"relation": b.manifest.source.relation, "splits": splits,
                                      "tasks": len(b.task_ids()), "environments": len(written),
                                      "packages": {w["env"]: w["module"] for w in written},
                                      "openenv_core": OPENENV_VERSION})
    return ExportResult(format="openenv", relation=b.manifest.source.relation or "", out=str(target), splits=splits,
                        columns=[], json_columns=[], task_rows=True)
