"""Public tool and argument names that are not Python identifiers work end to end.

MCP/OpenAPI names such as ``orders.get``, ``get-order``, ``Orders/Cancel``, ``import``; parameters
named ``order-id``, ``from`` or ``state`` (the first parameter of every tool function). The code
gets deterministic Python names (ToolCode.function_name, ToolCode.arg_map); agents, the JSON
Schema and every observation keep the public names.
"""

from __future__ import annotations

import copy

import pytest
from test_synthesis_mockdomain import mock_specs, mock_toolset

from autoforge.envs import pynames
from autoforge.envs import prompts
from autoforge.envs.runtime import Environment, run_tool_direct
from autoforge.envs.sandbox import ArgBinder, load_tool
from autoforge.envs.static_checks import check_source, compile_tool
from autoforge.envs.smoke import smoke_arguments
from autoforge.envs.synthesis import synthesize_environment
from autoforge.types import ToolCode, ToolSpec, content_id

S = {"type": "string"}


@pytest.mark.parametrize("public, python", [
    ("orders.get", "orders_get"), ("get-order", "get_order"), ("Orders/Cancel", "orders_cancel"),
    ("import", "import_"), ("list", "list_"), ("state", "state_"), ("error", "error_"), ("open", "open_"),
    ("2fa-reset", "t_2fa_reset"), ("__init__", "init"), ("getOrder", "getOrder"), ("get_order", "get_order"),
    ("ünïcode", "n_code"), ("...", "tool"),
])
def test_function_names_are_deterministic_identifiers(public, python):
    assert pynames.function_name(public) == python == pynames.function_name(public)
    check_source(f"def {python}(state):\n    return {{}}\n", python)  # the sandbox accepts every one


def test_argument_names_are_injective_and_keep_usable_names():
    got = pynames.argument_names(["order-id", "order_id", "from", "state", "class", "type", "x y", "min", ""])
    assert got == {"order-id": "order_id_2", "order_id": "order_id", "from": "from_", "state": "state_",
                   "class": "class_", "type": "type", "x y": "x_y", "min": "min_", "": "arg"}
    assert len(set(got.values())) == len(got) and all(v.isidentifier() for v in got.values())


def _spec(name: str, params: dict, required: list[str], effect: str = "write", out: dict | None = None) -> ToolSpec:
    parameters = {"type": "object", "properties": params, "required": required}
    return ToolSpec(tool_id=content_id("tool", "shop", name, parameters), toolset="shop", name=name,
                    description=f"{name}.", parameters=parameters, output_schema=out, effect=effect, doc_id="doc_x")


ODD = [
    _spec("orders.get", {"order-id": S}, ["order-id"], "read"),
    _spec("Orders/Cancel", {"order_id": S, "from": S}, ["order_id"]),
    _spec("import", {"user_id": S, "state": S, "class": S}, ["user_id"]),
    _spec("list", {"user_id": S, "limit": {"type": "integer"}}, [], "read"),
]


@pytest.fixture(scope="module")
def odd_env():
    specs = mock_specs() + ODD
    return synthesize_environment(mock_toolset(specs), specs)


def test_odd_names_synthesize_and_record_their_python_names(odd_env):
    by = {t.name: t for t in odd_env.tools}
    for spec in ODD:
        assert by[spec.name].status == "accepted", by[spec.name].reason
    assert (by["orders.get"].function_name, by["orders.get"].arg_map) == ("orders_get", {"order-id": "order_id"})
    assert by["Orders/Cancel"].function_name == "orders_cancel" and by["Orders/Cancel"].arg_map == {"from": "from_"}
    assert by["import"].function_name == "import_"
    assert by["import"].arg_map == {"state": "state_", "class": "class_"}
    assert "def import_(state, user_id, state_=None, class_=None):" in by["import"].source
    assert by["list"].function_name == "list_" and by["orders.get"].parameters["properties"] == {"order-id": S}
    assert by["create_order"].function_name == "create_order" and by["create_order"].arg_map == {}


def test_runtime_maps_public_names_to_python_names(odd_env):
    state = odd_env.environment.sample_state
    order_id = sorted(state["orders"])[0]
    with Environment(odd_env.tools) as env:
        env.reset(state)
        assert {"orders.get", "Orders/Cancel", "import", "list"} <= set(env.tool_names)
        got = env.call("orders.get", {"order-id": order_id})
        assert got.ok and got.output["order_id"] == order_id
        # the Python name is not part of the public interface
        wrong = env.call("orders.get", {"order_id": order_id})
        assert wrong.kind == "invalid_arguments" and "order-id" in wrong.error
        user = sorted(state["users"])[0]
        done = env.call("import", {"user_id": user, "state": "WA", "class": "gold"})
        assert done.kind in ("ok", "tool_error"), done
        assert env.call("list", {"limit": 1}).ok
        assert env.call("orders_get", {"order-id": order_id}).kind == "unknown_tool"
    # direct (in-process) execution applies the same mapping
    tool = next(t for t in odd_env.tools if t.name == "orders.get")
    assert run_tool_direct(tool, copy.deepcopy(state), {"order-id": order_id})["order_id"] == order_id


def test_smoke_arguments_use_public_names(odd_env):
    tool = next(t for t in odd_env.tools if t.name == "orders.get")
    spec = next(s for s in ODD if s.name == "orders.get")
    env = odd_env.environment
    args = smoke_arguments(spec, env.sample_state, env.state_schema, tool.collection, tool.kind, arg_map=tool.arg_map)
    assert set(args) == {"order-id"} and args["order-id"] in env.sample_state["orders"]


def _binder(src: str, name: str, arg_map: dict) -> ArgBinder:
    return ArgBinder(load_tool(compile_tool(src, name), name), arg_map)


def test_arg_binder_renames_checks_in_public_names_and_passes_kwargs_through():
    b = _binder("def t(state, order_id, from_=None):\n    return 1\n", "t", {"order-id": "order_id", "from": "from_"})
    assert b.problem({"order-id": "O1"}) is None
    assert b.bind({"order-id": "O1", "from": "x"}) == {"order_id": "O1", "from_": "x"}
    assert "missing required argument(s) ['order-id']" in b.problem({"from": "x"})
    assert "unexpected argument(s) ['order_id']" in b.problem({"order_id": "O1"})
    kw = _binder("def t(state, order_id, **rest):\n    return rest\n", "t", {"order-id": "order_id", "from": "from_"})
    assert kw.bind({"order-id": "O1", "from": "x"}) == {"order_id": "O1", "from": "x"}  # unmapped: into **rest as given
    assert "unexpected" in kw.problem({"order-id": "O1", "order_id": "O2"})  # a Python name may not sneak in
    plain = _binder("def t(state, a, b=1):\n    return 1\n", "t", {})
    args = {"a": 1}
    assert plain.identity and plain.bind(args) is args  # the common case costs nothing


def test_an_llm_tool_with_a_sanitised_name_runs_in_the_sandbox():
    """Hand-written code in the LLM convention: ``def <function_name>(state, <python params>)``."""
    src = ("def orders_get(state, order_id, from_=None):\n"
           "    record = state.get('orders', {}).get(order_id)\n"
           "    if record is None:\n"
           "        return error('order ' + str(order_id) + ' not found')\n"
           "    return {'order_id': order_id, 'from': from_}\n")
    tool = ToolCode(code_id="c1", env_id="e1", tool_id="t1", name="orders.get", source=src, status="accepted",
                    parameters={"type": "object", "properties": {"order-id": S, "from": S}, "required": ["order-id"]},
                    function_name="orders_get", arg_map={"order-id": "order_id", "from": "from_"})
    with Environment([tool]) as env:
        env.reset({"orders": {"O1": {"order_id": "O1"}}})
        assert env.call("orders.get", {"order-id": "O1", "from": "web"}).output == {"order_id": "O1", "from": "web"}
        miss = env.call("orders.get", {"order-id": "O9"})
        assert miss.kind == "tool_error" and "O9" in miss.output["error"]


def test_tool_code_prompt_states_the_sandbox_convention():
    assert "def <function_name>(state, " in prompts.TOOL_CODE_CONTRACT
    for helper in ("NOW", "TODAY", "next_id", "add_days", "copy", "error("):
        assert helper in prompts.TOOL_CODE_CONTRACT
    assert "Imports only from: collections, copy, datetime" in prompts.TOOL_CODE_CONTRACT
    assert "state['_meta']" not in prompts.TOOL_CODE_CONTRACT and "no imports" not in prompts.TOOL_CODE_CONTRACT
    [_, user] = prompts.tool_code(ODD[2], {"collections": []})
    assert '"python":{"function_name":"import_","parameters":{"class":"class_","state":"state_","user_id":"user_id"}}' \
        in user["content"]
