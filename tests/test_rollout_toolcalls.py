"""Tool-call formats: Hermes parsing edge cases, and native tool calls through the stub server."""

from __future__ import annotations

import json

import pytest
from stub_openai_server import StubOpenAIServer, reply, tool_reply
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.llm import OpenAIClient
from autoforge import dialogue as D
from autoforge.rollout.agents import OpenAIAgent, wire_messages
from autoforge.rollout.engine import run_episode
from autoforge.rollout.toolcalls import format_hermes, parse_hermes, tool_schemas
from autoforge.rollout.users import OfflineUser
from autoforge.types import ToolCall

# --------------------------------------------------------------------------- Hermes


def test_single_call_with_thinking_kept():
    text = '<think>I need the id first.</think>\n<tool_call>\n{"name": "get_user", "arguments": {"user_id": "U1"}}\n</tool_call>'
    p = parse_hermes(text)
    assert p.calls == [ToolCall(name="get_user", arguments={"user_id": "U1"})]
    assert p.content == "<think>I need the id first.</think>" and not p.malformed


def test_several_calls_and_surrounding_text():
    text = ('Let me check both.<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
            '<tool_call>  {"name": "b", "arguments": {"x": [1, {"y": "}"}]}}  </tool_call> ok')
    p = parse_hermes(text)
    assert [c.name for c in p.calls] == ["a", "b"]
    assert p.calls[1].arguments == {"x": [1, {"y": "}"}]}
    assert p.content == "Let me check both.\n ok"


def test_arguments_as_json_string_and_missing_arguments():
    p = parse_hermes('<tool_call>{"name": "a", "arguments": "{\\"k\\": 1}"}</tool_call>'
                     '<tool_call>{"name": "b"}</tool_call>')
    assert p.calls == [ToolCall(name="a", arguments={"k": 1}), ToolCall(name="b", arguments={})]


def test_code_fence_inside_block():
    p = parse_hermes('<tool_call>\n```json\n{"name": "a", "arguments": {"k": 2}}\n```\n</tool_call>')
    assert p.calls == [ToolCall(name="a", arguments={"k": 2})]


@pytest.mark.parametrize("body, why", [
    ('{"name": "a", "arguments": {"k": }}', "not valid JSON"),
    ('["a", {}]', "expected a JSON object"),
    ('{"arguments": {}}', 'missing "name"'),
    ('{"name": "a", "arguments": [1]}', "must be a JSON object"),
    ('{"name": "a", "arguments": "not json"}', "string that is not JSON"),
    ('{"name": "a", "parameters": {}}', "unexpected keys"),
    ('{"name": "a", "arguments": {}}}', "unexpected text after"),
    ("", "empty"),
])
def test_malformed_blocks_are_reported_not_raised(body, why):
    p = parse_hermes(f"before <tool_call>{body}</tool_call> after")
    assert not p.calls and len(p.malformed) == 1
    assert why in p.malformed[0].error
    assert p.content == "before  after"


def test_unclosed_block_at_the_end():
    ok = parse_hermes('<tool_call>{"name": "a", "arguments": {"k": 1}}')
    assert ok.calls == [ToolCall(name="a", arguments={"k": 1})]
    cut = parse_hermes('<tool_call>{"name": "a", "argum')
    assert not cut.calls and "unclosed" in cut.malformed[0].error


def test_unclosed_block_followed_by_another():
    p = parse_hermes('<tool_call>{"name": "a", "arguments": {}}\n<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    assert [c.name for c in p.calls] == ["a", "b"]


def test_calls_inside_thinking_are_not_executed():
    text = '<think>maybe <tool_call>{"name": "x", "arguments": {}}</tool_call>?</think><tool_call>{"name": "y", "arguments": {}}</tool_call>'
    p = parse_hermes(text)
    assert [c.name for c in p.calls] == ["y"]
    assert "<think>maybe" in p.content


def test_end_tokens_are_stripped_and_format_round_trips():
    call = ToolCall(name="get_order", arguments={"order_id": "O1", "note": "ünïcode </tool_call> inside"})
    p = parse_hermes(format_hermes(call) + "<|im_end|>")
    assert p.calls == [call] and p.content == ""


def test_plain_text_has_no_calls():
    p = parse_hermes("Your order is cancelled.<|im_end|>")
    assert p.content == "Your order is cancelled." and not p.calls and not p.malformed


def test_tool_schemas_from_code():
    schemas = tool_schemas(make_tools())
    names = [s["function"]["name"] for s in schemas]
    assert names == sorted(names) and "cancel_order" in names
    cancel = next(s for s in schemas if s["function"]["name"] == "cancel_order")
    assert cancel["type"] == "function" and cancel["function"]["parameters"]["required"] == ["order_id"]


def test_compact_schemas_keep_structure_and_drop_prose():
    import json as _json

    import jsonschema

    from autoforge.rollout.toolcalls import compact_schema

    full, compact = tool_schemas(make_tools()), tool_schemas(make_tools(), style="compact")
    assert [s["function"]["name"] for s in full] == [s["function"]["name"] for s in compact]
    assert len(_json.dumps(compact)) <= len(_json.dumps(full))
    for f, c in zip(full, compact):
        fp, cp = f["function"]["parameters"], c["function"]["parameters"]
        assert cp.get("required") == fp.get("required") and set(cp.get("properties", {})) == set(fp.get("properties", {}))
        jsonschema.Draft202012Validator.check_schema(cp)  # still a valid JSON Schema
    nested = {"type": "object", "description": "d", "properties": {
        "items": {"type": "array", "description": "x", "items": {"type": "object", "title": "Item", "properties": {
            "qty": {"type": "integer", "minimum": 1, "description": "n"}}, "required": ["qty"]}},
        "mode": {"enum": ["a", "b"], "default": "a", "pattern": "^.$"},
        "either": {"anyOf": [{"type": "string", "examples": ["s"]}, {"type": "null"}]}}, "required": ["items"]}
    assert compact_schema(nested) == {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": "integer"}},
                                             "required": ["qty"]}},
        "mode": {"enum": ["a", "b"]}, "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["items"]}
    with pytest.raises(ValueError, match="compact"):
        tool_schemas(make_tools(), style="short")


def test_brief_schemas_are_names_and_types_and_shorter():
    import json as _json

    from autoforge.rollout.toolcalls import brief_schema

    compact, brief = tool_schemas(make_tools(), style="compact"), tool_schemas(make_tools(), style="brief")
    assert [s["function"]["name"] for s in compact] == [s["name"] for s in brief]
    assert len(_json.dumps(brief)) < 0.7 * len(_json.dumps(compact))
    for c, b in zip(compact, brief):  # every property is there; optional ones end in "?"
        cp = c["function"]["parameters"]
        want = {k if k in cp.get("required", []) else k + "?" for k in cp.get("properties", {})}
        assert set(b["arguments"] if isinstance(b["arguments"], dict) else ()) == want
    nested = {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "qty": {"type": "integer"}, "note": {"type": "string"}}, "required": ["qty"]}},
        "mode": {"enum": ["a", "b"]}, "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "meta": {"type": "object"}, "n": {"type": ["integer", "null"]}}, "required": ["items", "mode"]}
    assert brief_schema(nested) == {"items": [{"qty": "integer", "note?": "string"}], "mode": ["a", "b"],
                                    "either?": {"one of": ["string", "null"]}, "meta?": "object", "n?": "integer|null"}


def test_openai_agent_refuses_brief_schemas():
    from autoforge.errors import ConfigError
    from autoforge.rollout.engine import AgentContext

    agent = OpenAIAgent.__new__(OpenAIAgent)
    ctx = AgentContext(task_id="t", env_id="e", tools=tool_schemas(make_tools(), style="brief"), system_prompt="")
    with pytest.raises(ConfigError, match="compact"):
        agent.reset(ctx)


# --------------------------------------------------------------------------- native tool calls (stub server)


@pytest.fixture
def server():
    with StubOpenAIServer() as s:
        yield s


def client_for(server) -> OpenAIClient:
    return OpenAIClient(server.base_url, "k", "stub-model", timeout_s=5, max_retries=0, backoff_base_s=0.001)


def test_openai_agent_native_calls_solve_a_task(server):
    tasks, _ = tasks_and_dags()
    task = next(t for t in tasks if t.task_id == "task_cancel")
    server.push(
        reply("Could you please tell me your email?"),
        tool_reply([("find_user_id_by_email", {"email": "ava.chen@example.com"})]),
        tool_reply([("list_user_orders", {"user_id": "U0001"}), ("get_user", '{"user_id": ')]),  # 2nd is malformed
        tool_reply([("cancel_order", {"order_id": "O0002"})]),
        reply("Your order O0002 has been cancelled."),
    )
    tools = make_tools()
    ep = run_episode(task, local_env_factory(tools), OpenAIAgent(client_for(server)), OfflineUser(task),
                     tools=tool_schemas(tools)).episode
    assert ep.reward == 1.0 and ep.termination == "user_stop", ep.termination_detail
    assert ep.agent == "openai:stub-model" and ep.n_turns == 5
    # the server got the tool schemas and the whole transcript, tool results with their call ids
    req = server.requests[3]
    assert {t["function"]["name"] for t in req["tools"]} >= {"cancel_order", "list_user_orders"}
    tool_msgs = [m for m in req["messages"] if m["role"] == "tool"]
    assert len(tool_msgs) == 3 and all(m["tool_call_id"] for m in tool_msgs)
    assert "malformed tool call" in tool_msgs[-1]["content"]
    # the malformed call goes back with its raw arguments text
    bad = [tc for m in req["messages"] if m.get("tool_calls") for tc in m["tool_calls"] if tc["function"]["name"] == "get_user"]
    assert bad[0]["function"]["arguments"] == '{"user_id": '
    assert req["messages"][0]["role"] == "system" and req["messages"][1]["content"] == task.request
    user_reply = next(m for m in req["messages"] if m["role"] == "user" and "ava.chen" in m["content"])
    assert D.parse_fact_lines(user_reply["content"], ["email"]) == {"email": "ava.chen@example.com"}


def test_openai_agent_falls_back_to_hermes_text(server):
    tasks, _ = tasks_and_dags()
    task = next(t for t in tasks if t.task_id == "task_cancel")
    server.push(reply('<tool_call>{"name": "cancel_order", "arguments": {"order_id": "O0002"}}</tool_call>'),
                reply("Done: the order has been cancelled."))
    tools = make_tools()
    ep = run_episode(task, local_env_factory(tools), OpenAIAgent(client_for(server)), OfflineUser(task),
                     tools=tool_schemas(tools)).episode
    assert ep.messages[2].tool_calls[0].name == "cancel_order"
    assert ep.reward == 1.0


def test_server_down_is_an_agent_error_not_a_crash(server):
    tasks, _ = tasks_and_dags()
    task = tasks[0]
    tools = make_tools()
    server.default = None  # every request: HTTP 500
    ep = run_episode(task, local_env_factory(tools), OpenAIAgent(client_for(server)), OfflineUser(task),
                     tools=tool_schemas(tools)).episode
    assert ep.termination == "agent_error" and "500" in ep.termination_detail
    assert ep.reward == 0.0


def test_wire_messages_keep_roles_and_ids():
    from autoforge.types import Message

    msgs = [Message(role="assistant", content="", tool_calls=[ToolCall(name="a", arguments={"k": 1}, id="c1")]),
            Message(role="tool", content="{}", tool_call_id="c1", name="a")]
    w = wire_messages(msgs)
    assert json.loads(w[0]["tool_calls"][0]["function"]["arguments"]) == {"k": 1}
    assert w[1] == {"role": "tool", "content": "{}", "tool_call_id": "c1"}
