"""The environment bundle (issue 35, autoforge.integrations.bundle): `autoforge bundle` writes tasks and their
environments to one folder; the folder, moved elsewhere with the warehouse deleted, plays every task in the
sandbox and scores it as the episode engine does over the warehouse (gold 1.0, do-nothing 0.0, a rule broken
0.0, the same reward for the same trajectory); a changed file is refused, naming it; a re-run replaces the
bundle in one rename. The warehouse: three environments through the offline factory (effects_calculator:
answer tasks; library: state and boundary tasks, runtime guards and a judged identify-first rule; hr: state
tasks), ~8 s, once per module."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from autoforge.cli import main
from autoforge.errors import ConfigError
from autoforge.integrations.bundle import (FORMAT, FORMAT_VERSION, USER_TOOL, USER_TOOL_SCHEMA, Bundle, BundleError,
                                           TaskEntry, write_bundle)
from autoforge.rollout.agents import ComplyAgent, OracleAgent
from autoforge.rollout.engine import AgentTurn, DEFAULT_SYSTEM_PROMPT
from autoforge.rollout.users import ErrorRates
from autoforge.types import ToolCall

ROOT = Path(__file__).resolve().parents[1]
DONE = "All done: I have completed everything you asked for."


@pytest.fixture(scope="module")
def wh(three_env_corpus) -> str:
    return three_env_corpus  # conftest: effects_calculator (answers), library (writes, rules), hr (writes)


# --------------------------------------------------------------------------- trajectories


def gold_script(t: TaskEntry) -> list[tuple]:
    """The gold calls, then the final word: the gold answer (answer and boundary tasks) or "all done"."""
    steps: list[tuple] = [("call", c.name, dict(c.arguments)) for c in t.gold_calls]
    if t.gold_answer is not None:
        v = t.gold_answer.value
        said = ", ".join(map(str, v)) if isinstance(v, list) else v
        steps.append(("say", f"All done: the {t.gold_answer.field} is {said}."))
    else:
        steps.append(("say", DONE))
    return steps


def noop_script(t: TaskEntry) -> list[tuple]:
    return [("say", DONE)]


def unidentified_script(t: TaskEntry, judged: list[dict]) -> list[tuple] | None:
    """The gold with the lookups an identify-first rule needs left out (None: no such rule binds the task's writes)."""
    for rule in judged:
        if rule["op"] != "identify_first" or not rule.get("via"):
            continue
        names = [c.name for c in t.gold_calls]
        if set(names) & set(rule["tools"]) and set(names) & set(rule["via"]):
            return [s for s in gold_script(t) if not (s[0] == "call" and s[1] in rule["via"])]
    return None


class ScriptAgent:
    """Plays a fixed script through the episode engine: one tool call per turn, or a message to the user."""

    name = "script"

    def __init__(self, scripts: dict[str, list[tuple]]):
        self.scripts = scripts

    def reset(self, ctx) -> None:
        self.steps = list(self.scripts[ctx.task_id])

    def act(self, messages) -> AgentTurn:
        if not self.steps:
            return AgentTurn(give_up="the script is over")
        step = self.steps.pop(0)
        if step[0] == "call":
            return AgentTurn(tool_calls=[ToolCall(name=step[1], arguments=step[2])])
        return AgentTurn(content=step[1])


def play(inputs, agent_factory, task_ids) -> list:
    """The episode engine (play_episodes, as evaluation calls it) over ``inputs``: its episodes."""
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.evaluate import make_user_factory

    tasks, dags, tools, specs, judged = inputs
    user_factory, user_name = make_user_factory("offline")
    return play_episodes([t for t in tasks if t.task_id in task_ids], dags, tools, agent_factory=agent_factory,
                         user_factory=user_factory, agent_name="script", user_name=user_name, specs_by_env=specs,
                         rules_by_env=judged, concurrency=1).episodes


def engine_rewards(inputs, scripts: dict[str, list[tuple]]) -> dict[str, tuple]:
    """task id -> (reward, rule breaks) of each script played by the episode engine."""
    return {e.task_id: (e.reward, list(e.rule_breaks)) for e in play(inputs, lambda: ScriptAgent(scripts), scripts)}


def transcript_script(messages) -> list[tuple]:
    """An engine episode's own actions as a script: its tool calls, and its messages to the user."""
    steps: list[tuple] = []
    for m in messages:
        if m.role == "assistant":
            steps += [("call", c.name, dict(c.arguments)) for c in m.tool_calls or ()]
            if (m.content or "").strip() and not m.tool_calls:
                steps.append(("say", m.content))
    return steps


Comply = ComplyAgent  # the oracle, but it makes the write the user asks for on a boundary task


def bundle_reward(bundle: Bundle, task_id: str, script: list[tuple]) -> tuple:
    """The same script through the bundle runtime: calls, messages through talk_to_user, then reward()."""
    with bundle.episode(task_id) as ep:
        for step in script:
            if step[0] == "call":
                ep.call(step[1], step[2])
            else:
                ep.talk_to_user(step[1])
        return ep.reward(), list(ep.reward_info.get("rule_breaks", []))


# --------------------------------------------------------------------------- the moved bundle


@pytest.fixture(scope="module")
def moved(wh, tmp_path_factory):
    """A bundle of a copy of the warehouse and what the warehouse gives for it; then the bundle is moved and the
    copy deleted."""
    from autoforge.integrations.rows import task_rows
    from autoforge.pipeline.corpus import judged_rules
    from autoforge.pipeline.evaluate import load_eval_inputs

    base = tmp_path_factory.mktemp("moved")
    copy = base / "copy.duckdb"
    shutil.copyfile(wh, copy)
    t0 = time.perf_counter()
    res = write_bundle(str(copy), "v_curated_tasks", base / "made")
    build_s = time.perf_counter() - t0
    tasks, dags, tools, specs = load_eval_inputs(str(copy))
    inputs = (tasks, dags, tools, specs, judged_rules(str(copy), tools))
    entries = {t.task_id: TaskEntry.of(t, "", dags.get(t.dag_id)) for t in tasks}
    scripts = {"gold": {t: gold_script(e) for t, e in entries.items()},
               "noop": {t: noop_script(e) for t, e in entries.items()}}
    broken = {t: unidentified_script(e, inputs[4][e.env_id]) for t, e in entries.items()}
    scripts["unidentified"] = {t: s for t, s in broken.items() if s is not None}
    expected = {name: engine_rewards(inputs, s) for name, s in scripts.items()}
    # the oracle (asks the user for every fact, then follows the DAG) and, on boundary tasks, an oracle that makes the
    # forbidden write: their transcripts, replayed through the bundle later, must score as they did here
    boundary = {t.task_id for t in tasks if t.kind == "boundary"}
    for name, factory, ids in (("oracle", OracleAgent, set(entries)), ("comply", Comply, boundary)):
        eps = play(inputs, factory, ids)
        scripts[name] = {e.task_id: transcript_script(e.messages) for e in eps}
        expected[name] = {e.task_id: (e.reward, list(e.rule_breaks)) for e in eps}
    rows = {r.task_id: r for r in task_rows(str(copy))}
    shutil.move(str(base / "made"), str(base / "elsewhere" / "bundle"))
    for p in base.iterdir():
        if p.name.startswith("copy.duckdb"):
            p.unlink()
    assert not copy.exists() and not (base / "made").exists()
    from autoforge.tasks.identity import RULE_KEY

    identity = {t.task_id for t in tasks if t.kind == "boundary" and t.dag_id in dags  # the user cannot say who they are
                and any(n.params.get(RULE_KEY) for n in dags[t.dag_id].nodes)}
    return {"path": base / "elsewhere" / "bundle", "res": res, "build_s": build_s, "inputs": inputs,
            "scripts": scripts, "expected": expected, "rows": rows, "identity": identity}


def test_the_bundle_is_a_self_describing_folder(moved):
    path, res = moved["path"], moved["res"]
    from autoforge.integrations import outdir

    m = json.loads((path / "manifest.json").read_text())
    assert (outdir.BUNDLE_MANIFEST, outdir.BUNDLE_FORMAT) == ("manifest.json", FORMAT)  # what --out may replace
    assert m["format"] == FORMAT and m["format_version"] == FORMAT_VERSION and m["autoforge_version"]
    assert m["source"]["relation"] == "v_curated_tasks" and m["source"]["warehouse"].endswith("copy.duckdb")
    assert m["created_at"] and "git_commit" in m
    on_disk = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert on_disk == sorted(m["files"]), "the manifest lists every file, and only those"
    assert m["counts"]["tasks"] == res.tasks == len(moved["inputs"][0]) and m["counts"]["environments"] == 3
    assert {"state", "answer"} <= set(m["counts"]["kinds"])
    bundle = Bundle.load(path)
    for info in m["environments"]:
        folder = path / info["folder"]
        assert {p.name for p in folder.iterdir()} == {"environment.json", "tool_code.json", "tool_specs.json",
                                                      "tool_schemas.json", "rules.json", "tasks"}
        env = bundle.env(info["name"])
        assert env.record.state_schema.collections and env.tools and all(t.status == "accepted" for t in env.tools)
        first = info["tasks"][0]["task_id"]
        assert env.schemas == [json.loads(json.dumps(s)) for s in moved["rows"][first].tools]
        task = json.loads((folder / "tasks" / f"{first}.json").read_text())
        assert {k: task[k] for k in ("split", "kind")} == {k: info["tasks"][0][k] for k in ("split", "kind")}
        for field in ("task_id", "env_id", "split", "request", "user_facts", "initial_state", "gold_calls",
                      "gold_state_hash", "gold_answer", "rules", "states_answer", "dag"):
            assert field in task, field
    for kind in ("state", "answer", "boundary"):  # the manifest's index filters without reading the task files
        assert bundle.task_ids(kind=kind) == [t for t in bundle.task_ids() if bundle.task(t).kind == kind]
    hr_train = [t for t in bundle.task_ids() if bundle.task(t).env_name == "hr" and bundle.task(t).split == "train"]
    assert bundle.task_ids(env="hr", split="train") == hr_train
    library = bundle.env("library")
    assert library.rules.runtime and [r["op"] for r in library.rules.judged] == ["identify_first"]
    assert any(r.enforcement == "judged" for r in library.rules.policy)


def test_the_bundle_holds_what_the_engine_reads_from_the_warehouse(moved):
    """Bundle.eval_inputs() equals load_eval_inputs + judged_rules of the warehouse, record for record."""
    got = Bundle.load(moved["path"]).eval_inputs()
    want = moved["inputs"]
    assert sorted(t.task_id for t in got[0]) == sorted(t.task_id for t in want[0])
    assert {t.task_id: t for t in got[0]} == {t.task_id: t for t in want[0]}
    assert {d: got[1][d] for d in got[1]} == {d: want[1][d] for d in got[1]}
    assert got[2] == want[2] and got[3] == want[3] and got[4] == want[4]


def test_moved_bundle_without_the_warehouse_scores_as_the_engine_did(moved):
    """Gold calls 1.0 and do-nothing 0.0 on every task (3 environments: state, answer and boundary tasks); the
    oracle's dialogues (facts asked of the user) 1.0; a write before the user is identified 0.0 naming the judged
    rule; the write a boundary task forbids, refused by the rule engine, 0.0 naming the guard; each reward and
    its rule breaks equal to the engine's over the warehouse for the same trajectory."""
    bundle = Bundle.load(moved["path"])
    kinds_by_env: dict[str, set] = {}
    for name, scripts in moved["scripts"].items():
        for task_id, script in scripts.items():
            got = bundle_reward(bundle, task_id, script)
            assert got == moved["expected"][name][task_id], (name, task_id, got)
            want = 1.0 if name in ("gold", "oracle") else 0.0
            assert got[0] == want, (name, task_id, got)
            if name == "gold":
                kinds_by_env.setdefault(bundle.task(task_id).env_name, set()).add(bundle.task(task_id).kind)
            if name == "unidentified":
                assert got[1] and set(got[1]) <= {r["rule_id"] for r in bundle.env("library").rules.judged}
            if name == "comply" and task_id in moved["identity"]:  # a write without the identity: judged or failed
                assert set(got[1]) <= {bundle.task(task_id).rules[0]}, got
            elif name == "comply":  # the forbidden write was refused by the rule engine: a runtime guard is named
                runtime = {r["rule_id"] for r in bundle.env(bundle.task(task_id).env_id).rules.runtime}
                assert got[1] and got[1][0] in runtime and got[1][0] == bundle.task(task_id).rules[0], got
    assert len(kinds_by_env) == 3 and any("state" in k for k in kinds_by_env.values())
    assert any("answer" in k for k in kinds_by_env.values()), kinds_by_env
    assert moved["scripts"]["unidentified"], "the fixture needs a library task whose write needs the member looked up"
    assert moved["scripts"]["comply"], "the fixture needs boundary tasks"
    assert any(s[0] == "say" and "\n- " in s[1] for sc in moved["scripts"]["oracle"].values() for s in sc), \
        "the oracle asks the user for facts"
    # the whole engine runs from the bundle too: the same rewards as over the warehouse
    assert engine_rewards(bundle.eval_inputs(), moved["scripts"]["gold"]) == moved["expected"]["gold"]


def test_the_runtime_loads_no_warehouse_prefect_or_torch(moved):
    import subprocess
    import sys

    code = ("import sys; from autoforge.integrations.bundle import Bundle; b = Bundle.load(sys.argv[1]); "
            "t = b.task(b.task_ids()[0]); ep = b.episode(t.task_id); "
            "[ep.call(c.name, c.arguments) for c in t.gold_calls]; r = ep.reward(); ep.close(); "
            "print(r, sorted(m for m in ('duckdb', 'sqlalchemy', 'prefect', 'torch', 'autoforge.warehouse', "
            "'autoforge.pipeline') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(moved["path"])], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(" ", 1)[1].strip() == "[]", out.stdout


def test_prompt_tools_and_the_offline_user(moved):
    bundle = Bundle.load(moved["path"])
    task_id = next(t for t in bundle.task_ids() if bundle.task(t).user_facts and bundle.task(t).kind == "state")
    row = moved["rows"][task_id]
    with bundle.episode(task_id, user_tool=False) as ep:  # the engine's own opening, as task_rows gives it
        p = ep.prompt()
        assert p.messages() == [m.model_dump() for m in row.prompt] and p.system == DEFAULT_SYSTEM_PROMPT
        assert p.tools == row.tools
    with bundle.episode(task_id) as ep:  # the user as a tool: its schema is listed, call() routes it
        p = ep.prompt()
        assert p.tools[-1] == USER_TOOL_SCHEMA and USER_TOOL in p.system and p.user == row.request
        key = sorted(bundle.task(task_id).user_facts)[0]
        from autoforge import dialogue as D

        reply = ep.call(USER_TOOL, {"message": f"Could you please tell me:\n- {D.fact_words(key)}"})
        assert D.states_value(reply, bundle.task(task_id).user_facts[key]), reply
        assert "error" in json.loads(ep.call("no_such_tool", {}))
        assert D.STOP in ep.talk_to_user(DONE) and ep.ended
        assert "ended the conversation" in json.loads(ep.call(row.tools[0]["function"]["name"], {}))["error"]
        assert ep.reward() == 0.0 and ep.reward_info["state_match"] is False
        assert ep.reset() == row.request and not ep.ended
        ep.close()
        with pytest.raises(ConfigError, match="closed"):
            ep.call(row.tools[0]["function"]["name"], {})
    fact = bundle.task(task_id).user_facts[key]
    with bundle.episode(task_id, user_error_rate=ErrorRates(wrong_fact=1.0)) as ep:  # an injected wrong fact
        reply = ep.talk_to_user(f"Could you please tell me:\n- {D.fact_words(key)}")
        assert D.fact_words(key) in reply and not D.states_value(reply, fact), reply
    with pytest.raises(BundleError, match="no task 'task_nope'"):
        bundle.episode("task_nope")


def test_a_changed_or_missing_file_is_refused_naming_it(moved, tmp_path):
    copy = tmp_path / "b"
    shutil.copytree(moved["path"], copy)
    bundle = Bundle.load(copy)
    task_id = bundle.task_ids()[0]
    rel = f"{bundle.env(bundle.task(task_id).env_id).folder}/tasks/{task_id}.json"
    data = json.loads((copy / rel).read_text())
    data["gold_state_hash"] = "h2:" + "0" * 64
    (copy / rel).write_text(json.dumps(data, indent=1))
    with pytest.raises(BundleError, match=f"{rel} does not match manifest.json"):
        Bundle.load(copy)
    lazy = Bundle.load(copy, verify=False)  # reading the file checks it too
    with pytest.raises(BundleError, match=rel):
        lazy.episode(task_id)
    shutil.copyfile(moved["path"] / rel, copy / rel)
    Bundle.load(copy)
    code = copy / bundle.env(bundle.task(task_id).env_id).folder / "tool_code.json"
    code.unlink()
    with pytest.raises(BundleError, match="tool_code.json is missing"):
        Bundle.load(copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(BundleError, match="upgrade autoforge"):
        Bundle.load(copy)
    (copy / "manifest.json").write_text(json.dumps({**manifest, "files": {**manifest["files"], "../x": {
        "sha256": "0" * 64, "bytes": 1}}}))
    with pytest.raises(BundleError, match="not a file inside the bundle"):
        Bundle.load(copy)
    with pytest.raises(BundleError, match="not an environment bundle"):
        Bundle.load(tmp_path)


def test_cli_writes_replaces_atomically_and_refuses_other_folders(wh, tmp_path, capsys, monkeypatch):
    out = tmp_path / "bundle"
    argv = ["bundle", "v_curated_tasks", "--out", str(out), "--warehouse", wh]
    assert main(argv) == 0
    assert "to " + str(out) in capsys.readouterr().out
    first = json.loads((out / "manifest.json").read_text())
    assert main(argv) == 0  # the same again: the same files, byte for byte (only the manifest's time may differ)
    assert json.loads((out / "manifest.json").read_text())["files"] == first["files"]
    assert main([*argv, "--env", "library", "--split", "train", "--limit", "3"]) == 0
    narrow = Bundle.load(out)
    assert len(narrow.task_ids()) == 3 and [e.name for e in narrow.manifest.environments] == ["library"]
    assert narrow.manifest.source.model_dump(include={"env", "split", "limit"}) == {"env": "library", "split": "train",
                                                                                  "limit": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no temporary folder left beside it
    capsys.readouterr()

    calls = []
    real = TaskEntry.of

    def failing(*a, **k):  # the disk fills up halfway through the tasks
        calls.append(1)
        if len(calls) > 2:
            raise OSError(28, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(TaskEntry, "of", failing)
    assert main(argv) == 1
    monkeypatch.undo()
    assert "No space left" in capsys.readouterr().err
    assert Bundle.load(out).task_ids() == narrow.task_ids()  # the previous bundle, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["bundle", "v_curated_tasks", "--out", str(foreign), "--warehouse", wh]) == 2
    assert "not an autoforge export" in capsys.readouterr().err and (foreign / "notes.txt").read_text() == "keep me"
    assert main(["bundle", "v_curated_tasks", "--out", str(tmp_path / "x"), "--warehouse", wh,
                 "--env", "atlantis"]) == 2
    assert "no environment of that name" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["bundle", "runs", "--out", str(tmp_path / "x"), "--warehouse", wh]) == 2
    assert "not a tasks relation" in capsys.readouterr().err


def test_a_killed_run_leaves_the_previous_bundle(wh, tmp_path):
    """SIGKILL while the new bundle is being written (task files are appearing in its temporary folder beside
    --out): --out is still the previous bundle, whole; only the temporary folder is left beside it."""
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "bundle"
    assert main(["bundle", "v_curated_tasks", "--out", str(out), "--warehouse", wh, "--limit", "2"]) == 0
    before = Bundle.load(out).task_ids()
    proc = subprocess.Popen([sys.executable, "-m", "autoforge", "bundle", "v_curated_tasks", "--out", str(out),
                             "--warehouse", wh], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        writing = ".bundle.tmp-*/envs/*/tasks/*"  # the new bundle's task files appearing
        while proc.poll() is None and time.time() < deadline and not list(tmp_path.glob(writing)):
            time.sleep(0.002)
        killed = proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL) if killed else None
    finally:
        proc.wait(timeout=60)
    if not killed:  # the run finished before its temporary folder was seen: then it is the whole new bundle
        assert len(Bundle.load(out).task_ids()) > len(before)
        return
    assert Bundle.load(out).task_ids() == before
    assert {p.name for p in tmp_path.iterdir()} - {"bundle"} <= {p.name for p in tmp_path.glob(".bundle.tmp-*")}


def test_bundle_help_explains(capsys):
    with pytest.raises(SystemExit) as done:
        main(["bundle", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in ("manifest.json", "sha256", "--env", "--split", "--limit", "no warehouse", "Bundle.load(DIR)",
                  "talk_to_user", "reward()", "replaces it only when complete"):
        assert words in text, words
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "bundle" in capsys.readouterr().out
