"""Online stages record every LLM call in the warehouse (through the stage's single write)."""

from __future__ import annotations

import json

from dags_mock import make_env, make_tools
from stub_openai_server import StubOpenAIServer, json_reply

from autoforge.llm import MemoryRecorder, get_client
from autoforge.settings import get_settings
from autoforge.dags.sample import sample_env
from autoforge.pipeline import SampleParams
from autoforge.pipeline.common import persist
from autoforge.types import Run
from autoforge.warehouse import query


def _judge_all_valid(body: dict):
    payload = json.loads(body["messages"][-1]["content"])
    return json_reply({"edges": [{"src": c["src"], "dst": c["dst"], "valid": True, "bindings": c["bindings"]}
                                 for c in payload["candidates"]]})


def test_sample_stage_with_llm_edges_records_calls(warehouse):
    with StubOpenAIServer(default=_judge_all_valid) as srv:
        settings = get_settings(openai_base_url=srv.base_url, openai_model="stub-model")
        client = get_client(settings, backend="openai", recorder=MemoryRecorder(), backoff_base_s=0.001)
        run = Run.make("sample", {"test": "llm-recording"})
        res = sample_env(make_env(), make_tools(), 0, walks=10, merges=5, client=client, run_id=run.run_id,
                         **SampleParams().model_dump(include={"min_len", "max_len", "start", "dag_variants"}))
        assert srv.n_requests >= 1
    assert res.graph.method.startswith("openai") and res.graph.edges
    assert len(res.llm_calls) == srv.n_requests and all(c.run_id == run.run_id for c in res.llm_calls)
    persist(warehouse, [res], run)
    rows = query(warehouse, "SELECT step, outcome, tokens_in FROM llm_calls")
    assert len(rows) == srv.n_requests
    assert {r["step"] for r in rows} == {"tool_graph"} and all(r["outcome"] == "ok" for r in rows)
