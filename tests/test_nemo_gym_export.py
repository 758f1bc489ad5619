"""Issue 35: ``autoforge export --format nemo-gym`` (a NeMo Gym resources server folder). The fast tests need no NeMo
Gym: the layout and the server's session logic (:class:`NemoGymSessions`, what app.py's routes call). The slow one
runs NeMo Gym's own server classes over the export (``benchmarks/interop.py --only nemo-gym``; skipped where its
cached venv is missing)."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autoforge.errors import ConfigError
from autoforge.integrations.bundle import USER_TOOL, Bundle, write_bundle
from autoforge.integrations.harbor import DONE, gold_trajectories
from autoforge.integrations.nemo_gym import NemoGymSessions, export_nemo_gym, response_messages

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import interop  # noqa: E402


def _response(actions, final):
    out = [{"type": "function_call", "name": n, "arguments": json.dumps(a), "call_id": f"c{i}"}
           for i, (n, a) in enumerate(actions)]
    return {"output": out + [{"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": final}]}]}


@pytest.fixture(scope="module")
def export(three_env_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("nemo") / "out"
    res = export_nemo_gym(three_env_corpus, "v_curated_tasks", str(out))
    return res, out / "resources_servers" / "autoforge"


def test_layout_config_and_rows(export):
    res, server = export
    assert res.format == "nemo-gym" and sum(res.splits.values()) >= 6
    marker = json.loads((server.parents[1] / "autoforge_export.json").read_text())
    assert marker["format"] == "nemo-gym" and marker["environments"] == 3
    app = (server / "app.py").read_text()
    tree = ast.parse(app)
    classes = {n.name: [b.id for b in n.bases if isinstance(b, ast.Name)]
               for n in tree.body if isinstance(n, ast.ClassDef)}
    assert classes["AutoforgeResourcesServer"] == ["SimpleResourcesServer"]
    tools = ast.literal_eval(next(n.value for n in tree.body if isinstance(n, ast.Assign)
                                  and getattr(n.targets[0], "id", "") == "TOOLS"))
    assert USER_TOOL in tools
    config = yaml.safe_load((server / "configs" / "autoforge.yaml").read_text())
    rs = config["autoforge_resources_server"]["resources_servers"]["autoforge"]
    assert rs["entrypoint"] == "app.py"
    agent = config["autoforge_simple_agent"]["responses_api_agents"]["simple_agent"]
    assert agent["resources_server"]["name"] == "autoforge_resources_server"
    bundle = Bundle.load(server / "bundle")
    n_rows = 0
    for ds in agent["datasets"]:
        path = server.parents[1] / ds["jsonl_fpath"]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            n_rows += 1
            params = row["responses_create_params"]
            assert [m["role"] for m in params["input"]] == ["system", "user"]
            names = {t["name"] for t in params["tools"]}
            assert USER_TOOL in names and names <= set(tools)
            assert all(t["type"] == "function" and "parameters" in t for t in params["tools"])
            assert bundle.task(row["autoforge_task_id"]).kind == row["autoforge_kind"]
    assert n_rows == len(bundle.task_ids())
    assert (server / "vendor" / "autoforge" / "integrations" / "nemo_gym.py").is_file()
    assert "pydantic==" in (server / "requirements.txt").read_text()


def test_sessions_score_gold_one_and_nothing_zero_live_and_replayed(export):
    """What the routes do: seed, the gold calls under the session, verify -> 1.0; seed then verify with nothing
    done -> 0.0; a verify without a live session replays the response (NeMo Gym's re-verification) -> 1.0;
    two sessions do not see each other's episodes."""
    _, server = export
    sessions = NemoGymSessions(server / "bundle")
    golds = gold_trajectories(sessions.bundle)
    picked = interop._pick([(t, sessions.bundle.task(t).env_id, sessions.bundle.task(t).kind)
                            for t in sessions.bundle.task_ids()], 1)
    assert len(picked) == 3
    for t in picked:
        g = golds[t]
        sessions.seed("a", t)
        sessions.seed("b", t)
        for name, args in g["actions"]:
            json.loads(json.dumps(sessions.call("a", name, args)))
        assert sessions.verify("a", t, _response(g["actions"], g["final"]))[0] == 1.0
        assert sessions.verify("b", t, _response([], DONE))[0] == 0.0  # b did nothing
        reward, info = sessions.verify("gone", t, _response(g["actions"], g["final"]))
        assert (reward, info["scored"]) == (1.0, "replay")
    assert "no task is running" in sessions.call("nobody", USER_TOOL, {"message": "hi"})
    sessions.seed("c", picked[0])
    assert "unknown tool" in sessions.call("c", "no_such_tool", {})
    assert "JSON object" in sessions.call("c", USER_TOOL, ["x"])


def test_response_messages_reads_the_responses_api_output():
    msgs, final = response_messages(_response([("a", {"x": 1}), ("b", {})], "done"))
    assert [len(m.get("tool_calls") or []) for m in msgs] == [2, 0] and final == "done"
    assert response_messages({"output": [{"type": "function_call", "name": "a", "arguments": "{}"}]})[1] is None


def test_a_moved_bundle_exports_with_the_warehouse_deleted(three_env_corpus, tmp_path):
    copy = tmp_path / "wh.duckdb"
    shutil.copyfile(three_env_corpus, copy)
    write_bundle(str(copy), "v_curated_tasks", tmp_path / "b1")
    copy.unlink()
    shutil.move(str(tmp_path / "b1"), str(tmp_path / "moved"))
    res = export_nemo_gym(None, None, str(tmp_path / "out"), bundle=str(tmp_path / "moved"))
    sessions = NemoGymSessions(Path(res.out) / "resources_servers" / "autoforge" / "bundle")
    t = sessions.bundle.task_ids()[0]
    g = gold_trajectories(sessions.bundle)[t]
    sessions.seed("s", t)
    for name, args in g["actions"]:
        sessions.call("s", name, args)
    assert sessions.verify("s", t, _response(g["actions"], g["final"]))[0] == 1.0


def test_a_tool_named_like_a_nemo_gym_route_is_refused(monkeypatch, export):
    from autoforge.integrations import nemo_gym

    _, server = export
    bundle = Bundle.load(server / "bundle")
    monkeypatch.setattr(nemo_gym, "RESERVED", frozenset({USER_TOOL}))
    with pytest.raises(ConfigError, match="shadow NeMo Gym's own routes"):
        nemo_gym.tool_names(bundle)


@pytest.mark.slow
@pytest.mark.skipif(interop.venv_python("nemo-gym") is None,
                    reason=f"no NeMo Gym venv at {interop.venv_of('nemo-gym')} (python benchmarks/interop.py --setup)")
def test_nemo_gym_serves_the_export_with_its_own_code():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "interop.py"), "--only", "nemo-gym", "--json",
                          "--tasks-per-env", "all"],
                         capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert re.fullmatch(r"nemo-gym 0\.7\.0: gold 1\.0 noop 0\.0 \(\d+ tasks, 3 envs\)", lines[0]), lines
    res = json.loads(lines[1])
    assert not res["bad"] and {"state", "answer"} <= set(res["kinds"]) and res["tasks"] == res["exported"]
    assert all(r["reverify"] == 1.0 for r in res["rewards"].values())
    assert lines[2].startswith("rewards agree:"), lines
    check = subprocess.run([str(interop.venv_python("nemo-gym")), "-m", "pip", "check"], capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, (check.stdout, check.stderr)
