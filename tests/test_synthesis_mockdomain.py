"""A small mock retail domain (users, orders, products) for the synthesis tests.

Hand-written ToolSpecs in the shape ingest produces; every synthesis test file imports
:func:`mock_specs` / :func:`mock_toolset`. The tests in this file check the schema reading.
"""

from __future__ import annotations

from autoforge.types import ToolSet, ToolSpec, content_id

ORDER_STATUS = ["pending", "processing", "shipped", "delivered", "cancelled"]
ORDER = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "user_id": {"type": "string"},
        "status": {"type": "string", "enum": ORDER_STATUS},
        "total": {"type": "number"},
        "address": {"type": "string"},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "product_id": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"}}}},
        "created_at": {"type": "string", "format": "date-time"},
    },
}
USER = {"type": "object", "properties": {
    "user_id": {"type": "string"}, "name": {"type": "string"}, "email": {"type": "string"},
    "balance": {"type": "number"}, "created_at": {"type": "string"}}}
PRODUCT = {"type": "object", "properties": {
    "product_id": {"type": "string"}, "name": {"type": "string"}, "category": {"type": "string", "enum": ["books", "toys", "garden"]},
    "price": {"type": "number"}, "stock": {"type": "integer"}}}


def obj(props: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": props, "required": required or []}


def spec(name: str, description: str, params: dict, required=None, output=None, effect="unknown", toolset="shop") -> ToolSpec:
    parameters = obj(params, required)
    return ToolSpec(tool_id=content_id("tool", toolset, name, parameters, output), toolset=toolset, name=name,
                    description=description, parameters=parameters, output_schema=output, effect=effect,
                    doc_id=content_id("doc", toolset))


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}


def mock_specs() -> list[ToolSpec]:
    return [
        spec("find_user_id_by_email", "Find a user's id from their email address.", {"email": S}, ["email"],
             obj({"user_id": S}), "read"),
        spec("get_user", "Get a user's profile.", {"user_id": S}, ["user_id"], USER, "read"),
        spec("get_order_details", "Get an order by id.", {"order_id": S}, ["order_id"], ORDER, "read"),
        spec("list_orders", "List a user's orders, optionally by status and total.",
             {"user_id": S, "status": {"type": "string", "enum": ORDER_STATUS}, "min_total": N, "max_total": N, "limit": I},
             ["user_id"], {"type": "object", "properties": {"orders": {"type": "array", "items": ORDER}}}, "read"),
        spec("search_products", "Search products by name, category and price.",
             {"name_contains": S, "category": {"type": "string", "enum": ["books", "toys", "garden"]}, "max_price": N},
             [], {"type": "array", "items": PRODUCT}, "read"),
        spec("create_order", "Place an order for a product.", {"user_id": S, "product_id": S, "quantity": I, "address": S},
             ["user_id", "product_id", "quantity"], ORDER, "write"),
        spec("update_order_address", "Change the shipping address. Only pending orders can be changed.",
             {"order_id": S, "address": S}, ["order_id", "address"], ORDER, "write"),
        spec("cancel_order", "Cancel an order. Only orders that are 'pending' or 'processing' can be cancelled.",
             {"order_id": S, "reason": S}, ["order_id"], ORDER, "write"),
        spec("transfer_credit", "Move store credit between two users; fails if the sender has insufficient balance.",
             {"from_user_id": S, "to_user_id": S, "amount": N}, ["from_user_id", "to_user_id", "amount"], None, "write"),
        spec("delete_product", "Remove a product from the catalogue.", {"product_id": S}, ["product_id"], None, "write"),
        spec("assign_order_to_courier", "Assign an order to a courier for delivery.", {"order_id": S, "courier_id": S},
             ["order_id", "courier_id"], ORDER, "write"),
    ]


def mock_toolset(specs: list[ToolSpec] | None = None) -> ToolSet:
    specs = specs or mock_specs()
    ids = sorted(s.tool_id for s in specs)
    return ToolSet(toolset_id=content_id("toolset", "shop", ids), name="shop", description="A small web shop.",
                   doc_ids=[specs[0].doc_id], tool_ids=ids, n_tools=len(specs))


# --------------------------------------------------------------------------- schema reading

import pytest  # noqa: E402

from autoforge.domain import words as nm  # noqa: E402
from autoforge.domain.entities import plan_tools  # noqa: E402
from autoforge.domain.ids import known_entities
from autoforge.domain.state import offline_state_schema
from autoforge.domain.tools import analyze_tool


def colls(schema):
    return {c.name: c for c in schema.collections}


def fields(coll):
    return {f.name: f for f in coll.fields}


def test_schema_collections_keys_refs_and_enums():
    schema = offline_state_schema("shop", mock_specs())
    cs = colls(schema)
    assert {"users", "orders", "products", "couriers"} <= set(cs)
    orders = cs["orders"]
    assert orders.entity == "order" and orders.primary_key == "order_id"
    of = fields(orders)
    assert of["user_id"].ref == "users" and of["courier_id"].ref == "couriers"
    assert of["status"].enum == ORDER_STATUS  # the documented enum is kept as is
    assert of["total"].type == "number" and of["items"].type == "array"
    assert of["created_at"].format == "date-time"
    assert fields(cs["users"])["email"].format == "email"
    assert fields(cs["products"])["category"].enum == ["books", "toys", "garden"]
    prefixes = [c.id_prefix for c in schema.collections]
    assert len(prefixes) == len(set(prefixes)) and cs["orders"].id_prefix == "O"


def test_tool_plans_read_verbs_entities_and_kinds():
    plans = plan_tools(mock_specs())
    want = {
        "find_user_id_by_email": ("lookup", "user"), "get_user": ("get", "user"), "get_order_details": ("get", "order"),
        "list_orders": ("list", "order"), "search_products": ("list", "product"), "create_order": ("create", "order"),
        "update_order_address": ("update", "order"), "cancel_order": ("status", "order"),
        "transfer_credit": ("amount", "user"), "delete_product": ("delete", "product"),
        "assign_order_to_courier": ("link", "order"),
    }
    assert {n: (p.kind, p.entity) for n, p in plans.items()} == want
    assert plans["find_user_id_by_email"].by_fields == ["email"] and plans["find_user_id_by_email"].returns_id
    assert plans["cancel_order"].target_status[0] == "cancelled"
    assert {p.name for p in plans.values() if p.effect == "read"} == {
        "find_user_id_by_email", "get_user", "get_order_details", "list_orders", "search_products"}


def test_schema_from_patterns_aliases_and_camel_case():
    """Documented id patterns set prefixes, and a role id with the same pattern is that entity."""
    E = {"type": "string", "pattern": "^EMP\\d{5}$"}
    specs = [
        spec("getEmployee", "Get an employee.", {"employee_id": E}, ["employee_id"],
             obj({"employee_id": E, "name": S, "manager_id": E}), "read", toolset="hr"),
        spec("listEmployees", "List employees of a manager.", {"manager_id": E}, [], None, "read", toolset="hr"),
        spec("open_account", "Open an account.", {"employee_id": E, "kind": {"type": "string", "enum": ["a", "b"]}},
             ["employee_id"], obj({"account_id": {"type": "string", "pattern": "^AC\\d{4}$"}}), "write", toolset="hr"),
    ]
    schema = offline_state_schema("hr", specs)
    cs = colls(schema)
    assert "managers" not in cs  # manager_id follows the employee pattern: a manager is an employee
    emp = cs["employees"]
    assert (emp.id_prefix, emp.id_width) == ("EMP", 5)
    assert fields(emp)["manager_id"].ref == "employees"
    assert cs["accounts"].id_prefix == "AC"
    assert plan_tools(specs)["getEmployee"].kind == "get"
    assert plan_tools(specs)["listEmployees"].kind == "list"


@pytest.mark.parametrize("word,plural_", [("order", "orders"), ("category", "categories"), ("address", "addresses"),
                                          ("status", "statuses"), ("person", "people"), ("order_item", "order_items"),
                                          ("day", "days"), ("box", "boxes")])
def test_plural_and_singular_round_trip(word, plural_):
    assert nm.plural(word) == plural_
    assert nm.singular(plural_) == word


def test_verbs_and_words():
    assert nm.words("getOrderDetails") == ["get", "order", "details"]
    assert nm.verb_of("check_in_guest") == ("checkin", ["guest"])
    known = known_entities(mock_specs())
    assert {"user", "order", "product", "courier"} <= known
    plan = analyze_tool(spec("book_flight", "Book a seat on a flight.", {"flight_id": S, "user_id": S}, ["flight_id", "user_id"]),
                        {"flight", "user"})
    assert (plan.kind, plan.entity, plan.other) == ("create", "booking", "flight")


def test_unknown_toolset_without_entities_still_gets_a_collection():
    schema = offline_state_schema("weather", [spec("ping", "Check the service.", {}, [], None, "read", toolset="weather")])
    assert schema.collections and schema.collections[0].primary_key.endswith("_id")
