"""Tool graph, walks, merging, reasoning ops and DAG validation on the hand-written mock shop."""

from __future__ import annotations

import networkx as nx
import pytest

import dags_mock as m
from autoforge.dags.build import DagError, DagKnobs, build_dag, build_dags, dag_depth, topo_order, validate_dag
from autoforge.dags.graph import EdgeJudgement, EdgeVerdict, build_graph, to_networkx
from autoforge.domain.keys import output_paths
from autoforge.dags.reasoning import OPS, ReasoningError, UnknownOpError, apply_op, describe_op
from autoforge.dags.sequences import merge_pair, merge_sequences, random_walks, sample_sequences
from autoforge.errors import ConfigError
from autoforge.types import ArgSource, Binding, DagNode, TaskDag, ToolSequence


@pytest.fixture(scope="module")
def env():
    return m.make_env()


@pytest.fixture(scope="module")
def tools():
    return m.make_tools()


@pytest.fixture(scope="module")
def graph(env, tools):
    return build_graph(env, tools)


def by_name(tools):
    return {t.name: t for t in tools}


# --------------------------------------------------------------------------- graph


def test_output_paths_flatten_lists():
    paths = output_paths(by_name(m.make_tools())["list_user_orders"].output_schema)
    assert paths["orders.*.order_id"] == {"string"}
    assert paths["orders.*.total"] == {"number"}
    assert paths["orders"] == {"array"}


def test_graph_edges_match_hand_known(graph):
    assert {(e.src, e.dst) for e in graph.edges} == m.EXPECTED_EDGES
    edges = {(e.src, e.dst): e.bindings for e in graph.edges}
    assert edges[("find_user_id_by_email", "list_user_orders")] == [Binding(output_path="user_id", param="user_id")]
    assert Binding(output_path="orders.*.order_id", param="order_id") in edges[("list_user_orders", "cancel_order")]
    # a user's email is not an identifier: no edge into the email lookup, no name clash user -> product
    assert ("get_user", "find_user_id_by_email") not in edges
    assert ("get_user", "find_product_id_by_name") not in edges
    g = to_networkx(graph)
    assert isinstance(g, nx.DiGraph) and g.number_of_edges() == len(m.EXPECTED_EDGES)


def test_graph_id_is_content_hash(env, tools):
    assert build_graph(env, tools).graph_id == build_graph(env, list(reversed(tools))).graph_id


class ScriptedClient:
    """Stands in for the LLM: accepts only the edges it was scripted with."""

    is_offline = False
    name = "openai:scripted"

    def __init__(self, accept):
        self.accept = accept
        self.calls = []

    def structured(self, step, messages, response_model, **kw):
        import json

        self.calls.append(step)
        payload = json.loads(messages[-1]["content"])
        verdicts = [EdgeVerdict(src=c["src"], dst=c["dst"], valid=(c["src"], c["dst"]) in self.accept,
                                bindings=[Binding(**b) for b in c["bindings"]])
                    for c in payload["candidates"]]
        verdicts.append(EdgeVerdict(src="nope", dst="nada", valid=True))  # not a candidate: ignored
        return response_model.model_validate(EdgeJudgement(edges=verdicts).model_dump())


def test_llm_judged_edges(env, tools):
    accept = {("find_user_id_by_email", "list_user_orders"), ("list_user_orders", "cancel_order")}
    client = ScriptedClient(accept)
    g = build_graph(env, tools, client)
    assert client.calls and set(client.calls) == {"tool_graph"}
    assert {(e.src, e.dst) for e in g.edges} == accept
    assert g.method == "openai:scripted"


# --------------------------------------------------------------------------- walks and merges


def test_walks_respect_length_seed_and_dedupe(env, tools, graph):
    w1 = random_walks(graph, tools, 25, seed=3, min_len=2, max_len=4, env=env)
    w2 = random_walks(graph, tools, 25, seed=3, min_len=2, max_len=4, env=env)
    assert [s.tools for s in w1] == [s.tools for s in w2]
    assert len({tuple(s.tools) for s in w1}) == len(w1)
    bn = by_name(tools)
    edges = {(e.src, e.dst) for e in graph.edges}
    for s in w1:
        assert 2 <= len(s.tools) <= 4
        assert bn[s.tools[0]].kind == "lookup"  # start rule "lookup"
        assert bn[s.tools[-1]].effect == "write"  # reads after the last write are cut
        assert all((a, b) in edges for a, b in zip(s.tools, s.tools[1:]))
    w3 = random_walks(graph, tools, 25, seed=4, min_len=2, max_len=4, env=env)
    assert [s.tools for s in w3] != [s.tools for s in w1]
    with pytest.raises(ConfigError):
        random_walks(graph, tools, 5, seed=0, min_len=3, max_len=2)
    with pytest.raises(ConfigError, match="start rule"):
        random_walks(graph, tools, 5, seed=0, start="middle")


def test_merge_removes_redundant_lookup(env, tools):
    a = ToolSequence(seq_id="a", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "cancel_order"])
    b = ToolSequence(seq_id="b", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "update_delivery_date"])
    merged, removed = merge_pair(a, b, tools, env=env)
    # the user lookup is shared; the orders list is read again because cancel_order wrote orders in between
    assert merged.tools == ["find_user_id_by_email", "list_user_orders", "cancel_order", "list_user_orders", "update_delivery_date"]
    assert merged.requirements == [0, 0, 0, 1, 1]
    assert removed == 1 and merged.source == "merge" and merged.parents == ["a", "b"]
    c = ToolSequence(seq_id="c", env_id=m.ENV_ID, tools=["find_user_id_by_email", "get_user", "create_order"])
    merged2, removed2 = merge_pair(b, c, tools, env=env)
    assert merged2.tools.count("find_user_id_by_email") == 1 and removed2 == 1


def test_merge_sequences_distinct(env, tools, graph):
    walks = random_walks(graph, tools, 20, seed=1, env=env)
    merged = merge_sequences(walks, tools, 10, seed=2, env=env)
    assert merged and len({s.seq_id for s in merged}) == len(merged)
    assert all(s.source == "merge" and len(s.parents) == 2 and 1 in s.requirements for s in merged)


# --------------------------------------------------------------------------- reasoning ops


ITEMS = [{"id": "A", "total": 5.0, "status": "open", "due": "2025-01-30"},
         {"id": "B", "total": 9.5, "status": "closed", "due": "2025-01-02"},
         {"id": "C", "total": 7.0, "status": "open", "due": "2025-02-11"}]


def test_reasoning_ops_semantics():
    assert apply_op("argmax", {"items": ITEMS}, {"field": "total"})["id"] == "B"
    assert apply_op("argmin", {"items": ITEMS}, {"field": "total"})["id"] == "A"
    assert apply_op("argmax", {"items": ITEMS}, {"field": "due"})["id"] == "C"  # ISO dates order as strings
    assert [x["id"] for x in apply_op("filter", {"items": ITEMS, "value": "open"}, {"field": "status"})] == ["A", "C"]
    assert apply_op("find", {"items": ITEMS, "value": "closed"}, {"field": "status"})["id"] == "B"
    assert apply_op("count", {"items": ITEMS}, {}) == 3
    assert apply_op("count", {"items": ITEMS}, {"field": "status", "equals": "open"}) == 2
    assert apply_op("sum", {"items": ITEMS}, {"field": "total"}) == 21.5
    assert apply_op("compare", {"left": ITEMS[0], "right": ITEMS[2]}, {"field": "total", "pick": "max"})["id"] == "C"
    assert apply_op("compare", {"left": ITEMS[0], "right": ITEMS[2]}, {"field": "total", "pick": "min"})["id"] == "A"
    assert apply_op("add_days", {"date": "2025-01-30"}, {"days": 3}) == "2025-02-02"
    assert apply_op("add_days", {"date": "2025-03-01T10:00:00"}, {"days": -1}) == "2025-02-28T10:00:00"
    assert apply_op("add", {"value": 4}, {"delta": 3}) == 7


def test_reasoning_ops_fail_loudly():
    tie = ITEMS + [{"id": "D", "total": 9.5}]
    with pytest.raises(ReasoningError, match="tie"):
        apply_op("argmax", {"items": tie}, {"field": "total"})
    with pytest.raises(ReasoningError, match="exactly one"):
        apply_op("find", {"items": ITEMS, "value": "open"}, {"field": "status"})
    with pytest.raises(ReasoningError):
        apply_op("argmin", {"items": []}, {"field": "total"})
    with pytest.raises(ReasoningError):
        apply_op("add_days", {"date": "next tuesday"}, {"days": 1})
    with pytest.raises(UnknownOpError, match="valid ops"):
        apply_op("median", {"items": ITEMS}, {})
    assert describe_op("argmax", {"field": "total"}, "order") == "the order with the highest total"
    assert describe_op("argmin", {"field": "delivery_date"}, "order") == "the order with the earliest delivery date"
    assert set(OPS) >= {"argmax", "argmin", "filter", "find", "count", "sum", "compare", "add_days", "add"}


# --------------------------------------------------------------------------- DAGs


def test_build_dag_inserts_select_for_lists(env, tools, graph):
    seq = ToolSequence(seq_id="s1", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "cancel_order"])
    dag = build_dag(seq, graph, tools, env, seed=0, knobs=DagKnobs(p_chain=0, p_find=0, p_compare=0))
    kinds = [(n.kind, n.tool or n.op) for n in dag.nodes]
    assert kinds[:2] == [("tool", "find_user_id_by_email"), ("tool", "list_user_orders")]
    r = next(n for n in dag.nodes if n.kind == "reasoning")
    assert r.op in ("argmax", "argmin") and r.params["field"] in ("total", "quantity", "delivery_date")
    cancel = next(n for n in dag.nodes if n.tool == "cancel_order")
    assert cancel.args["order_id"] == ArgSource(kind="node", node=r.node_id, path="order_id")
    assert dag.nodes[0].args["email"].kind == "user"
    assert nx.is_directed_acyclic_graph(nx.DiGraph(dag.edges)) and dag_depth(dag) == 4
    assert [n.node_id for n in topo_order(dag)] == ["n0", "n1", r.node_id, "n2"]


def test_build_dag_add_days_and_hoisted_lookup(env, tools, graph):
    seq = ToolSequence(seq_id="s2", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "update_delivery_date"])
    dag = build_dag(seq, graph, tools, env, seed=0, knobs=DagKnobs(p_add_days=1.0))
    upd = next(n for n in dag.nodes if n.tool == "update_delivery_date")
    src = dag.nodes[[n.node_id for n in dag.nodes].index(upd.args["delivery_date"].node)]
    assert src.op == "add_days" and src.args["date"].path == "delivery_date"
    # the user's id is looked up (find_user is moved before create_order), not asked for
    seq2 = ToolSequence(seq_id="s3", env_id=m.ENV_ID, tools=["find_product_id_by_name", "create_order", "find_user_id_by_email"])
    dag2 = build_dag(seq2, graph, tools, env, seed=0)
    create = next(n for n in dag2.nodes if n.tool == "create_order")
    assert create.args["user_id"].kind == "node" and create.args["product_id"].kind == "node"


def test_validate_dag_rejects_bad_dags(tools):
    bn = by_name(tools)
    gold = m.gold_dag()
    validate_dag(gold, bn)
    cyclic = gold.model_copy(update={"edges": gold.edges + [("n2", "n0")]})
    with pytest.raises(DagError) as e:
        validate_dag(cyclic, bn)
    assert e.value.reason == "cyclic_dag"
    unsourced = gold.model_copy(update={"nodes": gold.nodes[:3] + [DagNode(node_id="n2", kind="tool", tool="cancel_order")]})
    with pytest.raises(DagError) as e:
        validate_dag(unsourced, bn)
    assert e.value.reason == "unsourced_argument"
    reads = TaskDag(dag_id="d", env_id=m.ENV_ID, nodes=gold.nodes[:2], edges=[("n0", "n1")])
    with pytest.raises(DagError) as e:
        validate_dag(reads, bn)
    assert e.value.reason == "no_write_tool"
    bad_op = gold.model_copy(update={"nodes": [n if n.kind == "tool" else n.model_copy(update={"op": "vibes"}) for n in gold.nodes]})
    with pytest.raises(DagError) as e:
        validate_dag(bad_op, bn)
    assert e.value.reason == "unknown_op"


def test_build_dags_over_sampled_sequences(env, tools, graph):
    seqs = sample_sequences(graph, tools, 20, seed=5, env=env)
    dags, rejections = build_dags(graph, seqs, tools, env, seed=5, variants=2)
    assert len(dags) >= len(seqs) and not rejections
    assert any(d.n_requirements == 2 for d in dags)
    assert any(n.kind == "reasoning" for d in dags for n in d.nodes)
    again, _ = build_dags(graph, seqs, tools, env, seed=5, variants=2)
    assert [d.dag_id for d in again] == [d.dag_id for d in dags]


# --------------------------------------------------------------------------- one lookup per user, new reasoning ops


def test_merge_keeps_one_id_lookup_even_after_a_write(env, tools):
    """find_user_id_by_email returns only the id, which a write to users does not change: the second is redundant."""
    bn = by_name(tools)
    tier = bn["cancel_order"].model_copy(update={"name": "set_user_tier", "collection": "users"})
    a = ToolSequence(seq_id="a", env_id=m.ENV_ID, tools=["find_user_id_by_email", "set_user_tier"])
    b = ToolSequence(seq_id="b", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "cancel_order"])
    merged, removed = merge_pair(a, b, [*tools, tier], env=env)
    assert removed == 1 and merged.tools.count("find_user_id_by_email") == 1
    # a full read (get_user) after a write to users still sees new data: it stays
    c = ToolSequence(seq_id="c", env_id=m.ENV_ID, tools=["find_user_id_by_email", "get_user", "set_user_tier"])
    d = ToolSequence(seq_id="d", env_id=m.ENV_ID, tools=["get_user", "list_user_orders", "cancel_order"])
    assert merge_pair(c, d, [*tools, tier], env=env)[0].tools.count("get_user") == 2


def test_dag_asks_the_user_once_for_their_identity(env, tools, graph):
    seq = ToolSequence(seq_id="s4", env_id=m.ENV_ID, requirements=[0, 0, 0, 1, 1, 1],
                       tools=["find_user_id_by_email", "list_user_orders", "cancel_order",
                              "find_user_id_by_email", "list_user_orders", "update_delivery_date"])
    dag = build_dag(seq, graph, tools, env, seed=0)
    assert [n.tool for n in dag.nodes if n.kind == "tool"].count("find_user_id_by_email") == 1
    facts = [s.fact for n in dag.nodes for s in n.args.values() if s.kind == "user"]
    assert facts.count("email") == 1 and "email_2" not in facts and dag.n_requirements == 2


def test_fact_names_tell_roles_apart(env, tools, graph):
    """A find/filter value is named field-first (order_status), a second write's value by its entity."""
    seq = ToolSequence(seq_id="s5", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "cancel_order"])
    dag = build_dag(seq, graph, tools, env, seed=0, knobs=DagKnobs(p_compare=0, p_chain=1))
    assert "order_status" in {s.fact for n in dag.nodes for s in n.args.values() if s.kind == "user"}


def _ops(dag):
    return {n.op for n in dag.nodes if n.kind == "reasoning"}


def test_compare_is_placed_as_a_list_choice(env, tools, graph):
    seq = ToolSequence(seq_id="s6", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "cancel_order"])
    dag = build_dag(seq, graph, tools, env, seed=0, knobs=DagKnobs(p_compare=1))
    cmp_ = next(n for n in dag.nodes if n.op == "compare")
    left, right = (next(n for n in dag.nodes if n.node_id == cmp_.args[k].node) for k in ("left", "right"))
    assert {left.op, right.op} == {"argmax", "argmin"} and left.params["field"] == right.params["field"]
    assert cmp_.params["field"] != left.params["field"] and cmp_.params["pick"] in ("max", "min")
    cancel = next(n for n in dag.nodes if n.tool == "cancel_order")
    assert cancel.args["order_id"] == ArgSource(kind="node", node=cmp_.node_id, path="order_id")


def test_count_and_sum_feed_a_numeric_write(env, tools, graph):
    """create_order.quantity from the number of my orders, or from the sum of their quantities."""
    seq = ToolSequence(seq_id="s7", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "create_order"])
    seen = {}
    for seed in range(30):
        dag = build_dag(seq, graph, tools, env, seed=seed, knobs=DagKnobs(p_aggregate=1))
        create = next(n for n in dag.nodes if n.tool == "create_order")
        src = next(n for n in dag.nodes if n.node_id == create.args["quantity"].node)
        assert src.op in ("count", "sum")
        seen.setdefault(src.op, src)
    assert set(seen) == {"count", "sum"}
    assert seen["sum"].params == {"field": "quantity"}
    # no aggregate for a parameter that is not a count or an amount
    assert not any(op in ("count", "sum") for op in _ops(build_dag(
        ToolSequence(seq_id="s8", env_id=m.ENV_ID, tools=["find_user_id_by_email", "list_user_orders", "update_delivery_date"]),
        graph, tools, env, seed=0, knobs=DagKnobs(p_aggregate=1))))


def test_sampled_dags_use_every_op_family(env, tools, graph):
    seqs = sample_sequences(graph, tools, 30, seed=1, env=env)
    dags, _ = build_dags(graph, seqs, tools, env, seed=1, variants=2)
    ops = set().union(*(_ops(d) for d in dags))
    assert {"compare", "count", "sum", "filter", "add_days"} <= ops and ops & {"argmax", "argmin"}


# --------------------------------------------------------------------------- adaptive start rule


def test_auto_start_tries_every_rule_and_ranks_lookups_first():
    from autoforge.dags.sample import sample_env
    from autoforge.dags.sequences import start_tools
    from autoforge.pipeline import SampleParams

    knobs = SampleParams().model_dump(include={"min_len", "max_len", "start", "dag_variants"})  # the stage's defaults
    env, tools = m.make_env(), m.make_tools()
    res = sample_env(env, tools, seed=0, walks=10, merges=0, **knobs)  # the mock shop has lookups
    rules = [s.start_rule for s in res.sequences]
    assert len(res.sequences) == 10 and rules.count("lookup") > len(rules) / 2  # walks a user would make rank first
    assert set(res.starts) == {"lookup", "read", "entry", "any"}  # every rule was tried, each counted
    assert sum(c["kept"] for c in res.starts.values()) == 10 and res.starts["lookup"]["kept"] == rules.count("lookup")
    assert all(s.start_rule == "lookup" for s in res.sequences if s.tools[0].startswith("find_"))
    assert "lookup " in res.row()["starts"]
    # without its lookups, walks start at any read
    no_lookup = [t for t in tools if not t.name.startswith("find_")]
    res = sample_env(env, no_lookup, seed=0, walks=10, merges=0, **knobs)
    assert res.sequences and "read" in {s.start_rule for s in res.sequences} and "lookup" not in {s.start_rule for s in res.sequences}
    graph = build_graph(env, tools)
    keys = {c.primary_key for c in env.state_schema.collections}
    entry = start_tools(graph, {t.name: t for t in tools}, keys, "entry")
    assert "find_user_id_by_email" in entry and "get_order" not in entry
    # with no write at all, walks over reads become answer sequences (the last read answers the user)
    reads = sample_env(env, [t for t in tools if t.effect == "read"], seed=0, walks=5, merges=0, **knobs)
    assert reads.sequences and {s.goal for s in reads.sequences} == {"answer"}
    assert reads.dags and all(d.answer is not None for d in reads.dags)
    # with nothing to walk at all, the rejection says which rules were tried
    none = sample_env(env, [], seed=0, walks=5, merges=0, **knobs)
    assert not none.sequences and "lookup, read, entry, any" in none.rejections[-1].detail
