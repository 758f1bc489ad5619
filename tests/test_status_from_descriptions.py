"""A record's statuses and a call's status precondition said only in descriptions (issue 33): a status field
described "A ticket can be in Open or Closed state." takes those values (not words guessed from the tools'
names), and an id parameter described "Unique ID of the open ticket" makes the call refuse a ticket in any
other status, probed like any status rule."""

from __future__ import annotations

import copy
import json

import pytest

from autoforge.domain.values import quoted_vocabulary
from autoforge.envs.runtime import Environment
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths

TICKET = {"type": "object", "properties": {
    "ticketId": {"type": "string", "description": "Unique ID of the ticket"},
    "status": {"type": "string", "description": "The status of the ticket. A ticket can be in Open or Closed state."},
    "pendingItems": {"type": "array", "items": {"type": "string"}, "description": "Items still pending."}}}
SPEC = {"openapi": "3.0.0", "info": {"title": "Helpdesk", "version": "1"}, "paths": {
    "/tickets": {"post": {"operationId": "createTicket", "summary": "Create a new ticket",
                          "responses": {"200": {"description": "The new ticket",
                                                "content": {"application/json": {"schema": TICKET}}}}}},
    "/tickets/{ticketId}/remind": {"post": {
        "operationId": "sendReminder", "summary": "Send a reminder about the pending items of a ticket",
        "parameters": [{"name": "ticketId", "in": "path", "required": True, "schema": {"type": "string"},
                        "description": "Unique ID of the open ticket"}],
        "responses": {"200": {"description": "The ticket", "content": {"application/json": {"schema": TICKET}}}}}},
    "/tickets/{ticketId}": {"get": {
        "operationId": "getTicket", "summary": "Get a ticket",
        "parameters": [{"name": "ticketId", "in": "path", "required": True, "schema": {"type": "string"},
                        "description": "Unique ID of the ticket"}],
        "responses": {"200": {"description": "The ticket", "content": {"application/json": {"schema": TICKET}}}}}}}}


@pytest.mark.parametrize("text, values", [
    ("The status of the claim. Claim can be in Open or Closed state.", ["Open", "Closed"]),
    ("An order can be pending, shipped or delivered status", ["pending", "shipped", "delivered"]),
    ("It can be long or short.", []),  # no state word: not a vocabulary
])
def test_a_description_that_says_which_states_a_record_can_be_in(text, values):
    assert quoted_vocabulary(text) == values


def test_documented_states_and_an_id_of_an_open_record_are_enforced(tmp_path):
    (tmp_path / "helpdesk.json").write_text(json.dumps(SPEC))
    res = ingest_paths([tmp_path / "helpdesk.json"])
    (ts,) = res.toolsets
    result = synthesize_environment(ts, res.specs)
    coll = next(c for c in result.environment.state_schema.collections if c.entity == "ticket")
    assert next(f for f in coll.fields if f.name == "status").enum == ["Open", "Closed"]
    rule = next(r for r in result.rules if r.tool == "sendReminder" and r.kind == "source_status")
    assert rule.values == ["Open"] and rule.enforcement == "code" and rule.probe == "passed", rule
    assert not any(r.tool == "getTicket" and r.kind == "source_status" for r in result.rules)
    state = copy.deepcopy(result.environment.sample_state)
    key = sorted(state["tickets"])[0]
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(state))
        created = env.call("createTicket", {})
        assert created.ok and created.output["status"] == "Open", created
        state["tickets"][key]["status"] = "Closed"
        env.reset(state)
        before = env.get_state()
        refused = env.call("sendReminder", {"ticketId": key})
        assert refused.kind == "tool_error" and env.get_state() == before
        state["tickets"][key]["status"] = "Open"
        env.reset(state)
        assert env.call("sendReminder", {"ticketId": key}).ok
