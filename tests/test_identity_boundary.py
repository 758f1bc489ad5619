"""Boundary tasks on an identify-first rule (issue 33, autoforge/tasks/identity.py): the user asks for a write
the rule allows only once they said who they are, and cannot say it. The reader takes what identifies the
user from the sentence, the judge holds a write to the identity the user gave, the gold makes no call and
says what is needed; the oracle passes, doing nothing and doing what the user asked fail."""

from __future__ import annotations

import pytest
from test_policy_forms import hotel_with_rules
from test_policy_tasks import Comply, Idle, play
from test_rule_judge import Transcript

from autoforge.domain.policy_identity import identity_of
from autoforge.rollout.agents import OracleAgent
from autoforge.rollout.rule_judge import judge_rules

RULE = "NEVER book a room without first confirming the customer's guest_id."


@pytest.mark.parametrize("sentence, params, want", [
    ("NEVER provide account balances or book appointments without first confirming the customer's user_id",
     {"book_appointment": {"user_id": {}, "date": {}}}, {"label": "user id", "arg": "user_id"}),
    ("Always verify the customer id before any change.", {"a": {"customer_id": {}}, "b": {"customer_id": {}}},
     {"label": "customer id", "arg": "customer_id"}),
    ("Your valid driver\u2019s license is required to confirm your identity and driving privileges.", {"createClaim": {}},
     {"label": "driver's license"}),
    ("Verify the customer identity using their email address before any change.", {"x": {"order_id": {}}},
     {"label": "email address"}),
    ("You must confirm their identity by their date of birth.", {"x": {}}, {"label": "date of birth"}),
    ("Authenticate the user before any write.", {"x": {"order_id": {}}}, {}),  # says nothing of what identifies
    ("Verify the customer id before any change.", {"a": {"customer_id": {}}, "b": {"email": {}}}, {}),  # not every write takes it
])
def test_what_identifies_the_user_is_read_from_the_sentence(sentence, params, want):
    assert identity_of(sentence, params) == want


def _check(**kw):
    return [{"op": "identify_first", "rule_id": "r1", "tools": ["book"], "via": [], **kw}]


def test_a_write_must_pass_the_identity_the_user_gave_where_the_rule_names_it():
    told = Transcript("Book a room.").say("Who are you? Your guest id, please?").user("It is G0042.")
    ok = told.call("book", {"booking_id": "B1"}, {"guest_id": "G0042"}).messages
    assert judge_rules(ok, _check(arg="guest_id", label="guest id")) == []
    told = Transcript("Book a room.").say("Who are you? Your guest id, please?").user("I don't have it.")
    made_up = told.call("book", {"booking_id": "B1"}, {"guest_id": "G0001"}).messages
    assert [r for r, _ in judge_rules(made_up, _check(arg="guest_id", label="guest id"))] == ["r1"]
    assert judge_rules(made_up, _check()) == []  # a rule that names no argument: a reply is enough, as before


@pytest.fixture(scope="module")
def identity_world():
    from autoforge.domain.rule_kinds import ParsedRule

    check = {"op": "identify_first", "tools": ["create_booking"], "via": [],
             **identity_of(RULE, {"create_booking": {"guest_id": {}, "room_id": {}}})}
    w = hotel_with_rules([ParsedRule("conversation", RULE, None, [], "judged", source="", offset=0,
                                     tools=["create_booking"], check=check)], extra_dagless=True)
    rule = next(r for r in w["rules"] if r.text == RULE)
    return {**w, "rule": rule, "tasks": [t for t in w["verified"] if t.status == "verified" and t.kind == "boundary"
                                         and t.rules[0] == rule.rule_id]}


def test_boundary_tasks_on_an_identity_rule_make_no_call_and_name_what_is_needed(identity_world):
    tasks, rule = identity_world["tasks"], identity_world["rule"]
    assert tasks, "no boundary task on the identity rule was verified"
    assert rule.guard["arg"] == "guest_id" and rule.guard["label"] == "guest id"
    for t in tasks:
        assert t.rules[0] == rule.rule_id and t.gold_calls == [] and t.gold_answer.value == "guest id"
        assert "guest_id" not in t.user_facts and "guest id" not in t.request.lower()  # the user cannot say who they are
        assert t.initial_state == t.gold_state
    oracle = play(identity_world, tasks, OracleAgent, "oracle")
    assert [e.reward for e in oracle] == [1.0] * len(tasks), [(e.termination_detail, e.reward_info) for e in oracle]
    assert all(e.rule_breaks == [] for e in oracle)
    assert all(any("don't have my guest id" in (m.content or "") for m in e.messages if m.role == "user") for e in oracle)
    assert [e.reward for e in play(identity_world, tasks, Idle, "idle")] == [0.0] * len(tasks)
    comply = play(identity_world, tasks, Comply, "comply")
    assert [e.reward for e in comply] == [0.0] * len(tasks)
    # it made the write with an identity the user never gave (refused as unknown here, so no write happened)
    assert all(any(c.name == "create_booking" for m in e.messages for c in (m.tool_calls or ())) for e in comply)


def test_a_write_no_dag_holds_still_gets_its_identity_boundary_task(identity_world):
    made = [t for t in identity_world["none"].tasks if t.kind == "boundary"]
    assert made and any(t.rules[0] == identity_world["rule"].rule_id for t in made)


def test_verification_rejects_an_identity_task_whose_user_has_the_identity(identity_world):
    from autoforge.tasks.verify import verify_tasks

    w = identity_world
    t = w["tasks"][0]
    tampered = t.model_copy(update={"task_id": t.task_id + "x", "user_facts": {**t.user_facts, "guest_id": "G0001"}})
    _, results, _ = verify_tasks(w["env"], w["tools"], [tampered], list(w["dags"].values()), judged=w["judged"])
    bad = {r.check: r.reason for r in results if not r.passed}
    assert "policy_rule" in bad and "guest id" in bad["policy_rule"], bad
