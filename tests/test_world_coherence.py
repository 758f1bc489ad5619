"""One coherent world from plain docs (issue 32): links both ways, derived numbers, ordered dates,
and writes that change exactly what their doc says.

Each doc form is tested in several phrasings on small tool sets written here; the end-to-end test
runs the factory on a plain doc ("Returns the customer with their orders") and checks the worlds
agree on both sides and that tasks reach the order writes.
"""

from __future__ import annotations

import copy
import json
import random

import pytest

from autoforge.domain.coherence import cohere, schema_links
from autoforge.domain.tools import analyze_tool
from autoforge.domain.world_checks import state_findings
from autoforge.envs.runtime import run_direct
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, ToolSpec


def _tool(name, description, props, required=None):
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": required or list(props)}}


S = {"type": "string"}


def _env(tmp_path, name, tools):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(tools))
    res = ingest_paths([folder])
    assert not res.errors, res.errors
    return synthesize_environment(res.toolsets[0], res.specs)


def _call(env, state, name, **args):
    tool = next(t for t in env.tools if t.name == name)
    return run_direct(tool.source, tool.function_name or name, state, {(tool.arg_map or {}).get(k, k): v for k, v in args.items()})


def _agree(schema: StateSchema, state: dict) -> None:
    """Every reference resolves and each listing is exactly the children pointing at its parent."""
    by = {c.name: c for c in schema.collections}
    for link in schema_links(schema):
        parents, children = state[link.parent], state[link.child]
        for rec in children.values():
            assert rec[link.back] is None or str(rec[link.back]) in parents, (link, rec)
        if link.listing:
            pk = by[link.child].primary_key
            for pkey, prec in parents.items():
                mine = sorted(r[pk] for r in children.values() if str(r.get(link.back)) == pkey)
                assert sorted(prec[link.listing]) == mine, (link, pkey, prec[link.listing], mine)


# --------------------------------------------------------------------------- 1. links both ways

PERSON_FORMS = [
    ("user", "order", "Get a user. Returns the user's profile with their orders."),
    ("customer", "reservation", "Look up a customer. Returns the customer with their reservations."),
    ("member", "loan", "Fetch a member. Returns the member's name, email and the loans they hold."),
]


@pytest.mark.parametrize("person,child,sentence", PERSON_FORMS)
def test_a_persons_records_name_their_person_and_both_sides_agree(tmp_path, person, child, sentence):
    env = _env(tmp_path, f"{person}_set", [
        _tool(f"get_{person}", sentence, {f"{person}_id": S}),
        _tool(f"get_{child}", f"Get one {child} by id. Returns the {child} with its status.", {f"{child}_id": S}),
        _tool(f"cancel_{child}", f"Cancel a {child}.", {f"{child}_id": S}),
    ])
    schema = env.environment.state_schema
    cols = {c.name: {f.name: f for f in c.fields} for c in schema.collections}
    assert cols[f"{person}s"][f"{child}_ids"].ref == f"{child}s"
    assert cols[f"{child}s"][f"{person}_id"].ref == f"{person}s"  # the other direction, from the same link
    assert any(l.parent == f"{person}s" and l.child == f"{child}s" and l.listing == f"{child}_ids" for l in schema_links(schema))
    _agree(schema, env.environment.sample_state)


@pytest.mark.parametrize("sentence", [
    "Get an order. Returns the order with all of its items and its total.",
    "Fetch an order. Returns the order's status, total and the items it contains.",
])
def test_parts_no_tool_is_about_belong_to_the_record_listing_them(tmp_path, sentence):
    env = _env(tmp_path, "orders_items", [
        _tool("get_order", sentence, {"order_id": S}),
        _tool("return_order_items", "Return some items of a delivered order.",
              {"order_id": S, "item_ids": {"type": "array", "items": S}}),
    ])
    cols = {c.name: {f.name: f for f in c.fields} for c in env.environment.state_schema.collections}
    assert cols["orders"]["item_ids"].ref == "items" and cols["items"]["order_id"].ref == "orders"
    _agree(env.environment.state_schema, env.environment.sample_state)


def test_records_that_stand_on_their_own_stay_many_to_many(tmp_path):
    """The books an order contains are searched and fetched by themselves: no ``order_id`` on a book."""
    env = _env(tmp_path, "books", [
        _tool("search_books", "Search books. Returns the matching books, each with its book_id and title.", {"query": S}),
        _tool("get_book", "Get a book. Returns the book with its title and price.", {"book_id": S}),
        _tool("get_order", "Get an order. Returns the order with its status and the books it contains.", {"order_id": S}),
        _tool("cancel_order", "Cancel an order.", {"order_id": S}),
    ])
    cols = {c.name: {f.name: f for f in c.fields} for c in env.environment.state_schema.collections}
    assert cols["orders"]["book_ids"].ref == "books" and "order_id" not in cols["books"]


def test_a_create_and_a_delete_keep_the_parents_list(tmp_path):
    env = _env(tmp_path, "notes", [
        _tool("get_user", "Get a user. Returns the user with their notes.", {"user_id": S}),
        _tool("create_note", "Create a note for a user.", {"user_id": S, "text": S}),
        _tool("delete_note", "Delete a note.", {"note_id": S}),
    ])
    state = copy.deepcopy(env.environment.sample_state)
    user = sorted(state["users"])[0]
    new = _call(env, state, "create_note", user_id=user, text="call back")
    assert new["note_id"] in state["users"][user]["note_ids"]
    assert new["note_id"] in _call(env, state, "get_user", user_id=user)["note_ids"]  # the read shows it
    _agree(env.environment.state_schema, state)
    gone = state["users"][user]["note_ids"][0]
    assert _call(env, state, "delete_note", note_id=gone)["deleted"] is True
    assert gone not in state["users"][user]["note_ids"]
    _agree(env.environment.state_schema, state)
    state["notes"][new["note_id"]]["user_id"] = sorted(state["users"])[1]  # moved by hand: the read follows
    assert new["note_id"] not in _call(env, state, "get_user", user_id=user)["note_ids"]


# --------------------------------------------------------------------------- 2. derived numbers and dates


def _coll(name, entity, *fields):
    return CollectionSpec(name=name, entity=entity, primary_key=f"{entity}_id", id_prefix=entity[0].upper(),
                          fields=[FieldSpec(name=f"{entity}_id")] + [FieldSpec(name=n, type=t, ref=r) for n, t, r in fields])


def test_a_total_is_the_sum_of_its_priced_items_and_counts_count():
    schema = StateSchema(collections=[_coll("orders", "order", ("total", "number", None), ("items", "array", None),
                                            ("item_count", "integer", None))])
    state = {"orders": {"O1": {"order_id": "O1", "total": 5.0, "item_count": 7, "items": [
        {"name": "mug", "price": 4.5, "quantity": 2}, {"name": "pen", "unit_price": 1.25, "qty": 4}]}}}
    rec = cohere(state, schema)["orders"]["O1"]
    assert rec["total"] == 14.0 and rec["item_count"] == 2


def test_children_in_their_own_collection_give_the_parents_total_and_count():
    schema = StateSchema(collections=[
        _coll("orders", "order", ("total_amount", "number", None), ("num_lines", "integer", None)),
        _coll("lines", "line", ("order_id", "string", "orders"), ("price", "number", None), ("quantity", "integer", None))])
    state = {"orders": {"O1": {"order_id": "O1", "total_amount": 1.0, "num_lines": 0}},
             "lines": {"L1": {"line_id": "L1", "order_id": "O1", "price": 10.0, "quantity": 3},
                       "L2": {"line_id": "L2", "order_id": "O1", "price": 2.5, "quantity": 2},
                       "L3": {"line_id": "L3", "order_id": "O9", "price": 1.0, "quantity": 1}}}  # dangling: repointed
    cohere(state, schema)
    assert state["lines"]["L3"]["order_id"] == "O1"
    assert state["orders"]["O1"]["total_amount"] == 36.0 and state["orders"]["O1"]["num_lines"] == 3


def test_balances_and_stock_are_never_negative():
    schema = StateSchema(collections=[_coll("accounts", "account", ("balance", "number", None), ("stock_level", "integer", None),
                                            ("temperature", "number", None))])
    state = {"accounts": {"A1": {"account_id": "A1", "balance": -40.5, "stock_level": -3, "temperature": -4.0}}}
    rec = cohere(state, schema)["accounts"]["A1"]
    assert rec["balance"] == 40.5 and rec["stock_level"] == 3 and rec["temperature"] == -4.0


@pytest.mark.parametrize("first,later", [
    ("created_at", "updated_at"), ("booking_date", "departure_date"), ("placed_on", "delivered_on"),
    ("registered_at", "closed_at"), ("created_date", "due_date")])
def test_dates_follow_the_life_of_a_record(first, later):
    schema = StateSchema(collections=[_coll("things", "thing", (first, "string", None), (later, "string", None))])
    state = {"things": {"T1": {"thing_id": "T1", first: "2025-03-10T09:00:00", later: "2025-01-02T08:00:00"}}}
    rec = cohere(state, schema)["things"]["T1"]
    assert rec[later][:10] > rec[first][:10] and rec[later][10:] == "T08:00:00"


def test_birth_dates_lie_in_the_past():
    schema = StateSchema(collections=[_coll("patients", "patient", ("date_of_birth", "string", None))])
    state = {"patients": {"P1": {"patient_id": "P1", "date_of_birth": "2025-06-01"}}}
    assert cohere(state, schema)["patients"]["P1"]["date_of_birth"] < "2025-01-15"


# --------------------------------------------------------------------------- 2b. ids inside nested values

def _nested_found(schema, state):
    return [f for f in state_findings(schema, state) if f.kind == "nested_reference"]


def test_nested_items_name_records_of_their_collection():
    schema = StateSchema(collections=[
        _coll("restaurants", "restaurant", ("items", "array", None)),
        _coll("menu_items", "menu_item", ("price", "number", None))])
    state = {"restaurants": {"R1": {"restaurant_id": "R1", "items": [{"menu_item_id": "MI0008", "qty": 1},
                                                                     {"menu_item_id": "M1", "qty": 2}]}},
             "menu_items": {"M1": {"menu_item_id": "M1", "price": 3.0}, "M2": {"menu_item_id": "M2", "price": 4.0}}}
    assert _nested_found(schema, state)
    cohere(state, schema)
    items = state["restaurants"]["R1"]["items"]
    assert items[0]["menu_item_id"] in ("M1", "M2") and items[1]["menu_item_id"] == "M1"  # a real one is kept
    assert _nested_found(schema, state) == []


def test_nested_ids_of_the_records_own_collection_name_other_records_in_a_list():
    schema = StateSchema(collections=[_coll("flights", "flight", ("itineraries", "array", None))])
    state = {"flights": {k: {"flight_id": k, "itineraries": [{"flights": [{"flight_id": "F0006"}, {"flight_id": "F0009"}]}]}
                         for k in ("F1", "F2")}}
    cohere(state, schema)
    legs = [leg["flight_id"] for leg in state["flights"]["F1"]["itineraries"][0]["flights"]]
    assert legs == ["F1", "F2"] and _nested_found(schema, state) == []


def test_a_persons_nested_payment_methods_are_their_own():
    schema = StateSchema(collections=[
        _coll("users", "user", ("payment_methods", "array", None)),
        _coll("payment_methods", "payment_method", ("user_id", "string", "users"))])
    state = {"users": {"U1": {"user_id": "U1", "payment_methods": [{"payment_method_id": "PM0009", "source": "card"}]},
                       "U2": {"user_id": "U2", "payment_methods": [{"payment_method_id": "PM0009", "source": "card"}]}},
             "payment_methods": {"P1": {"payment_method_id": "P1", "user_id": "U2"},
                                 "P2": {"payment_method_id": "P2", "user_id": "U1"}}}
    cohere(state, schema)
    assert state["users"]["U1"]["payment_methods"][0]["payment_method_id"] == "P2"
    assert state["users"]["U2"]["payment_methods"][0]["payment_method_id"] == "P1"


def test_a_nested_object_with_the_records_own_key_names_the_record():
    schema = StateSchema(collections=[_coll("users", "user", ("profile", "object", None))])
    state = {"users": {k: {"user_id": k, "profile": {"user_id": "Blue Orbit", "bio": "hi"}} for k in ("U1", "U2")}}
    cohere(state, schema)
    assert [r["profile"]["user_id"] for r in state["users"].values()] == ["U1", "U2"]


def test_a_name_where_a_nested_reference_belongs_becomes_an_id():
    schema = StateSchema(collections=[
        _coll("users", "user", ("name", "string", None)),
        _coll("messages", "message", ("receiver_id", "string", "users"), ("results", "array", None))])
    state = {"users": {"U1": {"user_id": "U1", "name": "Ava"}, "U2": {"user_id": "U2", "name": "Liam"}},
             "messages": {"M1": {"message_id": "M1", "receiver_id": "U2", "results": [{"receiver_id": "Urban Beacon"}]}}}
    cohere(state, schema)
    assert state["messages"]["M1"]["results"][0]["receiver_id"] in ("U1", "U2")
    assert _nested_found(schema, state) == []


def test_integer_ids_stay_integers_and_a_bare_nested_id_is_left_alone():
    schema = StateSchema(collections=[
        CollectionSpec(name="pets", entity="pet", primary_key="pet_id", id_prefix="", id_type="integer", fields=[
            FieldSpec(name="pet_id", type="integer"), FieldSpec(name="tags", type="array")])])
    state = {"pets": {"1": {"pet_id": 1, "tags": [{"id": 99, "pet_id": 42}]}, "2": {"pet_id": 2, "tags": []}}}
    cohere(state, schema)
    assert state["pets"]["1"]["tags"] == [{"id": 99, "pet_id": 1}]


@pytest.mark.parametrize("description", [
    "A dictionary keyed by booking_id where each value contains the booking details.",
    "The bookings, indexed by the booking ID.",
    "A map from booking_id to the booking's details.",
])
def test_an_output_keyed_by_an_id_is_a_mapping_of_those_records(tmp_path, description):
    details = {"travel_date": {"type": "string"}, "travel_cost": {"type": "number"}}
    env = _env(tmp_path, "trips", [
        {**_tool("book_trip", "Book a trip.", {"travel_date": S}),
         "output_schema": {"type": "object", "properties": {
             "booking_id": S, "booking_history": {"type": "object", "description": "The booking history.",
                                                  "properties": {"booking_id": S, **details}}}}},
        {**_tool("get_booking_history", "Retrieve all booking history.", {}),
         "output_schema": {"type": "object", "properties": {
             "booking_history": {"type": "object", "description": description, "properties": details}}}},
        _tool("cancel_booking", "Cancel a booking.", {"booking_id": S}),
    ])
    cols = {c.name: {f.name for f in c.fields} for c in env.environment.state_schema.collections}
    assert {"booking_id", "travel_date", "travel_cost"} <= cols["bookings"]
    assert "booking_history" not in cols["bookings"]  # the history is the bookings, not a field of one


def test_an_object_of_additional_properties_is_a_mapping():
    from autoforge.domain.outputs import keyed_by, keyed_values
    mapping = {"type": "object", "additionalProperties": {"type": "object", "properties": {"price": {"type": "number"}}}}
    assert keyed_by(mapping) == "" and keyed_values(mapping) is mapping["additionalProperties"]
    assert keyed_by({"type": "object", "description": "The booking history.", "properties": {}}) is None


# --------------------------------------------------------------------------- 3. writes do what the doc says


def _plan(name, params, known, desc=""):
    spec = ToolSpec(tool_id=f"t_{name}", toolset="t", doc_id="d", name=name, description=desc,
                    parameters={"type": "object", "properties": params}, effect="write")
    return analyze_tool(spec, known)


@pytest.mark.parametrize("name,params,owner,hint", [
    ("add_lesson_credits", {"student_id": S, "credits": {"type": "integer"}}, "student", "lesson_credits"),
    ("grant_points", {"member_id": S, "points": {"type": "integer"}}, "member", "points"),
    ("add_funds", {"wallet_id": S, "amount": {"type": "number"}}, "wallet", "funds"),
    ("add_credits_to_student", {"student_id": S, "credits": {"type": "integer"}}, "student", "credits"),
])
def test_adding_an_amount_adds_to_the_record_not_a_new_record(name, params, owner, hint):
    plan = _plan(name, params, {"student", "lesson", "member", "wallet"})
    assert (plan.kind, plan.entity, plan.field_hint) == ("amount", owner, hint)


def test_adding_a_thing_is_still_a_create():
    assert _plan("add_pet", {"name": S}, {"pet"}).kind == "create"
    assert _plan("add_item", {"order_id": S, "quantity": {"type": "integer"}}, {"order", "item"}).kind == "create"


@pytest.mark.parametrize("name,params,holder,role", [
    ("setPreferredLocker", {"recipientId": S, "lockerId": S}, "recipient", "preferred_locker"),
    ("set_default_payment_method", {"user_id": S, "payment_method_id": S}, "user", "default_payment_method"),
    ("change_home_branch", {"member_id": S, "branch_id": S}, "member", "home_branch"),
])
def test_a_role_named_reference_is_set_on_its_holder(name, params, holder, role):
    plan = _plan(name, params, {"recipient", "locker", "user", "payment_method", "member", "branch"})
    assert (plan.kind, plan.entity, plan.field_hint) == ("update", holder, role)


def test_add_credits_and_preferred_locker_change_the_right_record(tmp_path):
    env = _env(tmp_path, "mixed", [
        _tool("get_student", "Get a student. Returns the student's name and lesson credits.", {"student_id": S}),
        _tool("add_lesson_credits", "Add prepaid lesson credits to a student's account.",
              {"student_id": S, "credits": {"type": "integer", "minimum": 1}}),
        _tool("get_recipient", "Get a recipient. Returns the recipient's name and preferred locker.", {"recipient_id": S}),
        _tool("get_locker", "Get a locker. Returns the locker's address.", {"locker_id": S}),
        _tool("set_preferred_locker", "Save a recipient's preferred locker.", {"recipient_id": S, "locker_id": S}),
    ])
    state = copy.deepcopy(env.environment.sample_state)
    sid = sorted(state["students"])[0]
    before = state["students"][sid]["lesson_credits"]
    _call(env, state, "add_lesson_credits", student_id=sid, credits=3)
    assert state["students"][sid]["lesson_credits"] == before + 3 and "lessons" not in state
    rid, lockers = sorted(state["recipients"])[0], copy.deepcopy(state["lockers"])
    lid = sorted(state["lockers"])[-1]
    _call(env, state, "set_preferred_locker", recipient_id=rid, locker_id=lid)
    assert state["recipients"][rid]["preferred_locker_id"] == lid and state["lockers"] == lockers


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    return _env(tmp_path_factory.mktemp("shop"), "shop", [
        _tool("get_user_details", "Get a user. Returns the user's profile with their orders.", {"user_id": S}),
        _tool("get_order_details", "Get an order. Returns the order with all of its items, its total and its payment method.",
              {"order_id": S}),
        _tool("modify_pending_order_items", "Modify the items of a pending order.",
              {"order_id": S, "item_ids": {"type": "array", "items": S}, "new_item_ids": {"type": "array", "items": S}}),
        _tool("return_delivered_order_items", "Return some items of a delivered order; the refund goes to the payment method.",
              {"order_id": S, "item_ids": {"type": "array", "items": S}, "payment_method_id": S}),
        _tool("update_shipping_address", "Update the shipping address of an order.",
              {"order_id": S, "shipping_address": {"type": "object", "properties": {"street": S, "city": S, "zip": S}}},
              ["order_id", "shipping_address"]),
        _tool("enable_roaming", "Enable roaming on a user's line.", {"user_id": S}),
    ])


def _order_with(state, status):
    oid = sorted(state["orders"])[0]
    state["orders"][oid]["status"] = status
    state["orders"][oid]["item_ids"] = ["I0001", "I0002", "I0003"]
    for i in ("I0001", "I0002", "I0003"):
        state["items"].setdefault(i, {"item_id": i, "order_id": oid})
    return oid


def test_an_item_level_update_swaps_only_the_named_items(shop):
    state = copy.deepcopy(shop.environment.sample_state)
    status = next(s for s in next(f.enum for c in shop.environment.state_schema.collections if c.name == "orders"
                                  for f in c.fields if f.name == "status") if s == "pending")
    oid = _order_with(state, status)
    out = _call(shop, state, "modify_pending_order_items", order_id=oid, item_ids=["I0002"], new_item_ids=["I0009"])
    assert "error" not in out and state["orders"][oid]["item_ids"] == ["I0001", "I0009", "I0003"]
    out = _call(shop, state, "modify_pending_order_items", order_id=oid, item_ids=["I0077"], new_item_ids=["I0008"])
    assert "error" in out and state["orders"][oid]["item_ids"] == ["I0001", "I0009", "I0003"]


def test_a_return_keeps_the_orders_payment_method_and_items(shop):
    state = copy.deepcopy(shop.environment.sample_state)
    oid = _order_with(state, "delivered")
    before = copy.deepcopy(state["orders"][oid])
    pm = sorted(state["payment_methods"])[-1]
    out = _call(shop, state, "return_delivered_order_items", order_id=oid, item_ids=["I0001"], payment_method_id=pm)
    rec = state["orders"][oid]
    assert "error" not in out and rec["status"] == "returned"
    assert rec["payment_method"] == before["payment_method"] and rec["item_ids"] == before["item_ids"]
    assert {k: v for k, v in rec.items() if k in before} == {**before, "status": "returned"}  # nothing else rewritten
    assert rec["return_payment_method_id"] == pm and rec["return_item_ids"] == ["I0001"]


def test_an_update_merges_into_the_held_object(shop):
    state = copy.deepcopy(shop.environment.sample_state)
    oid = sorted(state["orders"])[0]
    state["orders"][oid]["shipping_address"] = {"street": "1 Main St", "city": "Austin", "zip": "73301", "country": "US"}
    _call(shop, state, "update_shipping_address", order_id=oid, shipping_address={"street": "9 Elm Rd"})
    assert state["orders"][oid]["shipping_address"] == {"street": "9 Elm Rd", "city": "Austin", "zip": "73301", "country": "US"}


def test_a_flag_switch_sets_its_own_flag_not_the_status(shop):
    users = next(c for c in shop.environment.state_schema.collections if c.name == "users")
    assert any(f.name == "roaming_enabled" and f.type == "boolean" for f in users.fields)
    state = copy.deepcopy(shop.environment.sample_state)
    uid = sorted(state["users"])[0]
    state["users"][uid]["roaming_enabled"] = False
    before = copy.deepcopy(state["users"][uid])
    _call(shop, state, "enable_roaming", user_id=uid)
    assert state["users"][uid] == {**before, "roaming_enabled": True}


# --------------------------------------------------------------------------- end to end


def test_customer_with_their_orders_gives_agreeing_worlds_and_order_writes(tmp_path):
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.tasks.instantiate import make_world
    from autoforge.types import EnvironmentRecord, Task, ToolCode
    from autoforge.warehouse import apply_migrations, read_records

    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps([
        _tool("find_customer", "Find a customer by email. Returns the customer's id and name.", {"email": S}),
        _tool("get_customer", "Get a customer. Returns the customer with their orders.", {"customer_id": S}),
        _tool("get_order", "Get an order. Returns the order with its status, total and delivery address.", {"order_id": S}),
        _tool("cancel_order", "Cancel an order. Only pending orders can be cancelled.", {"order_id": S}),
        _tool("update_delivery_address", "Change the delivery address of a pending order.", {"order_id": S, "delivery_address": S}),
    ]))
    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh)
    run_factory(FactoryParams(paths=[str(folder)], bundled=False, seed=0, tasks_per_env=30, warehouse=wh))
    env = read_records(wh, EnvironmentRecord)[0]
    _agree(env.state_schema, env.sample_state)
    for seed in range(3):
        _agree(env.state_schema, make_world(env, random.Random(seed)))
    writes = {t.name for t in read_records(wh, ToolCode) if t.effect == "write"}
    verified = [t for t in read_records(wh, Task) if t.status == "verified"]
    used = {c.name for t in verified for c in t.gold_calls} & writes
    assert used == {"cancel_order", "update_delivery_address"}, used


CART = [
    _tool("find_customer", "Find a customer by email. Returns the customer's id and name.", {"email": S}),
    _tool("get_customer", "Get a customer. Returns the customer with their orders.", {"customer_id": S}),
    _tool("get_order", "Get an order. Returns the order with its items (each with item_id, price and quantity), "
          "its status and its total.", {"order_id": S}),
    _tool("update_item_quantity", "Update the quantity of an item in a pending order.",
          {"order_id": S, "item_id": S, "quantity": {"type": "integer", "minimum": 1}}),
    _tool("cancel_order", "Cancel an order. Only pending orders can be cancelled.", {"order_id": S}),
]


def test_an_item_update_changes_the_item_where_it_is_and_never_moves_it(tmp_path):
    env = _env(tmp_path, "cart", CART)
    state = copy.deepcopy(env.environment.sample_state)
    iid = sorted(state["items"])[0]
    home = state["items"][iid]["order_id"]
    other = next(o for o in sorted(state["orders"]) if o != home)
    assert "error" in _call(env, state, "update_item_quantity", order_id=other, item_id=iid, quantity=5)
    assert "error" not in _call(env, state, "update_item_quantity", order_id=home, item_id=iid, quantity=5)
    assert state["items"][iid] == {**env.environment.sample_state["items"][iid], "quantity": 5}


def test_tasks_reach_an_item_update_with_the_items_own_order(tmp_path):
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.types import EnvironmentRecord, Task
    from autoforge.warehouse import apply_migrations, read_records

    folder = tmp_path / "cart"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(CART))
    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh)
    run_factory(FactoryParams(paths=[str(folder)], bundled=False, seed=0, tasks_per_env=20, warehouse=wh))
    verified = [t for t in read_records(wh, Task) if t.status == "verified"]
    assert {c.name for t in verified for c in t.gold_calls} >= {"update_item_quantity", "cancel_order"}
    updates = [(t, c) for t in verified for c in t.gold_calls if c.name == "update_item_quantity"]
    assert updates
    for t, call in updates:  # the item's own order, and one still pending, so a later cancel can follow
        args = call.arguments
        order = t.initial_state["orders"][args["order_id"]]
        assert t.initial_state["items"][args["item_id"]]["order_id"] == args["order_id"] and order["status"] == "pending"
    for t in verified:
        _agree(read_records(wh, EnvironmentRecord)[0].state_schema, t.initial_state)
