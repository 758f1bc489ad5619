"""The user-error judge: rule-based verdicts, precision/recall on a generated set, the LLM judge."""

from __future__ import annotations

import pytest
from stub_openai_server import StubOpenAIServer, error, json_reply
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.llm import OpenAIClient
from autoforge import dialogue as D
from autoforge.rollout.agents import OracleAgent, RandomAgent
from autoforge.rollout.evaluate import evaluate_tasks
from autoforge.rollout.judge import LLMJudge, RuleJudge, judge_dialogue, judge_metrics
from autoforge.rollout.users import ErrorRates, OfflineUser
from autoforge.types import Episode, Message

TOOLS = make_tools()


@pytest.fixture(scope="module")
def world():
    tasks, dags = tasks_and_dags()
    return tasks, dags


def dialogue(*turns):
    """('a'|'u', text) pairs after the task's request."""
    msgs = [Message(role="system", content="s")]
    for who, text in turns:
        msgs.append(Message(role="assistant" if who == "a" else "user", content=text))
    return msgs


def verdict(task, *turns, termination="user_stop"):
    msgs = dialogue(("u", task.request), *turns)
    return judge_dialogue(task, msgs, termination)


def task_named(world, name):
    return next(t for t in world[0] if t.task_id == name)


# --------------------------------------------------------------------------- rule judge, by hand


def test_clean_free_text_dialogue_is_not_flagged(world):
    t = task_named(world, "task_reschedule")
    v = verdict(t, ("a", "Sure! What's your email address?"), ("u", "My email is ava.chen@example.com."),
                ("a", "Thanks. Which new delivery date would you like?"), ("u", "Please make it 2025-03-09"),
                ("a", "Done — the delivery date has been moved. Anything else I can help with?"),
                ("u", f"No, thanks! {D.STOP}"))
    assert v.flag is False, v.reason


def test_wrong_value_in_free_text_is_flagged(world):
    t = task_named(world, "task_cancel")
    v = verdict(t, ("a", "Could you tell me your email?"), ("u", "Sure, my email is ava.chen@exmaple.com."),
                ("a", "I could not find that account."), ("u", f"Oh well. {D.STOP}"))
    assert v.flag is True and v.kind == "wrong_fact"


def test_refusal_is_withheld(world):
    t = task_named(world, "task_cancel")
    v = verdict(t, ("a", "Could you please provide the email on your account?"), ("u", "I'd rather not say."),
                termination="max_turns")
    assert v.flag is True and v.kind == "withheld_fact"


def test_fact_given_in_the_request_is_not_withheld(world):
    t = task_named(world, "task_cancel").model_copy(update={"request": "Cancel my priciest order; I'm ava.chen@example.com."})
    v = verdict(t, ("a", "Can you confirm your email?"), ("u", "Yes, as I said."), ("a", "It has been cancelled."),
                ("u", D.STOP))
    assert v.flag is False, v.reason


def test_stop_before_completion_is_premature(world):
    t = task_named(world, "task_cancel")
    v = verdict(t, ("a", "Let me look into your orders."), ("u", f"Great, thanks, bye! {D.STOP}"))
    assert v.flag is True and v.kind == "premature_stop"
    ok = verdict(t, ("a", "Your order O0002 has been cancelled. Is there anything else?"), ("u", D.STOP))
    assert ok.flag is False


def test_agent_failure_is_not_a_user_error(world):
    t = task_named(world, "task_cancel")
    v = verdict(t, ("a", "Could you tell me your email?"), ("u", "- email: ava.chen@example.com"),
                ("a", "I have cancelled order O0001."), ("u", D.STOP))  # the wrong order: the agent's fault
    assert v.flag is False


def test_user_giving_up_on_a_failing_agent_is_not_premature(world):
    t = task_named(world, "task_cancel")
    v = verdict(t, ("a", "Hmm."), ("u", f"I'll stop here. {D.STOP}"), termination="user_gave_up")
    assert v.flag is False


# --------------------------------------------------------------------------- precision / recall on a generated set


def test_rule_judge_precision_and_recall_with_20_percent_injected_errors(world):
    tasks, dags = world
    report = evaluate_tasks(tasks, dags, {"env_mock_shop": TOOLS}, agent_factory=OracleAgent,
                            user_factory=lambda task, plan, seed: OfflineUser(task, plan, seed=seed), agent_name="oracle",
                            user_name="offline", trials=70, error_rates=ErrorRates.uniform(0.2), judge=RuleJudge(),
                            concurrency=1, env_factory=local_env_factory, n_boot=10, seed=7, reuse_envs=True)
    m = report.judge
    n_err = sum(bool(e.user_error) for e in report.episodes)
    assert 0.12 * len(report.episodes) <= n_err <= 0.28 * len(report.episodes)  # ~20% injected, all reached by the oracle
    assert {e.user_error_kind for e in report.episodes if e.user_error} == {"wrong_fact", "withheld_fact", "premature_stop"}
    assert m["precision"] >= 0.95 and m["recall"] >= 0.95, m
    # and every clean episode succeeded: the errors are the only failures
    assert all(e.reward == 1.0 for e in report.episodes if not e.user_error)
    flagged = [e for e in report.episodes if e.judge_flag]
    assert all(e.diagnostics["judge"]["kind"] == e.user_error_kind for e in flagged if e.user_error)


def test_rule_judge_does_not_flag_a_random_agent_with_a_clean_user(world):
    tasks, dags = world
    report = evaluate_tasks(tasks, dags, {"env_mock_shop": TOOLS}, agent_factory=RandomAgent,
                            user_factory=lambda task, plan, seed: OfflineUser(task, plan, seed=seed), agent_name="random",
                            user_name="offline", trials=10, judge=RuleJudge(), concurrency=1,
                            env_factory=local_env_factory, n_boot=10)
    assert not any(e.judge_flag for e in report.episodes)


def test_judge_metrics_by_hand():
    pairs = [(True, True)] * 8 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 9 + [(None, True)]
    m = judge_metrics(pairs)
    assert (m["tp"], m["fn"], m["fp"], m["tn"], m["n_skipped"]) == (8, 2, 1, 9, 1)
    assert m["precision"] == pytest.approx(8 / 9) and m["recall"] == pytest.approx(0.8)
    assert judge_metrics([(False, False)])["precision"] is None


# --------------------------------------------------------------------------- LLM judge (stub server)


def _episode(task, msgs):
    return Episode(episode_id="e", task_id=task.task_id, env_id=task.env_id, agent="a", user_sim="u", messages=msgs,
                   termination="user_stop")


def test_llm_judge_sends_facts_and_dialogue_and_reads_the_verdict(world):
    t = task_named(world, "task_cancel")
    ep = _episode(t, dialogue(("u", t.request), ("a", "Your email?"), ("u", "bob@example.com")))
    with StubOpenAIServer([json_reply({"user_error": True, "kind": "wrong_fact", "reason": "email differs"}),
                           error(400, "bad"), error(400, "bad"), error(400, "bad")]) as srv:
        judge = LLMJudge(OpenAIClient(srv.base_url, "k", "stub-model", timeout_s=5, max_retries=0))
        v = judge.judge(t, ep)
        assert v.flag is True and v.kind == "wrong_fact" and v.reason == "email differs"
        prompt = srv.requests[0]["messages"][-1]["content"]
        assert "- email: ava.chen@example.com" in prompt and "USER: bob@example.com" in prompt
        assert "AGENT: Your email?" in prompt
        # a failing judge gives an undecided verdict, not a crash
        v2 = judge.judge(t, ep)
        assert v2.flag is None and "judge failed" in v2.reason
