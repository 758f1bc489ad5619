"""The LLM backend path with a scripted stand-in client: schema from the model, code checked,
rejected code sent back for repair a bounded number of times, every failure stored."""

from __future__ import annotations

import json

from test_synthesis_mockdomain import mock_specs, mock_toolset

from autoforge.envs.synthesis import ToolCodeReply, synthesize_environment
from autoforge.errors import LLMError
from autoforge.settings import get_settings
from autoforge.types import CollectionSpec, FieldSpec, StateSchema

SCHEMA = StateSchema(collections=[
    CollectionSpec(name="users", entity="user", primary_key="user_id", id_prefix="U", fields=[
        FieldSpec(name="user_id"), FieldSpec(name="name"), FieldSpec(name="email", format="email")]),
    CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O", fields=[
        FieldSpec(name="order_id"), FieldSpec(name="user_id", ref="users"),
        FieldSpec(name="status", enum=["pending", "processing", "shipped", "cancelled"])]),
])

GET_USER = '''
def get_user(state, user_id):
    user = state["users"].get(user_id)
    if user is None:
        return error(f"user {user_id} not found")
    return copy(user)
'''
CANCEL_BAD = "import os\n" + '''
def cancel_order(state, order_id, reason=None):
    return {"ok": os.getcwd()}
'''
CANCEL_GOOD = '''
def cancel_order(state, order_id, reason=None):
    order = state["orders"].get(order_id)
    if order is None:
        return error(f"order {order_id} not found")
    if order["status"] not in ("pending", "processing"):
        return error(f"order {order_id} is {order['status']}")
    order["status"] = "cancelled"
    return copy(order)
'''
LOOKUP_CRASH = '''
def find_user_id_by_email(state, email):
    return {"user_id": state["people"][email]}
'''


def reply(source, effect="read", collection=None, output_schema=None):
    return ToolCodeReply(source=source, effect=effect, collection=collection, output_schema=output_schema)


class ScriptedLLM:
    """Stand-in for an OpenAI-compatible client: maps (step, tool) to canned replies."""

    is_offline = False
    model = "scripted"

    def __init__(self, schema, replies):
        self.schema, self.replies, self.calls = schema, {k: list(v) for k, v in replies.items()}, []

    def structured(self, step, messages, response_model, **kw):
        self.calls.append((step, messages))
        if step == "state_schema":
            if isinstance(self.schema, Exception):
                raise self.schema
            return self.schema
        assert response_model is ToolCodeReply
        name = json.loads(messages[-1]["content"])["tool"]["name"]
        return self.replies[name].pop(0)


def specs3():
    return [s for s in mock_specs() if s.name in ("get_user", "cancel_order", "find_user_id_by_email")]


def test_repair_loop_accepts_fixed_code_and_stores_every_rejection():
    specs = specs3()
    llm = ScriptedLLM(SCHEMA, {
        "get_user": [reply(GET_USER, collection="users")],
        "cancel_order": [reply(CANCEL_BAD, "write"), reply(CANCEL_GOOD, "write", "orders")],
        "find_user_id_by_email": [reply(LOOKUP_CRASH)] * 3,
    })
    settings = get_settings().with_(llm_max_repairs=2)
    res = synthesize_environment(mock_toolset(specs), specs, client=llm, settings=settings)
    by = {t.name: t for t in res.tools}
    assert by["get_user"].status == "accepted" and by["get_user"].attempts == 1 and by["get_user"].kind == "llm"
    assert by["cancel_order"].status == "accepted" and by["cancel_order"].attempts == 2
    assert by["cancel_order"].effect == "write" and by["cancel_order"].collection == "orders"
    lookup = by["find_user_id_by_email"]
    assert lookup.status == "rejected" and lookup.attempts == 3 and lookup.reason.startswith("crashed")
    env = res.environment
    assert (env.status, env.n_tools, env.n_tools_accepted, env.backend) == ("partial", 3, 2, "openai:scripted")
    assert env.state_schema == SCHEMA and set(env.sample_state) == {"users", "orders"}
    assert all(t.env_id == env.env_id for t in res.tools)
    reasons = sorted(r.reason for r in res.rejections)
    assert reasons == ["crashed", "crashed", "crashed", "unsafe_code"]  # 1 + (1 + max_repairs)
    assert len({r.rejection_id for r in res.rejections}) == 4
    # the repair prompt carries the failed source and the reason
    repairs = [m for step, m in llm.calls if step == "tool_repair"]
    assert len(repairs) == 1 + 2
    payloads = [json.loads(m[-1]["content"]) for m in repairs]
    cancel = next(p for p in payloads if p["tool"]["name"] == "cancel_order")
    assert "import os" in cancel["source"] and "unsafe_code" in cancel["failure"]
    assert all(not v for v in llm.replies.values())  # bounded: no extra calls


def test_no_repairs_when_max_repairs_is_zero():
    specs = [s for s in specs3() if s.name == "cancel_order"]
    llm = ScriptedLLM(SCHEMA, {"cancel_order": [reply(CANCEL_BAD, "write")]})
    res = synthesize_environment(mock_toolset(specs), specs, client=llm, settings=get_settings().with_(llm_max_repairs=0))
    assert res.environment.status == "failed" and len(res.rejections) == 1
    assert [s for s, _ in llm.calls] == ["state_schema", "tool_code"]


def test_schema_failure_fails_the_environment_with_a_rejection():
    specs = specs3()
    llm = ScriptedLLM(LLMError("reply never validated"), {})
    res = synthesize_environment(mock_toolset(specs), specs, client=llm, settings=get_settings())
    assert res.environment.status == "failed" and res.tools == []
    assert res.rejections[0].reason == "state_schema_failed" and "never validated" in res.rejections[0].detail


CANCEL_PERMISSIVE = '''
def cancel_order(state, order_id, reason=None):
    order = state["orders"].get(order_id)
    if order is None:
        return error(f"order {order_id} not found")
    order["status"] = "cancelled"
    return copy(order)
'''


def test_llm_code_is_told_the_rules_and_probed_like_offline_code():
    """The prompt carries the rules read from the docs; the LLM's code is probed the same way:
    enforcing code passes, permissive code is recorded as failing the probe."""
    specs = [s for s in specs3() if s.name == "cancel_order"]
    for source, probe in ((CANCEL_GOOD, "passed"), (CANCEL_PERMISSIVE, "failed")):
        llm = ScriptedLLM(SCHEMA, {"cancel_order": [reply(source, "write", "orders")]})
        res = synthesize_environment(mock_toolset(specs), specs, client=llm, settings=get_settings().with_(llm_max_repairs=0))
        (step, messages), = [c for c in llm.calls if c[0] == "tool_code"]
        told = json.loads(messages[-1]["content"])["rules"]
        assert any(r["kind"] == "source_status" and r["values"] == ["pending", "processing"] for r in told)
        (rule,) = [r for r in res.rules if r.kind == "source_status"]
        assert rule.enforcement == "code" and rule.probe == probe, rule.probe_detail
