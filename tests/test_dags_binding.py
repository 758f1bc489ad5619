"""Entity-aware binding in the tool graph: ids bind by entity, not only by identical name.

Real docs name one identifier differently in every tool (``get_ticket`` returns ``id``,
``close_ticket`` takes ``ticket_id``; ``findPetsByStatus`` returns pets, ``getPetById`` takes
``petId``). Small in-code fixtures: a pet store with integer ids (graph only) and a ticket
desk with string ids and doc-style names, run end to end (graph -> walks -> DAGs -> tasks ->
verification) on the in-process ``LocalEnvironment``.
"""

from __future__ import annotations

import copy

import pytest

import dags_mock as m
from autoforge.dags.build import build_dags
from autoforge.dags.graph import EntityIndex, binding_reasons, build_graph, candidate_bindings
from autoforge.domain.keys import is_key_param, key_canon, key_fields, name_tokens
from autoforge.dags.sequences import sample_sequences
from autoforge.tasks.generate import generate_tasks
from autoforge.tasks.verify import verify_tasks
from autoforge.types import (Binding, CollectionSpec, EnvironmentRecord, FieldSpec, StateSchema, ToolCode,
                             content_id)

I = {"type": "integer"}
S = {"type": "string"}


def obj(props: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": props, "required": required or []}


def tool(name: str, params: dict, output: dict | None, *, collection: str | None = None, effect: str = "read",
         kind: str = "llm", source: str = "", env_id: str = "env_binding") -> ToolCode:
    src = source.strip() + "\n" if source else f"def {name}(state, **kw):\n    return {{}}\n"
    return ToolCode(code_id=content_id("code", env_id, name, src), env_id=env_id, tool_id=f"tool_{name}", name=name,
                    source=src, status="accepted", effect=effect, kind=kind, collection=collection, parameters=params,
                    output_schema=output)


def env_of(collections: list[CollectionSpec], env_id: str = "env_binding", sample: dict | None = None) -> EnvironmentRecord:
    return EnvironmentRecord(env_id=env_id, name=env_id, toolset_id=f"toolset_{env_id}", backend="offline",
                             state_schema=StateSchema(collections=collections), sample_state=sample or {},
                             status="ready", n_tools=0, n_tools_accepted=0)


def pairs(src: ToolCode, dst: ToolCode, env: EnvironmentRecord) -> set[tuple[str, str]]:
    bs = candidate_bindings(src, dst, key_fields(env), keys_only=True, index=EntityIndex(env))
    return {(b.output_path, b.param) for b in bs}


# --------------------------------------------------------------------------- a pet store, integer ids

PET = obj({"id": {"type": "integer", "format": "int64"}, "name": S, "status": {"type": "string", "enum": ["available", "sold"]},
           "category": obj({"id": I, "name": S}), "tags": {"type": "array", "items": obj({"id": I, "name": S})}})
ORDER = obj({"id": I, "petId": I, "quantity": I, "status": S})


@pytest.fixture(scope="module")
def store():
    env = env_of([
        CollectionSpec(name="pets", entity="pet", primary_key="pet_id", id_prefix="P",
                       fields=[FieldSpec(name="pet_id", type="integer"), FieldSpec(name="name")]),
        CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O",
                       fields=[FieldSpec(name="order_id", type="integer"), FieldSpec(name="pet_id", type="integer", ref="pets"),
                               FieldSpec(name="quantity", type="integer")]),
        CollectionSpec(name="users", entity="user", primary_key="username", id_prefix="U",
                       fields=[FieldSpec(name="username"), FieldSpec(name="email")]),
    ])
    tools = {t.name: t for t in [
        tool("findPetsByStatus", obj({"status": S}), {"type": "array", "items": PET}, collection="pets"),
        tool("listPets", obj({}), obj({"pets": {"type": "array", "items": PET}})),  # no collection: the list names it
        tool("getPetById", obj({"petId": {"type": "integer", "description": "ID of pet to return"}}, ["petId"]), PET,
             collection="pets"),
        tool("deletePet", obj({"petId": I}, ["petId"]), obj({"deleted": {"type": "boolean"}}), collection="pets",
             effect="write", kind="delete"),
        tool("updatePetName", obj({"pet": {"type": "integer"}, "name": S}, ["pet", "name"]), PET, effect="write"),
        tool("addPet", obj({"id": I, "name": S}, ["name"]), PET, collection="pets", effect="write", kind="update"),
        tool("placeOrder", obj({"id": I, "petId": I, "quantity": I}), ORDER, collection="orders", effect="write"),
        tool("getOrderById", obj({"orderId": I}, ["orderId"]), ORDER, collection="orders"),
        tool("getUserByName", obj({"username": S}, ["username"]), obj({"username": S, "email": S}), collection="users"),
        tool("updateUser", obj({"username": S, "id": I, "email": S}, ["username"]), obj({"username": S}),
             collection="users", effect="write"),
        tool("tagPet", obj({"tag_id": I, "petid": I}, ["tag_id", "petid"]), PET, effect="write"),
        tool("getCategory", obj({"id_category": I}, ["id_category"]), obj({"id": I, "name": S})),
    ]}
    return env, tools


def test_name_styles():
    assert name_tokens("getPetById") == ["get", "pet", "by", "id"]
    assert name_tokens("userID") == ["user", "id"] and name_tokens("HTTPServer") == ["http", "server"]
    assert {key_canon(n) for n in ("pet_id", "petId", "PetID", "petid", "id_pet")} == {"petid"}
    keys = {"pet_id", "username"}
    assert all(is_key_param(n, keys) for n in ("petId", "orderID", "id_pet", "petid", "id", "user_id", "username"))
    assert not any(is_key_param(n, keys) for n in ("name", "valid", "paid", "status", "quantity"))


def test_camelcase_param_binds_the_id_of_a_record_list(store):
    env, t = store
    # the top-level array of a tool of collection pets, and a list named ``pets`` of a tool without a collection
    assert pairs(t["findPetsByStatus"], t["getPetById"], env) == {("*.id", "petId")}
    assert pairs(t["listPets"], t["deletePet"], env) == {("pets.*.id", "petId")}
    # ids of nested records (category, tags) are not the pet's
    assert not {p for p, _ in pairs(t["findPetsByStatus"], t["getPetById"], env)} & {"*.category.id", "*.tags.*.id"}


def test_id_of_a_record_binds_every_spelling_of_that_entitys_id(store):
    env, t = store
    pet = t["getPetById"]
    assert pairs(pet, t["deletePet"], env) == {("id", "petId")}
    assert pairs(pet, t["updatePetName"], env) == {("id", "pet")}  # bare entity name, integer, no prose: the id
    assert ("id", "petid") in pairs(pet, t["tagPet"], env)
    assert ("tags.*.id", "tag_id") in pairs(pet, t["tagPet"], env)  # a nested record of entity tag
    assert pairs(pet, t["getCategory"], env) == {("category.id", "id_category")}
    # the order's reference to a pet (petId) binds a pet's id; its own id is the order's
    assert pairs(pet, t["placeOrder"], env) == {("id", "petId")}
    assert pairs(t["placeOrder"], t["getOrderById"], env) == {("id", "orderId")}
    assert pairs(t["placeOrder"], t["getPetById"], env) == {("petId", "petId")}


def test_unrelated_ids_do_not_bind(store):
    env, t = store
    pet = t["getPetById"]
    assert pairs(pet, t["getOrderById"], env) == set()  # a pet id is not an order id
    assert pairs(pet, t["getUserByName"], env) == set()
    assert pairs(pet, t["addPet"], env) == set()  # a create's own id is new, never looked up
    assert pairs(pet, t["updateUser"], env) == set()  # category.id / tags.*.id are not a user's id
    assert pairs(t["getOrderById"], t["deletePet"], env) == {("petId", "petId")}  # the order's pet, not the order's id


def test_natural_primary_key_binds_by_name(store):
    env, t = store
    assert pairs(t["getUserByName"], t["updateUser"], env) == {("username", "username")}


def test_integer_id_does_not_bind_a_string_param():
    env = env_of([CollectionSpec(name="tickets", entity="ticket", primary_key="ticket_id", id_prefix="T",
                                 fields=[FieldSpec(name="ticket_id", type="integer"), FieldSpec(name="title")])])
    get = tool("get_ticket", obj({"ticket_id": I}, ["ticket_id"]), obj({"id": I, "title": S}), collection="tickets")
    close_int = tool("close_ticket", obj({"ticket_id": I}, ["ticket_id"]), obj({"id": I}), collection="tickets", effect="write")
    close_str = tool("archive_ticket", obj({"ticket_id": S}, ["ticket_id"]), obj({"id": I}), effect="write")
    retitle = tool("search_tickets", obj({"title": S, "ticket": {"type": "string", "description": "free text"}}), None)
    assert pairs(get, close_int, env) == {("id", "ticket_id")}
    assert pairs(get, close_str, env) == set()  # the runtime would reject 7 for a string parameter
    assert pairs(get, retitle, env) == set()  # title is data; a bare ``ticket`` of free text is not the id
    found = binding_reasons(get, close_int, key_fields(env), index=EntityIndex(env))
    assert found == [(Binding(output_path="id", param="ticket_id"), "ticket: id of a ticket record -> primary key")]


def test_tool_name_names_the_entity_without_a_collection():
    env = env_of([])
    get = tool("get_ticket", obj({"ticket_id": S}, ["ticket_id"]), obj({"id": S, "title": S}))
    lst = tool("get_user_tickets", obj({}), obj({"tickets": {"type": "array", "items": obj({"id": S, "owner_id": S})}}))
    edit = tool("edit_ticket", obj({"ticket_id": S, "title": S}, ["ticket_id", "title"]), None, effect="write")
    who = tool("get_owner", obj({"ownerId": S}, ["ownerId"]), None)
    assert pairs(get, edit, env) == {("id", "ticket_id")}
    assert pairs(lst, edit, env) == {("tickets.*.id", "ticket_id")}
    assert pairs(lst, who, env) == {("tickets.*.owner_id", "ownerId")}
    assert pairs(lst, get, env) == {("tickets.*.id", "ticket_id")}
    wrapped = tool("list_open_tickets", obj({}), obj({"data": {"type": "array", "items": obj({"id": S})}, "count": I}))
    assert pairs(wrapped, edit, env) == {("data.*.id", "ticket_id")}  # ``data`` wraps records of the tool's entity


def test_reference_field_binds_the_referenced_entitys_id():
    env = env_of([
        CollectionSpec(name="agents", entity="agent", primary_key="agent_id", id_prefix="A", fields=[FieldSpec(name="agent_id")]),
        CollectionSpec(name="tickets", entity="ticket", primary_key="ticket_id", id_prefix="T",
                       fields=[FieldSpec(name="ticket_id"), FieldSpec(name="assignee_id", ref="agents")]),
    ])
    agent = tool("find_agent", obj({"email": S}, ["email"]), obj({"id": S, "name": S}), collection="agents")
    assign = tool("assign_ticket", obj({"ticketId": S, "assigneeId": S}, ["ticketId", "assigneeId"]), None,
                  collection="tickets", effect="write")
    ticket = tool("get_ticket", obj({"ticket_id": S}, ["ticket_id"]), obj({"id": S, "assignee_id": S}), collection="tickets")
    agent_get = tool("get_agent", obj({"agent_id": S}, ["agent_id"]), obj({"id": S}), collection="agents")
    assert pairs(agent, assign, env) == {("id", "assigneeId")}
    assert pairs(ticket, assign, env) == {("id", "ticketId"), ("assignee_id", "assigneeId")}
    assert pairs(ticket, agent_get, env) == {("assignee_id", "agent_id")}


# --------------------------------------------------------------------------- end to end: a ticket desk, doc-style names

DESK_ENV = "env_ticket_desk"
_TICKET = obj({"id": S, "title": S, "priority": I, "status": {"type": "string", "enum": ["open", "closed"]}})
DESK_TOOLS = [
    ("listAgentTickets", "read", "list", "tickets", obj({"agentId": S}, ["agentId"]),
     obj({"tickets": {"type": "array", "items": _TICKET}}), '''
def listAgentTickets(state, agentId):
    if agentId not in state["agents"]:
        return {"error": "no agent " + str(agentId)}
    out = []
    for k, t in sorted(state["tickets"].items()):
        if t["assignee_id"] == agentId:
            out.append({"id": k, "title": t["title"], "priority": t["priority"], "status": t["status"]})
    return {"tickets": out}
'''),
    ("getTicketById", "read", "get", "tickets", obj({"ticketId": S}, ["ticketId"]), _TICKET, '''
def getTicketById(state, ticketId):
    t = state["tickets"].get(ticketId)
    if t is None:
        return {"error": "no ticket " + str(ticketId)}
    return {"id": ticketId, "title": t["title"], "priority": t["priority"], "status": t["status"]}
'''),
    ("closeTicket", "write", "status", "tickets", obj({"ticketId": S}, ["ticketId"]), _TICKET, '''
def closeTicket(state, ticketId):
    t = state["tickets"].get(ticketId)
    if t is None:
        return {"error": "no ticket " + str(ticketId)}
    if t["status"] != "open":
        return {"error": "ticket is not open"}
    t["status"] = "closed"
    return {"id": ticketId, "title": t["title"], "priority": t["priority"], "status": t["status"]}
'''),
    ("findAgentByEmail", "read", "lookup", "agents", obj({"email": S}, ["email"]), obj({"id": S, "name": S}), '''
def findAgentByEmail(state, email):
    for k, a in sorted(state["agents"].items()):
        if a["email"] == email:
            return {"id": k, "name": a["name"]}
    return {"error": "no agent with email " + email}
'''),
    ("assignTicket", "write", "update", "tickets", obj({"ticketId": S, "assigneeId": S}, ["ticketId", "assigneeId"]),
     _TICKET, '''
def assignTicket(state, ticketId, assigneeId):
    t = state["tickets"].get(ticketId)
    if t is None or assigneeId not in state["agents"]:
        return {"error": "no such ticket or agent"}
    t["assignee_id"] = assigneeId
    return {"id": ticketId, "title": t["title"], "priority": t["priority"], "status": t["status"]}
'''),
]
DESK_SCHEMA = StateSchema(collections=[
    CollectionSpec(name="agents", entity="agent", primary_key="agent_id", id_prefix="A",
                   fields=[FieldSpec(name="agent_id"), FieldSpec(name="name"), FieldSpec(name="email", format="email")]),
    CollectionSpec(name="tickets", entity="ticket", primary_key="ticket_id", id_prefix="T",
                   fields=[FieldSpec(name="ticket_id"), FieldSpec(name="title"), FieldSpec(name="priority", type="integer"),
                           FieldSpec(name="status", enum=["open", "closed"]), FieldSpec(name="assignee_id", ref="agents")]),
])
DESK_STATE = {
    "agents": {"A0001": {"agent_id": "A0001", "name": "Ava Chen", "email": "ava.chen@example.com"},
               "A0002": {"agent_id": "A0002", "name": "Liam Rossi", "email": "liam.rossi@example.com"}},
    "tickets": {"T0001": {"ticket_id": "T0001", "title": "Printer jams", "priority": 2, "status": "open", "assignee_id": "A0001"},
                "T0002": {"ticket_id": "T0002", "title": "VPN drops", "priority": 4, "status": "open", "assignee_id": "A0002"}},
}


@pytest.fixture(scope="module")
def desk():
    tools = [tool(n, p, o, collection=c, effect=e, kind=k, source=src, env_id=DESK_ENV) for n, e, k, c, p, o, src in DESK_TOOLS]
    env = EnvironmentRecord(env_id=DESK_ENV, name="ticket_desk", toolset_id="toolset_ticket_desk", backend="offline",
                            state_schema=DESK_SCHEMA, sample_state=copy.deepcopy(DESK_STATE), status="ready",
                            n_tools=len(tools), n_tools_accepted=len(tools))
    return env, tools


def test_desk_graph_binds_doc_style_ids(desk):
    env, tools = desk
    edges = {(e.src, e.dst): {(b.output_path, b.param) for b in e.bindings} for e in build_graph(env, tools).edges}
    assert edges[("findAgentByEmail", "listAgentTickets")] == {("id", "agentId")}  # ``id`` of an agent record
    assert edges[("listAgentTickets", "closeTicket")] == {("tickets.*.id", "ticketId")}  # ids of a list of tickets
    assert edges[("getTicketById", "closeTicket")] == {("id", "ticketId")}
    assert edges[("findAgentByEmail", "assignTicket")] == {("id", "assigneeId")}  # a reference to an agent
    assert ("findAgentByEmail", "closeTicket") not in edges  # an agent's id is not a ticket's
    assert ("listAgentTickets", "findAgentByEmail") not in edges


def test_desk_tasks_verify_end_to_end(desk):
    env, tools = desk
    graph = build_graph(env, tools)
    seqs = sample_sequences(graph, tools, 20, seed=1, env=env)
    dags, _ = build_dags(graph, seqs, tools, env, seed=1, variants=2)
    assert dags
    node_sourced = {(n.tool, a) for d in dags for n in d.nodes if n.kind == "tool" for a, s in n.args.items() if s.kind == "node"}
    assert {("listAgentTickets", "agentId"), ("closeTicket", "ticketId"), ("assignTicket", "assigneeId")} <= node_sourced
    tasks, _ = generate_tasks(env, tools, dags, seed=3, n_tasks=20, env_factory=m.LocalEnvironment)
    assert tasks
    out, results, _ = verify_tasks(env, tools, tasks, dags, env_factory=m.LocalEnvironment)
    verified = [t for t in out if t.status == "verified"]
    assert len(verified) >= 0.9 * len(tasks), {r.check: r.reason for r in results if not r.passed}
    # a verified task looks the ticket up and passes its id under the camelCase name
    assert any(c.name in ("closeTicket", "assignTicket") and str(c.arguments.get("ticketId", "")).startswith("T")
               for t in verified for c in t.gold_calls)
