"""Issue 35, second part: a finished transcript scored from a bundle (``Bundle.replay``) and the verl export
(``autoforge export --format verl``: tools.yaml, verl's rows, reward.py, the bundle) with the per-trajectory
episodes behind its tool class, all without verl (verl's own loader and agent loop run in
``tests/test_interop.py``, slow). The warehouse: three environments through the offline factory
(effects_calculator: answer tasks; library: state and boundary tasks with runtime guards and a judged rule; hr:
state tasks), ~14 s, once per module."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autoforge.cli import main
from autoforge.errors import ConfigError
from autoforge.integrations.bundle import USER_TOOL, Bundle, BundleError, TaskEntry, parse_transcript, write_bundle
from autoforge.integrations.verl_runtime import BUNDLE_ENV, ToolSessions, ground_truth

ROOT = Path(__file__).resolve().parents[1]
DONE = "All done: I have completed everything you asked for."


@pytest.fixture(scope="module")
def wh(three_env_corpus) -> str:
    return three_env_corpus  # conftest: effects_calculator (answers), library (writes, rules), hr (writes)


@pytest.fixture(scope="module")
def bundle(wh, tmp_path_factory) -> Bundle:
    out = tmp_path_factory.mktemp("b") / "bundle"
    write_bundle(wh, "v_curated_tasks", out)
    return Bundle.load(out)


@pytest.fixture(scope="module")
def export(wh, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("e") / "verl"
    assert main(["export", "v_curated_tasks", "--format", "verl", "--out", str(out), "--warehouse", wh]) == 0
    return out


# --------------------------------------------------------------------------- trajectories


def final_word(t: TaskEntry) -> str:
    if t.gold_answer is None:
        return DONE
    v = t.gold_answer.value
    return f"All done: the {t.gold_answer.field} is {', '.join(map(str, v)) if isinstance(v, list) else v}."


def gold_steps(t: TaskEntry) -> list[tuple[str, dict]]:
    """The gold calls, then the final word said to the user through talk_to_user."""
    return [(c.name, dict(c.arguments)) for c in t.gold_calls] + [(USER_TOOL, {"message": final_word(t)})]


def live_reward(bundle: Bundle, task_id: str, steps, final: str | None) -> tuple[float | None, list[str]]:
    """The steps played in a live episode, as a trainer's loop plays them; its reward."""
    with bundle.episode(task_id) as ep:
        observations = [ep.call(name, args) for name, args in steps]
        return ep.reward(final), observations


def as_messages(bundle: Bundle, task_id: str, steps, final: str | None) -> list[dict]:
    """OpenAI-style chat messages of the steps (tool results as the live episode gave them)."""
    with bundle.episode(task_id) as ep:
        msgs = ep.prompt().messages()
        for i, (name, args) in enumerate(steps):
            msgs.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
            msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": ep.call(name, args)})
    return msgs + ([{"role": "assistant", "content": final}] if final else [])


def as_verl_text(bundle: Bundle, task_id: str, steps, final: str | None) -> str:
    """The response text verl's reward manager decodes for the trajectory (the shipped Hermes tokenizer's chat
    template, special tokens skipped)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ROOT / "autoforge" / "data" / "base_policy"), local_files_only=True)
    msgs = as_messages(bundle, task_id, steps, final)[2:]
    text = tok.apply_chat_template(msgs, tokenize=False)
    return tok.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True)


def qwen_text(steps, observations, final: str | None) -> str:
    """The same as a Qwen2.5-style template decodes it (tool results in <tool_response> user turns)."""
    parts = []
    for (name, args), obs in zip(steps, observations):
        parts.append(f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>\nuser\n'
                     f"<tool_response>\n{obs}\n</tool_response>\nassistant\n")
    return "".join(parts) + (final or "")


# --------------------------------------------------------------------------- replay


def test_replay_gives_the_live_reward_in_every_form(bundle):
    """Gold transcripts 1.0 and do-nothing 0.0 on every task (3 environments: state writes, answers, boundary
    refusals), each equal to the live episode's reward, whether the transcript comes as calls, OpenAI messages,
    the text verl decodes (two chat templates) or autoforge Message records; a gold run whose final word lacks
    the answer, and one missing its last write, score 0.0 as they did live."""
    from autoforge.types import Message, ToolCall

    kinds: dict[str, set] = {}
    for task_id in bundle.task_ids():
        t = bundle.task(task_id)
        kinds.setdefault(t.env_name, set()).add(t.kind)
        steps, final = gold_steps(t), final_word(t)
        live, observations = live_reward(bundle, task_id, steps, final)
        assert live == 1.0, (task_id, t.kind)
        forms = {"calls": steps, "messages": as_messages(bundle, task_id, steps, final),
                 "verl text": as_verl_text(bundle, task_id, steps, final),
                 "qwen text": qwen_text(steps, observations, final),
                 "records": [Message(role="assistant", content="", tool_calls=[ToolCall(name=n, arguments=a)])
                             for n, a in steps] + [Message(role="assistant", content=final)]}
        for form, transcript in forms.items():
            got = bundle.replay(task_id, transcript, final_message=final if form == "calls" else None)
            assert got == live, (task_id, form, got, bundle.task(task_id).kind)
        # do nothing: the final word alone
        assert live_reward(bundle, task_id, [], DONE)[0] == 0.0
        for transcript in ([], [{"role": "assistant", "content": DONE}], DONE):
            assert bundle.replay(task_id, transcript) == 0.0, (task_id, transcript)
        if t.gold_answer is not None:  # the right calls, but the answer never stated
            vague = [s for s in steps if s[0] != USER_TOOL] + [(USER_TOOL, {"message": DONE})]
            assert live_reward(bundle, task_id, vague, DONE)[0] == bundle.replay(task_id, vague, final_message=DONE)
        if t.kind == "state":  # the last write left out
            short = steps[:-2] + steps[-1:]
            want = live_reward(bundle, task_id, short, final)[0]
            assert want == 0.0 and bundle.replay(task_id, short, final_message=final) == want
    assert len(kinds) == 3 and {"state", "answer"} <= set().union(*kinds.values()), kinds


def test_parse_transcript_reads_calls_as_verl_does():
    """Hermes blocks as verl's parser reads them (a block without "arguments" or with broken JSON is dropped), the
    turns split at the template's role lines, the final message the last turn without a call."""
    text = ('Looking it up.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>{"name": "b", "arguments": {}}</tool_call>tool\n{"ok": true}\nassistant\n'
            '<tool_call>{"name": "c"}</tool_call><tool_call>{broken</tool_call>\nuser\n<tool_response>\n'
            '<tool_call>{"name": "echoed", "arguments": {}}</tool_call>\n</tool_response>\nassistant\nDone: 42.')
    p = parse_transcript(text)
    assert p.steps == [[("a", {"x": 1}), ("b", {})]] and p.final == "Done: 42."
    assert parse_transcript("<|im_start|>assistant\nonly words<|im_end|>").final == "only words"
    ended_on_a_call = parse_transcript('<tool_call>{"name": "a", "arguments": {}}</tool_call>tool\n{}\nassistant\n')
    assert ended_on_a_call.calls == [("a", {})] and ended_on_a_call.final is None
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "Which account?"}, {"role": "user", "content": "A1"},
            {"role": "assistant", "content": '<tool_call>{"name": "a", "arguments": "{\\"k\\": 2}"}</tool_call>'},
            {"role": "tool", "content": "{}"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"function": {"name": "b", "arguments": '{"z": 3}'}}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Bye."}]}]
    p = parse_transcript(msgs)
    assert p.steps == ["Which account?", [("a", "{\"k\": 2}")], [("b", {"z": 3})]] and p.final == "Bye."
    assert parse_transcript([("a", '{"x": 1}'), {"name": "b"}, {"function": {"name": "c", "arguments": {}}}]).calls \
        == [("a", {"x": 1}), ("b", {}), ("c", {})]
    with pytest.raises(ConfigError, match="not a tool call"):
        parse_transcript([42])


def test_replay_runs_what_verl_ran(bundle):
    """Calls past verl's max_parallel_calls in one turn never ran, calls to tools the task lacks or with arguments
    that are not an object did nothing: the replay skips them too."""
    task_id = next(t for t in bundle.task_ids()
                   if bundle.task(t).kind == "state" and len(bundle.task(t).gold_calls) > 1)
    t = bundle.task(task_id)
    first, *rest = [f'<tool_call>{json.dumps({"name": c.name, "arguments": c.arguments})}</tool_call>'
                    for c in t.gold_calls]
    say = json.dumps({"name": USER_TOOL, "arguments": {"message": DONE}})
    one_turn = first + "".join(rest) + f"tool\n{{}}\nassistant\n<tool_call>{say}</tool_call>tool\nok\nassistant\n{DONE}"
    assert bundle.replay(task_id, one_turn) == 1.0  # every call of the turn ran
    assert bundle.replay(task_id, one_turn, max_parallel_calls=1) == 0.0  # only the first did
    noise = [("no_such_tool", {}), (t.gold_calls[0].name, "not an object")]
    steps = noise + [(c.name, c.arguments) for c in t.gold_calls] + [(USER_TOOL, {"message": DONE})]
    assert bundle.replay(task_id, steps, final_message=DONE) == 1.0
    with pytest.raises(ConfigError, match="max_parallel_calls"):
        bundle.replay(task_id, steps, max_parallel_calls=0)


# --------------------------------------------------------------------------- the export


def load_reward(folder: Path):
    """reward.py as verl loads a custom_reward_function (a file, by path)."""
    spec = importlib.util.spec_from_file_location(f"reward_{abs(hash(str(folder)))}", folder / "reward.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


def rows_of(folder: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [r for s in ("train", "test") for r in pq.read_table(folder / f"{s}.parquet").to_pylist()]


def test_verl_folder_tools_rows_and_reward(export):
    """tools.yaml: one entry per tool of every environment plus talk_to_user, each the one generic class with
    config.type native and its OpenAI schema (every parameter typed, as verl's schema model needs); the rows:
    verl's layout, each task's create_kwargs and tool selection; reward.py: gold 1.0, do-nothing 0.0."""
    b = Bundle.load(export / "bundle")
    tools = yaml.safe_load((export / "tools.yaml").read_text())["tools"]
    names = [e["tool_schema"]["function"]["name"] for e in tools]
    want = {s["function"]["name"] for e in b.environments for s in b.env(e).schemas} | {USER_TOOL}
    assert sorted(names) == names and set(names) == want
    for e in tools:
        assert e["class_name"] == "autoforge.integrations.verl_tool.AutoForgeTool"
        assert e["config"]["type"] == "native" and e["tool_schema"]["type"] == "function"
        fn = e["tool_schema"]["function"]
        assert fn["name"] == e["config"]["tool"] and isinstance(fn["description"], str)
        assert all(isinstance(p.get("type"), (str, list)) for p in fn["parameters"]["properties"].values())
    compute = load_reward(export)
    rows = rows_of(export)
    assert len(rows) == len(b.task_ids()) and set(rows[0]) == {"data_source", "prompt", "ability", "agent_name",
                                                              "reward_model", "extra_info"}
    for r in rows:
        x = r["extra_info"]
        t = b.task(x["task_id"])
        with b.episode(t.task_id) as ep:
            assert r["prompt"] == ep.prompt().messages()  # the opening the live episode plays
            assert x["tool_selection"] == x["env_tools"] == [s["function"]["name"] for s in ep.prompt().tools]
        assert r["agent_name"] == "tool_agent"
        assert r["reward_model"] == {"style": "rule", "ground_truth": ground_truth(t)}
        assert set(x["tools_kwargs"]) == set(names)
        steps, final = gold_steps(t), final_word(t)
        text = qwen_text(steps, [""] * len(steps), final)
        assert compute(r["data_source"], text, r["reward_model"]["ground_truth"], x) == 1.0, t.task_id
        assert compute(r["data_source"], DONE, r["reward_model"]["ground_truth"], x) == 0.0
    r = rows[0]
    with pytest.raises(BundleError, match="different exports"):
        compute(r["data_source"], "", "h2:" + "0" * 64, r["extra_info"])
    card = (export / "README.md").read_text()
    for words in ("multi_turn.tool_config_path=", "custom_reward_function.path=", "max_tool_response_length",
                  BUNDLE_ENV, "| `agent_name` |"):
        assert words in card, words


def test_a_moved_export_and_a_bundle_without_the_warehouse(export, bundle, tmp_path, monkeypatch, capsys):
    """The folder moved: reward.py plays the bundle beside it; the tools follow AUTOFORGE_BUNDLE. --bundle exports
    a bundle with no warehouse (the same rows, bundle paths aside); an export of other tasks is refused."""
    moved = tmp_path / "moved"
    shutil.copytree(export, moved)
    compute = load_reward(moved)
    rows = rows_of(moved)
    r = rows[0]
    t = bundle.task(r["extra_info"]["task_id"])
    gold = qwen_text(gold_steps(t), [""] * len(gold_steps(t)), final_word(t))
    shutil.move(str(export / "bundle"), str(tmp_path / "away"))  # the original place is gone
    try:
        assert compute(r["data_source"], gold, r["reward_model"]["ground_truth"], r["extra_info"]) == 1.0
        sessions = ToolSessions()
        kw = r["extra_info"]["tools_kwargs"][USER_TOOL]["create_kwargs"]
        iid = sessions.create(None, kw)
        with pytest.raises(BundleError, match=BUNDLE_ENV):
            asyncio.run(sessions.call(iid, USER_TOOL, {"message": "hi"}))
        monkeypatch.setenv(BUNDLE_ENV, str(moved / "bundle"))
        iid = sessions.create(None, kw)
        assert asyncio.run(sessions.call(iid, USER_TOOL, {"message": "hi"}))
        sessions.release(iid)
    finally:
        shutil.move(str(tmp_path / "away"), str(export / "bundle"))
    monkeypatch.delenv(BUNDLE_ENV)
    out = tmp_path / "from_bundle"
    assert main(["export", "--format", "verl", "--bundle", str(bundle.root), "--out", str(out),
                 "--warehouse", str(tmp_path / "no_such.duckdb")]) == 0
    assert "tools.yaml" in capsys.readouterr().out and not (tmp_path / "no_such.duckdb").exists()
    again = rows_of(out)
    for a, b_ in zip(rows, again):
        for row in (a, b_):
            for kw in row["extra_info"]["tools_kwargs"].values():
                if kw:
                    kw["create_kwargs"]["bundle"] = None
    assert again == rows and (out / "tools.yaml").read_text().split("\n", 3)[3] == \
        (export / "tools.yaml").read_text().split("\n", 3)[3]
    assert main(["export", "--format", "hf", "--bundle", str(bundle.root), "--out", str(tmp_path / "x")]) == 2
    assert "--bundle is read by the trainer formats" in capsys.readouterr().err
    assert main(["export", "--format", "verl", "--out", str(tmp_path / "x")]) == 2
    assert "--bundle DIR" in capsys.readouterr().err
    assert main(["export", "tasks", "--format", "verl", "--bundle", str(bundle.root),
                 "--out", str(tmp_path / "x")]) == 2
    assert "drop 'tasks'" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_a_tool_name_two_environments_define_differently_is_renamed_in_each(bundle):
    """verl keeps one tool per name: a shared name with one definition stays one tool; with two, each environment's
    becomes <env>__<name> (config.tool keeps its own name), the rows list both names, and the reward maps the
    renamed calls back (a call by the bare name never ran in verl: it scores as not made)."""
    from autoforge.integrations.verl import _escape, tool_entries, verl_tool_schema

    class Env:
        def __init__(self, name, schemas):
            self.name, self._s, self.folder = name, schemas, f"envs/{name}"

        def tool_schemas(self, style):
            return json.loads(json.dumps(self._s))

    def fn(desc, props):
        return {"type": "function", "function": {"name": "get", "description": desc,
                                                 "parameters": {"type": "object", "properties": props}}}

    class FakeBundle:
        def __init__(self, envs):
            self.envs = envs
            self.environments = list(envs)

        def env(self, e):
            return self.envs[e]

    same = fn("Get it.", {"id": {"type": "string"}})
    entries, sel = tool_entries(FakeBundle({"e1": Env("one", [same]), "e2": Env("two", [same])}))
    assert [e["config"]["tool"] for e in entries] == ["get", USER_TOOL]
    assert sel["e2"] == [("get", "get"), (USER_TOOL, USER_TOOL)]
    entries, sel = tool_entries(FakeBundle({"e1": Env("one", [same]), "e2": Env("two", [fn("Other.", {})])}))
    assert [(e["tool_schema"]["function"]["name"], e["config"]["tool"]) for e in entries] == [
        ("one__get", "get"), (USER_TOOL, USER_TOOL), ("two__get", "get")]
    assert sel["e2"] == [("two__get", "get"), (USER_TOOL, USER_TOOL)]
    taken = fn("x", {})
    taken["function"]["name"] = "one__get"
    with pytest.raises(ConfigError, match="another tool's name"):
        tool_entries(FakeBundle({"e1": Env("one", [same]), "e2": Env("two", [fn("Other.", {})]),
                                 "e3": Env("three", [taken])}))
    # the reward of a row whose tools were renamed
    from autoforge.integrations.verl_runtime import compute_score as score

    t = bundle.task(next(t for t in bundle.task_ids() if bundle.task(t).kind == "state"))
    env_tools = [s["function"]["name"] for s in bundle.env(t.env_id).schemas] + [USER_TOOL]
    given = [f"x__{n}" if n != USER_TOOL else n for n in env_tools]
    info = {"task_id": t.task_id, "tool_selection": given, "env_tools": env_tools}
    renamed = [(f"x__{n}" if n != USER_TOOL else n, a) for n, a in gold_steps(t)]
    assert score("autoforge/x", qwen_text(renamed, [""] * len(renamed), DONE), None, info, bundle=bundle.root) == 1.0
    bare = gold_steps(t)
    assert score("autoforge/x", qwen_text(bare, [""] * len(bare), DONE), None, info, bundle=bundle.root) == 0.0
    typed = verl_tool_schema(fn("x", {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "b": {"enum": [1, 2]},
                                      "c": {"description": "free"}}))["function"]["parameters"]["properties"]
    assert [typed[k]["type"] for k in "abc"] == [["string", "null"], "integer", "string"]
    assert _escape({"d": ["costs ${x}"]}) == {"d": ["costs \\${x}"]}


# --------------------------------------------------------------------------- the tools' episodes


class AgentData:
    """What verl's ToolAgentLoop hands a tool's execute: one object per trajectory."""


def test_tool_sessions_keep_one_episode_per_trajectory(bundle):
    """As ToolAgentLoop drives the tools (create / execute / release per call, agent_data per trajectory): the
    calls of one trajectory act on one state, two trajectories of one task on two; calc_reward is the live
    episode's; verl dropping the agent_data hands the sandbox back. Without agent_data, one instance id is
    one trajectory (released: closed)."""
    sessions = ToolSessions()
    t = bundle.task(next(t for t in bundle.task_ids() if bundle.task(t).kind == "state"))
    kw = {"task_id": t.task_id, "bundle": str(bundle.root)}

    async def run(steps, agent_data) -> None:
        for name, args in steps:
            iid = sessions.create(None, kw)
            await sessions.call(iid, name, args, agent_data)
            sessions.release(iid)

    async def reward(agent_data, final=None) -> float:
        iid = sessions.create(None, kw)
        try:
            return await sessions.reward(iid, agent_data, final)
        finally:
            sessions.release(iid)

    gold, idle = AgentData(), AgentData()
    asyncio.run(run(gold_steps(t), gold))
    asyncio.run(run([(USER_TOOL, {"message": DONE})], idle))
    assert asyncio.run(reward(gold)) == 1.0 and asyncio.run(reward(idle)) == 0.0
    assert not sessions.created and len(sessions.by_agent) == 2
    episode = sessions.by_agent[gold].episode
    del gold
    gc.collect()
    assert len(sessions.by_agent) == 1 and episode._live.closed
    iid = sessions.create(None, kw)
    err = json.loads(asyncio.run(sessions.call(iid, "not_a_tool", {}, idle)))["error"]
    assert "not a tool of this task's environment" in err
    assert "JSON object" in json.loads(asyncio.run(sessions.call(iid, USER_TOOL, "hi", idle)))["error"]
    # one instance for the whole trajectory (verl's older rollout)
    iid = sessions.create("traj-1", kw)
    for name, args in gold_steps(t):
        asyncio.run(sessions.call(iid, name, args))
    assert asyncio.run(sessions.reward(iid)) == 1.0
    ep = sessions.by_instance[iid].episode
    sessions.release(iid)
    assert ep._live.closed and iid not in sessions.by_instance
    with pytest.raises(BundleError, match="not created"):
        asyncio.run(sessions.call(iid, USER_TOOL, {"message": "x"}))


def test_the_verl_side_loads_no_warehouse_prefect_or_torch(export):
    code = ("import sys, importlib.util; spec = importlib.util.spec_from_file_location('r', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "import autoforge.integrations.verl_runtime; "
            "print(m.compute_score('autoforge/x', 'Done.', None, {'task_id': sys.argv[2]}), sorted(n for n in "
            "('duckdb', 'sqlalchemy', 'prefect', 'torch', 'transformers', 'autoforge.warehouse', 'autoforge.pipeline', "
            "'autoforge.integrations.verl', 'autoforge.integrations.rows') if n in sys.modules))")
    task_id = Bundle.load(export / "bundle").task_ids()[0]
    out = subprocess.run([sys.executable, "-c", code, str(export / "reward.py"), task_id], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.0 []", out.stdout


def test_export_help_lists_verl_and_bundle(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--bundle DIR", "tools.yaml", "reward.py", "talk_to_user", "tool_selection"):
        assert words in text, words
