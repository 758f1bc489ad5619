"""Simulated users: the offline script, each injected error kind, the LLM user via the stub server."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stub_openai_server import StubOpenAIServer, reply
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.errors import ConfigError
from autoforge.llm import OpenAIClient
from autoforge import dialogue as D
from autoforge.rollout.agents import OracleAgent
from autoforge.rollout.engine import run_episode
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import USER_MAX_TOKENS, ErrorRates, InjectionPlan, LLMUser, OfflineUser, flip_roles, perturb, sample_plan
from autoforge.types import Message

TOOLS = make_tools()


@pytest.fixture(scope="module")
def world():
    tasks, dags = tasks_and_dags()
    return {t.task_id: t for t in tasks}, dags


def oracle_episode(task, dags, user):
    return run_episode(task, local_env_factory(TOOLS), OracleAgent(), user, tools=tool_schemas(TOOLS),
                       dag=dags[task.dag_id]).episode


def agent(text):
    return [Message(role="user", content="req"), Message(role="assistant", content=text)]


# --------------------------------------------------------------------------- the offline script


def test_offline_user_reveals_asked_facts_only(world):
    task = world[0]["task_reschedule"]
    u = OfflineUser(task)
    assert u.opening() == task.request
    r = u.reply(agent("Could you tell me your email?"))
    assert not r.stop and D.parse_fact_lines(r.content, task.user_facts) == {"email": "ava.chen@example.com"}
    r = u.reply(agent("What new delivery date would you like, and your email again?"))
    assert D.parse_fact_lines(r.content, task.user_facts) == task.user_facts


def test_offline_user_confirms_and_stops_when_done(world):
    u = OfflineUser(world[0]["task_cancel"])
    assert u.reply(agent("I found order O0002. Shall I proceed with cancelling it?")).content == "Yes, please go ahead."
    r = u.reply(agent("Order O0002 has been cancelled. Is there anything else I can help you with?"))
    assert r.stop and D.STOP in r.content and not r.gave_up


def test_offline_user_does_not_stop_on_an_unfinished_message_and_gives_up_eventually(world):
    u = OfflineUser(world[0]["task_cancel"], max_unhelpful=2)
    r1 = u.reply(agent("Let me look into that."))
    r2 = u.reply(agent("What colour is the sky?"))
    assert not r1.stop and not r2.stop
    r3 = u.reply(agent("Hmm."))
    assert r3.stop and r3.gave_up


def test_clean_user_reports_no_error(world):
    tasks, dags = world
    ep = oracle_episode(tasks["task_buy"], dags, OfflineUser(tasks["task_buy"]))
    assert ep.reward == 1.0 and ep.user_error is False and ep.user_error_kind is None


# --------------------------------------------------------------------------- injected errors


def test_wrong_fact_is_injected_and_recorded(world):
    tasks, dags = world
    task = tasks["task_reschedule"]
    ep = oracle_episode(task, dags, OfflineUser(task, InjectionPlan(kind="wrong_fact"), seed=3))
    assert ep.user_error is True and ep.user_error_kind == "wrong_fact"
    plan = ep.diagnostics["user"]
    assert plan["manifested"] and plan["fact"] in task.user_facts
    assert plan["wrong_value"] != task.user_facts[plan["fact"]]
    said = "\n".join(m.content for m in ep.messages if m.role == "user")
    assert D.value_text(plan["wrong_value"]) in said
    assert ep.reward == 0.0


def test_withheld_fact_is_injected_and_recorded(world):
    tasks, dags = world
    task = tasks["task_cancel"]
    ep = oracle_episode(task, dags, OfflineUser(task, InjectionPlan(kind="withheld_fact")))
    assert ep.user_error is True and ep.user_error_kind == "withheld_fact"
    said = "\n".join(m.content for m in ep.messages[1:] if m.role == "user")
    assert "ava.chen@example.com" not in said and "don't have my email" in said
    assert ep.termination == "agent_gave_up" and ep.reward == 0.0


def test_premature_stop_is_injected_and_recorded(world):
    tasks, dags = world
    task = tasks["task_cancel"]
    ep = oracle_episode(task, dags, OfflineUser(task, InjectionPlan(kind="premature_stop")))
    assert ep.user_error is True and ep.user_error_kind == "premature_stop"
    assert ep.termination == "user_stop" and ep.n_turns == 1 and ep.reward == 0.0


def test_premature_stop_after_completion_does_not_manifest(world):
    task = world[0]["task_cancel"]
    u = OfflineUser(task, InjectionPlan(kind="premature_stop"))
    r = u.reply(agent("All done: your order has been cancelled."))
    assert r.stop and u.ground_truth() == (False, None)


def test_injection_that_is_never_reached_is_not_an_error(world):
    task = world[0]["task_cancel"]
    u = OfflineUser(task, InjectionPlan(kind="wrong_fact"))
    u.reply(agent("I have completed your request."))
    assert u.ground_truth() == (False, None) and u.diagnostics()["planned"] == "wrong_fact"


def test_error_rates_sampling_matches_rates(world):
    task = world[0]["task_cancel"]
    rates = ErrorRates(wrong_fact=0.1, withheld_fact=0.2, premature_stop=0.3)
    rng = random.Random(0)
    kinds = [sample_plan(rates, rng, task).kind for _ in range(6000)]
    for kind, p in [("wrong_fact", 0.1), ("withheld_fact", 0.2), ("premature_stop", 0.3), (None, 0.4)]:
        assert abs(kinds.count(kind) / len(kinds) - p) < 0.03
    assert ErrorRates.uniform(0.3).label() == "[wrong_fact=0.1,withheld_fact=0.1,premature_stop=0.1]"
    with pytest.raises(ConfigError):
        ErrorRates(0.6, 0.6, 0.0)
    with pytest.raises(ConfigError):
        ErrorRates.uniform(1.5)


@given(st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False),
                 st.text(max_size=20), st.lists(st.integers(), max_size=4), st.dictionaries(st.text(max_size=3),
                                                                                         st.integers(), max_size=3)))
def test_perturb_never_returns_the_true_value(value):
    wrong = perturb(value, random.Random(1))
    assert wrong != value


@given(st.one_of(st.text(max_size=30), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                 st.none(), st.lists(st.integers(), max_size=3)))
def test_fact_lines_round_trip_exactly(value):
    line = D.fact_line("order_note", value)
    assert D.parse_fact_lines(line, ["order_note"]) == {"order_note": value}


# --------------------------------------------------------------------------- the LLM user


@pytest.fixture
def server():
    with StubOpenAIServer() as s:
        yield s


def llm_client(server):
    return OpenAIClient(server.base_url, "k", "stub-model", timeout_s=5, max_retries=0)


def test_llm_user_prompt_roles_and_stop(server, world):
    task = world[0]["task_reschedule"]
    server.push(reply("Sure, my email is ava.chen@example.com."), reply(f"Thanks! {D.STOP}"))
    u = LLMUser(llm_client(server), task, seed=1)
    msgs = [Message(role="system", content="sys"), Message(role="user", content=task.request),
            Message(role="assistant", content="What is your email?")]
    r = u.reply(msgs)
    assert not r.stop and "ava.chen" in r.content
    sent = server.requests[0]["messages"]
    assert sent[0]["role"] == "system" and "ava.chen@example.com" in sent[0]["content"] and D.STOP in sent[0]["content"]
    assert "do NOT end the conversation while any change you requested is still pending" in sent[0]["content"]
    assert [m["role"] for m in sent[1:]] == ["assistant", "user"]  # flipped: the agent speaks as 'user'
    assert server.requests[0]["max_tokens"] == USER_MAX_TOKENS  # a user model that never stops is cut off
    msgs += [Message(role="user", content=r.content), Message(role="assistant", content="Done, it has been moved.")]
    assert u.reply(msgs).stop


def test_llm_user_wrong_and_withheld_facts_change_the_prompt(server, world):
    task = world[0]["task_reschedule"]
    u = LLMUser(llm_client(server), task, InjectionPlan(kind="wrong_fact", fact="email"), seed=1)
    assert "ava.chen@example.com" not in u.system and D.value_text(u.plan.wrong_value) in u.system
    server.push(reply(f"It's {u.plan.wrong_value}."))
    u.reply(agent("Could you give me your email?"))
    assert u.ground_truth() == (True, "wrong_fact")
    w = LLMUser(llm_client(server), task, InjectionPlan(kind="withheld_fact", fact="new_delivery_date"), seed=1)
    assert "2025-03-09" not in w.system and "do not remember your new delivery date" in w.system
    server.push(reply("I don't know."))
    w.reply(agent("Which new delivery date do you want?"))
    assert w.ground_truth() == (True, "withheld_fact")


def test_llm_user_premature_stop_is_forced_without_a_request(server, world):
    task = world[0]["task_cancel"]
    u = LLMUser(llm_client(server), task, InjectionPlan(kind="premature_stop"))
    r = u.reply(agent("Could you tell me your email?"))
    assert r.stop and server.n_requests == 0 and u.ground_truth() == (True, "premature_stop")


def test_llm_user_needs_an_online_backend(world):
    from autoforge.llm import OfflineClient

    with pytest.raises(ConfigError, match="openai"):
        LLMUser(OfflineClient(), world[0]["task_cancel"])


def test_flip_roles_hides_tool_traffic():
    from autoforge.types import ToolCall

    msgs = [Message(role="system", content="s"), Message(role="user", content="req"),
            Message(role="assistant", content="", tool_calls=[ToolCall(name="a")]),
            Message(role="tool", content="{}"), Message(role="assistant", content="done")]
    assert flip_roles(msgs) == [{"role": "assistant", "content": "req"}, {"role": "user", "content": "done"}]
