"""The prompt registry: every step has a template (each in its step's package), templates are deterministic
chat messages."""

from __future__ import annotations

import pytest

from autoforge.dags import prompts as dag_prompts
from autoforge.envs import prompts as env_prompts
from autoforge.errors import ConfigError
from autoforge.llm import prompting
from autoforge.rollout import prompts as rollout_prompts
from autoforge.tasks import prompts as task_prompts
from autoforge.tooldocs import prompts as doc_prompts
from autoforge.types import CollectionSpec, FieldSpec, Message, StateSchema, ToolCall, ToolSpec

TOOL = ToolSpec(tool_id="tool_1", toolset="shop", name="get_order", description="Look up an order.",
                parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
                doc_id="doc_1")
SCHEMA = StateSchema(collections=[CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O",
                                                 fields=[FieldSpec(name="order_id"), FieldSpec(name="status", enum=["open"])])])


def test_every_step_named_in_the_brief_is_registered():
    expected = {"state_schema", "tool_code", "tool_repair", "edges", "merge", "reasoning", "task_text",
                "user_sim", "judge", "tool_docs"}
    assert expected <= set(prompting.PROMPTS)
    assert prompting.get_prompt("judge") is rollout_prompts.judge


def test_unknown_step_lists_known_ones():
    with pytest.raises(ConfigError, match="known steps: .*edges.*state_schema"):
        prompting.get_prompt("nope")


def test_duplicate_registration_is_an_error():
    with pytest.raises(ConfigError, match="twice"):
        prompting.register("judge")(lambda: [])


@pytest.mark.parametrize("build", [
    lambda: env_prompts.state_schema("shop", [TOOL]),
    lambda: env_prompts.tool_code(TOOL, SCHEMA, sample_state={"orders": {}}),
    lambda: env_prompts.tool_repair(TOOL, SCHEMA, "def get_order(state, **a): pass", "returned None"),
    lambda: dag_prompts.edges([TOOL], candidates=[{"src": "a", "dst": "b"}]),
    lambda: dag_prompts.merge(["a", "b"], ["b", "c"], [TOOL]),
    lambda: dag_prompts.reasoning(["a", "b"], [TOOL], {"argmin": {"args": ["items"]}}),
    lambda: task_prompts.task_text({"nodes": []}, {"email": "a@b.c"}, [ToolCall(name="get_order", arguments={"order_id": "O1"})]),
    lambda: rollout_prompts.judge({"email": "a@b.c"}, "fix my order", [Message(role="user", content="hi")]),
    lambda: doc_prompts.tool_docs("## get_order\nLooks up an order by id.", path="docs/shop.md"),
])
def test_templates_are_system_plus_json_payload_and_deterministic(build):
    a, b = build(), build()
    assert a == b
    assert [m["role"] for m in a] == ["system", "user"]
    assert all(isinstance(m["content"], str) and m["content"] for m in a)


def test_tool_code_prompt_carries_tool_schema_and_contract():
    [system, user] = env_prompts.tool_code(TOOL, SCHEMA)
    assert "def <function_name>(state, " in system["content"] and "never raise" in system["content"]
    assert "\"python\":{\"function_name\":\"get_order\"" in user["content"]
    assert '"get_order"' in user["content"] and '"orders"' in user["content"]


def test_user_sim_flips_roles_and_hides_tool_traffic():
    convo = [
        Message(role="user", content="Cancel my last order."),
        Message(role="assistant", content="What is your email?"),
        Message(role="assistant", tool_calls=[ToolCall(name="find_user", arguments={})]),
        Message(role="tool", content='{"user_id": "U1"}', tool_call_id="c0"),
        Message(role="user", content="a@b.c"),
    ]
    msgs = rollout_prompts.user_sim("Cancel my last order.", {"email": "a@b.c"}, convo)
    assert msgs[0]["role"] == "system" and rollout_prompts.USER_STOP in msgs[0]["content"] and "a@b.c" in msgs[0]["content"]
    assert [(m["role"], m["content"]) for m in msgs[1:]] == [
        ("user", "Hi! How can I help you today?"),
        ("assistant", "Cancel my last order."),
        ("user", "What is your email?"),
        ("assistant", "a@b.c"),
    ]
