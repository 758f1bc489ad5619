"""The rule judge (autoforge/rollout/rule_judge.py): refused calls and judged conversation rules
(identify_first, confirm_first) over a transcript, Episode.rule_breaks, and the reward of a
rule-breaking episode (0 when AUTOFORGE_ZERO_ON_RULE_BREAK is on, the default; unchanged when off)."""

from __future__ import annotations

import json

import pytest
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.rollout import reward as R
from autoforge.rollout.agents import OracleAgent
from autoforge.rollout.engine import run_episode
from autoforge.rollout.rule_judge import episode_rule_breaks, judge_rules, refused_in
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import OfflineUser
from autoforge.tasks.rules import judged_checks
from autoforge.types import Message, ToolCall, ToolRule

IDENT = {"op": "identify_first", "rule_id": "R_ident", "tools": ["cancel_order"], "via": ["find_user_id_by_email"],
         "message": "Identify the customer first."}
IDENT_NO_VIA = {"op": "identify_first", "rule_id": "R_who", "tools": ["cancel_order"], "via": [],
                "message": "Know who you talk to."}
CONFIRM = {"op": "confirm_first", "rule_id": "R_conf", "tools": ["cancel_order"], "message": "Confirm first."}


class Transcript:
    """A transcript under construction: user / agent text, tool calls with their results."""

    def __init__(self, opening: str = "Please cancel my order."):
        self.messages = [Message(role="system", content="sys"), Message(role="user", content=opening)]
        self.n = 0

    def say(self, text: str) -> "Transcript":
        self.messages.append(Message(role="assistant", content=text))
        return self

    def user(self, text: str) -> "Transcript":
        self.messages.append(Message(role="user", content=text))
        return self

    def call(self, name: str, result: dict, args: dict | None = None) -> "Transcript":
        self.n += 1
        cid = f"c{self.n}"
        self.messages.append(Message(role="assistant", content="", tool_calls=[ToolCall(name=name, arguments=args or {},
                                                                                     id=cid)]))
        self.messages.append(Message(role="tool", content=json.dumps(result), tool_call_id=cid, name=name))
        return self


def flagged(t: Transcript, *checks: dict) -> list[str]:
    return [rid for rid, _ in judge_rules(t.messages, list(checks))]


# --------------------------------------------------------------------------- identify_first


def test_identify_first_with_lookups_flags_a_write_before_any_lookup():
    early = Transcript().call("cancel_order", {"order_id": "O1", "status": "cancelled"})
    early.call("find_user_id_by_email", {"user_id": "U1"})
    assert flagged(early, IDENT) == ["R_ident"]
    ok = Transcript().user("- email: a@b.c").call("find_user_id_by_email", {"user_id": "U1"})
    ok.call("cancel_order", {"order_id": "O1"})
    assert flagged(ok, IDENT) == []


def test_identify_first_counts_only_a_lookup_that_succeeded_and_a_write_that_happened():
    failed_lookup = Transcript().call("find_user_id_by_email", {"error": "no such user"})
    failed_lookup.call("cancel_order", {"order_id": "O1"})
    assert flagged(failed_lookup, IDENT) == ["R_ident"]
    failed_write = Transcript().call("cancel_order", {"error": "order O1 is shipped"})  # nothing happened
    assert flagged(failed_write, IDENT) == []


def test_identify_first_without_lookups_needs_a_reply_from_the_user_before_the_write():
    blind = Transcript().call("cancel_order", {"order_id": "O1"})
    assert flagged(blind, IDENT_NO_VIA) == ["R_who"]
    asked = Transcript().say("Who am I talking to? Please give me your email.").user("- email: a@b.c")
    asked.call("cancel_order", {"order_id": "O1"})
    assert flagged(asked, IDENT_NO_VIA) == []


# --------------------------------------------------------------------------- confirm_first


def test_confirm_first_flags_a_write_without_a_yes_to_a_request_to_confirm():
    unasked = Transcript().user("- email: a@b.c").call("cancel_order", {"order_id": "O1"})
    assert flagged(unasked, CONFIRM) == ["R_conf"]
    confirmed = Transcript().say("Shall I cancel order O1? Please confirm.").user("Yes, please go ahead.")
    confirmed.call("cancel_order", {"order_id": "O1"})
    assert flagged(confirmed, CONFIRM) == []
    refused = Transcript().say("Shall I cancel order O1? Please confirm.").user("No, don't do that.")
    refused.call("cancel_order", {"order_id": "O1"})
    assert flagged(refused, CONFIRM) == ["R_conf"]
    not_asked = Transcript().say("Your order is O1.").user("Yes.").call("cancel_order", {"order_id": "O1"})
    assert flagged(not_asked, CONFIRM) == ["R_conf"]  # a yes to nothing the agent asked to confirm


def test_a_confirmation_covers_the_writes_up_to_the_next_user_message():
    t = Transcript().say("Shall I go ahead? Please confirm.").user("Yes, go ahead.")
    t.call("find_user_id_by_email", {"user_id": "U1"}).call("cancel_order", {"order_id": "O1"})
    assert flagged(t, CONFIRM) == []
    t.user("- email: a@b.c").call("cancel_order", {"order_id": "O2"})  # a new user message: the yes is spent
    assert flagged(t, CONFIRM) == ["R_conf"]


def test_each_rule_once_refused_calls_first_and_stored_transcripts_read_refusals():
    t = Transcript().call("cancel_order", {"error": "policy rule R_ship: Shipped orders cannot be cancelled."})
    t.call("cancel_order", {"order_id": "O2"}).call("cancel_order", {"order_id": "O3"})
    assert refused_in(t.messages) == ["R_ship"]
    assert episode_rule_breaks(t.messages, [IDENT, CONFIRM]) == ["R_ship", "R_ident", "R_conf"]
    assert episode_rule_breaks(t.messages, [IDENT, CONFIRM], refused=[]) == ["R_ident", "R_conf"]
    assert episode_rule_breaks(t.messages, [{**CONFIRM, "op": "transfer_when"}], refused=[]) == []  # not judged


def test_judged_checks_come_from_judged_rule_rows():
    row = ToolRule(rule_id="rule_x", env_id="e", tool_id="t", tool="cancel_order", kind="conversation",
                   text="Confirm   before cancelling.", enforcement="judged", tools=["cancel_order"],
                   guard={"op": "confirm_first", "tools": ["cancel_order"]})
    other = row.model_copy(update={"rule_id": "rule_y", "enforcement": "runtime", "guard": {"op": "arg_limit"}})
    assert judged_checks([row, other]) == [{"op": "confirm_first", "tools": ["cancel_order"], "via": [],
                                            "rule_id": "rule_x", "message": "Confirm before cancelling."}]


# --------------------------------------------------------------------------- episodes and their reward


@pytest.fixture(scope="module")
def cancel():
    tasks, dags = tasks_and_dags()
    task = next(t for t in tasks if t.task_id == "task_cancel")
    return task, dags[task.dag_id]


class Hasty(OracleAgent):
    """The oracle, but it never asks for confirmation (it still knows the rules)."""

    name = "hasty"

    def reset(self, ctx):
        super().reset(ctx)
        self.confirm_tools = set()


def play(task, dag, agent, rules, zero=None):
    env = local_env_factory(make_tools())
    return run_episode(task, env, agent, OfflineUser(task), tools=tool_schemas(make_tools()), dag=dag, rules=rules,
                       zero_on_rule_break=zero).episode


def test_the_oracle_asks_for_confirmation_and_the_offline_user_agrees(cancel):
    task, dag = cancel
    ep = play(task, dag, OracleAgent(), [IDENT, CONFIRM])
    assert ep.reward == 1.0 and ep.rule_breaks == []
    said = [m.content for m in ep.messages if m.role == "assistant" and m.content]
    assert any("Please confirm" in s for s in said)
    assert "Yes, please go ahead." in [m.content for m in ep.messages if m.role == "user"]


def test_a_rule_breaking_episode_scores_0_by_default_and_unchanged_when_the_setting_is_off(cancel, monkeypatch):
    task, dag = cancel
    ep = play(task, dag, Hasty(), [IDENT, CONFIRM])
    assert ep.rule_breaks == ["R_conf"] and ep.reward == 0.0
    assert ep.reward_info["rule_breaks"] == ["R_conf"] and ep.reward_info["reward_before_rule_break"] == 1.0
    assert ep.reward_info["state_match"] is True  # the work itself was right
    monkeypatch.setenv("AUTOFORGE_ZERO_ON_RULE_BREAK", "0")
    off = play(task, dag, Hasty(), [IDENT, CONFIRM])
    assert off.rule_breaks == ["R_conf"] and off.reward == 1.0
    assert play(task, dag, Hasty(), [IDENT, CONFIRM], zero=True).reward == 0.0  # the argument beats the setting
    assert play(task, dag, Hasty(), [IDENT]).rule_breaks == []  # the oracle looked the user up first


def test_rule_break_reward_keeps_an_unscored_episode_unscored():
    assert R.rule_break_reward(None, {}, ["R1"], zero=True) == (None, {"rule_breaks": ["R1"]})
    assert R.rule_break_reward(1.0, {"a": 1}, [], zero=True) == (1.0, {"a": 1})
    assert R.rule_break_reward(1.0, {}, ["R1"], zero=False) == (1.0, {"rule_breaks": ["R1"]})


def test_rule_breaks_round_trip_through_the_warehouse(cancel, tmp_path):
    from autoforge.warehouse import query, read_records, write_records
    from autoforge.types import Episode, Task

    task, dag = cancel
    ep = play(task, dag, Hasty(), [CONFIRM])
    wh = str(tmp_path / "w.duckdb")
    write_records(wh, [task.model_copy(update={"rules": ["R_conf"]}), ep])
    assert read_records(wh, Episode)[0].rule_breaks == ["R_conf"]
    assert read_records(wh, Task)[0].rules == ["R_conf"]
    assert query(wh, "SELECT json_array_length(rule_breaks) AS n FROM episodes")[0]["n"] == 1
