"""The OpenEnv export checked by OpenEnv's own code (``openenv-core==0.3.0``), for ``benchmarks/interop.py --only
openenv`` (issue 35; docs/trainers.md, "OpenEnv").

``autoforge export --format openenv`` writes one environment package per AutoForge environment. Each package is
installed, as a user would install it, into a throwaway folder (``pip install --no-deps --no-build-isolation
--target`` by the OpenEnv venv's pip, from a copy of the package folder: the cached venv is not touched and
``pip check`` stays clean); then, in the OpenEnv venv with only that folder on ``PYTHONPATH`` (no AutoForge
checkout: the package's ``vendor/`` copy of AutoForge runs), the package's ``server`` script serves it on
127.0.0.1 and OpenEnv's code drives it:

* ``openenv.cli._validation.validate_multi_mode_deployment`` over the package folder (``openenv validate``'s
  local check: only ``uv.lock`` may be missing) and ``validate_running_environment(url)`` over the server
  (``openenv validate --url``: /openapi.json, /health, /metadata, /schema, /mcp, the mode's endpoints);
* ``MCPToolClient``: ``reset(task_id=...)``, ``list_tools()`` (the environment's tools and talk_to_user), then
  the gold trajectory (the oracle agent's actions, ``interop.oracle_scripts``: its tool calls and its messages to
  the user as ``talk_to_user`` calls) as ``step(CallToolAction(...))``, the last step's reward; and a do-nothing
  trajectory (reset, then only the final message through ``talk_to_user``): gold 1.0, do-nothing 0.0 on 2 tasks
  per environment (one of each kind first);
* the package's own client (an ``MCPToolClient`` that reads reset's task observation) once per environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import interop

PER_ENV = 2


def _packages(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if (p / "openenv.yaml").is_file())


def _install(pkg: Path, tmp: Path, py: Path) -> Path:
    """The package installed into its own throwaway folder (from a copy: setuptools builds in the source tree)."""
    src, site = tmp / "openenv_src" / pkg.name, tmp / "openenv_site" / pkg.name
    shutil.copytree(pkg, src)
    if subprocess.run([str(py), "-c", "import setuptools.command.bdist_wheel"], capture_output=True).returncode != 0:
        # a venv set up before interop.py pinned setuptools>=70.1: give it a setuptools that builds wheels by itself
        subprocess.run([str(py), "-m", "pip", "install", "-q", "setuptools>=70.1"], check=True, capture_output=True,
                       timeout=600)
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                           str(site), str(src)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"pip install of {pkg.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return site


def run(warehouse: str | None, relation: str | None, tmp: Path, keep: Path | None = None,
        per_env: int | None = PER_ENV, bundle: str | None = None) -> dict:
    """Export ``relation`` (or, with ``bundle``, that bundle: no warehouse read) as OpenEnv packages, install
    and serve each, and drive it with OpenEnv's client and validators in OpenEnv's venv (see the module
    docstring); ``per_env`` tasks per environment (None: all)."""
    from autoforge.integrations.openenv import export_openenv

    py = interop.venv_python("openenv")
    if py is None:
        return {"library": "openenv",
                "skipped": f"no venv at {interop.venv_of('openenv')} (python benchmarks/interop.py --setup)"}
    tmp.mkdir(parents=True, exist_ok=True)
    out = keep or tmp / "openenv_export"
    t0 = time.perf_counter()
    export_openenv(warehouse, relation, str(out), bundle=bundle)
    export_s = time.perf_counter() - t0
    plan, scripts, oracle_s = [], {}, 0.0
    for pkg in _packages(out):
        manifest = json.loads((pkg / "bundle" / "manifest.json").read_text())
        tasks = [(t["task_id"], e["name"], t["kind"]) for e in manifest["environments"] for t in e["tasks"]]
        picked = interop._pick(tasks, per_env)
        t1 = time.perf_counter()
        scripts.update({t: s for t, s in interop.oracle_scripts(pkg / "bundle").items() if t in picked})
        oracle_s += time.perf_counter() - t1
        t1 = time.perf_counter()
        site = _install(pkg, tmp, py)
        plan.append({"package": str(pkg), "module": pkg.name, "site": str(site), "env": tasks[0][1],
                     "install_s": round(time.perf_counter() - t1, 1),
                     "tasks": [{"task_id": t, "kind": k} for t, _, k in tasks if t in picked]})
    spec = tmp / "openenv_plan.json"
    spec.write_text(json.dumps({"plan": plan, "scripts": scripts, "done": interop.DONE}))
    env = interop.child_env(tmp)
    env.pop("PYTHONPATH")  # no AutoForge checkout: each server runs its package's vendored copy
    t1 = time.perf_counter()
    res = interop.inside(py, [__file__, "--inside", str(spec)], "openenv_check", "OpenEnv", env, 1500, cwd=tmp)
    inside_s = time.perf_counter() - t1
    gold = [(t, r["gold"]) for t, r in res["rewards"].items()]
    noop = [(t, r["noop"]) for t, r in res["rewards"].items()]
    bad = list(res["bad"]) + [g for g in gold if g[1] != 1.0] + [n for n in noop if n[1] != 0.0]
    bad += [(t, "engine", s["engine_reward"]) for t, s in scripts.items() if s["engine_reward"] != 1.0]
    return {"library": "openenv", "version": res["version"], "tasks": len(gold), "envs": len(res["envs"]),
            "env_names": res["envs"], "kinds": res["kinds"],
            "gold": min(g[1] for g in gold) if not bad else [g[1] for g in gold],
            "noop": max(n[1] for n in noop) if not bad else [n[1] for n in noop], "bad": bad,
            "rewards": res["rewards"], "validate": res["validate"], "local_issues": res["local_issues"],
            "packages": len(plan), "export_s": round(export_s, 1),
            "install_s": round(sum(p["install_s"] for p in plan), 1), "oracle_s": round(oracle_s, 1),
            "check_inside_s": round(inside_s, 1), "serve_s": res["serve_s"], "steps": res["steps"]}


# --------------------------------------------------------------------------- inside OpenEnv's venv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(item: dict, log: Path) -> tuple[subprocess.Popen, str]:
    """The package's ``server`` script on 127.0.0.1, with only its install folder on PYTHONPATH."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": item["site"], "AUTOFORGE_OPENENV_MAX_SESSIONS": "4"}
    with log.open("w") as fh:
        proc = subprocess.Popen([str(Path(item["site"]) / "bin" / "server"), "--host", "127.0.0.1", "--port",
                                 str(port)], env=env, stdout=fh, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}"


def _wait_healthy(proc: subprocess.Popen, url: str, name: str, log: Path, limit_s: float = 180) -> None:
    import requests

    deadline = time.time() + limit_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name}: the server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            if requests.get(f"{url}/health", timeout=2).json().get("status") == "healthy":
                return
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{name}: not healthy after {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


async def _play(url: str, task_id: str, actions: list, client_cls) -> tuple[float | None, bool, list[str], int]:
    """reset(task_id) and the actions as CallToolAction steps: the last step's reward and done, the tools listed."""
    from openenv.core.env_server.mcp_types import CallToolAction

    async with client_cls(base_url=url) as env:
        await env.reset(task_id=task_id)
        tools = [t.name for t in await env.list_tools()]
        reward, done = None, False
        for name, args in actions:
            step = await env.step(CallToolAction(tool_name=name, arguments=args))
            obs = step.observation
            if getattr(obs, "error", None) is not None:
                raise RuntimeError(f"{task_id}: {name} failed: {obs.error}")
            reward, done = step.reward, step.done
        return reward, done, tools, len(actions)


def openenv_check(spec_path: str) -> dict:
    """Every package of the plan served at once, then checked one by one (runs in OpenEnv's venv)."""
    from importlib.metadata import version

    spec = json.loads(Path(spec_path).read_text())
    scripts, done_msg = spec["scripts"], spec["done"]
    rewards, validate, local, bad, envs, kinds, serve_s = {}, {}, {}, [], set(), set(), {}
    logs = {item["module"]: Path(spec_path).parent / f"openenv_{item['module']}.log" for item in spec["plan"]}
    t0 = time.perf_counter()
    servers = {item["module"]: _start(item, logs[item["module"]]) for item in spec["plan"]}  # start together
    try:
        for item in spec["plan"]:
            proc, url = servers[item["module"]]
            _wait_healthy(proc, url, item["module"], logs[item["module"]])
            serve_s[item["env"]] = round(time.perf_counter() - t0, 1)
            _check_one(item, url, scripts, done_msg, rewards, validate, local, bad, envs, kinds)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
        for proc, _ in servers.values():
            proc.wait(timeout=30)
    steps = sum(r["calls"] + 1 for r in rewards.values())
    return {"version": version("openenv-core"), "rewards": rewards, "validate": validate, "local_issues": local,
            "envs": sorted(envs), "kinds": sorted(kinds), "bad": bad, "steps": steps, "serve_s": serve_s}


def _check_one(item: dict, url: str, scripts: dict, done_msg: str, rewards: dict, validate: dict, local: dict,
               bad: list, envs: set, kinds: set) -> None:
    """One package: OpenEnv's local and runtime validators, the gold and do-nothing runs, the package's client."""
    import importlib
    import importlib.util

    from openenv.cli._validation import validate_multi_mode_deployment, validate_running_environment
    from openenv.core.mcp_client import MCPToolClient

    _, issues = validate_multi_mode_deployment(Path(item["package"]))
    local[item["env"]] = issues
    bad += [(item["env"], "local", i) for i in issues if "uv.lock" not in i]  # no uv here to lock with
    report = validate_running_environment(url)
    validate[item["env"]] = {"passed": report["passed"], "mode": report["mode"],
                             "failed": report["summary"]["failed_criteria"],
                             "criteria": report["summary"]["total_count"]}
    if not report["passed"]:
        bad.append((item["env"], "validate", report["summary"]["failed_criteria"]))
    sys.path.insert(0, item["site"])  # the package's own client (its module only needs openenv)
    pkg = importlib.import_module(item["module"])
    importlib.import_module(f"{item['module']}.server")  # puts its vendor/ first on sys.path, as the server does
    origin = importlib.util.find_spec("autoforge").origin
    if not origin.startswith(item["site"]):
        bad.append((item["env"], "autoforge not the vendored copy", origin))
    own = next(getattr(pkg, n) for n in pkg.__all__ if n.endswith("Env"))
    for t in item["tasks"]:
        task_id, script = t["task_id"], scripts[t["task_id"]]
        actions = [(n, a) for n, a in script["actions"]] or [("talk_to_user", {"message": script["final"]})]
        gold, _, tools, n = asyncio.run(_play(url, task_id, actions, MCPToolClient))
        noop, _, _, _ = asyncio.run(_play(url, task_id, [("talk_to_user", {"message": done_msg})], MCPToolClient))
        rewards[task_id] = {"gold": gold, "noop": noop, "env": item["env"], "kind": t["kind"], "calls": n}
        if "talk_to_user" not in tools or any(nm not in tools for nm, _ in script["actions"]):
            bad.append((task_id, "tools", tools))
        envs.add(item["env"])
        kinds.add(t["kind"])
    first = item["tasks"][0]["task_id"]

    async def opening() -> tuple:
        async with own(base_url=url) as env:
            obs = (await env.reset(task_id=first)).observation
            names = [t.name for t in await env.list_tools()]
            return obs.task_id, obs.user, [s["function"]["name"] for s in obs.tool_schemas], names

    tid, user, schema_names, names = asyncio.run(opening())
    if tid != first or not user.strip() or sorted(schema_names) != sorted(names):
        bad.append((first, "reset observation", tid, user[:80], schema_names, names))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--inside", required=True, help="the plan (JSON) written by run()")
    args = ap.parse_args()
    print(json.dumps({"openenv_check": openenv_check(args.inside)}))
