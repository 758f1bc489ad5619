"""Tool kinds with real semantics (autoforge/domain/tool_kinds.py): a scratchpad changes nothing, a
calculator computes, a hand-off records the transfer, and none of them is ever in a task.

The fixture (tests/fixtures/realstyle/kinds_bike_rental.json) is a document of our own in the style
of customer-service tool sets: record tools plus ``think``, ``calculate`` and
``transfer_to_human_agents``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from autoforge.domain.tool_kinds import SPECIAL_KINDS, TOOL_KINDS, in_tasks, special_kind, tool_kind
from autoforge.envs.code.offline import TEMPLATES
from autoforge.envs.runtime import Environment, run_direct
from autoforge.envs.synthesis import synthesize_environment
from autoforge.errors import ConfigError
from autoforge.tasks.quality import check_tool_kinds
from autoforge.tooldocs.ingest import ingest_paths
from autoforge.types import ToolCall, ToolCode, ToolSpec

FIXTURE = Path(__file__).parent / "fixtures" / "realstyle" / "kinds_bike_rental.json"
SPECIAL_TOOLS = {"think", "calculate", "transfer_to_human_agents"}


def spec(name: str, description: str = "", **params) -> ToolSpec:
    props = {k: (v if isinstance(v, dict) else {"type": v}) for k, v in params.items()}
    return ToolSpec(tool_id=f"t_{name}", toolset="x", name=name, description=description, doc_id="d",
                    parameters={"type": "object", "properties": props, "required": list(props)})


CASES = [
    # scratchpads: by name, by "use this tool to ...", by "scratch pad", by "record your reasoning"
    (spec("think", "Use the tool to think about something.", thought="string"), "scratchpad"),
    (spec("reflect", "Reflect on the conversation so far before answering.", note="string"), "scratchpad"),
    (spec("scratchpad", "A private scratch pad for intermediate notes.", text="string"), "scratchpad"),
    (spec("log_reasoning", "Record your reasoning step by step. Nothing is stored.", reasoning="string"), "scratchpad"),
    (spec("planStep", "Use this tool to jot down a plan before you act.", plan="string"), "scratchpad"),
    # calculators: the expression parameter by name, or a description that speaks of a math expression
    (spec("calculate", "Calculate the result of a mathematical expression.", expression="string"), "calculator"),
    (spec("evaluate", "Evaluates an arithmetic expression like '3 * (2 + 1)'.", expr="string"), "calculator"),
    (spec("compute", "Compute a formula and return the number.", formula="string"), "calculator"),
    (spec("math_eval", "Evaluate a math expression, e.g. 2+2.", input="string", precision="integer"), "calculator"),
    (spec("calculator", "A calculator.", query={"type": "string", "description": "the math expression to evaluate"}),
     "calculator"),
    # hand-offs: by name (a hand-off verb and a person), or by the description
    (spec("transfer_to_human_agents", "Transfer the user to a human agent.", summary="string"), "handoff"),
    (spec("escalateToHuman", "Escalate the conversation.", reason="string"), "handoff"),
    (spec("handoff", "Hand the chat off to a live representative when the customer asks for one.", note="string"),
     "handoff"),
    (spec("request_live_agent", "Connect the customer with a live agent.", topic="string"), "handoff"),
    (spec("talk_to_human", "Route the caller to a human operator."), "handoff"),
    # tools about records: their words look alike, but they name a record or take numbers
    (spec("add_note", "Add a note to a customer's file.", customer_id="string", text="string"), None),
    (spec("get_thought", "Get a saved thought by id.", thought_id="string"), None),
    (spec("calculate_order_total", "Calculate the total of an order.", order_id="string"), None),
    (spec("calculate_shipping", "Calculate shipping cost for a weight.", weight="number", zone="string"), None),
    (spec("add", "Add two numbers.", a="number", b="number"), None),
    (spec("transfer_funds", "Transfer money from one account to another.", from_account_id="string",
          to_account_id="string", amount="number"), None),
    (spec("escalate_ticket", "Escalate the ticket to a human agent.", ticket_id="string"), None),
    (spec("assign_agent", "Assign the ticket to an agent.", ticket_id="string", agent_id="string"), None),
    (spec("transfer_call", "Transfer the call to another department.",
          department={"type": "string", "enum": ["billing", "sales"]}), None),
    (spec("search_web", "Search the web for a query.", query="string"), None),
    (spec("reason_for_return", "Record the reason for a return.", order_id="string", reason="string"), None),
    (spec("think_tank_list", "List the think tanks of the region.", region={"type": "string", "enum": ["eu", "us"]}), None),
]


@pytest.mark.parametrize("tool,kind", CASES, ids=[c[0].name for c in CASES])
def test_special_kinds_are_read_from_names_and_descriptions(tool, kind):
    assert special_kind(tool) == kind


def test_the_registry_holds_every_template_kind_and_says_which_are_in_tasks():
    assert set(TEMPLATES) | {"compute", "llm"} == set(TOOL_KINDS)
    assert [k for k in TOOL_KINDS if not in_tasks(k)] == list(SPECIAL_KINDS)
    assert tool_kind("scratchpad").effect == tool_kind("calculator").effect == "read"
    assert tool_kind("handoff").effect == "write" and tool_kind("handoff").stores
    with pytest.raises(ConfigError, match="valid kinds"):
        tool_kind("thinking")


@pytest.fixture(scope="module")
def synthesized():
    ingested = ingest_paths([FIXTURE])
    return ingested, synthesize_environment(ingested.toolsets[0], ingested.specs)


def test_the_scratchpad_is_tagged_read_at_ingest(synthesized):
    ingested, _ = synthesized
    effects = {s.name: s.effect for s in ingested.specs}
    # "It will not obtain new information or change the database": a description that says nothing changes
    assert effects["think"] == "read"


def test_each_special_tool_gets_its_kind_and_real_code(synthesized):
    _, res = synthesized
    by = {t.name: t for t in res.tools}
    assert all(t.status == "accepted" for t in res.tools), {t.name: t.reason for t in res.tools if t.reason}
    assert (by["think"].kind, by["think"].effect, by["think"].collection) == ("scratchpad", "read", None)
    assert (by["calculate"].kind, by["calculate"].effect, by["calculate"].collection) == ("calculator", "read", None)
    assert (by["transfer_to_human_agents"].kind, by["transfer_to_human_agents"].effect) == ("handoff", "write")
    names = {c.name for c in res.environment.state_schema.collections}
    assert "handoffs" in names and not names & {"records", "thinks", "calculates", "to_human_agents"}
    state = copy.deepcopy(res.environment.sample_state)
    before = copy.deepcopy(state)
    assert run_direct(by["think"].source, "think", state, {"thought": "the customer has two rentals"}) == {"status": "noted"}
    assert state == before  # a thought changes nothing
    out = run_direct(by["transfer_to_human_agents"].source, "transfer_to_human_agents", state, {"summary": "wants a refund"})
    added = set(state["handoffs"]) - set(before["handoffs"])
    assert added == {out["handoff_id"]} and state["handoffs"][out["handoff_id"]]["summary"] == "wants a refund"
    assert {k: v for k, v in state.items() if k != "handoffs"} == {k: v for k, v in before.items() if k != "handoffs"}


@pytest.mark.parametrize("expression,value", [
    ("2 + 2", 4), ("(12 + 3) * 2", 30), ("3 * (4 - 1.5) / 2", 3.75), ("-2 ** 2", -4), ("2 ** -1", 0.5),
    ("2 ** 3 ** 2", 512), ("2^10", 1024), ("0.1 + 0.2", 0.3), ("7 % 3", 1), ("1e3 * 2", 2000), (" - ( -3 )", 3),
    ("100 - 10 * 3 + 4 / 2", 72), ("9 ** 0.5", 3),
])
def test_the_calculator_computes(synthesized, expression, value):
    _, res = synthesized
    calc = next(t for t in res.tools if t.name == "calculate")
    assert run_direct(calc.source, "calculate", {}, {"expression": expression}) == {"result": value}


@pytest.mark.parametrize("expression,why", [
    ("1 / 0", "division by zero"), ("2 +", "ends without a number"), ("((1)", "unbalanced"), ("1 2", "two numbers"),
    ("__import__('os').system('ls')", "unexpected"), ("2 ** 9999", "exponent"), ("10 ** 300 * 10 ** 300", "too large"),
    ("1e999", "too large"), ("", "arithmetic expression"), ("(" * 150 + "1" + ")" * 150, "nests too deeply"),
])
def test_the_calculator_refuses_what_is_not_arithmetic(synthesized, expression, why):
    _, res = synthesized
    calc = next(t for t in res.tools if t.name == "calculate")
    out = run_direct(calc.source, "calculate", {}, {"expression": expression})
    assert why in out["error"]


def test_a_task_calling_a_special_tool_is_refused():
    def code(name: str, kind: str, effect: str) -> ToolCode:
        return ToolCode(code_id=name, env_id="e", tool_id=name, name=name, source="", status="accepted", effect=effect, kind=kind)

    tools = {"get_bike": code("get_bike", "get", "read"), "think": code("think", "scratchpad", "read"),
             "transfer": code("transfer", "handoff", "write"), "rent_bike": code("rent_bike", "create", "write")}
    assert check_tool_kinds([ToolCall(name="get_bike", arguments={}), ToolCall(name="rent_bike", arguments={})], tools) is None
    assert "scratchpad" in check_tool_kinds([ToolCall(name="get_bike", arguments={}), ToolCall(name="think", arguments={})], tools)
    assert "handoff" in check_tool_kinds([ToolCall(name="transfer", arguments={})], tools)


def test_the_factory_makes_tasks_that_never_call_a_special_tool(tmp_path):
    from autoforge.pipeline import environment_yield, run_factory
    from autoforge.types import EnvironmentRecord, Task
    from autoforge.warehouse import read_records

    wh = str(tmp_path / "w.duckdb")
    run_factory(paths=[str(FIXTURE)], bundled=False, tasks_per_env=40, warehouse=wh)
    tasks = [t for t in read_records(wh, Task) if t.status == "verified"]
    assert len(tasks) >= 20
    for t in tasks:
        called = {c.name for c in t.gold_calls}
        assert not called & SPECIAL_TOOLS, (t.task_id, called)
        assert t.kind == "answer" or called & {"rent_bike", "cancel_rental", "update_customer_email"}
    (env,) = read_records(wh, EnvironmentRecord)
    assert env.n_write_tools == 3 and "transfer_to_human_agents" not in env.writes_unreachable  # a hand-off is no task's write
    (row,) = environment_yield(wh, ["kinds_bike_rental"])
    assert row["n_verified"] == len(tasks)
    # the tools stay in the environment: an agent may call them, in the sandbox
    from autoforge.types import ToolCode as TC

    tools = [t for t in read_records(wh, TC) if t.env_id == env.env_id and t.status == "accepted"]
    assert SPECIAL_TOOLS <= {t.name for t in tools}
    with Environment(tools, timeout_s=5) as rt:
        rt.reset(env.sample_state)
        h0 = rt.state_hash()
        assert rt.call("calculate", {"expression": "3 * 12.5 + 4"}).output == {"result": 41.5}
        assert rt.call("think", {"thought": "rent the cheaper bike"}).ok and rt.state_hash() == h0
        assert rt.call("transfer_to_human_agents", {"summary": "asks for a manager"}).ok and rt.state_hash() != h0


def test_the_llm_backend_uses_the_templates_for_tools_that_hold_no_state(synthesized):
    from test_synthesis_llm import SCHEMA, ScriptedLLM, reply

    from autoforge.settings import get_settings

    ingested, _ = synthesized
    specs = [s for s in ingested.specs if s.name in ("think", "calculate", "transfer_to_human_agents")]
    handoff = ('def transfer_to_human_agents(state, summary):\n'
               '    state.setdefault("users", {})["H1"] = {"user_id": "H1", "name": summary}\n'
               '    return {"ok": True}\n')
    llm = ScriptedLLM(SCHEMA, {"transfer_to_human_agents": [reply(handoff, "write", "users")]})
    res = synthesize_environment(ingested.toolsets[0], specs, client=llm, settings=get_settings().with_(llm_max_repairs=0))
    by = {t.name: t for t in res.tools}
    asked = {json.loads(m[-1]["content"])["tool"]["name"] for step, m in llm.calls if step == "tool_code"}
    assert asked == {"transfer_to_human_agents"}  # no LLM call for a thought or a calculation
    assert {n: (t.status, t.kind) for n, t in by.items()} == {
        "think": ("accepted", "scratchpad"), "calculate": ("accepted", "calculator"),
        "transfer_to_human_agents": ("accepted", "handoff")}  # the LLM's code, read as a hand-off: never in a task
    assert run_direct(by["calculate"].source, "calculate", {}, {"expression": "(1 + 2) * 3"}) == {"result": 9}
