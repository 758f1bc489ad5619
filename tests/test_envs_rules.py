"""Rules stated in the prose: parsed, enforced by the offline code, probed, recorded (autoforge.domain.rules, autoforge.envs.rule_engine)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from autoforge.domain.rules import parse_sentence
from autoforge.envs.runtime import Environment
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"
REALDOCS = Path(__file__).resolve().parents[2] / "shared" / "realdocs"


def _kinds(sentence, enum=None, entity=None, verb=None):
    return [(r.kind, r.field, r.values, r.forbidden) for r in parse_sentence(sentence, enum or [], entity, verb)]


@pytest.mark.parametrize("sentence,enum,entity,verb,expected", [
    ("Issue a refund only for a draft invoice.", ["draft", "sent"], "invoice", "refund", ["draft"]),
    ("Freeze the card; requires the account to be Open.", ["open", "frozen"], "account", "freeze", ["open"]),
    ("The order can only be cancelled if pending.", ["pending", "cancelled"], "order", "cancel", ["pending"]),
    ("The order must be in 'pending' status.", [], "order", "cancel", ["pending"]),
    ("Only 'pending' orders can be cancelled.", [], "order", "cancel", ["pending"]),
    ("Requires: the account is Open.", [], "account", "freeze", ["open"]),
])
def test_source_status_phrasings(sentence, enum, entity, verb, expected):
    got = [r for r in parse_sentence(sentence, enum, entity, verb) if r.kind == "source_status"]
    assert got and got[0].values == expected


def test_negated_source_status_forbids():
    (r,) = parse_sentence("Checked-in bookings cannot be cancelled.", ["confirmed", "checked_in"], "booking", "cancel")
    assert r.kind == "source_status" and r.forbidden == ["checked_in"]
    assert parse_sentence("Suspend an active line (no calls or data)", ["active"], "line", "suspend") == []


@pytest.mark.parametrize("sentence,entity,value", [
    ("The ticket is then marked 'escalated'.", "ticket", "escalated"),
    ("The booking becomes confirmed.", "booking", "confirmed"),
    ("Effect: moves it to Frozen.", "account", "frozen"),
    ("Sets the ticket status to 'resolved'.", "ticket", "resolved"),
    ("Changes the order's status to shipped.", "order", "shipped"),
    ("The status is set to 'archived'.", "project", "archived"),
    ("The loan transitions to returned.", "loan", "returned"),
])
def test_result_status_phrasings(sentence, entity, value):
    got = [r for r in parse_sentence(sentence, [], entity) if r.kind == "result_status"]
    assert got and got[0].values == [value]


def test_result_of_another_record_is_not_read():
    assert not [r for r in parse_sentence("a suspended member whose fines reach zero becomes active again", [], "fine")
                if r.kind == "result_status"]
    assert not [r for r in parse_sentence("The head becomes the new manager", [], "employee") if r.kind == "result_status"]


@pytest.mark.parametrize("sentence,field", [
    ("Records frozen_at.", "frozen_at"), ("Stamps closed_at with the current time.", "closed_at"),
    ("The tool records the time.", None),
])
def test_side_effect_phrasings(sentence, field):
    got = [r for r in parse_sentence(sentence, [], "ticket") if r.kind == "side_effect"]
    assert got and got[0].field == field and got[0].values == ["NOW"]


@pytest.mark.parametrize("sentence,kind", [
    ("A customer may hold at most 3 accounts.", "constraint"),
    ("Each user can file one ticket per day.", "constraint"),
    ("You can only change one folder level at a time.", "unparsed"),
    ("This can only be done by the logged in user.", "unparsed"),
    ("Get an account by its id.", None),
])
def test_rule_like_sentences_are_listed(sentence, kind):
    got = parse_sentence(sentence, [], "account")
    assert [r.kind for r in got] == ([kind] if kind else [])
    assert all(r.enforcement == "not enforced" for r in got)


# --------------------------------------------------------------------------- end to end


def _synth(name):
    res = ingest_paths([FIXTURES / name])
    assert not res.errors, res.errors
    (ts,) = res.toolsets
    return synthesize_environment(ts, res.specs)


def _rules(result, tool):
    return {r.kind: r for r in result.rules if r.tool == tool}


def test_accounts_rules_enforced_probed_and_recorded():
    result = _synth("rules_accounts.json")
    assert result.environment.n_tools_accepted == result.environment.n_tools
    fr = _rules(result, "freeze_account")
    assert fr["source_status"].values == ["open"] and fr["source_status"].enforcement == "code"
    assert fr["result_status"].values == ["frozen"] and fr["result_status"].enforcement == "code"
    assert fr["side_effect"].field == "frozen_at" and fr["side_effect"].enforcement == "code"
    for r in fr.values():
        assert r.probe == "passed", (r.kind, r.probe_detail)
    rename = [r for r in result.rules if r.tool == "rename_account"]
    assert {r.kind for r in rename} >= {"constraint"} and all(r.enforcement == "not enforced" and r.probe == "none"
                                                              for r in rename)
    assert result.summary()["rules"]["probe_passed"] >= 3
    assert any(type(r).__name__ == "ToolRule" for r in result.records())

    # the real sandbox runtime: a frozen account cannot be frozen again, an open one is, with frozen_at
    tools = {t.name: t for t in result.accepted}
    state = copy.deepcopy(result.environment.sample_state)
    accounts = state["accounts"]
    key = sorted(accounts)[0]
    with Environment(result.accepted) as env:
        accounts[key]["status"] = "frozen"
        env.reset(state)
        before = env.get_state()
        obs = env.call("freeze_account", {"account_id": accounts[key]["account_id"] if "account_id" in accounts[key] else key})
        assert obs.kind == "tool_error" and env.get_state() == before
        accounts[key]["status"] = "open"
        env.reset(state)
        obs = env.call("freeze_account", {"account_id": accounts[key].get("account_id", key)})
        assert obs.ok, obs
        after = env.get_state()["accounts"][key]
        assert after["status"] == "frozen" and after["frozen_at"]
    assert "freeze_account" in tools


def test_tickets_rules_enforced():
    result = _synth("rules_tickets.json")
    assert result.environment.n_tools_accepted == result.environment.n_tools
    esc = _rules(result, "escalate_ticket")
    assert esc["source_status"].values == ["open"] and esc["result_status"].values == ["escalated"]
    assert esc["side_effect"].field == "escalated_at"
    res = _rules(result, "resolve_ticket")
    assert res["source_status"].values == ["escalated"] and res["result_status"].values == ["resolved"]
    for r in list(esc.values()) + list(res.values()):
        assert r.enforcement == "code" and r.probe == "passed", (r.tool, r.kind, r.probe_detail)
    create = [r for r in result.rules if r.tool == "create_ticket" and r.kind == "constraint"]
    assert create and create[0].enforcement == "not enforced"


def test_rules_are_written_and_viewed(tmp_path):
    from autoforge.pipeline.common import persist
    from autoforge.types import Run
    from autoforge.warehouse import apply_migrations, query

    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh)
    result = _synth("rules_accounts.json")
    written = persist(wh, [result], Run.make("synthesize", {}))
    assert written["tool_rules"] == len(result.rules)
    (row,) = query(wh, "SELECT * FROM v_environment_rules")
    assert row["n_rules"] == len(result.rules) and row["n_probe_passed"] >= 3 and row["n_probe_failed"] == 0


@pytest.mark.skipif(not REALDOCS.is_dir(), reason="no ../shared/realdocs")
def test_real_docs_rules_listed_never_dropped():
    res = ingest_paths([REALDOCS / "mcp_github_issues"])
    (ts,) = res.toolsets
    result = synthesize_environment(ts, res.specs)
    texts = {r.text for r in result.rules}
    assert any("At least one of body or reaction is required" in t for t in texts)
    # argument rules (ranges, one-of, required-when ...) are code and pass their probes; the rest
    # is listed as not enforced, never dropped
    args = [r for r in result.rules if r.kind == "constraint" and r.values and isinstance(r.values[0], str)]
    assert {r.values[0] for r in args} >= {"one_of", "excludes", "range", "required_when", "only_when"}
    assert all(r.enforcement == "code" and r.probe == "passed" for r in args), [(r.tool, r.values, r.probe_detail)
                                                                               for r in args if r.probe != "passed"]
    assert all(r.enforcement == "not enforced" for r in result.rules if r not in args)
    assert any(r.kind == "unparsed" for r in result.rules)
