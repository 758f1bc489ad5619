"""A hand-written mock shop domain (users, products, orders) for the DAG and task tests.

Tools follow the synthesis convention: ``def tool_name(state, **params)``, state is
``{collection: {id: record}}``, writes mutate state, a failed precondition returns
``{"error": ...}``. The graph, a gold DAG and its final state are known by hand (below).

``LocalEnvironment`` is a tiny in-process stand-in with the runtime's interface
(``reset``/``call``/``get_state``/``state_hash``) so these tests do not depend on the sandbox.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from autoforge.types import (ArgSource, CollectionSpec, DagNode, EnvironmentRecord, FieldSpec, StateSchema, TaskDag, ToolCode,
                             content_id, state_hash)

ENV_ID = "env_mock_shop"

SCHEMA = StateSchema(collections=[
    CollectionSpec(name="users", entity="user", primary_key="user_id", id_prefix="U", fields=[
        FieldSpec(name="user_id"), FieldSpec(name="name"), FieldSpec(name="email"),
        FieldSpec(name="tier", enum=["basic", "gold"])]),
    CollectionSpec(name="products", entity="product", primary_key="product_id", id_prefix="P", fields=[
        FieldSpec(name="product_id"), FieldSpec(name="name"), FieldSpec(name="price", type="number"),
        FieldSpec(name="stock", type="integer")]),
    CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O", fields=[
        FieldSpec(name="order_id"), FieldSpec(name="user_id", ref="users"), FieldSpec(name="product_id", ref="products"),
        FieldSpec(name="quantity", type="integer"), FieldSpec(name="total", type="number"),
        FieldSpec(name="status", enum=["pending", "shipped", "delivered", "cancelled"]),
        FieldSpec(name="delivery_date")]),
])

# The hand-checked initial state of the gold task: two similar users, U0001 has three orders.
STATE: dict[str, Any] = {
    "users": {
        "U0001": {"user_id": "U0001", "name": "Ava Chen", "email": "ava.chen@example.com", "tier": "gold"},
        "U0002": {"user_id": "U0002", "name": "Ava Cheng", "email": "ava.cheng@example.com", "tier": "basic"},
    },
    "products": {
        "P0001": {"product_id": "P0001", "name": "Blue Lamp", "price": 20.0, "stock": 5},
        "P0002": {"product_id": "P0002", "name": "Red Chair", "price": 75.5, "stock": 2},
    },
    "orders": {
        "O0001": {"order_id": "O0001", "user_id": "U0001", "product_id": "P0001", "quantity": 1, "total": 20.0,
                  "status": "pending", "delivery_date": "2025-03-01"},
        "O0002": {"order_id": "O0002", "user_id": "U0001", "product_id": "P0002", "quantity": 1, "total": 75.5,
                  "status": "pending", "delivery_date": "2025-03-04"},
        "O0003": {"order_id": "O0003", "user_id": "U0001", "product_id": "P0001", "quantity": 2, "total": 40.0,
                  "status": "shipped", "delivery_date": "2025-02-20"},
        "O0004": {"order_id": "O0004", "user_id": "U0002", "product_id": "P0002", "quantity": 2, "total": 151.0,
                  "status": "pending", "delivery_date": "2025-03-02"},
    },
}

_ORDER = {"type": "object", "properties": {
    "order_id": {"type": "string"}, "user_id": {"type": "string"}, "product_id": {"type": "string"},
    "quantity": {"type": "integer"}, "total": {"type": "number"},
    "status": {"type": "string", "enum": ["pending", "shipped", "delivered", "cancelled"]},
    "delivery_date": {"type": "string"}}}
_USER = {"type": "object", "properties": {"user_id": {"type": "string"}, "name": {"type": "string"},
                                          "email": {"type": "string"}, "tier": {"type": "string"}}}


def _obj(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required}


S = {"type": "string"}
_TOOLS: list[tuple[str, str, str, str, dict, dict, str]] = [
    ("find_user_id_by_email", "read", "lookup", "users", _obj({"email": S}, ["email"]),
     {"type": "object", "properties": {"user_id": S}}, '''
def find_user_id_by_email(state, email):
    for uid, u in sorted(state["users"].items()):
        if u["email"] == email:
            return {"user_id": uid}
    return {"error": "no user with email " + email}
'''),
    ("get_user", "read", "get", "users", _obj({"user_id": S}, ["user_id"]), _USER, '''
def get_user(state, user_id):
    if user_id not in state["users"]:
        return {"error": "no user " + user_id}
    return dict(state["users"][user_id])
'''),
    ("list_user_orders", "read", "list", "orders", _obj({"user_id": S}, ["user_id"]),
     {"type": "object", "properties": {"orders": {"type": "array", "items": _ORDER}}}, '''
def list_user_orders(state, user_id):
    if user_id not in state["users"]:
        return {"error": "no user " + user_id}
    return {"orders": [dict(o) for k, o in sorted(state["orders"].items()) if o["user_id"] == user_id]}
'''),
    ("get_order", "read", "get", "orders", _obj({"order_id": S}, ["order_id"]), _ORDER, '''
def get_order(state, order_id):
    if order_id not in state["orders"]:
        return {"error": "no order " + order_id}
    return dict(state["orders"][order_id])
'''),
    ("cancel_order", "write", "cancel", "orders", _obj({"order_id": S}, ["order_id"]), _ORDER, '''
def cancel_order(state, order_id):
    order = state["orders"].get(order_id)
    if order is None:
        return {"error": "no order " + order_id}
    if order["status"] != "pending":
        return {"error": "only pending orders can be cancelled"}
    order["status"] = "cancelled"
    return dict(order)
'''),
    ("update_delivery_date", "write", "update", "orders",
     _obj({"order_id": S, "delivery_date": S}, ["order_id", "delivery_date"]), _ORDER, '''
def update_delivery_date(state, order_id, delivery_date):
    order = state["orders"].get(order_id)
    if order is None:
        return {"error": "no order " + order_id}
    if order["status"] == "cancelled":
        return {"error": "order is cancelled"}
    order["delivery_date"] = delivery_date
    return dict(order)
'''),
    ("find_product_id_by_name", "read", "lookup", "products", _obj({"name": S}, ["name"]),
     {"type": "object", "properties": {"product_id": S}}, '''
def find_product_id_by_name(state, name):
    for pid, p in sorted(state["products"].items()):
        if p["name"] == name:
            return {"product_id": pid}
    return {"error": "no product named " + name}
'''),
    ("create_order", "write", "create", "orders",
     _obj({"user_id": S, "product_id": S, "quantity": {"type": "integer"}}, ["user_id", "product_id", "quantity"]), _ORDER, '''
def create_order(state, user_id, product_id, quantity):
    if user_id not in state["users"] or product_id not in state["products"]:
        return {"error": "unknown user or product"}
    product = state["products"][product_id]
    if product["stock"] < quantity:
        return {"error": "not enough stock"}
    product["stock"] = product["stock"] - quantity
    oid = "O" + str(len(state["orders"]) + 1).zfill(4)
    order = {"order_id": oid, "user_id": user_id, "product_id": product_id, "quantity": quantity,
             "total": round(product["price"] * quantity, 2), "status": "pending", "delivery_date": "2025-01-10"}
    state["orders"][oid] = order
    return dict(order)
'''),
]


def make_tools(env_id: str = ENV_ID) -> list[ToolCode]:
    out = []
    for name, effect, kind, coll, params, output, source in _TOOLS:
        src = source.strip() + "\n"
        out.append(ToolCode(code_id=content_id("code", env_id, name, src), env_id=env_id, tool_id=f"tool_{name}", name=name,
                            source=src, status="accepted", effect=effect, kind=kind, collection=coll, parameters=params,
                            output_schema=output))
    return out


def make_env() -> EnvironmentRecord:
    return EnvironmentRecord(env_id=ENV_ID, name="mock_shop", toolset_id="toolset_mock_shop", backend="offline",
                             state_schema=SCHEMA, sample_state=copy.deepcopy(STATE), status="ready", n_tools=len(_TOOLS),
                             n_tools_accepted=len(_TOOLS))


# Hand-known tool graph (keys_only binding): (src, dst) -> params bound.
_WRITES_AND_GETS = ["get_order", "cancel_order", "update_delivery_date", "create_order"]  # output a full order
EXPECTED_EDGES: set[tuple[str, str]] = (
    {("find_user_id_by_email", d) for d in ["get_user", "list_user_orders", "create_order"]}
    | {("get_user", d) for d in ["list_user_orders", "create_order"]}
    | {("list_user_orders", d) for d in ["get_user", "get_order", "cancel_order", "update_delivery_date", "create_order"]}
    | {(s, d) for s in _WRITES_AND_GETS for d in ["get_user", "list_user_orders"] + _WRITES_AND_GETS if s != d}
    | {("find_product_id_by_name", "create_order")}
)


def gold_dag() -> TaskDag:
    """'Cancel my most expensive order': find user by email -> list orders -> argmax total -> cancel."""
    nodes = [
        DagNode(node_id="n0", kind="tool", tool="find_user_id_by_email", args={"email": ArgSource(kind="user", fact="email")}),
        DagNode(node_id="n1", kind="tool", tool="list_user_orders", args={"user_id": ArgSource(kind="node", node="n0", path="user_id")}),
        DagNode(node_id="r0", kind="reasoning", op="argmax", params={"field": "total"},
                args={"items": ArgSource(kind="node", node="n1", path="orders")}),
        DagNode(node_id="n2", kind="tool", tool="cancel_order", args={"order_id": ArgSource(kind="node", node="r0", path="order_id")}),
    ]
    edges = [("n0", "n1"), ("n1", "r0"), ("r0", "n2")]
    return TaskDag(dag_id=content_id("dag", ENV_ID, [n.model_dump() for n in nodes], edges), env_id=ENV_ID, nodes=nodes,
                   edges=edges, n_requirements=1)


GOLD_FACTS = {"email": "ava.chen@example.com"}


def gold_final_state() -> dict:
    """By hand: U0001's orders total 20.0 / 75.5 / 40.0 -> O0002 (pending) is cancelled; nothing else moves."""
    s = copy.deepcopy(STATE)
    s["orders"]["O0002"]["status"] = "cancelled"
    return s


# --------------------------------------------------------------------------- a local environment


@dataclass
class Observation:
    ok: bool
    output: Any = None
    error: str | None = None
    kind: str = "ok"


class LocalEnvironment:
    """In-process executor with the runtime's interface (tests only: no sandbox limits)."""

    def __init__(self, tools: list[ToolCode], timeout_s: float | None = None, memory_mb: int | None = None):
        self.fns = {}
        for t in tools:
            ns: dict[str, Any] = {}
            exec(compile(t.source, f"<tool {t.name}>", "exec"), ns)  # noqa: S102 - hand-written test code
            self.fns[t.name] = ns[t.name]
        self.state: dict = {}

    def reset(self, state: dict) -> None:
        self.state = copy.deepcopy(state)

    def call(self, name: str, arguments: dict) -> Observation:
        if name not in self.fns:
            return Observation(ok=False, error=f"unknown tool {name}", kind="unknown_tool")
        try:
            out = self.fns[name](self.state, **arguments)
        except Exception as exc:  # noqa: BLE001
            return Observation(ok=False, error=repr(exc), kind="exception")
        if isinstance(out, dict) and "error" in out:
            return Observation(ok=False, output=out, error=str(out["error"]), kind="tool_error")
        return Observation(ok=True, output=out)

    def get_state(self) -> dict:
        return copy.deepcopy(self.state)

    def state_hash(self) -> str:
        return state_hash(self.state)
