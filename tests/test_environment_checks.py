"""The acceptance checks stored per environment (v_environment_checks): whether the tool set has
state at all, which write tools a read leads to through the tool graph, and the stated rules."""

from __future__ import annotations

import json
from pathlib import Path

from autoforge.dags.graph import build_graph
from autoforge.dags.sample import unreachable_writes
from autoforge.pipeline import run_ingest, run_synthesis
from autoforge.pipeline.synthesize import environment_checks
from autoforge.types import EnvironmentRecord, ToolCode
from autoforge.warehouse import read_records

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"


def test_checks_are_stored_and_match_the_tool_graph(warehouse):
    run_ingest(warehouse, bundled=True)
    run_synthesis(warehouse)
    rows = {r["name"]: r for r in environment_checks(warehouse)}
    assert len(rows) == 11 and all(r["kind"] == "stateful" for r in rows.values())
    envs = {e.env_id: e for e in read_records(warehouse, EnvironmentRecord)}
    tools = read_records(warehouse, ToolCode)
    for env in envs.values():
        mine = [t for t in tools if t.env_id == env.env_id and t.status == "accepted"]
        assert env.n_write_tools == sum(t.effect == "write" for t in mine) > 0
        assert env.writes_unreachable == unreachable_writes(build_graph(env, mine), mine)
        row = rows[env.name]
        assert row["n_writes_reachable"] == env.n_write_tools - len(env.writes_unreachable)
        assert 0 <= row["reachable_share"] <= 1
        assert set(env.writes_standalone) <= set(env.writes_unreachable)
        assert row["n_writes_usable"] == row["n_writes_reachable"] + len(env.writes_standalone)


def test_a_stateless_tool_set_is_recognized_and_has_no_writes(warehouse):
    run_ingest(warehouse, paths=[FIXTURES / "effects_calculator.json"])
    run_synthesis(warehouse)
    (row,) = environment_checks(warehouse)
    assert row["kind"] == "stateless" and row["n_write_tools"] == 0 and row["reachable_share"] is None


def test_rules_of_the_prose_are_counted(warehouse):
    run_ingest(warehouse, paths=[FIXTURES / "rules_tickets.json"])
    run_synthesis(warehouse)
    (row,) = environment_checks(warehouse)
    assert row["n_rules"] >= 1 and row["n_rules_enforced"] >= 1
    assert row["n_rules_probe_passed"] == row["n_rules_enforced"] and row["n_rules_probe_failed"] == 0
    assert isinstance(json.loads(row["writes_unreachable"]) if isinstance(row["writes_unreachable"], str)
                      else row["writes_unreachable"], list)


def test_unreachable_writes_follow_the_edges():
    from autoforge.types import GraphEdge, ToolGraph

    def tool(name, effect):
        return ToolCode(code_id=name, env_id="e", tool_id=name, name=name, source="", status="accepted", effect=effect)

    tools = [tool("find", "read"), tool("get", "read"), tool("update", "write"), tool("archive", "write"),
             tool("purge", "write")]
    graph = ToolGraph(graph_id="g", env_id="e", tools=[t.name for t in tools],
                      edges=[GraphEdge(src="find", dst="update", bindings=[]),
                             GraphEdge(src="update", dst="archive", bindings=[])])
    assert unreachable_writes(graph, tools) == ["purge"]  # archive is reached through update


def test_outputs_the_docs_do_not_give_are_marked_derived(warehouse):
    run_ingest(warehouse, paths=[FIXTURES / "rules_tickets.json"])  # a real-doc style set with no output schemas
    run_ingest(warehouse, bundled=True)
    run_synthesis(warehouse)
    tools = read_records(warehouse, ToolCode)
    helpdesk = {e.env_id for e in read_records(warehouse, EnvironmentRecord) if e.name == "rules_tickets"}
    mine = [t for t in tools if t.env_id in helpdesk]
    assert mine and all(t.output_schema_source == "derived" and t.output_schema for t in mine)
    assert all(t.output_schema_source == "documented" for t in tools if t.env_id not in helpdesk)  # bundled: all documented
    rows = {r["name"]: r for r in environment_checks(warehouse)}
    assert rows["rules_tickets"]["n_outputs_derived"] == len([t for t in mine if t.status == "accepted"])
    assert rows["retail"]["n_outputs_derived"] == 0
