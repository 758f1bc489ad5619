"""The prompt registry: the synthesis steps' templates (autoforge.envs.prompts) are registered and
deterministic chat messages."""

from __future__ import annotations

import pytest

from autoforge.envs import prompts as env_prompts
from autoforge.errors import ConfigError
from autoforge.llm import prompting
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, ToolSpec

TOOL = ToolSpec(tool_id="tool_1", toolset="shop", name="get_order", description="Look up an order.",
                parameters={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
                doc_id="doc_1")
SCHEMA = StateSchema(collections=[CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O",
                                                 fields=[FieldSpec(name="order_id"), FieldSpec(name="status", enum=["open"])])])


def test_every_synthesis_step_is_registered():
    assert {"state_schema", "tool_code", "tool_repair"} <= set(prompting.PROMPTS)
    assert prompting.get_prompt("tool_code") is env_prompts.tool_code


def test_unknown_step_lists_known_ones():
    with pytest.raises(ConfigError, match="known steps: .*state_schema.*tool_code"):
        prompting.get_prompt("nope")


def test_duplicate_registration_is_an_error():
    with pytest.raises(ConfigError, match="twice"):
        prompting.register("tool_code")(lambda: [])


@pytest.mark.parametrize("build", [
    lambda: env_prompts.state_schema("shop", [TOOL]),
    lambda: env_prompts.tool_code(TOOL, SCHEMA, sample_state={"orders": {}}),
    lambda: env_prompts.tool_repair(TOOL, SCHEMA, "def get_order(state, **a): pass", "returned None"),
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
