"""The episode engine with scripted agents and users: tool calls, messages, malformed calls,
limits, crash isolation, and the oracle / random agents end to end on the mock shop."""

from __future__ import annotations

import json

import pytest
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.errors import SandboxError
from autoforge import dialogue as D
from autoforge.rollout.agents import OracleAgent, RandomAgent
from autoforge.rollout.engine import AgentTurn, EpisodeConfig, UserTurn, run_episode
from autoforge.rollout.toolcalls import MalformedCall, tool_schemas
from autoforge.rollout.users import OfflineUser
from autoforge.types import ToolCall

TOOLS = make_tools()
SCHEMAS = tool_schemas(TOOLS)


@pytest.fixture(scope="module")
def world():
    tasks, dags = tasks_and_dags()
    return {t.task_id: t for t in tasks}, dags


class Scripted:
    """An agent that plays a fixed list of turns (then keeps sending 'done')."""

    name = "scripted"

    def __init__(self, turns):
        self.turns = list(turns)
        self.seen = []

    def reset(self, ctx):
        self.ctx = ctx

    def act(self, messages):
        self.seen.append([m.model_copy() for m in messages])
        if not self.turns:
            return AgentTurn(content="All done.")
        t = self.turns.pop(0)
        if isinstance(t, Exception):
            raise t
        return t


class ScriptedUser:
    name = "scripted-user"

    def __init__(self, replies, opening="Please cancel order O0001."):
        self.replies = list(replies)
        self.opening_text = opening

    def opening(self):
        return self.opening_text

    def reply(self, messages):
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    def ground_truth(self):
        return False, None


def play(task, agent, user, **kw):
    return run_episode(task, local_env_factory(TOOLS), agent, user, tools=SCHEMAS, **kw).episode


def test_tool_call_then_message_then_user_stop(world):
    tasks, _ = world
    task = tasks["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})]),
                      AgentTurn(content="Order O0002 has been cancelled.")])
    ep = play(task, agent, ScriptedUser([UserTurn("Thanks! " + D.STOP, stop=True)]))
    roles = [m.role for m in ep.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    tool_msg = ep.messages[3]
    assert json.loads(tool_msg.content)["status"] == "cancelled"
    assert tool_msg.tool_call_id == ep.messages[2].tool_calls[0].id and tool_msg.name == "cancel_order"
    # the agent saw the observation before its second turn
    assert agent.seen[1][-1].role == "tool"
    assert ep.termination == "user_stop" and ep.n_turns == 2
    assert ep.reward == 1.0 and ep.reward_info["state_match"] is True
    assert ep.final_state_hash == task.gold_state_hash


def test_wrong_write_scores_zero_with_differing_collection(world):
    task = world[0]["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0001"})])])
    ep = play(task, agent, ScriptedUser([UserTurn(D.STOP, stop=True)]))
    assert ep.reward == 0.0
    assert ep.reward_info["differing_collections"] == ["orders"]
    assert ep.reward_info["differing_records"] == {"orders": ["O0001", "O0002"]}


def test_tool_error_is_an_observation_not_a_crash(world):
    task = world[0]["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O9999"}),
                                            ToolCall(name="no_such_tool", arguments={})])])
    ep = play(task, agent, ScriptedUser([UserTurn(D.STOP, stop=True)]))
    tool_msgs = [m for m in ep.messages if m.role == "tool"]
    assert len(tool_msgs) == 2
    assert "no order O9999" in tool_msgs[0].content and "unknown tool" in tool_msgs[1].content
    assert ep.termination == "user_stop" and ep.reward == 0.0


def test_malformed_call_gets_an_error_observation_and_the_episode_goes_on(world):
    task = world[0]["task_cancel"]
    bad = MalformedCall(raw='{"name": "cancel_order", "arguments": {"order_id": }', error="not valid JSON")
    agent = Scripted([AgentTurn(content="", malformed=[bad]),
                      AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})])])
    ep = play(task, agent, ScriptedUser([UserTurn(D.STOP, stop=True)]))
    assistant = ep.messages[2]
    assert assistant.tool_calls[0].arguments["__raw__"].startswith('{"name"')
    err = ep.messages[3]
    assert err.role == "tool" and "malformed tool call" in json.loads(err.content)["error"]
    assert err.tool_call_id == assistant.tool_calls[0].id
    assert ep.reward == 1.0 and ep.n_turns == 3


def test_max_turns_ends_a_runaway_episode(world):
    task = world[0]["task_cancel"]
    looping = Scripted([AgentTurn(tool_calls=[ToolCall(name="get_order", arguments={"order_id": "O0001"})])] * 100)
    ep = play(task, looping, ScriptedUser([]), config=EpisodeConfig(max_turns=5))
    assert ep.termination == "max_turns" and ep.n_turns == 5
    assert "5 agent turns" in ep.termination_detail
    assert ep.reward == 0.0  # scored: the state is readable, it just is not the gold one


def test_max_tokens_ends_the_episode(world):
    task = world[0]["task_cancel"]
    chatty = Scripted([AgentTurn(content="Could you tell me more?", tokens=600)] * 10)
    user = ScriptedUser([UserTurn("Sure.")] * 10)
    ep = play(task, chatty, user, config=EpisodeConfig(max_tokens=1000))
    assert ep.termination == "max_tokens" and ep.n_turns == 2


def test_too_many_calls_in_one_turn_are_refused(world):
    task = world[0]["task_cancel"]
    calls = [ToolCall(name="get_order", arguments={"order_id": "O0001"})] * 4
    ep = play(task, Scripted([AgentTurn(tool_calls=calls)]), ScriptedUser([UserTurn(D.STOP, stop=True)]),
              config=EpisodeConfig(max_calls_per_turn=2))
    tool_msgs = [m for m in ep.messages if m.role == "tool"]
    assert len(tool_msgs) == 4 and sum("too many tool calls" in m.content for m in tool_msgs) == 2
    assert ep.diagnostics["tool_calls"] == 2


def test_agent_crash_is_recorded_and_still_scored(world):
    task = world[0]["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})]),
                      RuntimeError("CUDA out of memory")])
    ep = play(task, agent, ScriptedUser([]))
    assert ep.termination == "agent_error" and "CUDA out of memory" in ep.termination_detail
    assert ep.reward == 1.0  # the state was reached before the crash: scoring is on the state


def test_user_crash_is_recorded(world):
    task = world[0]["task_cancel"]
    ep = play(task, Scripted([AgentTurn(content="Hello?")]), ScriptedUser([ValueError("bad user")]))
    assert ep.termination == "user_sim_error" and "bad user" in ep.termination_detail
    assert ep.reward is None and "infrastructure" in ep.reward_info["unscored_reason"]


class BrokenEnv:
    def __init__(self, fail_on="call"):
        self.fail_on = fail_on
        self.state = {}

    def reset(self, state):
        if self.fail_on == "reset":
            raise RuntimeError("worker failed to start")
        self.state = dict(state)

    def call(self, name, arguments):
        if self.fail_on == "sandbox":
            raise SandboxError("time limit")
        raise OSError("pipe broken")

    def get_state(self):
        if self.fail_on == "call":
            raise OSError("pipe broken")
        return self.state


def test_env_crash_is_unscored_not_zero(world):
    task = world[0]["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})])])
    ep = run_episode(task, BrokenEnv("call"), agent, ScriptedUser([]), tools=SCHEMAS).episode
    assert ep.termination == "env_error" and "pipe broken" in ep.termination_detail
    assert ep.reward is None and ep.reward_info["state_match"] is None  # could not score: None, not 0
    ep = run_episode(task, BrokenEnv("reset"), Scripted([]), ScriptedUser([]), tools=SCHEMAS).episode
    assert ep.termination == "env_error" and ep.reward is None and ep.n_turns == 0


def test_sandbox_error_becomes_an_observation(world):
    task = world[0]["task_cancel"]
    agent = Scripted([AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})])])
    ep = run_episode(task, BrokenEnv("sandbox"), agent, ScriptedUser([UserTurn(D.STOP, stop=True)]),
                     tools=SCHEMAS).episode
    assert "SandboxError" in ep.messages[3].content and ep.termination == "user_stop"


def test_agent_give_up_is_recorded(world):
    task = world[0]["task_cancel"]
    ep = play(task, Scripted([AgentTurn(content="I can't.", give_up="no idea")]), ScriptedUser([]))
    assert ep.termination == "agent_gave_up" and ep.termination_detail == "no idea"


@pytest.mark.parametrize("name", ["task_cancel", "task_reschedule", "task_buy"])
def test_oracle_solves_each_task_through_the_dialogue(world, name):
    tasks, dags = world
    task = tasks[name]
    out = run_episode(task, local_env_factory(TOOLS), OracleAgent(), OfflineUser(task), tools=SCHEMAS,
                      dag=dags[task.dag_id])
    ep = out.episode
    assert ep.reward == 1.0, (ep.termination, ep.termination_detail)
    assert ep.termination == "user_stop" and ep.user_error is False
    # it learned the facts from the user, not from the task: they appear in a user turn first
    ask = ep.messages[2].content
    assert all(D.fact_words(f) in ask for f in task.user_facts)
    assert out.agent.calls == [c.model_copy(update={"id": None}) for c in task.gold_calls]


def test_oracle_without_a_dag_is_an_agent_error(world):
    task = world[0]["task_cancel"]
    ep = play(task, OracleAgent(), OfflineUser(task))
    assert ep.termination == "agent_error" and "DAG" in ep.termination_detail


def test_oracle_on_the_real_sandbox_runtime(world):
    from autoforge.envs.runtime import Environment

    tasks, dags = world
    task = tasks["task_reschedule"]
    with Environment(TOOLS) as env:
        ep = run_episode(task, env, OracleAgent(), OfflineUser(task), tools=SCHEMAS, dag=dags[task.dag_id]).episode
    assert ep.reward == 1.0, ep.termination_detail


def test_random_agent_fails(world):
    tasks, dags = world
    rewards = []
    for seed in range(10):
        for task in tasks.values():
            ep = run_episode(task, local_env_factory(TOOLS), RandomAgent(), OfflineUser(task), tools=SCHEMAS,
                             seed=seed).episode
            rewards.append(ep.reward)
    assert all(r is not None for r in rewards)
    assert sum(rewards) / len(rewards) <= 0.05


def test_the_trials_of_a_task_encode_and_send_its_initial_state_once(world):
    """With a sandboxed Environment, the engine resets to the task's state encoded once per task
    (ResidentState): later trials neither encode it again nor send it to the worker again."""
    from autoforge.envs.runtime import Environment, ResidentState
    from autoforge.rollout import engine

    task = world[0]["task_cancel"]
    turns = lambda: [AgentTurn(tool_calls=[ToolCall(name="cancel_order", arguments={"order_id": "O0002"})]),  # noqa: E731
                     AgentTurn(content="Order O0002 has been cancelled.")]
    with Environment(TOOLS, _any_status=True) as env:
        assert isinstance(engine.initial_state_for(env, task), ResidentState)
        assert engine.initial_state_for(env, task) is engine.initial_state_for(env, task)
        sent = []
        for _ in range(3):
            ep = run_episode(task, env, Scripted(turns()), ScriptedUser([UserTurn(D.STOP, stop=True)]),
                             tools=SCHEMAS).episode
            assert ep.reward == 1.0 and ep.final_state_hash == task.gold_state_hash
            sent.append(env._worker.bytes_sent)
    state_bytes = len(json.dumps(task.initial_state))
    assert sent[2] - sent[1] < state_bytes  # the third trial did not ship the state again
    # any other environment gets the plain dict
    assert engine.initial_state_for(local_env_factory(TOOLS), task) is task.initial_state
