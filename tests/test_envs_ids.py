"""Ids as the docs type them: integer ids, client-supplied ids in a create's body, ids shown by example."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from autoforge.envs.runtime import Environment
from autoforge.domain.entities import plan_tools
from autoforge.domain.ids import id_pattern
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"
REALDOCS = Path(__file__).resolve().parents[2] / "shared" / "realdocs"


def _synth(path: Path):
    r = ingest_paths([str(path)])
    return synthesize_environment(r.toolsets[0], r.specs)


def _colls(result) -> dict:
    return {c.name: c for c in result.environment.state_schema.collections}


def _fields(coll) -> dict:
    return {f.name: f for f in coll.fields}


def test_integer_ids_give_integer_collections():
    result = _synth(FIXTURES / "ids_helpdesk.json")
    env = result.environment
    assert env.n_tools_accepted == env.n_tools, [(t.name, t.reason) for t in result.tools if t.status != "accepted"]
    colls = _colls(result)
    for name in ("tickets", "agents"):
        c = colls[name]
        assert c.id_type == "integer" and c.id_prefix == ""
        assert _fields(c)[c.primary_key].type == "integer"
    ref = _fields(colls["tickets"])["agent_id"]
    assert ref.ref == "agents" and ref.type == "integer"
    # the state keeps JSON's string keys; the records hold ints, references too
    tickets = env.sample_state["tickets"]
    assert sorted(tickets, key=int)[:3] == ["1", "2", "3"]
    for key, rec in tickets.items():
        assert rec["ticket_id"] == int(key) and isinstance(rec["ticket_id"], int)
        assert isinstance(rec["agent_id"], int) and str(rec["agent_id"]) in env.sample_state["agents"]
    tools = {t.name: t for t in result.tools}
    assert tools["get_ticket"].output_schema["properties"]["ticket_id"]["type"] == "integer"
    assert tools["find_agent_by_email"].output_schema["properties"]["agent_id"]["type"] == "integer"
    assert "str(ticket_id)" in tools["get_ticket"].source


def test_integer_ids_work_through_the_sandbox():
    result = _synth(FIXTURES / "ids_helpdesk.json")
    state = copy.deepcopy(result.environment.sample_state)
    n = len(state["tickets"])
    with Environment(result.accepted) as env:
        env.reset(state)
        obs = env.call("get_ticket", {"ticket_id": 2})
        assert obs.ok and obs.output["ticket_id"] == 2, obs
        assert env.call("get_ticket", {"ticket_id": 999}).kind == "tool_error"
        agent = env.call("find_agent_by_email", {"email": state["agents"]["3"]["email"]})
        assert agent.ok and agent.output["agent_id"] == 3
        open_key = next(k for k, r in state["tickets"].items() if r["status"] in ("open", "pending") and r["agent_id"] != 3)
        obs = env.call("assign_ticket", {"ticket_id": int(open_key), "agent_id": 3})
        assert obs.ok, obs
        assert env.get_state()["tickets"][open_key]["agent_id"] == 3
        assert env.call("assign_ticket", {"ticket_id": int(open_key), "agent_id": 999}).kind == "tool_error"
        listed = env.call("list_tickets", {"agent_id": 3})
        assert listed.ok and any(t["ticket_id"] == int(open_key) for t in listed.output["tickets"])
        created = env.call("create_ticket", {"title": "Printer on fire"})
        assert created.ok and created.output["ticket_id"] == n + 1
        assert env.get_state()["tickets"][str(n + 1)]["ticket_id"] == n + 1
        again = env.call("create_ticket", {"title": "Second"})
        assert again.output["ticket_id"] == n + 2


def test_create_takes_the_id_its_body_carries():
    result = _synth(FIXTURES / "ids_petshop_body.json")
    assert result.environment.n_tools_accepted == result.environment.n_tools
    plans = plan_tools(ingest_paths([str(FIXTURES / "ids_petshop_body.json")]).specs)
    assert plans["addPet"].kind == "create" and plans["placeOrder"].kind == "create"
    colls = _colls(result)
    assert colls["pets"].id_type == "integer" and colls["orders"].id_type == "integer"
    assert _fields(colls["orders"])["pet_id"].type == "integer"
    state = copy.deepcopy(result.environment.sample_state)
    n = len(state["pets"])
    with Environment(result.accepted) as env:
        env.reset(state)
        obs = env.call("addPet", {"name": "Rex"})  # no id: the next one
        assert obs.ok and obs.output["pet_id"] == n + 1
        obs = env.call("addPet", {"id": 77, "name": "Fido", "status": "available"})  # the client's id
        assert obs.ok and obs.output["pet_id"] == 77
        after = env.get_state()
        assert after["pets"]["77"]["pet_id"] == 77 and after["pets"]["77"]["name"] == "Fido"
        dup = env.call("addPet", {"id": 77, "name": "Other"})  # a taken id is refused, nothing changes
        assert dup.kind == "tool_error" and "already exists" in dup.output["error"]
        assert env.get_state() == after
        assert env.call("getPetById", {"petId": 77}).output["name"] == "Fido"
        order = env.call("placeOrder", {"id": 500, "petId": 77, "quantity": 1})
        assert order.ok and order.output["order_id"] == 500 and order.output["pet_id"] == 77
        assert env.call("placeOrder", {"petId": 12345}).kind == "tool_error"  # no such pet
        nxt = env.call("placeOrder", {"petId": 1})
        assert nxt.ok and nxt.output["order_id"] == 501  # next_id continues after the largest id
        assert env.call("deleteOrder", {"orderId": 500}).ok
        assert "500" not in env.get_state()["orders"]


def test_ids_shown_by_example_set_prefix_and_pattern():
    assert id_pattern({"type": "string", "description": "The invoice id, such as 'INV-00042'."}, examples=True) == ("INV-", 5)
    assert id_pattern({"type": "string", "description": "The customer's id, e.g. 'CUS-0012'."}, examples=True) == ("CUS-", 4)
    assert id_pattern({"type": "string", "example": "PO-123456"}, examples=True) == ("PO-", 6)
    assert id_pattern({"type": "string", "description": "such as 'INV-00042'"}) is None  # only when asked
    result = _synth(FIXTURES / "ids_billing_example.json")
    assert result.environment.n_tools_accepted == result.environment.n_tools
    colls = _colls(result)
    inv, cus = colls["invoices"], colls["customers"]
    assert (inv.id_type, inv.id_prefix, inv.id_width) == ("string", "INV-", 5)
    assert (cus.id_prefix, cus.id_width) == ("CUS-", 4)
    assert _fields(inv)["invoice_id"].pattern == r"^INV-\d{5}$"
    state = copy.deepcopy(result.environment.sample_state)
    assert sorted(state["invoices"])[0] == "INV-00001" and sorted(state["customers"])[0] == "CUS-0001"
    with Environment(result.accepted) as env:
        env.reset(state)
        obs = env.call("create_invoice", {"customer_id": "CUS-0002", "amount_due": 50.0})
        assert obs.ok and obs.output["invoice_id"] == f"INV-{len(state['invoices']) + 1:05d}"


def test_string_ids_stay_as_they_were():
    result = _synth(FIXTURES / "rules_tickets.json")
    tickets = _colls(result)["tickets"]
    assert tickets.id_type == "string" and tickets.id_prefix == "T" and tickets.id_width == 4
    assert sorted(result.environment.sample_state["tickets"])[0] == "T0001"


def test_realdocs_ticket_api_integer_ids():
    path = REALDOCS / "bfcl_ticket_api"
    if not path.exists():
        pytest.skip("no real docs at ../shared/realdocs")
    result = _synth(path)
    tickets = _colls(result)["tickets"]
    assert tickets.id_type == "integer"
    tools = {t.name: t for t in result.tools}
    assert tools["get_ticket"].parameters["properties"]["ticket_id"]["type"] == "integer"
    assert tools["get_ticket"].output_schema["properties"]["ticket_id"]["type"] == "integer"
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(result.environment.sample_state))
        assert env.call("get_ticket", {"ticket_id": 1}).ok


def test_factory_gold_calls_pass_integer_ids(tmp_path):
    import duckdb

    from autoforge.pipeline import run_factory

    wh = str(tmp_path / "w.duckdb")
    run_factory(paths=[str(FIXTURES / "ids_helpdesk.json")], bundled=False, tasks_per_env=12, warehouse=wh)
    con = duckdb.connect(wh, read_only=True)
    try:
        rows = con.execute("select gold_calls, initial_state from tasks where status = 'verified'").fetchall()
    finally:
        con.close()
    assert rows, "no verified task"
    id_args = []
    for gold, initial in rows:
        state = json.loads(initial) if isinstance(initial, str) else initial
        calls = json.loads(gold) if isinstance(gold, str) else gold
        for i, call in enumerate(calls):
            created = any(c["name"].startswith("create") for c in calls[: i + 1])  # acts on a record the task made
            for k, v in call["arguments"].items():
                if k in ("ticket_id", "agent_id"):
                    id_args.append(v)
                    assert isinstance(v, int) and not isinstance(v, bool), call
                    coll = "tickets" if k == "ticket_id" else "agents"
                    assert str(v) in state[coll] or created, call
    assert id_args


# --------------------------------------------------------------------------- id style from the docs

from autoforge.domain.ids import documented_id_style, id_style, make_id  # noqa: E402
from autoforge.types import CollectionSpec, FieldSpec  # noqa: E402


@pytest.mark.parametrize("schema, want", [
    ({"type": "string", "format": "uuid"}, "uuid"),
    ({"type": "string", "format": "GUID"}, "uuid"),
    ({"type": "string", "description": "The order's id, a UUID such as 3f2b8c1e-9d4a-4e7b-8a6c-1d2e3f4a5b6c."}, "uuid"),
    ({"type": "string", "description": "Unique identifier (UUID v4) of the booking"}, "uuid"),
    ({"type": "string", "description": "Booking reference, e.g. 0b7e6c1a-2f3d-4a5b-9c8d-7e6f5a4b3c2d"}, "uuid"),
    ({"type": "string", "example": "5a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}, "uuid"),
    ({"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}, "uuid"),
    ({"type": "array", "items": {"type": "string", "format": "uuid"}}, "uuid"),
    ({"type": "integer"}, "integer"),
    ({"type": "number", "description": "The ticket number"}, "integer"),
    ({"type": "string", "description": "The numeric id of the order"}, "integer"),
    ({"type": "string", "description": "Order ID (integer)"}, "integer"),
    ({"type": "string", "example": 1042}, "integer"),
    ({"type": "string", "description": "The booking code, e.g. 'BK-1042'"}, "code"),
    ({"type": "string", "description": "Invoice number such as INV-00042"}, "code"),
    ({"type": "string", "pattern": "^AC\\d{4}$"}, "code"),
    ({"type": "string", "example": "CUS-0012"}, "code"),
    ({"type": "string", "description": "The id of the order"}, None),
    ({"type": "string"}, None),
    ({"type": "string", "pattern": "^[a-z0-9-]+$"}, None),  # a slug's pattern: no style shown
])
def test_id_style_is_read_from_the_docs_many_forms(schema, want):
    assert documented_id_style(schema) == want


def _coll(**pk) -> CollectionSpec:
    return CollectionSpec(name="bookings", entity="booking", primary_key="booking_id", id_prefix="BK-", id_width=4,
                          fields=[FieldSpec(name="booking_id", **pk), FieldSpec(name="note")])


def test_make_id_writes_a_record_number_in_the_docs_style():
    import uuid

    assert make_id(_coll(), 42) == "BK-0042" and make_id(_coll(), 7, 3) == "BK-007"
    integer = _coll().model_copy(update={"id_type": "integer", "id_prefix": ""})
    assert id_style(integer) == "integer" and make_id(integer, 42) == "42"
    uu = _coll(format="uuid")
    assert id_style(uu) == "uuid" and id_style(_coll(description="a UUID")) == "uuid"
    keys = [make_id(uu, n) for n in range(1, 50)]
    assert all(uuid.UUID(k).version == 4 for k in keys) and len(set(keys)) == 49
    assert make_id(uu, 3) == make_id(uu.model_copy(), 3)  # the same record number, the same id (any process)
    other = uu.model_copy(update={"name": "rooms"})
    assert make_id(other, 3) != make_id(uu, 3)


def test_the_sample_state_and_a_task_world_use_the_docs_id_style():
    import random
    import uuid

    from autoforge.envs.sample import sample_state
    from autoforge.tasks.instantiate import make_world
    from autoforge.types import EnvironmentRecord, StateSchema

    schema = StateSchema(collections=[_coll(format="uuid"), CollectionSpec(
        name="rooms", entity="room", primary_key="room_id", id_prefix="R", fields=[FieldSpec(name="room_id")])])
    state = sample_state(schema)
    assert all(uuid.UUID(k) and rec["booking_id"] == k for k, rec in state["bookings"].items())
    assert sorted(state["rooms"]) == ["R0001", "R0002", "R0003", "R0004"]  # no style shown: today's codes
    env = EnvironmentRecord(env_id="e", name="x", toolset_id="t", backend="offline", state_schema=schema,
                            sample_state=state, status="ready", n_tools=0, n_tools_accepted=0)
    world = make_world(env, random.Random(0))
    assert all(uuid.UUID(k).version == 4 for k in world["bookings"])
    assert all(k.startswith("R") for k in world["rooms"])


def test_a_uuid_in_an_id_parameters_prose_makes_the_collection_uuid_keyed(tmp_path):
    doc = [{"name": "get_booking", "description": "Look up a booking.", "parameters": {"type": "object", "properties": {
        "booking_id": {"type": "string", "description": "The booking's UUID, e.g. 0b7e6c1a-2f3d-4a5b-9c8d-7e6f5a4b3c2d"}},
        "required": ["booking_id"]}},
           {"name": "cancel_booking", "description": "Cancel a booking.", "parameters": {"type": "object", "properties": {
               "booking_id": {"type": "string"}}, "required": ["booking_id"]}}]
    (tmp_path / "tools.json").write_text(json.dumps(doc))
    res = _synth(tmp_path / "tools.json")
    bookings = _colls(res)["bookings"]
    assert id_style(bookings) == "uuid"
    import uuid

    assert all(uuid.UUID(k) for k in res.environment.sample_state["bookings"])


def test_a_plain_doc_with_uuid_ids_gives_verified_tasks_whose_ids_are_uuids(tmp_path):
    """tests/fixtures/plain/desk_booking documents its ids as ``format: uuid``: the task worlds and the gold
    calls hold UUIDs, not ``D0001``."""
    import uuid

    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.types import Task
    from autoforge.warehouse import apply_migrations, read_records

    wh = str(tmp_path / "w.duckdb")
    apply_migrations(wh)
    run_factory(FactoryParams(paths=[str(Path(__file__).parent / "fixtures" / "plain" / "desk_booking")], bundled=False,
                              seed=0, tasks_per_env=20, warehouse=wh))
    verified = [t for t in read_records(wh, Task) if t.status == "verified"]
    assert len(verified) >= 5
    ids = [v for t in verified for c in t.gold_calls for k, v in c.arguments.items()
           if k.lower().endswith("id") and isinstance(v, str)]
    assert ids and all(uuid.UUID(v).version == 4 for v in ids), ids[:5]
    for t in verified:
        for table in t.initial_state.values():
            assert all(uuid.UUID(k) for k in table)
