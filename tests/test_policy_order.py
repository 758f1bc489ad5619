"""Procedure rules (autoforge/domain/policy_order.py): "call X before Y" and required tool sequences read
from a policy, judged on the order of the successful calls, kept by the gold trajectories and seeded
as tool sequences; and the ``arg_filled`` guard ("never call a tool with placeholder values")."""

from __future__ import annotations

import pytest
import test_policy_reader as reader
from test_rule_judge import Transcript, flagged

from autoforge.dags.sample import procedure_sequences
from autoforge.domain.policy import read_policy
from autoforge.envs.guards import broken, placeholder
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tasks.rules import gold_breaks, order_breaks, task_rules
from autoforge.tooldocs.effects import tool_effect
from autoforge.tooldocs.ingest import ingest_paths
from autoforge.types import EnvironmentRecord, ToolCall, ToolCode

HOTEL = reader.HOTEL
hotel = reader.hotel  # the fixture: the hotel tool set as the policy reader sees it


def _read(hotel, text):
    _, _, cspecs, plans, schema = hotel
    return read_policy(text, "policy.md", cspecs, plans, schema)


@pytest.mark.parametrize("sentence, first, then", [
    ("Always look the guest up with find_guest_id_by_email() BEFORE calling cancel_booking.", "find_guest_id_by_email",
     "cancel_booking"),
    ("Run `cancel_booking` only after `get_booking_details`.", "get_booking_details", "cancel_booking"),
    ("First call list_available_rooms, then create_booking.", "list_available_rooms", "create_booking"),
])
def test_a_sentence_naming_two_tools_and_their_order_is_a_call_before_rule(hotel, sentence, first, then):
    (r,) = [r for r in _read(hotel, sentence) if r.kind == "procedure"]
    assert r.enforcement == "judged" and r.check == {"op": "call_before", "tools": [then], "via": [first]}
    assert r.tools == [then] and r.offset == 0


def test_a_sentence_with_one_tool_or_plain_words_is_no_procedure(hotel):
    rules = _read(hotel, "Always search before you book.\n\nCall create_booking only after the guest agrees.\n")
    assert not [r for r in rules if r.kind == "procedure"]


def test_procedure_lists_and_numbered_runbooks_become_sequence_rules(hotel):
    text = ("# Required steps\n\n"
            "- rebook: find-guest-id-by-email, list_guest_bookings, modify_booking_dates\n"
            "- a note: this line, names, no tools\n\n"
            "## Cancel a stay\n\n"
            "1. [Find Guest ID By Email] ask for the email.\n"
            "   - a sub-step that names nothing\n"
            "2. `list_guest_bookings` to see the stays.\n"
            "3. Tell the guest the fee.\n"
            "4. [Cancel Booking] once they agree.\n\n"
            "## Choose one\n\n"
            "1. [Cancel Booking] Option 1\n"
            "2. [Modify Booking Dates] Option 2\n")
    seqs = [r for r in _read(hotel, text) if r.check and r.check.get("op") == "sequence"]
    assert [r.check["steps"] for r in seqs] == [
        ["find_guest_id_by_email", "list_guest_bookings", "modify_booking_dates"],
        ["find_guest_id_by_email", "list_guest_bookings", "cancel_booking"]]
    assert seqs[0].text.startswith("rebook:") and seqs[1].text.startswith("Cancel a stay: [Find Guest ID By Email]")
    assert text[seqs[0].offset:].startswith("rebook:") and text[seqs[1].offset:].startswith("[Find Guest ID")


def test_procedures_an_episode_could_not_both_keep_are_not_enforced_and_narrow_identify_first(hotel):
    text = ("- a: find_guest_id_by_email, list_guest_bookings, cancel_booking\n"
            "- b: list_guest_bookings, find_guest_id_by_email, cancel_booking, create_booking\n"
            "- c: list_guest_bookings, modify_booking_dates\n\n"
            "Verify the guest's identity before making any change.\n")
    rules = _read(hotel, text)
    seq = {r.text[0]: r for r in rules if r.kind == "procedure"}
    assert seq["a"].enforcement == "not enforced" and "orders these tools differently" in seq["a"].why
    assert seq["b"].enforcement == "judged" and seq["c"].enforcement == "judged"
    (ident,) = [r for r in rules if r.kind == "conversation"]
    # procedure c modifies dates with no lookup before it: the identity rule no longer binds that write
    assert ident.check["op"] == "identify_first" and "modify_booking_dates" not in ident.check["tools"]
    assert "cancel_booking" in ident.check["tools"]


CALL_BEFORE = {"op": "call_before", "rule_id": "R_before", "tools": ["cancel_booking"], "via": ["get_booking_details"]}
SEQUENCE = {"op": "sequence", "rule_id": "R_seq", "steps": ["find_guest_id_by_email", "list_guest_bookings", "cancel_booking"],
            "tools": ["find_guest_id_by_email", "list_guest_bookings", "cancel_booking"]}


def test_order_breaks_judges_call_before_and_a_complete_sequence_only():
    assert order_breaks(["cancel_booking", "get_booking_details"], [CALL_BEFORE])[0][0] == "R_before"
    assert order_breaks(["get_booking_details", "cancel_booking"], [CALL_BEFORE]) == []
    assert order_breaks(["list_guest_bookings", "find_guest_id_by_email", "cancel_booking"], [SEQUENCE])[0][0] == "R_seq"
    assert order_breaks(["find_guest_id_by_email", "list_guest_bookings", "list_guest_bookings", "cancel_booking"],
                        [SEQUENCE]) == []
    assert order_breaks(["list_guest_bookings", "cancel_booking"], [SEQUENCE]) == []  # not every step: not judged
    calls = [ToolCall(name=n) for n in ("list_guest_bookings", "find_guest_id_by_email", "cancel_booking")]
    assert [rid for rid, _ in gold_breaks(calls, [SEQUENCE, CALL_BEFORE])] == ["R_seq", "R_before"]
    # a task exercises a sequence only when its gold makes every step
    assert task_rules(calls[:2], {}, [SEQUENCE]) == [] and task_rules(calls, {}, [SEQUENCE]) == ["R_seq"]


def test_the_judge_reads_the_order_of_the_successful_calls():
    t = Transcript().call("cancel_booking", {"error": "no such booking"}).call("get_booking_details", {"status": "confirmed"})
    t.call("cancel_booking", {"status": "cancelled"})
    assert flagged(t, CALL_BEFORE) == []  # the failed cancel made no write
    early = Transcript().call("cancel_booking", {"status": "cancelled"}).call("get_booking_details", {"status": "x"})
    assert flagged(early, CALL_BEFORE) == ["R_before"]


def test_procedures_seed_tool_sequences_of_tools_the_environment_has():
    env = EnvironmentRecord(env_id="E1", toolset_id="T", name="hotel", state_schema={"collections": []}, status="ready",
                            backend="offline", n_tools=4, n_tools_accepted=4)
    tools = [ToolCode(code_id=f"c{i}", tool_id=f"t{i}", env_id="E1", name=n, source="", effect=e, kind=k, status="accepted")
             for i, (n, e, k) in enumerate([("find_guest_id_by_email", "read", "lookup"), ("cancel_booking", "write", "cancel"),
                                            ("list_faq", "read", "list"), ("think", "write", "scratchpad")])]
    got = procedure_sequences(env, tools, [["find_guest_id_by_email", "cancel_booking"], ["find_guest_id_by_email", "gone"],
                                           ["list_faq", "find_guest_id_by_email"], ["think", "cancel_booking"],
                                           ["find_guest_id_by_email", "cancel_booking"]])
    assert [(s.tools, s.goal, s.start_rule) for s in got] == [
        (["find_guest_id_by_email", "cancel_booking"], "state", "procedure"),
        (["list_faq", "find_guest_id_by_email"], "answer", "procedure")]


@pytest.mark.parametrize("value, blank", [("", True), ("  ", True), ("<phone number>", True), ("[required info]", True),
                                          ("{zip}", True), ("null", True), ("N/A", True), ("TBD", True), ("your email", True),
                                          ("...", True), ("Jane Doe", False), ("none of these", False), ("555-0101", False),
                                          (0, False), (None, False)])
def test_placeholder_values(value, blank):
    assert placeholder(value) is blank
    assert broken({"op": "arg_filled", "args": ["x"]}, {}, {"x": value}) is blank


def test_never_call_with_placeholder_values_guards_the_free_text_arguments_and_is_probed():
    res = ingest_paths([str(HOTEL)])
    policy = res.policies[0].model_copy(update={"text": "NEVER call a tool with missing, empty or placeholder values."})
    out = synthesize_environment(res.toolsets[0], res.specs, policies=[policy])
    (rule,) = [r for r in out.rules if r.source != "tool" and r.guard and r.guard.get("op") == "arg_filled"]
    assert rule.enforcement == "runtime" and rule.probe == "passed", rule.probe_detail
    by_tool = {t.name: g for t in out.tools for g in t.guards if g.get("op") == "arg_filled"}
    assert by_tool["find_guest_id_by_email"]["args"] == ["email"]
    assert "get_guest_details" not in by_tool  # its one required argument is an id with a pattern, not free text


def test_a_rule_naming_nothing_of_the_tool_set_is_outside_the_tools(hotel):
    from autoforge.domain.rule_kinds import OUTSIDE, checkable

    got = {r.text: r for r in _read(hotel, "Never rush the caller and always smile.\n\n"
                                           "Special requests must be polite.\n\nCall cancel_booking only when asked.\n")}
    smile = got["Never rush the caller and always smile."]
    assert smile.why.startswith(OUTSIDE) and not checkable(smile.enforcement, smile.why)
    for text in ("Special requests must be polite.", "Call cancel_booking only when asked."):  # a field, a tool
        assert got[text].enforcement == "not enforced" and checkable(got[text].enforcement, got[text].why), got[text]


@pytest.mark.parametrize("name, effect", [("pull-up-account", "read"), ("look_up_order", "read"), ("sign_up_user", "write")])
def test_phrasal_read_verbs(name, effect):
    assert tool_effect(name, "") == effect


# --------------------------------------------------------------------------- more forms, and what is outside the tools


def test_a_write_a_read_decides_needs_the_read_first(hotel):
    got = {r.text: r for r in _read(hotel, "If the booking details show a confirmed stay, the booking can be cancelled.\n\n"
                                           "The booking should be created for a room the available rooms list shows.\n")}
    cancel = got["If the booking details show a confirmed stay, the booking can be cancelled."]
    assert cancel.check == {"op": "call_before", "tools": ["cancel_booking"], "via": ["get_booking_details"]}
    create = got["The booking should be created for a room the available rooms list shows."]
    assert create.check == {"op": "call_before", "tools": ["create_booking"], "via": ["list_available_rooms"]}


def test_n_of_the_items_for_a_named_tool_is_an_arg_count_guard_and_probed():
    res = ingest_paths([str(HOTEL)])
    text = "To search, the guest must give at least 2 of the following details for [Search Hotels]."
    out = synthesize_environment(res.toolsets[0], res.specs, policies=[res.policies[0].model_copy(update={"text": text})])
    (rule,) = [r for r in out.rules if r.guard and r.guard.get("op") == "arg_count"]
    assert rule.tools == ["search_hotels"] and rule.guard["min"] == 2 and rule.probe == "passed", rule.probe_detail
    g = rule.guard
    assert broken(g, {}, {"city": "Lisbon"}) and not broken(g, {}, {"city": "Lisbon", "amenity": "spa"})
    assert broken(g, {}, {"city": "Lisbon", "amenity": "<amenity>"})  # a placeholder is no value


def test_listed_values_of_an_argument_are_refused_on_every_tool_taking_it(hotel):
    (r,) = [r for r in _read(hotel, "Do not take special requests (pets, smoking or fireworks) for a booking.")
            if r.check and r.check["op"] == "arg_not"]
    assert r.check == {"op": "arg_not", "arg": "special_requests", "values": ["pets", "smoking", "fireworks"],
                       "label": "special requests"}  # what the values are: the reason a refusal states
    assert r.tools == ["create_booking"] and r.enforcement == "runtime"


def test_a_json_state_machine_gives_its_prose_and_its_steps(hotel):
    from autoforge.domain.policy_text import json_value, statements

    machine = ('# States\n\n[\n  {"id": "1_find", "instructions": ["Ask for the email, then call find_guest_id_by_email.",],\n'
               '   "examples": ["Hi! What is your email?"]},\n'
               '  {"id": "2_broken", "instructions": ["Say "hello" badly"]},\n'
               '  {"id": "3_cancel", "description": "Only cancel with cancel_booking after the guest agrees.",\n'
               '   "transitions": [{"condition": "Once the booking is cancelled"}]},\n]\n')
    texts = [s.text for s in statements(machine)]
    assert texts == ["Ask for the email, then call find_guest_id_by_email.",
                     "Only cancel with cancel_booking after the guest agrees."]  # no sample phrase, no transition
    assert [s.offset for s in statements(machine)] == [machine.find("Ask for"), machine.find("Only cancel")]
    assert json_value('[1, 2, {"a": "x, ]"},]', 0) == ([1, 2, {"a": "x, ]"}], 22)
    steps = [r.check["steps"] for r in _read(hotel, machine) if r.check and r.check.get("op") == "sequence"]
    assert steps == [["find_guest_id_by_email", "cancel_booking"]]


@pytest.mark.parametrize("sentence, why", [
    ("Guests can always ask for late checkout at the front desk.", "a permission"),
    ('"You must have your booking number ready, please."', "a phrase to say"),
    ("Occasionally, the guest may not remember their booking id.", "a possibility"),
    ("Loyalty cards arrive within 10 business days of joining.", "no argument, field or write"),
])
def test_rules_no_call_could_show_kept_or_broken_are_outside_the_tools(hotel, sentence, why):
    from autoforge.domain.rule_kinds import OUTSIDE

    (r,) = [r for r in _read(hotel, sentence)]
    assert r.enforcement == "not enforced" and r.why.startswith(OUTSIDE) and why in r.why, r.why


def test_tools_are_named_by_their_words_a_typo_and_an_adjective_aside(hotel):
    from autoforge.domain.policy_world import policy_world, tools_named

    _, _, cspecs, plans, schema = hotel
    world = policy_world(cspecs, plans, schema)
    names = lambda text: [t.name for t in tools_named(text, world)]  # noqa: E731
    assert names("the booking can be cancelled") == ["cancel_booking"]
    from autoforge.domain.policy_world import _said
    assert _said("access", {"acess"}) and not _said("book", {"boo"})  # a long word one letter off ("acesss" stems to acess)
    assert names("for the given booking") == [] and names("cancel") == []


# --------------------------------------------------------------------------- tool-calling protocol


@pytest.mark.parametrize("sentence, op", [
    ("Only make one tool call at a time.", "one_call_per_turn"),
    ("Never call several tools at once.", "one_call_per_turn"),
    ("If you make a tool call, you should not respond to the user at the same time.", "silent_call"),
    ("If you're going to call a function, ALWAYS let the user know what you're about to do BEFORE calling it.",
     "announce_call"),
])
def test_protocol_sentences_bind_every_tool(hotel, sentence, op):
    (r,) = _read(hotel, sentence)
    assert (r.kind, r.enforcement, r.check["op"]) == ("conversation", "judged", op)
    assert len(r.tools) == len(hotel[2])  # every tool of the set


def test_announcing_and_staying_silent_cannot_both_hold(hotel):
    rules = _read(hotel, "If you make a tool call, do not respond to the user at the same time.\n\n"
                         "Before calling a tool, always tell the user what it does.\n")
    by = {r.text[:6]: r for r in rules}
    assert by["If you"].enforcement == "judged"
    assert by["Before"].enforcement == "not enforced" and "not to write to the user" in by["Before"].why


def test_the_judge_reads_the_protocol_off_the_agent_messages():
    from autoforge.types import Message

    one = {"op": "one_call_per_turn", "rule_id": "R_one", "tools": ["a", "b"]}
    silent = {"op": "silent_call", "rule_id": "R_silent", "tools": ["a", "b"]}
    announce = {"op": "announce_call", "rule_id": "R_say", "tools": ["a", "b"]}
    two = Transcript()
    two.messages.append(Message(role="assistant", content="", tool_calls=[ToolCall(name="a", id="x1"),
                                                                           ToolCall(name="b", id="x2")]))
    assert flagged(two, one, silent, announce) == ["R_one", "R_say"]
    chatty = Transcript()
    chatty.messages.append(Message(role="assistant", content="Let me look.", tool_calls=[ToolCall(name="a", id="x1")]))
    chatty.messages.append(Message(role="assistant", content="", tool_calls=[ToolCall(name="b", id="x2")]))
    assert flagged(chatty, one, silent, announce) == ["R_silent"]  # announced once this turn: the second call is fine


def test_the_oracle_keeps_the_protocol_and_an_agent_that_does_not_scores_0():
    from test_rollout_support import make_tools, tasks_and_dags
    from test_rule_judge import play

    from autoforge.rollout.agents import OracleAgent

    tasks, dags = tasks_and_dags()
    task = next(t for t in tasks if t.task_id == "task_cancel")  # cancel an order: a lookup, then the cancel
    dag, every = dags[task.dag_id], [t.name for t in make_tools()]
    rules = [{"op": op, "rule_id": f"R_{op}", "tools": every} for op in ("one_call_per_turn", "announce_call")]
    ep = play(task, dag, OracleAgent(), rules)
    assert ep.reward == 1.0 and ep.rule_breaks == []
    assert all(m.content.startswith("Next I will use") for m in ep.messages if m.role == "assistant" and m.tool_calls)
    silent = [{"op": "silent_call", "rule_id": "R_silent", "tools": every}]
    assert play(task, dag, OracleAgent(), silent).rule_breaks == []
    loud = play(task, dag, OracleAgent(), silent + rules[1:])  # the oracle announces: it breaks silent_call
    assert loud.rule_breaks == ["R_silent"] and loud.reward == 0.0


def test_bracket_lines_and_deep_or_broken_json_neither_crash_nor_stall():
    from autoforge.domain.policy_text import statements

    nested = "[\n" * 3000 + "]" * 3000  # deeper than Python's stack
    unclosed = "\n".join('[ "a", ' for _ in range(2000))
    links = "\n\n".join(f"[Step {i}] (interaction) Only pending orders can be cancelled." for i in range(300))
    assert statements(nested) is not None and statements(unclosed) is not None
    assert len(statements(links)) == 300  # a line that starts with a bracket is prose, not JSON
