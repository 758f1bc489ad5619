"""Synthesis hardening: a bad tool, a bad reply or a broken environment never crashes the stage;
the LLM calls paid for are always written; a systemic failure never replaces a better stored row.

Most tests run ``autoforge synthesize --backend openai`` (``run_synthesis``) against the stub
OpenAI server (a real HTTP server), on a warehouse holding the small shop tool set of
``test_faults`` (``get_user``, ``cancel_order``, ``find_user_id_by_email``). The guards are tested
twice where the layer underneath may change: end to end with the real payload (whatever the
sandbox then raises or returns), and with the check function patched to raise.
"""

from __future__ import annotations

import json
import re
from itertools import count

import jsonschema
import pytest
import referencing.exceptions
from stub_openai_server import StubOpenAIServer, error, json_reply, reply
from test_faults import CANCEL_ORDER, GET_USER, SCHEMA, SHOP_DOC, _request_key
from test_synthesis_llm import SCHEMA as LLM_SCHEMA, ScriptedLLM, specs3
from test_synthesis_llm import reply as tool_reply
from test_synthesis_mockdomain import mock_toolset

from autoforge.envs import rule_engine, synthesis
from autoforge.envs.checks import CheckResult
from autoforge.errors import SandboxError
from autoforge.llm.messages import MAX_JSON_DEPTH, json_depth, parse_json_content
from autoforge.pipeline import run_ingest, run_synthesis
from autoforge.settings import get_settings
from autoforge.warehouse import query

FIND_USER = '''
def find_user_id_by_email(state, email):
    for user_id, user in state["users"].items():
        if user.get("email") == email:
            return {"user_id": user_id}
    return error(f"no user has the email {email}")
'''
GOOD = {
    "state_schema": SCHEMA,
    "get_user": {"source": GET_USER, "effect": "read", "collection": "users"},
    "cancel_order": {"source": CANCEL_ORDER, "effect": "write", "collection": "orders"},
    "find_user_id_by_email": {"source": FIND_USER, "effect": "read", "collection": "users"},
}
HUGE_NUMBER = '''
def get_user(state, user_id):
    user = state["users"].get(user_id)
    if user is None:
        return error(f"user {user_id} not found")
    return {"user_id": user_id, "balance": 10**400}
'''
DEEP_UNARY = "def get_user(state, user_id):\n    return {'user_id': " + "- " * 500 + "1}\n"
DANGLING_REF = {**GOOD["get_user"], "output_schema": {"$ref": "#/definitions/user"}}


def shop_warehouse(tmp_path, names=("shop",)) -> str:
    """A warehouse with one copy of the shop tool set per name."""
    for name in names:
        docs = tmp_path / "docs" / name
        docs.mkdir(parents=True)
        (docs / "tools.json").write_text(json.dumps(SHOP_DOC))
    wh = str(tmp_path / "hardening.duckdb")
    assert run_ingest(wh, paths=[str(tmp_path / "docs" / n) for n in names])["n_toolsets"] == len(names)
    return wh


def stub(first: dict | None = None) -> StubOpenAIServer:
    """A stub answering every request with the good reply for its tool, after the scripted
    ``first`` replies of a tool (key -> list of replies, used up in order)."""
    first = {k: list(v) for k, v in (first or {}).items()}

    def answer(body: dict):
        key = _request_key(body)
        if first.get(key):
            nxt = first[key].pop(0)
            return nxt if not isinstance(nxt, dict) else json_reply(nxt)
        return json_reply(GOOD[key]) if key in GOOD else error(503, f"stub: no answer for {key}")

    return StubOpenAIServer(default=answer)


def settings_for(srv: StubOpenAIServer, **kw):
    return get_settings(openai_base_url=srv.base_url, openai_model="stub-model", llm_timeout_s=10.0,
                        **{"llm_max_repairs": 1, "llm_max_retries": 0, **kw})


def tool_requests(srv: StubOpenAIServer, tool: str) -> list[dict]:
    """The payloads (last user message) of the requests about ``tool``."""
    return [json.loads(b["messages"][-1]["content"]) for b in srv.requests if _request_key(b) == tool]


def sent_calls(wh: str) -> int:
    """LLM calls on record that went to the server (the store's tool prompts equal the shop's: cache hits)."""
    return query(wh, "SELECT count(*) AS n FROM llm_calls WHERE outcome <> 'cached'")[0]["n"]


def synth_rejections(wh: str) -> list[dict]:
    return query(wh, "SELECT item_id, reason, detail FROM rejections WHERE stage = 'synthesize' ORDER BY detail")


def assert_rejected_then_repaired(wh: str, srv: StubOpenAIServer, summary: dict, says: str) -> str:
    """get_user: attempt 1 rejected with a reason matching ``says`` (stored, and sent back), attempt 2
    accepted; every call on record. Returns the stored rejection's reason and detail."""
    assert summary["status"] == "completed" and summary["counts"]["ready"] == 1, summary["problems"]
    (tool,) = query(wh, "SELECT status, attempts FROM tool_code WHERE name = 'get_user'")
    assert (tool["status"], tool["attempts"]) == ("accepted", 2)
    (rej,) = synth_rejections(wh)
    message = f"{rej['reason']}: {rej['detail']}"
    assert "tool get_user attempt 1" in rej["detail"] and re.search(says, message, re.I), message
    code, repair = tool_requests(srv, "get_user")
    assert "source" not in code and rej["reason"] in repair["failure"]
    assert sent_calls(wh) == srv.n_requests
    return message


# --------------------------------------------------------------------------- 1. the bad payloads, end to end


def test_code_returning_10_to_the_400_is_rejected_with_a_reason_then_repaired(tmp_path):
    wh = shop_warehouse(tmp_path)
    with stub({"get_user": [{"source": HUGE_NUMBER, "effect": "read", "collection": "users"}]}) as srv:
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv))
    assert_rejected_then_repaired(wh, srv, summary, r"json|float|infinity|number|range")


def test_a_500_deep_unary_expression_is_rejected_naming_the_depth(tmp_path):
    wh = shop_warehouse(tmp_path)
    with stub({"get_user": [{"source": DEEP_UNARY, "effect": "read", "collection": "users"}]}) as srv:
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv))  # no RecursionError escapes
    message = assert_rejected_then_repaired(wh, srv, summary, r"deep|depth|nest")
    assert "Traceback" not in message


def test_an_output_schema_with_a_dangling_ref_is_rejected(tmp_path):
    wh = shop_warehouse(tmp_path)
    with stub({"get_user": [DANGLING_REF]}) as srv:
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv))
    assert_rejected_then_repaired(wh, srv, summary, r"schema|\$ref")


# --------------------------------------------------------------------------- 1. the guard itself


@pytest.mark.parametrize("exc, reason", [
    (RecursionError("maximum recursion depth exceeded"), "too_deep"),
    (MemoryError(), "memory_limit"),
    (OverflowError("int too large to convert to float"), "check_error"),
    (ValueError("Out of range float values are not JSON compliant"), "check_error"),
    (jsonschema.exceptions.SchemaError("'objekt' is not valid under any of the given schemas"), "invalid_output_schema"),
    (referencing.exceptions.PointerToNowhere("/definitions/user", resource=None), "invalid_output_schema"),
    (SandboxError("the sandbox worker could not start"), "check_error"),
    (KeyError("users"), "check_error"),
])
def test_anything_a_check_raises_is_that_tools_rejection_and_goes_to_repair(monkeypatch, exc, reason):
    real, calls = synthesis.check_tool, count()

    def check(tool, state, arguments, **kw):
        if tool.name == "cancel_order" and next(calls) == 0:
            raise exc
        return real(tool, state, arguments, **kw)

    monkeypatch.setattr(synthesis, "check_tool", check)
    specs = specs3()
    replies = {"get_user": [tool_reply(GET_USER, collection="users")],
               "cancel_order": [tool_reply(CANCEL_ORDER, "write", "orders")] * 2,
               "find_user_id_by_email": [tool_reply(FIND_USER, collection="users")]}
    llm = ScriptedLLM(LLM_SCHEMA, replies)
    res = synthesis.synthesize_environment(mock_toolset(specs), specs, client=llm,
                                           settings=get_settings().with_(llm_max_repairs=1))
    (rej,) = res.rejections
    assert rej.reason == reason and type(exc).__name__ in rej.detail and "cancel_order" in rej.detail
    assert res.environment.status == "ready" and {t.attempts for t in res.tools if t.name == "cancel_order"} == {2}
    (repair,) = [json.loads(m[-1]["content"]) for step, m in llm.calls if step == "tool_repair"]
    assert repair["failure"].startswith(reason) and "raised" in repair["failure"]


def test_offline_tools_whose_check_raises_are_rejected_not_crashed(monkeypatch):
    def check(tool, state, arguments, **kw):
        raise RecursionError("maximum recursion depth exceeded while calling a Python object")

    monkeypatch.setattr(synthesis, "check_tool", check)
    specs = specs3()
    res = synthesis.synthesize_environment(mock_toolset(specs), specs)
    assert res.environment.status == "failed" and len(res.rejections) == 3
    assert {r.reason for r in res.rejections} == {"too_deep"} and res.problem is None  # the code's fault, not the sandbox's


def test_a_probe_that_raises_fails_its_rules_not_the_environment(monkeypatch):
    def probe(*a, **kw):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(rule_engine, "probe_tool", probe)
    specs = [s for s in specs3() if s.name == "cancel_order"]
    llm = ScriptedLLM(LLM_SCHEMA, {"cancel_order": [tool_reply(CANCEL_ORDER, "write", "orders")]})
    res = synthesis.synthesize_environment(mock_toolset(specs), specs, client=llm, settings=get_settings())
    assert res.environment.status == "ready" and res.error is None
    enforced = [r for r in res.rules if r.enforcement == "code"]
    assert enforced and all(r.probe == "failed" and "OverflowError" in r.probe_detail for r in enforced)


def test_replies_that_are_not_what_was_asked_for_are_repaired_and_stored_clipped(tmp_path):
    wh = shop_warehouse(tmp_path)
    nested: dict = {"type": "object"}
    for _ in range(20):  # 41 levels of JSON: within a reply's limit, over an output schema's
        nested = {"type": "object", "properties": {"x": nested}}
    bad = [
        {"source": 123, "effect": "maybe", "collection": ["users"]},               # wrong types
        reply("[" * 5000 + "]" * 5000),                                             # deeper than json.loads follows
        reply(json.dumps({**GOOD["get_user"], "x": deep_list(MAX_JSON_DEPTH + 5)})),  # deeper than a reply may be
        {"source": GET_USER + "#" * 60_000, "effect": "read"},                    # a huge string
        reply("x" * 1_200_000),                                                     # a huge reply
        {**GOOD["get_user"], "output_schema": nested},                              # a deeply nested schema
    ]
    with stub({"get_user": bad}) as srv:
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv, llm_max_repairs=len(bad)))
    assert summary["counts"]["ready"] == 1 and summary["status"] == "completed"
    calls = query(wh, "SELECT outcome, error, length(CAST(response AS VARCHAR)) AS size FROM llm_calls "
                      "WHERE step = 'tool_code' ORDER BY created_at")
    invalid = [c for c in calls if c["outcome"] == "invalid"]
    assert len(invalid) == len(bad) and len(calls) == srv.n_requests - 1  # every request but the state schema
    errors = "\n".join(c["error"] for c in invalid)
    for says in ("source", "effect", "deeper than the JSON parser", f"limit of {MAX_JSON_DEPTH}", "at most 50000",
                 "1,200,000 characters", "output_schema nests"):
        assert says in errors, says
    assert max(c["size"] for c in invalid) < 25_000  # a runaway reply is stored clipped


def deep_list(n: int) -> list:
    deep: list = []
    for _ in range(n - 1):
        deep = [deep]
    return deep


def test_json_depth_and_parse_limits_never_recurse():
    assert json_depth(deep_list(100_000)) == 100_000 and json_depth(1) == 0 and json_depth({"a": [1]}) == 2
    with pytest.raises(ValueError, match="deeper"):
        parse_json_content("[" * 100_000 + "]" * 100_000)


# --------------------------------------------------------------------------- 1. one environment raises


@pytest.mark.parametrize("where", ["synthesis", "pipeline"])
def test_an_exception_in_one_environment_is_its_failure_and_the_others_are_written(tmp_path, monkeypatch, where):
    import autoforge.pipeline.synthesize as stage

    wh = shop_warehouse(tmp_path, ("shop", "store"))
    module, name = (synthesis, "sample_state") if where == "synthesis" else (stage, "with_reachability")
    real, calls = getattr(module, name), count()

    def injected(*a, **kw):
        if next(calls) == 0:
            raise RuntimeError("injected failure")
        return real(*a, **kw)

    monkeypatch.setattr(module, name, injected)
    with stub() as srv:
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv))
    by = {e["env"]: e for e in summary["environments"]}
    assert by["store"]["status"] == "ready" and by["shop"]["status"] == "failed"
    assert summary["status"] == "failed" and [p["env"] for p in summary["problems"]] == ["shop"]
    assert "RuntimeError: injected failure" in summary["problems"][0]["problem"]
    stored = {r["name"]: r for r in query(wh, "SELECT name, status, reason FROM environments")}
    assert stored["store"]["status"] == "ready" and stored["shop"]["status"] == "failed"
    assert "injected failure" in stored["shop"]["reason"] and "at " in stored["shop"]["reason"]
    assert [r["reason"] for r in synth_rejections(wh)] == ["environment_error"]
    assert query(wh, "SELECT status FROM runs WHERE stage = 'synthesize'")[0]["status"] == "failed"
    assert sent_calls(wh) == srv.n_requests


# --------------------------------------------------------------------------- 2. LLM calls survive a failing stage


@pytest.mark.parametrize("fault", ["interrupt", "write"])
def test_llm_calls_are_written_when_the_stage_raises_and_a_rerun_reuses_them(tmp_path, monkeypatch, fault):
    import autoforge.pipeline.synthesize as stage

    wh = shop_warehouse(tmp_path, ("shop", "store"))
    calls = count()
    if fault == "interrupt":  # Ctrl-C while the second environment is being finished
        real, raised = stage.with_reachability, KeyboardInterrupt

        def broken(result):
            if next(calls) == 1:
                raise KeyboardInterrupt
            return real(result)

        monkeypatch.setattr(stage, "with_reachability", broken)
    else:  # the stage's one write fails (the second, the calls-only write, goes through)
        real, raised = stage.persist, RuntimeError

        def broken(*a, **kw):
            if next(calls) == 0:
                raise RuntimeError("disk full")
            return real(*a, **kw)

        monkeypatch.setattr(stage, "persist", broken)
    with stub() as srv:
        with pytest.raises(raised):
            run_synthesis(wh, backend="openai", settings=settings_for(srv))
    paid = srv.n_requests
    rows = query(wh, "SELECT call_id, prompt_hash, outcome FROM llm_calls")
    # 2 schemas + 3 tools sent; the store's 3 tool prompts equal the shop's, answered by the cache
    assert paid == 5 and sent_calls(wh) == paid and len(rows) == 8 and {r["outcome"] for r in rows} == {"ok", "cached"}
    assert query(wh, "SELECT status FROM runs WHERE stage = 'synthesize'")[0]["status"] == "failed"
    assert query(wh, "SELECT count(*) AS n FROM environments")[0]["n"] == 0
    monkeypatch.undo()

    with StubOpenAIServer() as srv2:  # no script: any request would be answered with a 500
        summary = run_synthesis(wh, backend="openai", settings=settings_for(srv2))
    assert srv2.n_requests == 0 and summary["status"] == "completed" and summary["counts"]["ready"] == 2
    after = query(wh, "SELECT call_id, prompt_hash, outcome FROM llm_calls")
    ok = sorted(r["call_id"] for r in rows if r["outcome"] == "ok")
    assert sorted(r["call_id"] for r in after if r["outcome"] == "ok") == ok  # no request sent, none stored twice
    assert len(after) == len({r["call_id"] for r in after}) == 2 * len(rows)  # the old calls once, one cache hit per call
    assert {r["outcome"] for r in after if r["call_id"] not in {x["call_id"] for x in rows}} == {"cached"}


# --------------------------------------------------------------------------- 3. a bad setting never destroys good rows


def _sandbox_down(tool, state, arguments, **kw):
    return CheckResult(False, "sandbox_error", "timeout_s and memory_mb must be positive (got -1.0, 512)", arguments)


@pytest.mark.parametrize("backend", ["offline", "openai"])
def test_a_ready_environment_is_not_overwritten_by_a_systemic_all_tools_rejected_run(tmp_path, monkeypatch, backend):
    wh = shop_warehouse(tmp_path)
    with stub() as srv:
        settings = settings_for(srv)
        first = run_synthesis(wh, backend=backend, settings=settings)
        again = run_synthesis(wh, backend=backend, settings=settings)  # a plain re-run: same rows, upserted
        assert first["status"] == again["status"] == "completed" and again["counts"]["kept"] == 0
        before = query(wh, "SELECT env_id, status, n_tools_accepted, reason FROM environments")
        tools = query(wh, "SELECT code_id, status, reason FROM tool_code ORDER BY code_id")
        assert [e["status"] for e in before] == ["ready"] and len(tools) == 3

        monkeypatch.setattr(synthesis, "check_tool", _sandbox_down)  # every tool rejected, for a sandbox reason
        broken = run_synthesis(wh, backend=backend, settings=settings)
    assert broken["status"] == "failed" and broken["counts"]["kept"] == 1 and broken["counts"]["ready"] == 0
    (problem,) = broken["problems"]
    assert "kept" in problem["problem"] and "AUTOFORGE_TOOL_TIMEOUT" in problem["problem"]
    assert broken["environments"][0]["kept"]
    assert query(wh, "SELECT env_id, status, n_tools_accepted, reason FROM environments") == before
    assert query(wh, "SELECT code_id, status, reason FROM tool_code ORDER BY code_id") == tools
    assert synth_rejections(wh) == [] and "environments" not in broken["written"]
    assert query(wh, "SELECT status FROM runs WHERE stage = 'synthesize'")[0]["status"] == "failed"
    if backend == "openai":  # the repair requests of the broken run are on record too
        assert query(wh, "SELECT count(*) AS n FROM llm_calls WHERE step = 'tool_repair'")[0]["n"] >= 3


def test_a_systemic_failure_with_nothing_stored_is_written_and_fails_the_run(tmp_path, monkeypatch):
    wh = shop_warehouse(tmp_path)
    monkeypatch.setattr(synthesis, "check_tool", _sandbox_down)
    summary = run_synthesis(wh)
    assert summary["status"] == "failed" and summary["counts"]["failed"] == 1 and summary["counts"]["kept"] == 0
    assert "sandbox reason (sandbox_error)" in summary["problems"][0]["problem"]
    assert query(wh, "SELECT status FROM environments") == [{"status": "failed"}]


def test_the_cli_exits_3_and_names_the_problem_when_a_ready_environment_was_kept(tmp_path, monkeypatch, capsys):
    from autoforge.cli import FAILED_EXIT_CODE, main

    wh = shop_warehouse(tmp_path)
    assert main(["synthesize", "--warehouse", wh]) == 0
    before = query(wh, "SELECT env_id, status, n_tools_accepted FROM environments")
    monkeypatch.setattr(synthesis, "check_tool", _sandbox_down)
    capsys.readouterr()
    assert main(["synthesize", "--warehouse", wh]) == FAILED_EXIT_CODE == 3
    err = capsys.readouterr().err
    assert "problem: " in err and "kept" in err
    assert query(wh, "SELECT env_id, status, n_tools_accepted FROM environments") == before


def test_a_failure_that_repeats_is_asked_again_not_answered_from_the_cache(tmp_path):
    """The same broken reply twice gives the same failure; the second repair must still reach the LLM."""
    wh = shop_warehouse(tmp_path)
    broken = {"source": "def get_user(state, user_id):\n    return (\n", "effect": "read", "collection": "users"}
    with stub({"get_user": [broken, broken, broken]}) as srv:
        run_synthesis(wh, backend="openai", settings=settings_for(srv, llm_max_repairs=2))
        asked = tool_requests(srv, "get_user")
    assert len(asked) == 3  # the first request and two repairs, each sent
    assert "note" not in asked[1] and "repair 2" in asked[2]["note"]
    assert query(wh, "SELECT count(*) AS n FROM llm_calls WHERE step = 'tool_repair' AND outcome = 'cached'")[0]["n"] == 0


def test_an_unreachable_llm_server_is_exit_3_with_the_reason(tmp_path, monkeypatch, capsys):
    import socket

    from autoforge.cli import FAILED_EXIT_CODE, main

    wh = shop_warehouse(tmp_path)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AUTOFORGE_OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("AUTOFORGE_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("AUTOFORGE_LLM_TIMEOUT", "2")
    assert main(["synthesize", "--backend", "openai", "--warehouse", wh]) == FAILED_EXIT_CODE
    err = capsys.readouterr().err
    assert "failed: shop:" in err and "Traceback" not in err
