"""Yield and write coverage on real-style tool sets: the classes of problem real docs showed.

Fixtures are our own documents in the styles public tool docs use (tests/fixtures/realstyle/yield_*):
BFCL-style helpdesk tools with ``"default": "None"`` and verbs that each end in their own status;
MCP-style tracker tools with an operation selector (``method``) and "Required unless ..." groups;
a BFCL-style shell whose ``touch``/``mkdir`` create what they name and whose ``echo`` names its file
only optionally. Each test names the class of problem it pins. The last test runs the factory on the public
tool sets of /work/shared/realdocs when they are there and skips otherwise."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from autoforge.envs.runtime import Environment
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"
REALDOCS = Path(__file__).resolve().parents[2] / "shared" / "realdocs"


def _synth(name: str):
    res = ingest_paths([FIXTURES / name])
    (ts,) = res.toolsets
    result = synthesize_environment(ts, res.specs)
    assert result.environment.n_tools_accepted == result.environment.n_tools
    return result


def _factory(tmp_path, path: Path, tasks: int = 30):
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.types import Task, ToolCode
    from autoforge.warehouse import apply_migrations, read_records

    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh)
    run_factory(FactoryParams(paths=[str(path)], bundled=False, seed=0, tasks_per_env=tasks, warehouse=wh))
    verified = [t for t in read_records(wh, Task) if t.status == "verified"]
    writes = {t.name for t in read_records(wh, ToolCode) if t.status == "accepted" and t.effect == "write"}
    used = {c.name for t in verified for c in t.gold_calls} & writes
    return wh, verified, writes, used


# --------------------------------------------------------------------------- helpdesk (BFCL style)


def test_a_documented_none_default_means_no_filter():
    """``"default": "None"`` (BFCL: "If None, return all tickets") is no value, not the string 'None'."""
    result = _synth("yield_helpdesk.json")
    state = result.environment.sample_state
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(state))
        obs = env.call("get_my_cases", {})
        assert obs.ok and obs.output["count"] == len(state["cases"]) > 0


def test_an_edit_the_docs_do_not_restrict_works_on_a_closed_record():
    """No stated precondition: an edit of a closed case is allowed (as a delete is)."""
    result = _synth("yield_helpdesk.json")
    state = copy.deepcopy(result.environment.sample_state)
    key = sorted(state["cases"])[0]
    with Environment(result.accepted) as env:
        env.reset(state)
        cid = env.get_state()["cases"][key]["case_id"]
        assert env.call("close_case", {"case_id": cid}).ok or env.get_state()["cases"][key]["status"] == "closed"
        obs = env.call("edit_case", {"case_id": cid, "changes": {"subject": "Printer jam"}})
        assert obs.ok, obs.error


def test_status_verbs_end_in_statuses_of_their_own():
    """close and resolve: two statuses (closed, resolved), so a resolve after a close is seen."""
    result = _synth("yield_helpdesk.json")
    coll = next(c for c in result.environment.state_schema.collections if c.name == "cases")
    enum = next(f.enum for f in coll.fields if f.name == "status")
    assert "closed" in enum and "resolved" in enum
    tools = {t.name: t for t in result.accepted}
    assert "'resolved'" in tools["resolve_case"].source and "'closed'" in tools["close_case"].source


def test_the_helpdesk_yields_tasks_that_use_its_writes(tmp_path):
    _, verified, writes, used = _factory(tmp_path, FIXTURES / "yield_helpdesk.json")
    assert len(verified) >= 15
    assert len(used) >= 0.7 * len(writes), (sorted(used), sorted(writes))


# --------------------------------------------------------------------------- tracker (MCP style)


def test_an_operation_selector_is_not_a_record_field():
    """``method: create|update`` picks what ticket_write does; stored on the ticket it made a read's
    ``method`` (get|get_notes) draw 'create' from the record."""
    result = _synth("yield_tracker.json")
    fields = {f.name for c in result.environment.state_schema.collections for f in c.fields}
    assert "method" not in fields


def test_a_required_unless_group_gets_one_member_in_every_task(tmp_path):
    """add_ticket_note(text?, reaction?): "Required unless reaction is provided" -- the gold call gives one."""
    _, verified, writes, used = _factory(tmp_path, FIXTURES / "yield_tracker.json")
    notes = [c for t in verified for c in t.gold_calls if c.name == "add_ticket_note"]
    assert notes and all(c.arguments.get("text") or c.arguments.get("reaction") for c in notes)
    assert used == writes


# --------------------------------------------------------------------------- shell (BFCL style)


def test_a_tool_that_creates_a_new_record_it_names_is_a_create():
    """"Create a new directory" (mkdir(dir_name)), "Create a new file" (touch(file_name)): creates, not no-op updates."""
    result = _synth("yield_shell.json")
    kinds = {t.name: t.kind for t in result.accepted}
    assert kinds["touch"] == "create" and kinds["mkdir"] == "create"


def test_a_write_gets_the_key_of_its_record_even_when_documented_optional(tmp_path):
    """echo(content, file_name=None) writes to the file it names: the task gives the file."""
    _, verified, writes, used = _factory(tmp_path, FIXTURES / "yield_shell.json")
    echoes = [c for t in verified for c in t.gold_calls if c.name == "echo"]
    assert echoes and all(c.arguments.get("file_name") for c in echoes)
    assert len(used) >= 0.7 * len(writes), (sorted(used), sorted(writes))


# --------------------------------------------------------------------------- chat (BFCL style)


def test_a_role_id_whose_description_names_an_entity_points_at_it():
    """``addressee_id``: "User ID of the user to send the message to" is a user, not an 'addressee' collection."""
    result = _synth("yield_chat.json")
    colls = {c.name: c for c in result.environment.state_schema.collections}
    assert "addressees" not in colls
    ref = next(f.ref for f in colls["messages"].fields if f.name == "addressee_id")
    assert ref == "users"


def test_a_delete_that_names_what_the_record_points_at_deletes_the_latest_such_record():
    """delete_message(addressee_id): "Delete the latest message sent to a recipient" removes that message, not the user."""
    result = _synth("yield_chat.json")
    tools = {t.name: t for t in result.accepted}
    assert tools["delete_message"].collection == "messages"
    state = copy.deepcopy(result.environment.sample_state)
    uid = sorted(state["users"])[0]
    with Environment(result.accepted) as env:
        env.reset(state)
        assert env.call("post_message", {"addressee_id": uid, "message": "first"}).ok
        assert env.call("post_message", {"addressee_id": uid, "message": "second"}).ok
        n = len(env.get_state()["messages"])
        assert env.call("delete_message", {"addressee_id": uid}).ok
        after = env.get_state()
        assert uid in after["users"] and len(after["messages"]) == n - 1
        texts = [m["message"] for m in after["messages"].values() if m.get("addressee_id") == uid]
        assert "first" in texts and "second" not in texts


def test_a_write_with_nothing_to_set_sets_the_flag_its_verb_names():
    """chat_login(user_id) sets the user's login_status (it changed nothing before)."""
    result = _synth("yield_chat.json")
    state = copy.deepcopy(result.environment.sample_state)
    uid = sorted(state["users"])[0]
    state["users"][uid]["login_status"] = False
    with Environment(result.accepted) as env:
        env.reset(state)
        assert env.call("chat_login", {"user_id": uid}).ok
        assert env.get_state()["users"][uid]["login_status"] is True
        assert env.call("chat_login", {"user_id": uid}).kind == "tool_error"


def test_the_chat_yields_tasks_on_every_write_and_picks_users_by_name(tmp_path):
    """A list with nothing to rank or class its items by is narrowed by a name (find by user_name)."""
    from autoforge.types import TaskDag
    from autoforge.warehouse import read_records

    wh, verified, writes, used = _factory(tmp_path, FIXTURES / "yield_chat.json")
    assert used == writes and len(verified) >= 10
    ops = {(n.op, n.params.get("field")) for d in read_records(wh, TaskDag) for n in d.nodes if n.kind == "reasoning"}
    assert ("find", "user_name") in ops


# --------------------------------------------------------------------------- the public tool sets


SETS = ["bfcl_message_api", "bfcl_ticket_api", "mcp_github_issues", "bfcl_gorilla_file_system"]


@pytest.mark.skipif(not REALDOCS.is_dir() or os.environ.get("AUTOFORGE_SKIP_REALDOCS") == "1",
                    reason="no /work/shared/realdocs here")
@pytest.mark.parametrize("name", SETS)
def test_public_tool_sets_yield_tasks_on_most_of_their_writes(tmp_path, name):
    if not (REALDOCS / name).is_dir():
        pytest.skip(f"{name} is not in {REALDOCS}")
    _, verified, writes, used = _factory(tmp_path, REALDOCS / name, tasks=110)
    assert len(verified) >= 50, len(verified)
    assert len(used) >= 0.7 * len(writes), (sorted(used), sorted(writes))


def test_fact_names_that_read_alike_are_kept_apart():
    """A second ``file_name`` fact is not ``file_name_2`` when a parameter ``file_name2`` is a fact too:
    both read "file name 2" to the user, who cannot tell which is asked for."""
    from autoforge.dags.build import _Builder

    b = object.__new__(_Builder)
    b.facts, b.shared = set(), set()
    names = [b.fact("file_name2").fact, b.fact("file_name").fact, b.fact("file_name").fact]
    assert len({n.replace("_", "") for n in names}) == 3, names
