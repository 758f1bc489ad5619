"""Walks under every start rule, ranked by how much they read like a user's workflow (issue 32).

A hand-built travel desk: one lookup (``find_member_by_email``) reaches one write, so the lookup
rule alone yields a single walk; reads by a stated id (a flight, a reservation) reach four writes,
so the read rule yields many. The sampler keeps both, the lookup walk ranked first.
"""

from __future__ import annotations

from autoforge.dags.sequences import random_walks, ranked_walks, undoes, walk_score
from autoforge.types import Binding, CollectionSpec, EnvironmentRecord, FieldSpec, GraphEdge, StateSchema, ToolCode, ToolGraph, ToolSequence

ENV = "env_travel_desk"


def _tool(name: str, effect: str, kind: str, coll: str, required: list[str], out: dict[str, str]) -> ToolCode:
    return ToolCode(code_id=f"code_{name}", env_id=ENV, tool_id=f"tool_{name}", name=name, source="", status="accepted",
                    effect=effect, kind=kind, collection=coll,
                    parameters={"type": "object", "properties": {p: {"type": "string"} for p in required}, "required": required},
                    output_schema={"type": "object", "properties": {k: {"type": t} for k, t in out.items()}})


TOOLS = [
    _tool("find_member_by_email", "read", "lookup", "members", ["email"], {"member_id": "string"}),
    _tool("close_membership", "write", "update", "members", ["member_id"], {"member_id": "string"}),
    _tool("get_flight", "read", "get", "flights", ["flight_id"], {"flight_id": "string", "seats_left": "integer"}),
    _tool("book_flight", "write", "create", "reservations", ["flight_id"], {"reservation_id": "string"}),
    _tool("get_reservation", "read", "get", "reservations", ["reservation_id"], {"reservation_id": "string", "flight_id": "string"}),
    _tool("change_seat", "write", "update", "reservations", ["reservation_id"], {"reservation_id": "string"}),
    _tool("cancel_reservation", "write", "delete", "reservations", ["reservation_id"], {"reservation_id": "string"}),
]


def _edge(src: str, dst: str, key: str) -> GraphEdge:
    return GraphEdge(src=src, dst=dst, bindings=[Binding(output_path=key, param=key)])


GRAPH = ToolGraph(graph_id="graph_travel_desk", env_id=ENV, tools=[t.name for t in TOOLS], edges=[
    _edge("find_member_by_email", "close_membership", "member_id"),
    _edge("get_flight", "book_flight", "flight_id"),
    _edge("book_flight", "change_seat", "reservation_id"),
    _edge("book_flight", "cancel_reservation", "reservation_id"),
    _edge("get_reservation", "change_seat", "reservation_id"),
    _edge("get_reservation", "cancel_reservation", "reservation_id"),
    _edge("get_reservation", "get_flight", "flight_id"),
])


def _env() -> EnvironmentRecord:
    colls = [CollectionSpec(name=c, entity=c.rstrip("s"), primary_key=f"{c.rstrip('s')}_id", id_prefix=c[0].upper(),
                            fields=[FieldSpec(name=f"{c.rstrip('s')}_id", type="string")])
             for c in ("members", "flights", "reservations")]
    return EnvironmentRecord(env_id=ENV, name="travel_desk", toolset_id="toolset_travel_desk", backend="offline",
                             state_schema=StateSchema(collections=colls), sample_state={}, status="ready",
                             n_tools=len(TOOLS), n_tools_accepted=len(TOOLS))


RULES = ("lookup", "read", "entry", "any")
BY_NAME = {t.name: t for t in TOOLS}


def _score(tools: list[str]) -> float:
    env = _env()
    keys = {c.primary_key for c in env.state_schema.collections}
    return walk_score(ToolSequence(seq_id="s", env_id=ENV, tools=tools), GRAPH, BY_NAME, keys)


def test_the_first_rule_yields_one_walk_another_many_and_both_are_kept_ranked():
    env = _env()
    lookup_only = random_walks(GRAPH, TOOLS, 20, 0, start="lookup", env=env)
    assert [w.tools for w in lookup_only] == [["find_member_by_email", "close_membership"]]  # what "auto" stopped at
    kept, starts = ranked_walks(GRAPH, TOOLS, 20, 0, RULES, env=env)
    assert set(starts) == set(RULES) and starts["lookup"] == {"walks": 1, "kept": 1}
    assert starts["read"]["walks"] >= 5 and starts["read"]["kept"] == starts["read"]["walks"]  # budget not reached: all kept
    rules = {tuple(w.tools): w.start_rule for w in kept}
    assert rules[("find_member_by_email", "close_membership")] == "lookup"
    assert {"book_flight", "change_seat", "cancel_reservation", "close_membership"} <= {t for w in kept for t in w.tools}
    # ranked: the identify -> act walk scores above every walk that starts at a read by a stated id,
    # whose best scores above the best that starts at a write
    score = {tuple(w.tools): _score(w.tools) for w in kept}
    lookup_walk = score[("find_member_by_email", "close_membership")]
    by_rule: dict[str, list[float]] = {}
    for w in kept:
        by_rule.setdefault(w.start_rule, []).append(score[tuple(w.tools)])
    assert lookup_walk > max(by_rule["read"]) and by_rule["any"] and max(by_rule["read"]) > max(by_rule["any"])
    assert ranked_walks(GRAPH, TOOLS, 20, 0, RULES, env=env) == (kept, starts)  # deterministic for a seed


def test_a_tight_budget_keeps_the_best_walks_and_every_write():
    env = _env()
    everything, _ = ranked_walks(GRAPH, TOOLS, 50, 0, RULES, env=env)
    kept, starts = ranked_walks(GRAPH, TOOLS, 4, 0, RULES, env=env)
    assert len(kept) == 4 and sum(c["kept"] for c in starts.values()) == 4
    writes = {t for w in everything for t in w.tools if BY_NAME[t].effect == "write"}
    assert writes == {t for w in kept for t in w.tools if BY_NAME[t].effect == "write"}  # coverage first
    assert max(_score(w.tools) for w in everything) == max(_score(w.tools) for w in kept)
    # a single rule keeps what it drew, in the order drawn (an explicit --start behaves as before)
    assert ranked_walks(GRAPH, TOOLS, 20, 0, ("read",), env=env)[0] == [
        w.model_copy(update={"start_rule": "read"}) for w in random_walks(GRAPH, TOOLS, 20, 0, start="read", env=env)]


def test_walk_score_prefers_a_looked_up_key_and_ranks_an_undone_write_last():
    assert _score(["get_reservation", "change_seat"]) > _score(["change_seat"])  # look up, then act; not blind
    assert _score(["get_flight", "book_flight", "change_seat"]) > _score(["get_flight", "book_flight", "cancel_reservation"])
    assert undoes(BY_NAME["book_flight"], BY_NAME["cancel_reservation"])
    assert not undoes(BY_NAME["cancel_reservation"], BY_NAME["book_flight"]) and not undoes(BY_NAME["book_flight"], BY_NAME["change_seat"])
    # a repeated call scores lower, unless a write in between changed what it reads
    assert _score(["get_reservation", "get_reservation", "change_seat"]) < _score(["get_reservation", "change_seat"])
    assert (_score(["get_reservation", "change_seat", "get_reservation", "cancel_reservation"])
            > _score(["get_reservation", "change_seat", "change_seat", "cancel_reservation"]))


def test_the_sample_stage_counts_walks_drawn_and_kept_per_rule():
    from autoforge.dags.sample import sample_counts, sample_env

    env = _env()
    res = sample_env(env, TOOLS, 0, walks=4, merges=2, min_len=2, max_len=5, start="auto", dag_variants=1)
    assert sum(c["kept"] for c in res.starts.values()) == 4 and res.starts["lookup"]["walks"] == 1
    counts = sample_counts([res, res], 0.0)
    assert counts["start_rules"]["lookup"] == {"walks": 2, "kept": 2 * res.starts["lookup"]["kept"]}
    assert sum(v for k, v in counts.items() if k.startswith("start_") and k != "start_rules") == counts["in"]
    merged = [s for s in res.sequences if s.source == "merge"]
    first = {s.seq_id: s.start_rule for s in res.sequences if s.source == "walk"}
    assert merged and all(m.start_rule == first[m.parents[0]] for m in merged)  # a merge starts where its first walk does
