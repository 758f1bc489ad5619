"""Linked state from real-style docs: natural keys, state edges, argument rules, resource-first names.

Fixtures are documents of our own in the styles real docs use (tests/fixtures/realstyle): a blog
whose articles are selected by ``slug``, a note store keyed by ``key``, a smart home with no ids
at all, MCP tools whose rules are stated per parameter ("min 1, max 50", "Required unless ...")."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from autoforge.dags.graph import build_graph
from autoforge.dags.sample import unreachable_writes
from autoforge.domain import words as nm
from autoforge.domain.canonical import natural_keys
from autoforge.domain.argument_rules import argument_rule
from autoforge.envs.runtime import Environment
from autoforge.envs.synthesis import synthesize_environment
from autoforge.tooldocs import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"
REALDOCS = Path(__file__).resolve().parents[2] / "shared" / "realdocs"


def _synth(name: str):
    res = ingest_paths([FIXTURES / name])
    (ts,) = res.toolsets
    return res.specs, synthesize_environment(ts, res.specs)


@pytest.mark.parametrize("name,verb,rest", [
    ("issue_read", "read", ["issue"]), ("sub_issue_write", "write", ["sub", "issue"]),
    ("core_memory_add", "add", ["core", "memory"]), ("get_order", "get", ["order"]),
    ("issue_refund", "issue", ["refund"]), ("orders.get", "get", ["orders"]),
])
def test_resource_first_names_end_with_their_verb(name, verb, rest):
    assert nm.verb_of(name) == (verb, rest)


def test_natural_keys_are_read_from_the_tools_that_select_by_them():
    specs, _ = _synth("keys_blog.json")
    keys = natural_keys(specs)
    assert keys[("get_article", "slug")] == keys[("delete_article", "slug")] == "article"
    assert keys[("add_comment_to_article", "slug")] == "article"  # a reference to the article
    assert not any(p in ("title", "body", "tag") for _, p in keys)


def test_a_slug_keyed_delete_deletes_the_article_it_names():
    _, result = _synth("keys_blog.json")
    assert result.environment.n_tools_accepted == result.environment.n_tools
    tools = {t.name: t for t in result.accepted}
    assert tools["delete_article"].kind == "delete" and tools["update_article"].kind == "update"
    arts = result.environment.sample_state["articles"]
    key = sorted(arts)[0]
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(result.environment.sample_state))
        assert env.call("delete_article", {"slug": key}).ok
        assert key not in env.get_state()["articles"] and len(env.get_state()["articles"]) == len(arts) - 1
        again = env.call("delete_article", {"slug": key})
        assert again.kind == "tool_error"
    # the listing feeds the delete through the key, by entity
    graph = build_graph(result.environment, result.accepted)
    edge = next(e for e in graph.edges if (e.src, e.dst) == ("list_articles", "delete_article"))
    assert edge.kind == "data" and [(b.output_path, b.param) for b in edge.bindings] == [("articles.*.article_id", "slug")]


def test_a_key_value_store_adds_under_a_new_key_and_lists_its_keys():
    _, result = _synth("keys_notes_store.json")
    tools = {t.name: t for t in result.accepted}
    assert tools["notes_add"].kind == "create" and tools["notes_remove"].kind == "delete"
    graph = build_graph(result.environment, result.accepted)
    data = {(e.src, e.dst) for e in graph.edges if e.kind == "data"}
    assert ("notes_list_keys", "notes_remove") in data and ("notes_list_keys", "notes_replace") in data
    assert unreachable_writes(graph, result.accepted) == []
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(result.environment.sample_state))
        bad = env.call("notes_add", {"key": "Shopping List", "value": "eggs"})
        assert bad.kind == "tool_error" and "snake_case" in bad.to_text()
        assert env.call("notes_add", {"key": "shopping_list", "value": "eggs"}).ok
        assert env.call("notes_retrieve", {"key": "shopping_list"}).ok


def test_a_device_without_ids_is_linked_by_state_edges():
    """No tool takes an id: the status read reports the fields the setters change."""
    _, result = _synth("device_smart_home.json")
    graph = build_graph(result.environment, result.accepted)
    state = {(e.src, e.dst) for e in graph.edges if e.kind == "state"}
    assert state == {("showHomeStatus", "setTargetTemperature"), ("showHomeStatus", "setFanLevel"),
                     ("showHomeStatus", "closeWindows")}
    assert all(not e.bindings for e in graph.edges if e.kind == "state")
    assert unreachable_writes(graph, result.accepted) == []


def test_state_edges_only_fill_in_where_data_edges_do_not_reach():
    _, result = _synth("keys_blog.json")
    graph = build_graph(result.environment, result.accepted)
    state_dst = {e.dst for e in graph.edges if e.kind == "state"}
    data_only = graph.model_copy(update={"edges": [e for e in graph.edges if e.kind == "data"]})
    assert state_dst == set(unreachable_writes(data_only, result.accepted)) == {"add_comment_to_article", "create_article"}


@pytest.mark.parametrize("param,sentence,values", [
    (None, "At least one of body or reaction is required", ["one_of", "body", "reaction"]),
    ("body", "Required unless reaction is provided", ["one_of", "body", "reaction"]),
    ("reply_to", "Cannot be combined with reaction", ["excludes", "reply_to", "reaction"]),
    ("per_page", "Results per page for pagination (min 1, max 50)", ["range", 1, 50]),
    ("per_page", "Page size, between 1 and 25.", ["range", 1, 25]),
    ("fan", "The fan level from 0 to 5.", ["range", 0, 5]),
    ("per_page", "At most 20.", ["range", None, 20]),
    ("duplicate_of", "Required when state_reason is 'duplicate'", ["required_when", "duplicate_of", "state_reason", "duplicate"]),
    ("notify", "Use with 'update' method only", ["only_when", "notify", "method", "update"]),
    ("body", "Must be snake_case.", ["format", "body", "snake_case"]),
    ("body", "Cannot contain spaces.", ["format", "body", "no_spaces"]),
    ("url", "The page. Must start with 'http://' or 'https://'", ["starts_with", "url", ["http://", "https://"]]),
])
def test_argument_rule_phrasings(param, sentence, values):
    params = {"body": {"type": "string"}, "reaction": {"type": "string"}, "reply_to": {"type": "number"},
              "per_page": {"type": "integer"}, "fan": {"type": "integer"}, "duplicate_of": {"type": "number"},
              "state_reason": {"type": "string"}, "notify": {"type": "boolean"}, "method": {"type": "string"},
              "url": {"type": "string"}}
    rule = argument_rule(sentence, param, params)
    assert rule is not None and rule.values == values


def test_argument_rules_are_code_probed_and_refuse_without_a_change():
    _, result = _synth("args_mcp_threads.json")
    args = [r for r in result.rules if r.kind == "constraint"]
    assert {r.values[0] for r in args} == {"one_of", "excludes", "range", "required_when", "only_when"}
    assert all(r.enforcement == "code" and r.probe == "passed" for r in args), [(r.values, r.probe_detail) for r in args]
    threads = result.environment.sample_state["threads"]
    number = next(iter(threads.values()))["thread_id"]
    with Environment(result.accepted) as env:
        env.reset(copy.deepcopy(result.environment.sample_state))
        before = env.get_state()
        for call in ({"thread_number": number},  # neither body nor reaction
                     {"thread_number": number, "body": "hi", "reaction": "heart", "reply_to": 1}):
            obs = env.call("comment_write", call)
            assert obs.kind == "tool_error" and env.get_state() == before, obs
        obs = env.call("thread_read", {"thread_number": number, "per_page": 51})
        assert obs.kind == "tool_error" and "at most 50" in obs.to_text()
        assert env.call("comment_write", {"thread_number": number, "body": "hi"}).ok


@pytest.mark.skipif(not REALDOCS.is_dir(), reason="no ../shared/realdocs")
@pytest.mark.parametrize("toolset", ["openapi_realworld_conduit", "bfcl_memory_kv", "bfcl_vehicle_control",
                                     "mcp_github_issues", "bfcl_trading_bot"])
def test_real_docs_writes_are_reachable_from_a_read(toolset):
    """Issue 13's bar on real docs: >= 80% of a stateful set's writes are reachable from a read."""
    res = ingest_paths([REALDOCS / toolset])
    (ts,) = res.toolsets
    result = synthesize_environment(ts, res.specs)
    graph = build_graph(result.environment, result.accepted)
    writes = [t for t in result.accepted if t.effect == "write"]
    unreachable = unreachable_writes(graph, result.accepted)
    assert writes and len(unreachable) <= 0.2 * len(writes), unreachable
