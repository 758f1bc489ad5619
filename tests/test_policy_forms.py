"""More policy forms (issue 33): a write and its list of conditions, citations of what a read returned, a
named tool's argument that must be entered, and what is no mechanically checkable rule (an approval by a
person no tool models, what an API is for, a dispensation). Then boundary tasks on a rule that guards a
*read* ("do not discuss prohibited topics"): the gold makes no call and says why."""

from __future__ import annotations

import dataclasses

import pytest
import test_policy_reader as reader
from test_rule_judge import Transcript

from autoforge.domain.policy import read_policy
from autoforge.domain.policy_protocol import citations
from autoforge.domain.rule_kinds import checkable
from autoforge.rollout.rule_judge import judge_rules
from autoforge.tasks.rules import order_breaks

hotel = reader.hotel


def _read(hotel, text):
    _, _, cspecs, plans, schema = hotel
    return {r.text: r for r in read_policy(text, "policy.md", cspecs, plans, schema)}


CONDITIONS = ("A booking can be cancelled only if all of the following conditions are true:\n\n"
              "1. The booking details show a confirmed stay.\n2. The guest id was found by email.\n"
              "3. The stay is less than 30 days away.\n")


def test_a_write_and_its_list_of_conditions_needs_every_read_the_conditions_name(hotel):
    got = _read(hotel, CONDITIONS)
    lead = got["A booking can be cancelled only if all of the following conditions are true:"]
    # the number in condition 3 is a limit, not what a read returned: it gives no read
    assert lead.check == {"op": "call_before", "tools": ["cancel_booking"],
                          "via": ["get_booking_details", "find_guest_id_by_email"], "all": True}
    assert lead.kind == "procedure" and lead.enforcement == "judged"
    check = {**lead.check, "rule_id": "r1"}
    assert order_breaks(["get_booking_details", "cancel_booking"], [check])  # one read is not all of them
    assert order_breaks(["find_guest_id_by_email", "get_booking_details", "cancel_booking"], [check]) == []
    plain = {**check, "all": False}
    assert order_breaks(["get_booking_details", "cancel_booking"], [plain]) == []  # without "all": any one of them


def test_a_lead_in_without_its_list_or_a_write_is_no_condition_rule(hotel):
    got = _read(hotel, "A booking can be cancelled only if all of the following conditions are true:\n\nThanks.\n")
    assert all((r.check or {}).get("all") is None for r in got.values())


def test_citations_are_read_judged_and_given_by_the_oracle(hotel):
    r = _read(hotel, "Always include citations for any facts from the booking details.\n")[
        "Always include citations for any facts from the booking details."]
    assert r.check == {"op": "cite_source", "tools": ["get_booking_details"]} and r.enforcement == "judged"
    check = {**r.check, "rule_id": "cite"}
    result = {"booking_id": "BK-77", "status": "confirmed"}
    assert citations(result) == ["BK-77"]
    assert citations([{"doc": {"title": "Returns", "id": 42, "n": 3}}]) == ["Returns", "42"]
    silent = Transcript("What is my booking's status?").call("get_booking_details", result).say("It is confirmed.")
    assert [rid for rid, _ in judge_rules(silent.messages, [check])] == ["cite"]
    cited = Transcript("What is my booking's status?").call("get_booking_details", result)
    assert judge_rules(cited.say("It is confirmed [booking](BK-77).").messages, [check]) == []
    # a read that returned nothing to cite is not judged
    bare = Transcript("Status?").call("get_booking_details", {"status": "ok"}).say("Ok.")
    assert judge_rules(bare.messages, [check]) == []


def test_the_oracle_cites_what_its_reads_returned():
    from autoforge.rollout.agents import OracleAgent

    agent = OracleAgent()
    agent.cite, agent.outputs = {"get_booking_details"}, {"n0": {"booking_id": "BK-77"}}
    agent.order = [type("N", (), {"tool": "get_booking_details", "node_id": "n0"})()]
    assert agent.sources() == " Sources: [get_booking_details](BK-77)."
    agent.cite = set()
    assert agent.sources() == ""


def test_a_named_tools_argument_that_must_be_entered_is_an_arg_filled_guard(hotel):
    r = _read(hotel, "[Create Booking] To book you will need to enter the special requests.\n")[
        "[Create Booking] To book you will need to enter the special requests."]
    assert r.check == {"op": "arg_filled", "args": ["special_requests"]} and r.tools == ["create_booking"]
    # "enter X and click [Tool]" states no obligation
    assert not any(x.check for x in _read(hotel, "Once you have it, enter the email and click [Create Booking].\n").values())


@pytest.mark.parametrize("sentence, why", [
    ("Refunds must be approved by the duty manager.", "an approval by someone"),
    ("All overtime must be approved in advance by the employee's supervisor and booked.", "(the supervisor)"),
    ("APIs for managing bookings that still need to be kept.", "what an API is for"),
    ("You do not need to enter the room type.", "what is enough"),
    ("You only need the booking id.", "what is enough"),
])
def test_sentences_that_no_call_could_show_kept_are_outside_the_tools(hotel, sentence, why):
    r = _read(hotel, sentence + "\n")[sentence]
    assert r.enforcement == "not enforced" and why in r.why and not checkable(r.enforcement, r.why), r.why


def test_an_approval_by_someone_the_tools_model_stays_checkable(hotel):
    r = _read(hotel, "Late check-outs must be approved by the guest.\n")["Late check-outs must be approved by the guest."]
    assert "an approval by someone" not in (r.why or "")


def test_left_hand_is_no_rule_word(hotel):
    assert _read(hotel, "The booking id is on the left-hand side of the page.\n") == {}
    assert _read(hotel, "Only rooms with nights left can be booked.\n")


# --------------------------------------------------------------------------- a boundary task on a read


AMENITY = "Do not search for banned amenities (spa, gym)."


def hotel_with_rules(rules, extra_dagless: bool = False) -> dict:
    """The bundled hotel synthesized with ``rules`` (ParsedRule records) as its whole policy, its DAGs, tasks
    generated (30) and verified; with ``extra_dagless``, also tasks generated with no DAG at all (``none``)."""
    from autoforge.dags.build import build_dags
    from autoforge.dags.graph import build_graph
    from autoforge.dags.sequences import sample_sequences
    from autoforge.domain import policy
    from autoforge.envs.synthesis import synthesize_environment
    from autoforge.tasks.generate import generate_env
    from autoforge.tasks.rules import judged_checks
    from autoforge.tasks.verify import verify_tasks
    from autoforge.tooldocs.ingest import ingest_paths
    from autoforge.types import PolicyDoc

    def fake_read(text, source, specs, plans, schema):
        return [dataclasses.replace(r, source=source) for r in rules]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policy, "read_policy", fake_read)
        mp.delenv("AUTOFORGE_BOUNDARY_SHARE", raising=False)
        res = ingest_paths([str(reader.HOTEL)])
        ts = res.toolsets[0]
        doc = PolicyDoc(policy_id="p", toolset=ts.name, toolset_id=ts.toolset_id, source="policy.md", sha256="x",
                        text="(rules)", n_chars=7)
        syn = synthesize_environment(ts, res.specs, policies=[doc])
        env, tools = syn.environment, [t for t in syn.tools if t.status == "accepted"]
        graph = build_graph(env, tools)
        dags = build_dags(graph, sample_sequences(graph, tools, 60, seed=1, env=env), tools, env, seed=1, variants=2)[0]
        judged = judged_checks(syn.rules)
        gen = generate_env(env, tools, dags, 0, tasks_per_env=30, attempts_per_task=4, judged=judged)
        verified, results, _ = verify_tasks(env, tools, gen.tasks, dags + gen.dags, judged=judged)
        none = generate_env(env, tools, [], 0, tasks_per_env=10, attempts_per_task=4, judged=judged) \
            if extra_dagless else None
    return {"env": env, "tools": tools, "dags": {d.dag_id: d for d in dags + gen.dags + (none.dags if none else [])},
            "judged": judged, "rules": syn.rules, "verified": verified, "results": results, "none": none}


@pytest.fixture(scope="module")
def read_world():
    from autoforge.domain.rule_kinds import ParsedRule

    w = hotel_with_rules([ParsedRule("prohibition", AMENITY, None, [], "runtime", source="", offset=0,
                                     tools=["search_hotels"], check={"op": "arg_not", "arg": "amenity",
                                                                     "values": ["spa", "gym"], "label": "banned amenities"})])
    rule = next(r for r in w["rules"] if r.text == AMENITY)
    return {**w, "rule": rule, "tasks": [t for t in w["verified"] if t.status == "verified" and t.kind == "boundary"
                                         and t.rules and t.rules[0] == rule.rule_id]}


def test_a_rule_on_a_reads_argument_makes_boundary_tasks_that_make_no_call(read_world):
    from test_policy_tasks import Comply, Idle, play

    tasks = read_world["tasks"]
    assert tasks, "no boundary task on the read's rule was verified"
    for t in tasks:
        assert t.gold_calls == [] and t.gold_answer.value == "banned amenities"
        assert t.user_facts.get("amenity") in ("spa", "gym")
        assert "banned" not in t.request.lower()  # the request never says why
        assert " also " not in f" {t.request.lower()} " and "while you're at it" not in t.request.lower()  # asked alone
    from autoforge.rollout.agents import OracleAgent

    oracle = play(read_world, tasks, OracleAgent, "oracle")
    assert [e.reward for e in oracle] == [1.0] * len(tasks), [(e.termination_detail, e.reward_info) for e in oracle]
    assert [e.reward for e in play(read_world, tasks, Idle, "idle")] == [0.0] * len(tasks)
    comply = play(read_world, tasks, Comply, "comply")
    assert [e.reward for e in comply] == [0.0] * len(tasks)
    assert all(e.rule_breaks == [read_world["rule"].rule_id] for e in comply)
