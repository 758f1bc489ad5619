"""Offline tool templates on the mock shop: each template's behaviour, run as real checked code.

Calls go through ``run_direct`` (the checked source, in-process) for speed; one test runs the
same environment through the sandboxed runtime.
"""

from __future__ import annotations

import copy

import pytest
from test_synthesis_mockdomain import mock_specs, mock_toolset

from autoforge.envs.checks import output_fits
from autoforge.envs.runtime import Environment, run_direct
from autoforge.envs.synthesis import synthesize_environment
from autoforge.types import state_hash


@pytest.fixture(scope="module")
def env():
    return synthesize_environment(mock_toolset(), mock_specs())


@pytest.fixture
def state(env):
    return copy.deepcopy(env.environment.sample_state)


def call(env, state, name, **args):
    tool = next(t for t in env.tools if t.name == name)
    out = run_direct(tool.source, name, state, args)
    if isinstance(out, dict) and "error" not in out:
        assert output_fits(out, tool.output_schema) is None, (name, out)  # the declared output schema is true
    return out


def test_every_mock_tool_is_accepted_with_kind_collection_and_effect(env):
    assert env.environment.status == "ready" and env.environment.n_tools_accepted == 11
    by = {t.name: t for t in env.tools}
    assert (by["create_order"].kind, by["create_order"].collection, by["create_order"].effect) == ("create", "orders", "write")
    assert (by["list_orders"].kind, by["list_orders"].effect) == ("list", "read")
    assert by["find_user_id_by_email"].output_schema["properties"]["user_id"]["type"] == "string"
    assert env.rejections == []


def test_sample_state_is_realistic_and_consistent(env):
    st = env.environment.sample_state
    n = len(st["orders"])
    assert n == 5  # every one of the 5 order statuses appears once
    assert sorted(st["users"]) == [f"U{k:04d}" for k in range(1, n + 1)]
    user = st["users"]["U0001"]
    assert user["email"].endswith("@example.com") and " " in user["name"]
    assert all(o["user_id"] in st["users"] for o in st["orders"].values())  # references resolve
    statuses = {o["status"] for o in st["orders"].values()}
    assert statuses == {"pending", "processing", "shipped", "delivered", "cancelled"}  # statuses cycle through the enum
    assert all(isinstance(p["price"], float) for p in st["products"].values())


def test_lookup_by_field(env, state):
    email = state["users"]["U0002"]["email"]
    assert call(env, state, "find_user_id_by_email", email=email.upper()) == {"user_id": "U0002"}
    assert "error" in call(env, state, "find_user_id_by_email", email="nobody@example.com")


def test_get_by_id_and_unknown_id(env, state):
    assert call(env, state, "get_order_details", order_id="O0001")["order_id"] == "O0001"
    out = call(env, state, "get_order_details", order_id="O9999")
    assert out == {"error": "order O9999 not found"}


def test_list_with_equality_range_substring_and_limit(env, state):
    everyone = call(env, state, "list_orders", user_id="U0001")
    assert everyone["count"] == len(everyone["orders"]) >= 1
    assert all(o["user_id"] == "U0001" for o in everyone["orders"])
    state["orders"]["O0002"]["user_id"] = "U0001"
    both = call(env, state, "list_orders", user_id="U0001")["orders"]
    totals = sorted(o["total"] for o in both)
    assert len(both) == 2
    cheap = call(env, state, "list_orders", user_id="U0001", max_total=totals[0])["orders"]
    assert [o["total"] for o in cheap] == [totals[0]]
    dear = call(env, state, "list_orders", user_id="U0001", min_total=totals[1])["orders"]
    assert [o["total"] for o in dear] == [totals[1]]
    status = both[0]["status"]
    assert all(o["status"] == status for o in call(env, state, "list_orders", user_id="U0001", status=status)["orders"])
    assert call(env, state, "list_orders", user_id="U0001", limit=1)["count"] == 1
    assert "error" in call(env, state, "list_orders", user_id="U9999")  # an unknown reference is an error
    name = state["products"]["P0001"]["name"]
    found = call(env, state, "search_products", name_contains=name.split()[0].lower())["products"]
    assert "P0001" in [p["product_id"] for p in found]
    price = state["products"]["P0001"]["price"]
    assert all(p["price"] <= price for p in call(env, state, "search_products", max_price=price)["products"])


def test_create_derives_id_defaults_total_and_stock(env, state):
    stock = state["products"]["P0001"]["stock"]
    price = state["products"]["P0001"]["price"]
    out = call(env, state, "create_order", user_id="U0001", product_id="P0001", quantity=2)
    assert out["order_id"] == "O0006" and state["orders"]["O0006"] == out  # next_id after O0001..O0005
    assert out["status"] == "pending" and out["created_at"] == "2025-01-15T10:00:00"
    assert out["total"] == round(price * 2, 2)
    assert state["products"]["P0001"]["stock"] == stock - 2
    assert call(env, state, "create_order", user_id="U0002", product_id="P0001", quantity=1)["order_id"] == "O0007"
    before = state_hash(state)
    assert "error" in call(env, state, "create_order", user_id="U0001", product_id="P0404", quantity=1)
    assert "error" in call(env, state, "create_order", user_id="U0001", product_id="P0001", quantity=10_000)
    assert state_hash(state) == before  # a failed precondition changes nothing


def test_update_precondition_from_the_description(env, state):
    pending = next(k for k, o in state["orders"].items() if o["status"] == "pending")
    shipped = next(k for k, o in state["orders"].items() if o["status"] == "shipped")
    assert call(env, state, "update_order_address", order_id=pending, address="1 New St")["address"] == "1 New St"
    out = call(env, state, "update_order_address", order_id=shipped, address="1 New St")
    assert "error" in out and "pending" in out["error"]  # "Only pending orders can be changed."
    assert state["orders"][shipped]["address"] != "1 New St"


def test_cancel_moves_status_and_checks_allowed_statuses(env, state):
    pending = next(k for k, o in state["orders"].items() if o["status"] == "pending")
    shipped = next(k for k, o in state["orders"].items() if o["status"] == "shipped")
    out = call(env, state, "cancel_order", order_id=pending, reason="changed my mind")
    assert out["status"] == "cancelled" and state["orders"][pending]["reason"] == "changed my mind"
    assert "already cancelled" in call(env, state, "cancel_order", order_id=pending)["error"]
    err = call(env, state, "cancel_order", order_id=shipped)["error"]
    assert "pending, processing" in err and state["orders"][shipped]["status"] == "shipped"


def test_transfer_moves_amount_or_refuses_when_insufficient(env, state):
    a, b = state["users"]["U0001"]["balance"], state["users"]["U0002"]["balance"]
    out = call(env, state, "transfer_credit", from_user_id="U0001", to_user_id="U0002", amount=10.0)
    assert out["from_balance"] == round(a - 10, 2) and state["users"]["U0002"]["balance"] == round(b + 10, 2)
    before = state_hash(state)
    assert "insufficient" in call(env, state, "transfer_credit", from_user_id="U0001", to_user_id="U0002", amount=1e9)["error"]
    assert "error" in call(env, state, "transfer_credit", from_user_id="U0001", to_user_id="U0001", amount=1.0)
    assert state_hash(state) == before


def test_delete_and_link(env, state):
    assert call(env, state, "delete_product", product_id="P0002") == {"product_id": "P0002", "deleted": True}
    assert "P0002" not in state["products"]
    assert "error" in call(env, state, "delete_product", product_id="P0002")
    free = next(k for k in state["couriers"] if state["orders"]["O0001"]["courier_id"] != k)
    assert call(env, state, "assign_order_to_courier", order_id="O0001", courier_id=free)["courier_id"] == free
    assert "already assigned" in call(env, state, "assign_order_to_courier", order_id="O0001", courier_id=free)["error"]
    assert "not found" in call(env, state, "assign_order_to_courier", order_id="O0001", courier_id="C9999")["error"]


def test_runs_in_the_sandboxed_runtime(env):
    with Environment(env.tools, timeout_s=5) as rt:
        rt.reset(env.environment.sample_state)
        h0 = rt.state_hash()
        obs = rt.call("cancel_order", {"order_id": "O0001"})
        assert obs.ok and obs.output["status"] == "cancelled" and rt.state_hash() != h0
        bad = rt.call("cancel_order", {"order_id": "O0001"})
        assert not bad.ok and bad.kind == "tool_error" and "already" in bad.output["error"]
        assert rt.call("get_order_details", {}).kind == "invalid_arguments"  # schema checked before code runs
