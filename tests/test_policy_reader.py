"""The offline policy reader (autoforge/domain/policy.py): each sentence form into its typed rule and
check, bound to the tools it governs; what it cannot read is listed with why, never dropped; the
guards it makes are probed at synthesis and a failed probe guards nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoforge.domain.policy import read_policy, prose_policy_rules
from autoforge.domain.policy_text import statements
from autoforge.domain.state import offline_state_schema
from autoforge.envs.synthesis import canonical_specs, plan_tools, synthesize_environment
from autoforge.tooldocs.ingest import ingest_paths
from autoforge.types import PolicyDoc

ROOT = Path(__file__).resolve().parents[1]
HOTEL = ROOT / "autoforge" / "data" / "tooldocs" / "hotel"
POLICYDOCS = ROOT.parent / "shared" / "policydocs"


@pytest.fixture(scope="module")
def hotel():
    res = ingest_paths([str(HOTEL)])
    ts = res.toolsets[0]
    cspecs, _ = canonical_specs(res.specs)
    plans = plan_tools(cspecs)
    return ts, res.specs, cspecs, plans, offline_state_schema(ts, cspecs)


def _read(hotel, text):
    _, _, cspecs, plans, schema = hotel
    return {r.text: r for r in read_policy(text, "policy.md", cspecs, plans, schema)}


@pytest.mark.parametrize("sentence, kind, tool, check", [
    ("A booking may hold at most 4 guests.", "quantity_limit", "create_booking",
     {"op": "arg_limit", "arg": "guests_count", "max": 4}),
    ("No more than 5000 points can be redeemed per booking.", "quantity_limit", "redeem_loyalty_points",
     {"op": "arg_limit", "arg": "points", "max": 5000}),
    ("Only confirmed bookings can be modified.", "source_status", "modify_booking_dates",
     {"op": "status", "allowed": ["confirmed"]}),
    ("Checked-in bookings cannot be cancelled.", "source_status", "cancel_booking",
     {"op": "status", "forbidden": ["checked_in"]}),
    ("Dates can be changed only once per booking.", "count_limit", "modify_booking_dates",
     {"op": "count_limit", "max": 1, "collection": "bookings"}),
    ("A booking's dates may be changed at most twice.", "count_limit", "modify_booking_dates", {"op": "count_limit", "max": 2}),
    ("Changes must be made at least 48 hours before check-in.", "time_window", "modify_booking_dates",
     {"op": "window", "field": "check_in", "direction": "until", "hours": 48}),
    ("The booking must belong to the guest redeeming the points.", "cross_record", "redeem_loyalty_points",
     {"op": "owned", "collection": "bookings", "owner_field": "guest_id"}),
    ("Verify the guest's identity before making any change.", "conversation", "cancel_booking",
     {"op": "identify_first", "via": ["find_guest_id_by_email"]}),
    ("Always get the guest's explicit confirmation before cancelling a booking.", "conversation", "cancel_booking",
     {"op": "confirm_first", "tools": ["cancel_booking"]}),
])
def test_each_form_reads_into_its_kind_and_check(hotel, sentence, kind, tool, check):
    r = _read(hotel, sentence)[sentence]
    assert r.kind == kind and tool in r.tools, (r.kind, r.tools, r.check, r.why)
    assert r.enforcement == ("judged" if kind == "conversation" else "runtime")
    for k, v in check.items():
        assert r.check[k] == v, (k, r.check)
    assert r.source == "policy.md" and r.offset == 0


def test_what_it_cannot_read_or_bind_is_listed_with_why(hotel):
    got = _read(hotel, "Be courteous and you must always smile.\n\nThe number of guests cannot be changed after booking.\n\n"
                       "Transfer to a human agent only when the guest asks for a refund.\n\nOur lobby is lovely.")
    smile = got["Be courteous and you must always smile."]
    assert smile.kind == "unparsed" and smile.enforcement == "not enforced" and "matches no rule form" in smile.why
    guests = got["The number of guests cannot be changed after booking."]
    assert guests.kind == "prohibition" and guests.enforcement == "not enforced" and "guests" in guests.why
    assert "no hand-off tool" in got["Transfer to a human agent only when the guest asks for a refund."].why
    assert "Our lobby is lovely." not in got  # states no rule: not a rule at all


def test_statements_keep_offsets_list_items_tables_and_skip_code():
    text = ("# Rules\n\n1. At most 4 guests.\n2. Only confirmed bookings.\n\n```\nmust not be read\n```\n"
            "| Tier | Max points |\n|---|---|\n| Gold | 5000 |\n\n<!-- a comment must go -->\nPlain one. Plain two.\n")
    got = statements(text)
    assert [s.text for s in got] == ["At most 4 guests.", "Only confirmed bookings.", "Tier: Gold; Max points: 5000",
                                     "Plain one.", "Plain two."]
    for s in got[:2] + got[3:]:
        assert text[s.offset:].startswith(s.text[:8])
    assert got[0].context == "Rules"


def test_a_fee_is_no_window_and_a_parenthesis_restates_the_status(hotel):
    _, _, cspecs, plans, schema = hotel
    got = {r.text for c in cspecs for r in prose_policy_rules(c, plans[c.name], schema, cspecs, plans)}
    assert not any("Free until" in t for t in got)
    from autoforge.domain.statuses import status_rules
    assert status_rules("Only possible while the order is still pending (not yet shipped).",
                        ["pending", "shipped", "cancelled"], "order", "cancelled") == (["pending"], [])


def test_synthesis_probes_the_read_rules_and_drops_a_failed_guard(hotel, monkeypatch):
    ts, specs, *_ = hotel
    text = ("1. A booking may hold at most 4 guests.\n2. Only confirmed bookings can be modified.\n"
            "3. Cancelled bookings cannot be changed.\n4. Changes must be made at least 48 hours before check-in.\n")
    doc = PolicyDoc(policy_id="p", toolset=ts.name, toolset_id=ts.toolset_id, source="policy.md", sha256="x",
                    text=text, n_chars=len(text))
    res = synthesize_environment(ts, specs, policies=[doc])
    rows = [r for r in res.rules if r.source == "policy.md"]
    assert len(rows) == 4 and all(r.enforcement == "runtime" and r.probe == "passed" for r in rows), \
        [(r.text, r.probe, r.probe_detail) for r in rows]
    guarded = {g["rule_id"] for t in res.tools for g in t.guards}
    assert {r.rule_id for r in rows} <= guarded

    from autoforge.envs import policy_guards
    monkeypatch.setattr(policy_guards, "probe_guard", lambda *a, **k: ("failed", "a call that keeps it was refused"))
    res = synthesize_environment(ts, specs, policies=[doc])
    rows = [r for r in res.rules if r.source == "policy.md"]
    assert all(r.probe == "failed" and r.enforcement == "not enforced" and "probe failed" in r.why for r in rows)
    assert not any(t.guards for t in res.tools)


@pytest.mark.skipif(not POLICYDOCS.is_dir(), reason="../shared/policydocs is absent")
def test_every_rule_like_sentence_of_the_real_policies_is_kept():
    """Each policydocs set: every statement that reads like a rule has at least one record (enforced, or
    not enforced with why); every enforced one names a tool and has a check."""
    from autoforge.domain.policy import RULE_CUE

    for folder in sorted(p for p in POLICYDOCS.iterdir() if p.is_dir()):
        res = ingest_paths([str(folder)])
        ts = res.toolsets[0]
        cspecs, _ = canonical_specs(res.specs)
        plans = plan_tools(cspecs)
        schema = offline_state_schema(ts, cspecs)
        for doc in res.policies:
            rules = read_policy(doc.text, doc.source, cspecs, plans, schema)
            cued = [s for s in statements(doc.text) if RULE_CUE.search(s.text)]
            assert {s.offset for s in cued} <= {r.offset for r in rules}, folder.name
            for r in rules:
                assert (r.enforcement == "not enforced" and r.why) or (r.tools and r.check), (folder.name, r)


FIXTURES = ROOT / "tests" / "fixtures" / "policies"


def test_the_fixture_policies_checkable_rules_are_enforced_on_their_tools():
    """The answer keys of tests/fixtures/policies (.expected_rules.json): at least 80% of the rules a
    tool call can break are enforced on the tool the key names (runtime with a passing probe, or judged)."""
    import json

    hit = total = 0
    for folder in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        keys = json.loads((folder / ".expected_rules.json").read_text())
        res = ingest_paths([str(folder)])
        out = synthesize_environment(res.toolsets[0], res.specs, policies=list(res.policies))
        rows = [r for r in out.rules if r.source != "tool"]
        text = (folder / "policy.md").read_text()
        for k in keys:
            if not (k.get("checkable") and k.get("tool")):
                continue
            total += 1
            at = text.find(k["sentence"])
            got = [r for r in rows if r.source_offset is not None  # the statement holding the key's sentence
                   and r.source_offset <= at + len(k["sentence"]) and at <= r.source_offset + len(r.text) + 8]
            hit += any(k["tool"] in r.tools and (r.enforcement == "judged" or (r.enforcement == "runtime" and r.probe == "passed"))
                       for r in got)
    assert total >= 60 and hit / total >= 0.8, (hit, total)


def test_tier_tables_ranges_and_counts_left(hotel):
    table = ("| Tier | Max points per redemption |\n|---|---|\n| gold | 4000 |\n\n"
             "Guests may stay for 1 to 14 nights.\n\nA booking with no nights left cannot be modified.\n")
    _, _, cspecs, plans, schema = hotel
    rules = read_policy(table, "policy.md", cspecs, plans, schema)
    by = {r.kind: r for r in rules}
    assert all(r.source == "policy.md" for r in rules)
    assert any(r.check and r.check.get("op") == "arg_limit" and r.check.get("min") == 1 and r.check.get("max") == 14
               for r in rules if r.enforcement == "runtime") or "quantity_limit" in by
    left = [r for r in rules if r.check and r.check.get("op") == "record_min"]
    assert left and left[0].check["field"] == "nights" and "modify_booking_dates" in left[0].tools
