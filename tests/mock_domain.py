"""A small hand-written mock domain (users and orders), the default fixture of runtime tests.

Written to the tool-code convention of :mod:`autoforge.envs.sandbox`, as the code generator
would emit it. Reads: ``get_user_id_by_email``, ``get_user``, ``get_order``, ``list_orders``.
Writes: ``cancel_order`` (precondition: the order is pending), ``create_order`` (derived id,
fixed clock), ``update_address``.
"""

from __future__ import annotations

from autoforge.types import (
    CollectionSpec,
    EnvironmentRecord,
    FieldSpec,
    StateSchema,
    ToolCode,
    content_id,
)

ENV_ID = "env_mock_shop"

SOURCES: dict[str, str] = {
    "get_user_id_by_email": '''
def get_user_id_by_email(state, email):
    """Find a user's id from their email address."""
    wanted = email.strip().lower()
    for user_id, user in state["users"].items():
        if user["email"].lower() == wanted:
            return {"user_id": user_id}
    return error(f"no user with email {email}")
''',
    "get_user": '''
def get_user(state, user_id):
    user = state["users"].get(user_id)
    if user is None:
        return error(f"user {user_id} not found")
    return copy(user)
''',
    "get_order": '''
def get_order(state, order_id):
    order = state["orders"].get(order_id)
    if order is None:
        return error(f"order {order_id} not found")
    return copy(order)
''',
    "list_orders": '''
def list_orders(state, user_id, status=None):
    if user_id not in state["users"]:
        return error(f"user {user_id} not found")
    found = [o for o in state["orders"].values()
             if o["user_id"] == user_id and (status is None or o["status"] == status)]
    return {"orders": sorted((copy(o) for o in found), key=lambda o: o["order_id"])}
''',
    "cancel_order": '''
CANCELLABLE = ("pending",)

def cancel_order(state, order_id, reason):
    order = state["orders"].get(order_id)
    if order is None:
        return error(f"order {order_id} not found")
    if order["status"] not in CANCELLABLE:
        return error(f"order {order_id} is {order['status']}; only pending orders can be cancelled")
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["updated_at"] = NOW
    return {"order_id": order_id, "status": "cancelled"}
''',
    "create_order": '''
import math

def create_order(state, user_id: str, item: str, quantity: int = 1, unit_price: float = 10.0) -> dict:
    if user_id not in state["users"]:
        return error(f"user {user_id} not found")
    order_id = next_id(state, "orders", "O")
    state["orders"][order_id] = {
        "order_id": order_id, "user_id": user_id, "item": item, "quantity": quantity,
        "total": math.floor(quantity * unit_price * 100) / 100, "status": "pending",
        "created_at": NOW, "ship_by": add_days(TODAY, 3),
    }
    return {"order_id": order_id}
''',
    "update_address": '''
def update_address(state, user_id, address):
    user = state["users"].get(user_id)
    if user is None:
        return error(f"user {user_id} not found")
    user["address"] = dict(address)
    return {"user_id": user_id, "address": user["address"]}
''',
}

_STR = {"type": "string"}
PARAMETERS: dict[str, dict] = {
    "get_user_id_by_email": {"type": "object", "properties": {"email": _STR}, "required": ["email"]},
    "get_user": {"type": "object", "properties": {"user_id": _STR}, "required": ["user_id"]},
    "get_order": {"type": "object", "properties": {"order_id": _STR}, "required": ["order_id"],
                  "additionalProperties": False},
    "list_orders": {"type": "object", "properties": {
        "user_id": _STR, "status": {"type": "string", "enum": ["pending", "shipped", "cancelled"]}},
        "required": ["user_id"]},
    "cancel_order": {"type": "object", "properties": {"order_id": _STR, "reason": _STR},
                     "required": ["order_id", "reason"], "additionalProperties": False},
    "create_order": {"type": "object", "properties": {
        "user_id": _STR, "item": _STR, "quantity": {"type": "integer", "minimum": 1},
        "unit_price": {"type": "number", "minimum": 0}}, "required": ["user_id", "item"]},
    "update_address": {"type": "object", "properties": {"user_id": _STR, "address": {
        "type": "object", "properties": {"street": _STR, "city": _STR}, "required": ["street", "city"]}},
        "required": ["user_id", "address"]},
}
EFFECTS = {"get_user_id_by_email": "read", "get_user": "read", "get_order": "read", "list_orders": "read",
           "cancel_order": "write", "create_order": "write", "update_address": "write"}


def tool_code(name: str, source: str, parameters: dict | None = None, *, status: str = "accepted",
              effect: str = "unknown", env_id: str = ENV_ID) -> ToolCode:
    """A ToolCode record for hand-written source (tests use it for attack code too)."""
    return ToolCode(code_id=content_id("code", env_id, name, source), env_id=env_id,
                    tool_id=content_id("tool", env_id, name), name=name, source=source,
                    status=status, effect=effect, parameters=parameters or {"type": "object"})


def mock_tools() -> list[ToolCode]:
    return [tool_code(n, s, PARAMETERS[n], effect=EFFECTS[n]) for n, s in SOURCES.items()]


def mock_state() -> dict:
    return {
        "users": {
            "U0001": {"user_id": "U0001", "name": "Ada Lovelace", "email": "ada@example.com",
                      "address": {"street": "1 Analytical St", "city": "London"}},
            "U0002": {"user_id": "U0002", "name": "Alan Turing", "email": "alan@example.com",
                      "address": {"street": "2 Bletchley Rd", "city": "Milton Keynes"}},
        },
        "orders": {
            "O0001": {"order_id": "O0001", "user_id": "U0001", "item": "notebook", "quantity": 2,
                      "total": 12.5, "status": "pending", "created_at": "2025-01-10T09:00:00"},
            "O0002": {"order_id": "O0002", "user_id": "U0001", "item": "pen", "quantity": 10,
                      "total": 8.0, "status": "shipped", "created_at": "2025-01-11T09:00:00"},
            "O0003": {"order_id": "O0003", "user_id": "U0002", "item": "lamp", "quantity": 1,
                      "total": 40.0, "status": "pending", "created_at": "2025-01-12T09:00:00"},
        },
    }


def mock_env_record() -> EnvironmentRecord:
    s = FieldSpec
    schema = StateSchema(collections=[
        CollectionSpec(name="users", entity="user", primary_key="user_id", id_prefix="U",
                       fields=[s(name="user_id"), s(name="name"), s(name="email"), s(name="address", type="object")]),
        CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O",
                       fields=[s(name="order_id"), s(name="user_id", ref="users"), s(name="item"),
                               s(name="quantity", type="integer"), s(name="total", type="number"),
                               s(name="status", enum=["pending", "shipped", "cancelled"])]),
    ])
    tools = mock_tools()
    return EnvironmentRecord(env_id=ENV_ID, name="mock_shop", toolset_id="toolset_mock_shop", backend="offline",
                             state_schema=schema, sample_state=mock_state(), status="ready",
                             n_tools=len(tools), n_tools_accepted=len(tools))


# A typical episode: (tool, arguments) — reads and writes mixed; used by the benchmark too.
EPISODE: list[tuple[str, dict]] = [
    ("get_user_id_by_email", {"email": "ada@example.com"}),
    ("list_orders", {"user_id": "U0001", "status": "pending"}),
    ("get_order", {"order_id": "O0001"}),
    ("cancel_order", {"order_id": "O0001", "reason": "ordered by mistake"}),
    ("create_order", {"user_id": "U0001", "item": "notebook", "quantity": 3, "unit_price": 4.5}),
    ("get_user", {"user_id": "U0001"}),
    ("update_address", {"user_id": "U0001", "address": {"street": "3 Difference Ave", "city": "London"}}),
    ("get_order", {"order_id": "O0004"}),
    ("cancel_order", {"order_id": "O0002", "reason": "too late"}),  # precondition fails: shipped
    ("list_orders", {"user_id": "U0002"}),
]
