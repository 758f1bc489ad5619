"""get_client, the offline backend, the caches, and the helpers (no server needed)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from pydantic import BaseModel

from autoforge.errors import ConfigError, LLMError
from autoforge.llm import (
    LLMClient,
    MemoryCache,
    OfflineClient,
    OpenAIClient,
    ResponseCache,
    WarehouseCache,
    get_client,
    parse_json_content,
    prompt_hash,
)
from autoforge.settings import Settings


class M(BaseModel):
    x: int


def test_default_backend_is_offline(monkeypatch):
    monkeypatch.delenv("AUTOFORGE_BACKEND", raising=False)
    client = get_client()
    assert isinstance(client, OfflineClient)
    assert client.is_offline and client.name == "offline"
    assert isinstance(client, LLMClient)


def test_offline_client_refuses_llm_calls_with_guidance():
    client = OfflineClient()
    with pytest.raises(LLMError, match="offline backend.*rules.*is_offline"):
        client.structured("state_schema", [], M)
    with pytest.raises(LLMError, match="'user_sim'"):
        client.chat("user_sim", [])


def test_unknown_backend_lists_valid_ones():
    with pytest.raises(ConfigError, match="unknown LLM backend 'gpt'.*offline, openai"):
        get_client(Settings(backend="offline"), backend="gpt")


def test_openai_without_base_url_says_which_variable():
    with pytest.raises(ConfigError, match="AUTOFORGE_OPENAI_BASE_URL"):
        get_client(Settings(backend="openai", openai_base_url=None))


def test_openai_without_key_says_which_variable():
    with pytest.raises(ConfigError, match="AUTOFORGE_OPENAI_API_KEY"):
        get_client(Settings(backend="openai", openai_base_url="http://127.0.0.1:9/v1", openai_api_key=""))


def test_openai_client_from_settings():
    s = Settings(backend="openai", openai_base_url="http://127.0.0.1:9/v1", openai_api_key="k",
                 openai_model="qwen3-8b", llm_timeout_s=5.0, llm_max_retries=1, llm_max_repairs=0)
    client = get_client(s, backoff_base_s=0.0)
    assert isinstance(client, OpenAIClient) and isinstance(client, LLMClient)
    assert (client.name, client.model, client.is_offline) == ("openai:qwen3-8b", "qwen3-8b", False)
    assert client.retry.max_retries == 1 and client.max_repairs == 0 and client.timeout_s == 5.0
    assert client.retry.base_s == 0.0
    assert client._client.max_retries == 0  # the package's own retries are off


def test_backend_argument_overrides_settings_and_env(monkeypatch):
    monkeypatch.setenv("AUTOFORGE_BACKEND", "openai")
    assert get_client(backend="offline").is_offline


def test_prompt_hash_is_stable_and_sensitive():
    msgs = [{"role": "user", "content": "hi"}]
    h = prompt_hash("m", "s", msgs, temperature=0.0, kind="chat")
    assert h == prompt_hash("m", "s", [{"content": "hi", "role": "user"}], temperature=0.0, kind="chat")
    assert h == prompt_hash("m", "s", msgs, temperature=0.0, kind="chat", seed=None)  # None knobs drop out
    others = {
        prompt_hash("m2", "s", msgs, temperature=0.0, kind="chat"),
        prompt_hash("m", "s2", msgs, temperature=0.0, kind="chat"),
        prompt_hash("m", "s", msgs, temperature=0.5, kind="chat"),
        prompt_hash("m", "s", msgs, temperature=0.0, kind="chat", seed=1),
        prompt_hash("m", "s", msgs, temperature=0.0, kind="structured"),
        prompt_hash("m", "s", msgs, temperature=0.0, kind="chat", tools=[{"type": "function"}]),
        prompt_hash("m", "s", msgs, temperature=0.0, kind="chat", schema={"type": "object"}),
    }
    assert h not in others and len(others) == 7


def test_memory_cache_returns_copies():
    c = MemoryCache()
    assert isinstance(c, ResponseCache)
    c.put("k", {"a": [1]})
    got = c.get("k")
    got["a"].append(2)
    assert c.get("k") == {"a": [1]} and c.get("missing") is None and "k" in c


def test_warehouse_cache_from_rows_keeps_latest_ok():
    rows = [
        {"prompt_hash": "h1", "response": json.dumps({"x": 1}), "outcome": "ok", "created_at": datetime(2025, 1, 1)},
        {"prompt_hash": "h1", "response": json.dumps({"x": 2}), "outcome": "ok", "created_at": datetime(2025, 1, 2)},
        {"prompt_hash": "h1", "response": json.dumps({"x": 3}), "outcome": "ok", "created_at": datetime(2024, 1, 1)},
        {"prompt_hash": "h2", "response": '"not json for M"', "outcome": "invalid", "created_at": None},
        {"prompt_hash": "h3", "response": {"x": 9}, "outcome": "ok"},  # already decoded
        {"prompt_hash": "h4", "response": None, "outcome": "error"},
        {"prompt_hash": "h5", "response": {"x": 5}, "outcome": "cached"},
    ]
    cache = WarehouseCache.from_rows(rows)
    assert len(cache) == 2
    assert cache.get("h1") == {"x": 2} and cache.get("h3") == {"x": 9}
    assert cache.get("h2") is None and cache.get("h5") is None


def test_warehouse_cache_answers_a_rerun_without_a_server():
    """The point of the cache: records of run 1, loaded back, answer run 2 with no server at all."""
    from autoforge.llm import MemoryRecorder

    msgs = [{"role": "user", "content": "x?"}]
    client = OpenAIClient("http://127.0.0.1:9/v1", "k", "m", max_retries=0)
    key = prompt_hash("m", "step", msgs, schema=M.model_json_schema(), temperature=0.0, kind="structured")
    rows = [{"prompt_hash": key, "response": json.dumps({"x": 42}), "outcome": "ok"}]
    rec = MemoryRecorder()
    client.cache, client.recorder = WarehouseCache.from_rows(rows), rec
    assert client.structured("step", msgs, M) == M(x=42)
    assert [c.outcome for c in rec.calls] == ["cached"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"x": 1}', {"x": 1}),
        ('```json\n{"x": 1}\n```', {"x": 1}),
        ('<think>let me see {</think>{"x": 1}', {"x": 1}),
        ('Here you go: {"x": 1}. Done.', {"x": 1}),
        ("[1, 2]", [1, 2]),
    ],
)
def test_parse_json_content(text, expected):
    assert parse_json_content(text) == expected


@pytest.mark.parametrize("text", ["", None, "no json here", "{broken"])
def test_parse_json_content_rejects(text):
    with pytest.raises(ValueError):
        parse_json_content(text)


def test_records_round_trip_through_the_warehouse_and_feed_the_cache(tmp_path):
    """Run 1 talks to a server and its records are persisted; run 2 loads the cache from the
    warehouse and makes no request at all."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from stub_openai_server import StubOpenAIServer, json_reply, reply

    from autoforge.llm import MemoryRecorder
    from autoforge.pipeline.llm_cache import load_llm_cache
    from autoforge.types import LLMCall
    from autoforge.warehouse import read_records, write_records

    wh = str(tmp_path / "wh.duckdb")
    msgs = [{"role": "user", "content": "x?"}]
    with StubOpenAIServer([reply("not json"), json_reply({"x": 7}), reply("hello")]) as srv:
        rec = MemoryRecorder()
        client = OpenAIClient(srv.base_url, "k", "m", recorder=rec, cache=MemoryCache(), run_id="run_1")
        assert client.structured("step", msgs, M) == M(x=7)
        assert client.chat("user_sim", msgs).content == "hello"
        write_records(wh, rec.drain())
        assert srv.n_requests == 3

    stored = read_records(wh, LLMCall, order_by="created_at")
    assert sorted(c.outcome for c in stored) == ["invalid", "ok", "ok"]
    assert all(c.run_id == "run_1" and c.tokens_in == 11 for c in stored)
    with StubOpenAIServer() as srv2:
        rec2 = MemoryRecorder()
        client2 = OpenAIClient(srv2.base_url, "k", "m", recorder=rec2, cache=load_llm_cache(wh, model="m"))
        assert client2.structured("step", msgs, M) == M(x=7)
        assert client2.chat("user_sim", msgs).content == "hello"
        assert srv2.n_requests == 0
        assert [c.outcome for c in rec2.calls] == ["cached", "cached"]
