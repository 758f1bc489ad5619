"""The rule engine (autoforge/envs/guards.py): guards refuse calls that break a rule, before the
tool's code runs, name the rule and change nothing; counters count; probes break and keep each rule;
synthesis carries a policy's guards on the tool code and probes them."""

from __future__ import annotations

import pytest

from autoforge.domain.rule_kinds import ParsedRule
from autoforge.envs import guards as G
from autoforge.envs.runtime import Environment
from autoforge.types import ToolCode

RENEW = '''def renew_loan(state, loan_id, weeks=None):
    loan = state["loans"].get(loan_id)
    if loan is None:
        return {"error": "no loan " + loan_id}
    loan["due"] = "2025-02-01"
    return {"loan_id": loan_id, "due": loan["due"]}
'''


def _tool(guards: list[dict]) -> ToolCode:
    params = {"type": "object", "properties": {"loan_id": {"type": "string"}, "weeks": {"type": "integer"}},
              "required": ["loan_id"]}
    return ToolCode(code_id="c", env_id="e", tool_id="t", name="renew_loan", source=RENEW, status="accepted",
                    effect="write", kind="update", collection="loans", parameters=params, guards=guards)


def _g(op: str, rid: str, **kw) -> dict:
    return {"op": op, "rule_id": rid, "tool": "renew_loan", "message": f"rule {rid}", "collection": "loans",
            "id_arg": "loan_id", **kw}


STATE = {"loans": {"L1": {"loan_id": "L1", "status": "active", "borrowed_on": "2025-01-10", "member_id": "M1",
                          "items": [{"item_id": "I1"}], "copies": 2, "paid": 10.0},
                   "L2": {"loan_id": "L2", "status": "overdue", "borrowed_on": "2024-11-01", "member_id": "M2",
                          "items": [], "copies": 1, "paid": 5.0}}}


def test_a_broken_guard_refuses_names_the_rule_and_changes_nothing():
    with Environment([_tool([_g("status", "R1", field="status", forbidden=["overdue"])])]) as env:
        env.reset(STATE)
        before = env.state_hash()
        obs = env.call("renew_loan", {"loan_id": "L2"})
        assert not obs.ok and obs.kind == "tool_error" and obs.rule_id == "R1"
        assert "policy rule R1" in obs.to_text() and env.state_hash() == before
        ok = env.call("renew_loan", {"loan_id": "L1"})
        assert ok.ok and ok.rule_id is None and env.get_state()["loans"]["L1"]["due"] == "2025-02-01"


def test_count_limit_counts_successful_calls_in_the_state():
    with Environment([_tool([_g("count_limit", "R2", counter="renew_count", max=2)])]) as env:
        env.reset(STATE)
        got = [env.call("renew_loan", {"loan_id": "L1"}).rule_id for _ in range(3)]
        assert got == [None, None, "R2"]
        assert env.get_state()["loans"]["L1"]["renew_count"] == 2
        env.reset(STATE)  # a reset puts the counter back
        assert env.call("renew_loan", {"loan_id": "L1"}).ok


@pytest.mark.parametrize("guard, args, bad", [
    (_g("status", "s", field="status", allowed=["active"]), {"loan_id": "L2"}, True),
    (_g("status", "s", field="status", allowed=["Active"]), {"loan_id": "L1"}, False),  # case-insensitive
    ({"op": "arg_limit", "rule_id": "a", "arg": "weeks", "max": 4}, {"loan_id": "L1", "weeks": 5}, True),
    ({"op": "arg_limit", "rule_id": "a", "arg": "weeks", "max": 4}, {"loan_id": "L1", "weeks": 4}, False),
    ({"op": "arg_limit", "rule_id": "a", "arg": "weeks", "min": 1}, {"loan_id": "L1"}, False),  # absent passes
    ({"op": "arg_not", "rule_id": "n", "arg": "kind", "values": ["Investment"]}, {"kind": "investment"}, True),
    ({"op": "arg_in", "rule_id": "i", "arg": "to", "values": ["original", "gift_card"]}, {"to": "cash"}, True),
    (_g("record_limit", "r", field="items", max=1), {"loan_id": "L1"}, True),  # 1 held + 1 added > 1
    (_g("record_limit", "r", field="items", max=1), {"loan_id": "L2"}, False),
    (_g("record_limit", "r", field="copies", arg="weeks", max=3), {"loan_id": "L1", "weeks": 2}, True),
    (_g("window", "w", field="borrowed_on", days=30, direction="since"), {"loan_id": "L2"}, True),
    (_g("window", "w", field="borrowed_on", days=30, direction="since"), {"loan_id": "L1"}, False),
    (_g("window", "w", field="borrowed_on", hours=24, direction="until"), {"loan_id": "L1"}, True),
    (_g("owned", "o", owner_field="member_id", owner_arg="member_id"), {"loan_id": "L1", "member_id": "M2"}, True),
    (_g("owned", "o", owner_field="member_id", owner_arg="member_id"), {"loan_id": "L1", "member_id": "M1"}, False),
    (_g("member", "m", list_field="items", item_arg="item_id"), {"loan_id": "L1", "item_id": "I9"}, True),
    (_g("member", "m", list_field="items", item_arg="item_id"), {"loan_id": "L1", "item_id": ["I1"]}, False),
    (_g("unchanged", "u", field="copies", arg="copies"), {"loan_id": "L1", "copies": 3}, True),
    (_g("unchanged", "u", field="items", arg="items"), {"loan_id": "L1", "items": ["x"]}, False),  # same length
    (_g("covers", "c", field="paid", arg="refund", side="max"), {"loan_id": "L1", "refund": 10.5}, True),
    (_g("covers", "c", field="paid", arg="pay", side="min"), {"loan_id": "L1", "pay": 9}, True),
    (_g("status", "s", field="status", allowed=["active"]), {"loan_id": "L9"}, False),  # no record: the tool says so
    (_g("window", "w", field="status", days=1), {"loan_id": "L1"}, False),  # not a date: passes
])
def test_each_op_refuses_what_breaks_it_and_only_that(guard, args, bad):
    assert G.broken(guard, STATE, args) is bad
    assert (G.refusal([guard], STATE, args) is not None) is bad


@pytest.mark.parametrize("guard", [
    _g("status", "s", field="status", forbidden=["overdue"]), _g("count_limit", "c", counter="n", max=1),
    _g("window", "w", field="borrowed_on", days=14, direction="since"),
    _g("window", "w", field="borrowed_on", hours=0, direction="until"),
    _g("record_limit", "r", field="items", max=2), _g("owned", "o", owner_field="member_id", owner_arg="member_id"),
    _g("member", "m", list_field="items", item_arg="item_id"), _g("unchanged", "u", field="copies", arg="copies"),
    _g("covers", "c", field="paid", arg="refund", side="max"), _g("covers", "c", field="paid", arg="pay", side="min"),
    {"op": "arg_limit", "rule_id": "a", "arg": "weeks", "min": 1, "max": 4},
    {"op": "arg_not", "rule_id": "n", "arg": "weeks", "values": [3]},
])
def test_probe_cases_keep_and_break_exactly_the_guard(guard):
    other = _g("count_limit", "s0", counter="times", max=3)  # kept while the guard under test is broken
    guards = [other, guard]
    (keep_st, keep_a), (bad_st, bad_a) = G.probe_cases(guards, guard, STATE, {"loan_id": "L1"},
                                                       {"loans": ["active", "overdue"]})
    assert G.refusal(guards, keep_st, keep_a) is None
    assert G.refusal(guards, bad_st, bad_a)[0] == guard["rule_id"]
    assert STATE["loans"]["L1"]["status"] == "active"  # the sample state is not touched


def test_a_guard_that_cannot_read_a_value_passes():
    g = {"op": "arg_limit", "rule_id": "a", "arg": "weeks", "max": {"not": "a number"}}
    assert G.refusal([g], STATE, {"weeks": 3}) is None


def test_synthesis_carries_policy_guards_on_the_code_and_probes_them(monkeypatch, tmp_path):
    """A policy rule read into a guard reaches the tool's code row, is probed (a call that breaks it is
    refused with the rule's id, the one that keeps it succeeds), and refuses calls in any Environment
    built from the rows; its rule row says where it came from."""
    from autoforge.domain import policy
    from autoforge.envs.synthesis import synthesize_environment
    from autoforge.tooldocs.ingest import ingest_paths
    from autoforge.types import PolicyDoc

    def fake_read(text, source, specs, plans, schema):
        return [ParsedRule("source_status", "Cancelled bookings cannot be modified.", "status", [], "runtime",
                           source=source, offset=0, tools=["modify_booking_dates"],
                           check={"op": "status", "collection": "bookings", "id_arg": "booking_id", "field": "status",
                                  "forbidden": ["cancelled"]}),
                ParsedRule("quantity_limit", "At most 4 guests per booking.", "guests_count", [4], "runtime",
                           source=source, offset=40, tools=["create_booking"],
                           check={"op": "arg_limit", "arg": "guests_count", "max": 4}),
                ParsedRule("conversation", "Verify the guest's identity first.", None, [], "judged", source=source,
                           offset=80, tools=["cancel_booking"], check={"op": "identify_first",
                                                                        "tools": ["cancel_booking"], "via": []}),
                ParsedRule("unparsed", "Be friendly.", None, [], source=source, offset=120, why="no form")]

    monkeypatch.setattr(policy, "read_policy", fake_read)
    from pathlib import Path

    hotel = Path(__file__).resolve().parents[1] / "autoforge" / "data" / "tooldocs" / "hotel"
    res = ingest_paths([str(hotel)])
    ts = res.toolsets[0]
    doc = PolicyDoc(policy_id="p", toolset=ts.name, toolset_id=ts.toolset_id, source="policy.md", sha256="x",
                    text="(rules)", n_chars=7)
    plain = synthesize_environment(ts, res.specs)
    result = synthesize_environment(ts, res.specs, policies=[doc])
    assert result.environment.env_id != plain.environment.env_id  # the guards are part of the environment
    tools = {t.name: t for t in result.tools}
    assert [g["op"] for g in tools["modify_booking_dates"].guards] == ["status"]
    assert [g["op"] for g in tools["create_booking"].guards] == ["arg_limit"]
    rows = {r.text: r for r in result.rules if r.source == "policy.md"}
    assert rows["Cancelled bookings cannot be modified."].enforcement == "runtime"
    assert rows["Cancelled bookings cannot be modified."].probe == "passed", rows["Cancelled bookings cannot be modified."].probe_detail
    assert rows["At most 4 guests per booking."].probe == "passed", rows["At most 4 guests per booking."].probe_detail
    assert rows["Verify the guest's identity first."].enforcement == "judged"
    assert rows["Be friendly."].enforcement == "not enforced" and rows["Be friendly."].why
    rid = rows["Cancelled bookings cannot be modified."].rule_id
    state = result.environment.sample_state
    booking = next(iter(state["bookings"].values()))
    booking["status"] = "cancelled"
    with Environment(result.tools, env_id=result.environment.env_id) as env:
        env.reset(state)
        obs = env.call("modify_booking_dates", {"booking_id": booking["booking_id"], "check_in": "2025-03-01",
                                                "check_out": "2025-03-04"})
        assert obs.rule_id == rid and not obs.ok


def test_check_problem_validates_a_check_against_the_tool_and_the_schema():
    """The offline reader's checks and the LLM backend's pass one validation (policy_guards.check_problem)."""
    from autoforge.envs.policy_guards import check_problem
    from autoforge.types import CollectionSpec, FieldSpec, StateSchema

    schema = StateSchema(collections=[CollectionSpec(name="loans", entity="loan", primary_key="loan_id", id_prefix="L",
                                                     fields=[FieldSpec(name="loan_id"), FieldSpec(name="status"),
                                                             FieldSpec(name="copies", type="integer")])])
    params = ["loan_id", "weeks"]
    ok = {"op": "record_limit", "collection": "loans", "id_arg": "loan_id", "field": "copies", "max": 3}
    assert check_problem(ok, params, schema, "runtime") is None
    assert "no field of loans" in check_problem({**ok, "field": "pages"}, params, schema, "runtime")
    assert "not in the state schema" in check_problem({**ok, "collection": "books"}, params, schema, "runtime")
    assert "no argument of the tool" in check_problem({**ok, "id_arg": "book_id"}, params, schema, "runtime")
    assert "max must be a number" in check_problem({**ok, "max": "three"}, params, schema, "runtime")
    assert "needs max or min" in check_problem({"op": "arg_limit", "arg": "weeks"}, params, schema, "runtime")
    assert "op 'teleport'" in check_problem({"op": "teleport"}, params, schema, "runtime")
    assert check_problem({"op": "identify_first", "tools": ["renew_loan"]}, params, schema, "judged") is None
    assert "judged op" in check_problem({"op": "arg_limit"}, params, schema, "judged")
