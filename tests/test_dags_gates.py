"""Walks that respect what a write requires (issue 32): status gates along the walk.

A hand-written desk booking: ``reserve_desk`` makes a confirmed reservation, ``check_in`` takes
only confirmed ones and leaves them checked_in, ``cancel_reservation`` takes confirmed
ones ("Checked-in reservations cannot be cancelled") and leaves them cancelled. The offline
templates write those rules into the code; :mod:`autoforge.dags.gates` reads them back, so
no walk cancels what it checked in or checks in what it cancelled, and a read's id that feeds
a write is one the write accepts.
"""

from __future__ import annotations

import json
import random

import pytest

from autoforge.dags.gates import gate_break, gate_of, gates
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import merge_sequences, random_walks
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tasks.instantiate import FactChooser
from autoforge.tooldocs import ingest_paths
from autoforge.types import ArgSource, DagNode, TaskDag

S = {"type": "string"}


def _tool(name, description, props, required=None):
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": props, "required": required or list(props)}}


DOCS = [
    _tool("find_member_by_email", "Find a member by email. Returns the member's member_id and name.", {"email": S}),
    _tool("list_desks", "List the desks. Returns the desks with their desk_id and label.", {}, []),
    _tool("reserve_desk", "Reserve a desk for a member for one day. Returns the reservation id and its status.",
          {"member_id": S, "desk_id": S, "date": {"type": "string", "format": "date"}}),
    _tool("get_reservation", "Get a reservation by id. Returns the reservation with its desk, date and status.",
          {"reservation_id": S}),
    _tool("check_in", "Check a member in to a reserved desk. Only confirmed reservations can be checked in; "
          "the reservation becomes checked_in.", {"reservation_id": S}),
    _tool("cancel_reservation", "Cancel a reservation. Checked-in reservations cannot be cancelled; the reservation "
          "becomes cancelled.", {"reservation_id": S}),
]


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gates") / "desk_gates"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(DOCS))
    res = ingest_paths([folder])
    assert not res.errors, res.errors
    syn = synthesize_environment(res.toolsets[0], res.specs)
    tools = [t for t in syn.tools if t.status == "accepted"]
    assert {t.name for t in tools} == {d["name"] for d in DOCS}
    return syn.environment, tools


def test_gates_read_from_the_code_the_prose_became(desk):
    _, tools = desk
    g = gates(tools)
    by = {t.name: t for t in tools}
    assert g["check_in"].requires == {"confirmed"} and g["check_in"].leaves == {"checked_in"}
    assert "checked_in" not in g["cancel_reservation"].requires and g["cancel_reservation"].leaves == {"cancelled"}
    assert g["reserve_desk"].creates and g["reserve_desk"].leaves == {"confirmed"}
    assert gate_of(by["get_reservation"]) is None and gate_of(by["find_member_by_email"]) is None


def test_a_forbidden_chain_breaks_and_an_allowed_one_does_not(desk):
    _, tools = desk
    by = {t.name: t for t in tools}
    # check in, then cancel: "Checked-in reservations cannot be cancelled"
    assert gate_break(["get_reservation", "check_in", "cancel_reservation"], by) == 2
    # book, cancel, then check in: check-in takes confirmed reservations only
    assert gate_break(["reserve_desk", "cancel_reservation", "check_in"], by) == 2
    assert gate_break(["check_in", "check_in"], by) == 1  # already checked in
    # allowed: book then check in; book then cancel; a new booking after a cancel starts a new record
    assert gate_break(["list_desks", "reserve_desk", "check_in"], by) is None
    assert gate_break(["reserve_desk", "cancel_reservation"], by) is None
    assert gate_break(["get_reservation", "cancel_reservation", "reserve_desk", "check_in"], by) is None


def test_walks_and_merges_hold_no_forbidden_chain(desk):
    env, tools = desk
    by = {t.name: t for t in tools}
    graph = build_graph(env, tools)
    walks = random_walks(graph, tools, 60, 3, start="any", env=env, max_len=5)
    merged = merge_sequences(walks, tools, 60, 4, env=env)
    seqs = [s.tools for s in walks + merged]
    assert seqs and all(gate_break(s, by) is None for s in seqs)
    pairs = {(a, b) for s in seqs for a, b in zip(s, s[1:])}
    assert ("check_in", "cancel_reservation") not in pairs and ("cancel_reservation", "check_in") not in pairs
    # the allowed chain is still drawn: book, then check in the new reservation
    assert ("reserve_desk", "check_in") in pairs
    # deterministic per seed
    assert [w.tools for w in random_walks(graph, tools, 60, 3, start="any", env=env, max_len=5)] == [w.tools for w in walks]


class _State:
    def __init__(self, state):
        self.state = state

    def get_state(self):
        return self.state


def _one_confirmed(env, which):
    """A copy of the sample state where only the ``which``-th reservation (in id order) is confirmed,
    the others checked in; with its reservation table and sorted ids."""
    state = json.loads(json.dumps(env.sample_state))
    table = state["reservations"]
    ids = sorted(table)
    assert len(ids) > which
    for i, k in enumerate(ids):
        table[k]["status"] = "confirmed" if i == which else "checked_in"
    return state, table, ids


def test_a_read_feeding_a_write_picks_a_record_the_write_accepts(desk):
    env, tools = desk
    by = {t.name: t for t in tools}
    state, table, ids = _one_confirmed(env, 1)
    dag = TaskDag(dag_id="d", env_id=env.env_id, edges=[("n0", "n1")], nodes=[
        DagNode(node_id="n0", kind="tool", tool="get_reservation",
                args={"reservation_id": ArgSource(kind="user", fact="reservation_id")}),
        DagNode(node_id="n1", kind="tool", tool="check_in",
                args={"reservation_id": ArgSource(kind="node", node="n0", path="reservation_id")})])
    for seed in range(8):
        chooser = FactChooser(env, by, random.Random(seed), {}, dag)
        assert chooser(dag.nodes[0], "reservation_id", {}, _State(state)) == table[ids[1]]["reservation_id"]
    # without the DAG the read may pick any reservation
    picks = {FactChooser(env, by, random.Random(seed), {})(dag.nodes[0], "reservation_id", {}, _State(state))
             for seed in range(12)}
    assert len(picks) > 1


def test_a_write_few_dags_hold_gets_a_turn_first():
    from autoforge.tasks.generate import coverage_first

    def dag(i, *tools):
        return TaskDag(dag_id=f"d{i}", env_id="e", edges=[], nodes=[DagNode(node_id=f"n{j}", kind="tool", tool=t)
                                                                     for j, t in enumerate(tools)])

    cycle = [dag(0, "get", "edit"), dag(1, "get", "edit"), dag(2, "get", "close"), dag(3, "edit"), dag(4, "login", "edit")]
    out = coverage_first(cycle, {"edit", "close", "login"})
    assert [d.dag_id for d in out] == ["d0", "d2", "d4", "d1", "d3"]
    assert coverage_first(cycle, set()) == cycle


def test_a_find_feeding_a_write_through_a_read_singles_out_a_record_the_write_accepts(desk):
    env, tools = desk
    by = {t.name: t for t in tools}
    state, table, ids = _one_confirmed(env, 2)
    for i, k in enumerate(ids):
        table[k]["date"] = f"2025-06-{i + 1:02d}"
    items = [table[k] for k in ids]
    find = DagNode(node_id="r0", kind="reasoning", op="find", params={"field": "date"},
                   args={"value": ArgSource(kind="user", fact="date")})
    dag = TaskDag(dag_id="d", env_id=env.env_id, edges=[("r0", "n1"), ("n1", "n2")], nodes=[
        find,
        DagNode(node_id="n1", kind="tool", tool="get_reservation",
                args={"reservation_id": ArgSource(kind="node", node="r0", path="reservation_id")}),
        DagNode(node_id="n2", kind="tool", tool="check_in",
                args={"reservation_id": ArgSource(kind="node", node="n1", path="reservation_id")})])
    for seed in range(8):
        chooser = FactChooser(env, by, random.Random(seed), {}, dag)
        assert chooser(find, "value", {"items": items}, _State(state)) == "2025-06-03"
