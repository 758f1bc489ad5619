"""The OpenAI-compatible client against a local stub server (tests/stub_openai_server.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).parent))

from stub_openai_server import (  # noqa: E402
    StubOpenAIServer,
    drop,
    error,
    json_reply,
    malformed,
    reply,
    slow,
    stub_server,  # noqa: F401 - the fixture
    tool_reply,
)

from autoforge.errors import LLMError  # noqa: E402
from autoforge.llm import (  # noqa: E402
    ChatReply,
    LLMInvalidReply,
    LLMRequestError,
    MemoryCache,
    MemoryRecorder,
    OpenAIClient,
)
from autoforge.types import LLMCall, Message, ToolCall  # noqa: E402


class Entity(BaseModel):
    name: str
    primary_key: str
    n_fields: int = Field(ge=1)


MSGS = [{"role": "system", "content": "You design databases."}, {"role": "user", "content": "orders?"}]
GOOD = {"name": "order", "primary_key": "order_id", "n_fields": 3}


@pytest.fixture
def server(stub_server):
    assert isinstance(stub_server, StubOpenAIServer)
    return stub_server


def make_client(server, **kw) -> tuple[OpenAIClient, MemoryRecorder, list[float]]:
    rec = MemoryRecorder()
    sleeps: list[float] = []
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("max_retries", 3)
    kw.setdefault("max_repairs", 2)
    kw.setdefault("backoff_base_s", 0.001)
    kw.setdefault("backoff_max_s", 0.01)
    client = OpenAIClient(server.base_url, "test-key", "stub-model", recorder=rec, sleep=sleeps.append, **kw)
    return client, rec, sleeps


# --------------------------------------------------------------------------- structured


def test_valid_structured_reply(server):
    server.push(json_reply(GOOD, tokens_in=40, tokens_out=12))
    client, rec, _ = make_client(server)
    out = client.structured("state_schema", MSGS, Entity)
    assert out == Entity(**GOOD)
    assert server.n_requests == 1
    body = server.last_request
    assert body["model"] == "stub-model"
    assert body["messages"] == MSGS
    assert body["temperature"] == 0.0
    rf = body["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "Entity"
    assert rf["json_schema"]["schema"] == Entity.model_json_schema()
    [call] = rec.calls
    assert isinstance(call, LLMCall)
    assert (call.outcome, call.step, call.model, call.backend) == ("ok", "state_schema", "stub-model", "openai")
    assert (call.tokens_in, call.tokens_out) == (40, 12)
    assert call.latency_ms is not None and call.latency_ms > 0
    assert call.response == GOOD
    assert call.prompt == MSGS
    assert len(call.prompt_hash) == 32


def test_fenced_json_with_think_block_is_accepted(server):
    server.push(reply("<think>hmm</think>\nHere it is:\n```json\n" + json.dumps(GOOD) + "\n```"))
    client, _, _ = make_client(server)
    assert client.structured("state_schema", MSGS, Entity).primary_key == "order_id"


def test_invalid_then_valid_sends_validation_error_back(server):
    bad = {"name": "order", "n_fields": 0}  # primary_key missing, n_fields < 1
    server.push(json_reply(bad), json_reply(GOOD))
    client, rec, _ = make_client(server)
    out = client.structured("state_schema", MSGS, Entity)
    assert out.n_fields == 3
    assert server.n_requests == 2
    follow_up = server.requests[1]["messages"]
    assert follow_up[: len(MSGS)] == MSGS
    assert follow_up[len(MSGS)] == {"role": "assistant", "content": json.dumps(bad)}
    note = follow_up[-1]
    assert note["role"] == "user"
    assert "primary_key" in note["content"] and "n_fields" in note["content"]
    assert "Entity" in note["content"]
    assert [c.outcome for c in rec.calls] == ["invalid", "ok"]
    assert "primary_key" in rec.calls[0].error
    assert rec.calls[0].prompt_hash == rec.calls[1].prompt_hash  # one logical call


def test_non_json_reply_is_repaired(server):
    server.push(reply("Sure! The entity is order."), json_reply(GOOD))
    client, rec, _ = make_client(server)
    assert client.structured("s", MSGS, Entity) == Entity(**GOOD)
    assert "not valid JSON" in rec.calls[0].error


def test_always_invalid_raises_after_bounded_attempts(server):
    server.default = json_reply({"name": 3})
    client, rec, _ = make_client(server, max_repairs=2)
    with pytest.raises(LLMInvalidReply) as ei:
        client.structured("state_schema", MSGS, Entity)
    assert isinstance(ei.value, LLMError)
    assert "after 3 attempts" in str(ei.value) and "AUTOFORGE_LLM_MAX_REPAIRS" in str(ei.value)
    assert server.n_requests == 3
    assert [c.outcome for c in rec.calls] == ["invalid"] * 3


def test_max_repairs_zero_means_one_attempt(server):
    server.default = json_reply({"name": 3})
    client, _, _ = make_client(server, max_repairs=0)
    with pytest.raises(LLMInvalidReply):
        client.structured("s", MSGS, Entity)
    assert server.n_requests == 1


def test_json_schema_rejected_falls_back_to_json_object_then_prompt(server):
    server.push(error(400, "response_format json_schema is not supported"),
                error(400, "response_format json_object is not supported"),
                json_reply(GOOD), json_reply(GOOD))
    client, rec, _ = make_client(server)
    assert client.structured("s", MSGS, Entity) == Entity(**GOOD)
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    assert server.requests[1]["response_format"] == {"type": "json_object"}
    assert "response_format" not in server.requests[2]
    system = server.requests[2]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You design databases.")
    assert '"primary_key"' in system["content"]  # the schema travels in the prompt
    assert [c.outcome for c in rec.calls] == ["error", "error", "ok"]
    # the client remembers: the next call goes straight to the working mode
    client.structured("s2", MSGS, Entity)
    assert server.n_requests == 4 and "response_format" not in server.requests[3]


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize("failure", [error(500, "boom"), error(503), error(429, "slow down"), drop(), malformed()],
                         ids=["500", "503", "429", "dropped", "malformed-body"])
def test_transient_failure_then_ok_is_retried(server, failure):
    server.push(failure, json_reply(GOOD))
    client, rec, sleeps = make_client(server)
    assert client.structured("s", MSGS, Entity) == Entity(**GOOD)
    assert server.n_requests == 2
    assert [c.outcome for c in rec.calls] == ["error", "ok"]
    assert rec.calls[0].error.startswith("attempt 1/4")
    assert len(sleeps) == 1 and 0 < sleeps[0] <= 0.01


def test_timeout_then_ok(server):
    server.push(slow(json_reply(GOOD), 2.0), json_reply(GOOD))
    client, rec, _ = make_client(server, timeout_s=0.2)
    assert client.structured("s", MSGS, Entity) == Entity(**GOOD)
    assert server.n_requests == 2
    assert rec.calls[0].outcome == "error" and "timeout after 0.2s" in rec.calls[0].error
    assert rec.calls[0].latency_ms >= 150


def test_retry_after_header_is_honoured_within_bound(server):
    server.push(error(429, headers={"Retry-After": "5"}), json_reply(GOOD))
    client, _, sleeps = make_client(server, backoff_max_s=0.05)
    client.structured("s", MSGS, Entity)
    assert sleeps == [0.05]  # Retry-After 5 s, capped at backoff_max_s


def test_persistent_500_raises_after_max_retries(server):
    server.default = error(500, "down for maintenance")
    client, rec, sleeps = make_client(server, max_retries=3)
    with pytest.raises(LLMRequestError) as ei:
        client.structured("tool_code", MSGS, Entity)
    err = ei.value
    assert isinstance(err, LLMError)
    assert err.status == 500 and err.attempts == 4 and err.retryable
    assert "down for maintenance" in str(err) and "after 4 attempts" in str(err) and "'tool_code'" in str(err)
    assert server.n_requests == 4
    assert len(sleeps) == 3
    assert [c.outcome for c in rec.calls] == ["error"] * 4


def test_backoff_grows_exponentially_and_is_bounded():
    from autoforge.llm import RetryPolicy

    p = RetryPolicy(max_retries=10, base_s=1.0, max_s=8.0, jitter=0.0)
    assert [p.delay(a) for a in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    j = RetryPolicy(base_s=1.0, max_s=8.0, jitter=0.5)
    for a in range(6):
        d = j.delay(a)
        full = min(8.0, 2.0**a)
        assert full * 0.5 <= d <= full


@pytest.mark.parametrize("status", [401, 404])
def test_4xx_is_not_retried(server, status):
    server.default = error(status, "nope")
    client, rec, sleeps = make_client(server)
    with pytest.raises(LLMRequestError) as ei:
        client.chat("agent", MSGS)
    assert server.n_requests == 1 and sleeps == []
    assert ei.value.status == status and not ei.value.retryable
    assert "not retried" in str(ei.value)
    assert [c.outcome for c in rec.calls] == ["error"]


def test_400_on_structured_is_not_retried_after_the_last_mode(server):
    server.default = error(400, "context too long")
    client, _, sleeps = make_client(server)
    with pytest.raises(LLMRequestError) as ei:
        client.structured("s", MSGS, Entity)
    assert ei.value.status == 400 and "context too long" in str(ei.value)
    assert server.n_requests == 3 and sleeps == []  # one per structured-output mode, no retries


# --------------------------------------------------------------------------- cache


def test_cache_hit_makes_no_request_and_records_cached(server):
    server.push(json_reply(GOOD))
    cache = MemoryCache()
    client, rec, _ = make_client(server, cache=cache)
    first = client.structured("s", MSGS, Entity)
    second = client.structured("s", MSGS, Entity)
    assert first == second
    assert server.n_requests == 1
    assert [c.outcome for c in rec.calls] == ["ok", "cached"]
    cached = rec.calls[1]
    assert cached.prompt_hash == rec.calls[0].prompt_hash
    assert (cached.tokens_in, cached.tokens_out) == (0, 0)
    assert cached.response == GOOD


def test_cache_key_distinguishes_step_messages_schema_temperature_seed(server):
    server.default = json_reply(GOOD)
    client, _, _ = make_client(server, cache=MemoryCache())

    class Other(BaseModel):
        name: str

    client.structured("s", MSGS, Entity)
    client.structured("s2", MSGS, Entity)
    client.structured("s", MSGS + [{"role": "user", "content": "more"}], Entity)
    client.structured("s", MSGS, Other)
    client.structured("s", MSGS, Entity, temperature=0.7)
    client.structured("s", MSGS, Entity, temperature=0.7, seed=1)
    assert server.n_requests == 6
    client.structured("s", MSGS, Entity, temperature=0.7, seed=1)
    client.structured("s", MSGS, Entity, use_cache=False)
    assert server.n_requests == 7


def test_invalid_replies_are_not_cached(server):
    server.push(json_reply({"bad": 1}), json_reply(GOOD), json_reply(GOOD))
    cache = MemoryCache()
    client, _, _ = make_client(server, cache=cache, max_repairs=1)
    client.structured("s", MSGS, Entity)
    assert len(cache) == 1
    assert list(cache._data.values()) == [json.dumps(GOOD, sort_keys=True)]


def test_chat_cache(server):
    server.push(tool_reply([("get_order", {"order_id": "O1"})]))
    client, rec, _ = make_client(server, cache=MemoryCache())
    a = client.chat("agent", MSGS, tools=[{"type": "function", "function": {"name": "get_order", "parameters": {}}}])
    b = client.chat("agent", MSGS, tools=[{"type": "function", "function": {"name": "get_order", "parameters": {}}}])
    assert server.n_requests == 1
    assert b.cached and not a.cached
    assert a.tool_calls == b.tool_calls
    assert [c.outcome for c in rec.calls] == ["ok", "cached"]


# --------------------------------------------------------------------------- chat


def test_chat_parses_tool_calls_and_usage(server):
    server.push(tool_reply([("get_order", {"order_id": "O0001"}), ("list_users", {})], content="checking",
                           tokens_in=100, tokens_out=20))
    client, rec, _ = make_client(server)
    tools = [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}]
    out = client.chat("agent", MSGS, tools=tools, temperature=1.0, max_tokens=256, seed=3)
    assert isinstance(out, ChatReply)
    assert out.tool_calls == [ToolCall(name="get_order", arguments={"order_id": "O0001"}, id="call_0"),
                              ToolCall(name="list_users", arguments={}, id="call_1")]
    assert out.content == "checking" and out.finish_reason == "tool_calls"
    assert (out.tokens_in, out.tokens_out) == (100, 20)
    body = server.last_request
    assert body["tools"] == tools and body["max_tokens"] == 256 and body["seed"] == 3 and body["temperature"] == 1.0
    assert "response_format" not in body
    [call] = rec.calls
    assert call.outcome == "ok" and call.response["tool_calls"][0]["name"] == "get_order"
    # the reply can be appended to the conversation as is
    msg = out.to_message()
    assert msg["tool_calls"][0]["function"] == {"name": "get_order", "arguments": '{"order_id": "O0001"}'}


def test_chat_malformed_tool_arguments_do_not_crash(server):
    server.push(tool_reply([("get_order", '{"order_id": '), ("f", "[1, 2]"), ("ok", {"a": 1})]))
    client, _, _ = make_client(server)
    out = client.chat("agent", MSGS)
    assert [tc.name for tc in out.tool_calls] == ["ok"]
    assert [m["name"] for m in out.malformed_tool_calls] == ["get_order", "f"]
    assert out.malformed_tool_calls[0]["arguments"] == '{"order_id": '
    assert "not an object" in out.malformed_tool_calls[1]["error"]


def test_chat_text_reply_with_reasoning_and_message_records(server):
    server.push(reply("Your order is cancelled.", extra_message={"reasoning_content": "the user asked"}))
    client, _, _ = make_client(server)
    history = [Message(role="user", content="cancel O1"),
               Message(role="assistant", tool_calls=[ToolCall(name="cancel", arguments={"id": "O1"}, id="c1")]),
               Message(role="tool", content='{"ok": true}', tool_call_id="c1", name="cancel")]
    out = client.chat("agent", history)
    assert out.content == "Your order is cancelled." and out.tool_calls == [] and out.finish_reason == "stop"
    assert out.reasoning == "the user asked"
    sent = server.last_request["messages"]
    assert sent[1]["tool_calls"][0] == {"id": "c1", "type": "function",
                                        "function": {"name": "cancel", "arguments": '{"id": "O1"}'}}
    assert sent[2] == {"role": "tool", "content": '{"ok": true}', "tool_call_id": "c1"}


def test_run_id_is_stamped_on_records(server):
    server.push(reply("hi"))
    client, rec, _ = make_client(server, run_id="run_123")
    client.chat("user_sim", MSGS)
    assert rec.calls[0].run_id == "run_123"
    assert rec.summary() == {"n_calls": 1, "by_outcome": {"ok": 1}, "tokens_in": 11, "tokens_out": 7,
                             "latency_ms": rec.calls[0].latency_ms}
    assert len(rec.drain()) == 1 and len(rec) == 0


def test_ping_lists_models(server):
    client, _, _ = make_client(server)
    assert client.ping() == ["stub-model"]


def test_openai_package_retries_are_off(server):
    # One 500 with max_retries=0 must be exactly one request: the package does not retry on its own.
    server.default = error(500)
    client, _, _ = make_client(server, max_retries=0)
    with pytest.raises(LLMRequestError):
        client.chat("agent", MSGS)
    assert server.n_requests == 1


def test_concurrent_calls_share_one_client(server):
    """Episodes run in threads: one client, many callers; a callable default answers per request."""
    from concurrent.futures import ThreadPoolExecutor

    server.default = lambda body: reply("echo:" + body["messages"][-1]["content"])
    client, rec, _ = make_client(server, cache=MemoryCache())

    def ask(i: int) -> str:
        return client.chat("user_sim", [{"role": "user", "content": f"q{i % 10}"}]).content

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, range(40)))
    assert answers == [f"echo:q{i % 10}" for i in range(40)]
    assert len(rec) == 40
    assert server.n_requests == sum(c.outcome == "ok" for c in rec.calls) >= 10
