"""The NeMo Gym export checked by NeMo Gym's own code (issue 35; run by ``benchmarks/interop.py --only nemo-gym``).

NeMo Gym 0.7.0 declares ``Requires-Python >=3.13.14``; this machine has Python 3.13.0, so its venv
(``$AUTOFORGE_INTEROP_DIR/nemo-gym-0.7.0``) is made with 3.13.0 and ``pip install --ignore-requires-python``
(``interop.py --setup --only nemo-gym``). The check is therefore NeMo Gym's code on an older Python than it
supports: what it shows is that the generated server speaks NeMo Gym 0.7's API, not that NeMo Gym supports
3.13.0. Where a Python >= 3.13.14 is installed, point ``NEMO_GYM_PYTHON`` at it before ``--setup``.

Inside the venv, :func:`nemo_gym_check` builds the exported ``AutoforgeResourcesServer`` (NeMo Gym's
``SimpleResourcesServer`` subclass, with its session middleware) and drives it with FastAPI's ``TestClient``
as NeMo Gym's ``simple_agent`` does: ``/seed_session`` with the dataset row, the gold trajectory's calls as
``POST /<tool>`` under the session cookie, then ``/verify`` with the row and a Responses API ``response``
holding those calls and the final message (``NeMoGymResponse`` validates it): gold 1.0. The do-nothing run
(seed, then verify with only a closing message, ``DONE``): 0.0. A re-verification of the gold response without the
session (NeMo Gym's ``reverify``) replays it: 1.0 again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import interop

LIBRARY = "nemo-gym"
DONE = interop.DONE  # the do-nothing run's last word


def run(warehouse: str, relation: str, tmp: Path, keep: Path | None = None, per_env: int | None = 2) -> dict:
    """Export ``relation`` for NeMo Gym; check it in NeMo Gym's venv (see the module docstring)."""
    from autoforge.integrations.nemo_gym import export_nemo_gym

    py = interop.venv_python(LIBRARY)
    if py is None:
        return {"library": LIBRARY, "skipped": f"no venv at {interop.venv_of(LIBRARY)} "
                                               "(python benchmarks/interop.py --setup --only nemo-gym)"}
    out = keep or tmp / "nemo_gym_export"
    export_nemo_gym(warehouse, relation, str(out))
    server = out / "resources_servers" / "autoforge"
    scripts = interop.oracle_scripts(server / "bundle")
    rows = [json.loads(ln) for f in sorted((server / "data").glob("*.jsonl")) for ln in f.read_text().splitlines()]
    picked = interop._pick([(r["autoforge_task_id"], r["autoforge_env"], r["autoforge_kind"]) for r in rows], per_env)
    plan = tmp / "nemo_gym_plan.json"
    plan.write_text(json.dumps({t: scripts[t] for t in picked}))
    res = interop.inside(py, [__file__, str(server), str(plan)], "nemo_gym_check", "NeMo Gym",
                         interop.child_env(tmp), 1200)
    meta = {r["autoforge_task_id"]: r for r in rows}
    rewards = res["rewards"]
    bad = [(t, r) for t, r in rewards.items() if (r["gold"], r["noop"], r["reverify"]) != (1.0, 0.0, 1.0)]
    envs = sorted({meta[t]["autoforge_env"] for t in rewards})
    return {"library": LIBRARY, "version": res["version"], "python": res["python"], "tasks": len(rewards),
            "envs": len(envs), "env_names": envs, "kinds": sorted({meta[t]["autoforge_kind"] for t in rewards}),
            "exported": len(rows), "rewards": rewards,
            "gold": min(r["gold"] for r in rewards.values()) if not bad else [r["gold"] for r in rewards.values()],
            "noop": max(r["noop"] for r in rewards.values()) if not bad else [r["noop"] for r in rewards.values()],
            "bad": bad}


# --------------------------------------------------------------------------- inside NeMo Gym's venv


def _response(tools: list[dict], actions: list, final: str) -> dict:
    """A Responses API response as a model would return it: the calls (with their outputs) and a last message."""
    output: list[dict] = []
    for i, (name, args) in enumerate(actions):
        output.append({"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": f"call_{i}",
                       "id": f"fc_{i}", "status": "completed"})
        output.append({"type": "function_call_output", "call_id": f"call_{i}", "output": "(recorded)"})
    output.append({"type": "message", "id": "msg_final", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": final, "annotations": []}]})
    return {"id": "resp_autoforge", "created_at": 0.0, "model": "oracle", "object": "response", "output": output,
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": tools}


def nemo_gym_check(server_dir: str, plan: dict) -> dict:
    """NeMo Gym's server classes and session middleware over the exported resources server."""
    import importlib.util
    import platform
    from importlib.metadata import version
    from unittest.mock import MagicMock

    from fastapi.testclient import TestClient
    from nemo_gym.server_utils import ServerClient

    spec = importlib.util.spec_from_file_location("autoforge_nemo_gym_app", Path(server_dir) / "app.py")
    app_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app_mod)
    config = app_mod.AutoforgeResourcesServerConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="autoforge")
    server = app_mod.AutoforgeResourcesServer(config=config, server_client=MagicMock(spec=ServerClient))
    app = server.setup_webserver()
    rows = {}
    for f in sorted((Path(server_dir) / "data").glob("*.jsonl")):
        for ln in f.read_text().splitlines():
            row = json.loads(ln)
            rows[row["autoforge_task_id"]] = row
    rewards = {}
    for task_id, script in plan.items():
        row = rows[task_id]
        tools = row["responses_create_params"]["tools"]
        got = {}
        for mode in ("gold", "noop"):
            client = TestClient(app)  # its cookie jar carries NeMo Gym's session cookie between requests
            client.post("/seed_session", json=row).raise_for_status()
            actions, final = (script["actions"], script["final"]) if mode == "gold" else ([], DONE)
            for name, args in actions:
                r = client.post(f"/{name}", json=args)
                r.raise_for_status()
            r = client.post("/verify", json={**row, "response": _response(tools, actions, final)})
            r.raise_for_status()
            got[mode] = r.json()["reward"]
        fresh = TestClient(app)  # no session: the stored rollout is replayed
        r = fresh.post("/verify", json={**row, "response": _response(tools, script["actions"], script["final"])})
        r.raise_for_status()
        got["reverify"] = r.json()["reward"]
        got["engine"] = script["engine_reward"]
        rewards[task_id] = got
    return {"version": version("nemo-gym"), "python": platform.python_version(), "rewards": rewards}


if __name__ == "__main__":
    print(json.dumps({"nemo_gym_check": nemo_gym_check(sys.argv[1], json.loads(Path(sys.argv[2]).read_text()))}))
