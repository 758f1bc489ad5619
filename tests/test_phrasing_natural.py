"""Natural offline requests (autoforge.tasks.phrasing): fields named as words, a record's fields
grouped, one closing sentence naming the hidden facts, no redundant objects, and the offline user
still reveals every fact when asked by the name the request uses."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from autoforge import dialogue as D
from autoforge.rollout.users import OfflineUser
from autoforge.tasks.execute import DagRun
from autoforge.tasks.phrasing import StatePolicy, write_request
from autoforge.types import (ArgSource, CollectionSpec, DagNode, EnvironmentRecord, FieldSpec, Message, StateSchema,
                             Task, TaskDag, ToolCode)

HIDDEN_MARKERS = re.compile(r"I'll give you|I'll tell you|I can tell you|I have in mind|I can give you|ask me for|"
                            r"ready if you need", re.IGNORECASE)
NOTHING_STATED = StatePolicy(0, 0, 0, 0)


def _coll(name: str, entity: str, fields: list[str]) -> CollectionSpec:
    pk = f"{entity}_id"
    return CollectionSpec(name=name, entity=entity, primary_key=pk, id_prefix=entity[0].upper(),
                          fields=[FieldSpec(name=pk)] + [FieldSpec(name=f) for f in fields])


ENV = EnvironmentRecord(
    env_id="env-natural", name="car and shop", toolset_id="ts", backend="offline", status="ready", n_tools=8,
    n_tools_accepted=8,
    state_schema=StateSchema(collections=[
        _coll("cars", "car", ["status"]),
        _coll("fuel_tanks", "fuel_tank", ["fuelAmount"]),
        _coll("climate_controls", "climate_control", ["temperature"]),
        _coll("cruise_controls", "cruise_control", ["activate", "distanceToNextVehicle", "speed"]),
        _coll("accounts", "account", ["address1", "address2", "city", "country", "state", "zip"]),
        _coll("articles", "article", ["article", "title"]),
        _coll("orders", "order", ["amount", "order_type", "symbol"]),
    ]))


def _tool(name: str, effect: str, kind: str, collection: str, params: list[str]) -> ToolCode:
    return ToolCode(code_id=f"code-{name}", env_id=ENV.env_id, tool_id=f"tool-{name}", name=name, source="", status="accepted",
                    effect=effect, kind=kind, collection=collection,
                    parameters={"type": "object", "properties": {p: {"type": "string"} for p in params}})


TOOLS = {t.name: t for t in [
    _tool("displayCarStatus", "read", "list", "cars", ["option"]),
    _tool("fillFuelTank", "write", "generic", "fuel_tanks", ["fuelAmount"]),
    _tool("adjustClimateControl", "write", "generic", "climate_controls", ["temperature"]),
    _tool("setCruiseControl", "write", "generic", "cruise_controls", ["activate", "distanceToNextVehicle", "speed"]),
    _tool("updateAccountAddress", "write", "update", "accounts", ["account_id", "address1", "address2", "city", "country",
                                                                  "state", "zip"]),
    _tool("createArticle", "write", "create", "articles", ["title"]),
    _tool("updateArticle", "write", "update", "articles", ["slug", "article"]),
    _tool("place_order", "write", "create", "orders", ["amount", "order_type", "symbol"]),
]}


def _user(fact: str) -> ArgSource:
    return ArgSource(kind="user", fact=fact)


def _dag(*nodes: DagNode, n_requirements: int = 1) -> TaskDag:
    return TaskDag(dag_id="dag-natural", env_id=ENV.env_id, nodes=list(nodes), edges=[], n_requirements=n_requirements)


def _node(i: int, tool: str, args: dict[str, ArgSource], requirement: int = 0) -> DagNode:
    return DagNode(node_id=f"n{i}", kind="tool", tool=tool, args=args, requirement=requirement)


def _run(facts: dict) -> DagRun:
    return DagRun(calls=[], outputs={}, final_state={}, facts=facts)


CAR = (_dag(_node(0, "displayCarStatus", {"option": _user("option")}),
            _node(1, "fillFuelTank", {"fuelAmount": _user("fuelAmount")}),
            _node(2, "adjustClimateControl", {"temperature": _user("temperature")}, requirement=1),
            _node(3, "setCruiseControl", {"activate": _user("activate"), "distanceToNextVehicle": _user("distanceToNextVehicle"),
                                          "speed": _user("speed")}, requirement=1), n_requirements=2),
       {"option": "doors", "fuelAmount": 45.5, "temperature": 21.5, "activate": True, "distanceToNextVehicle": 120.25,
        "speed": 88.5})
ADDRESS_FIELDS = ["address1", "address2", "city", "country", "state", "zip"]
ADDRESS = (_dag(_node(0, "updateAccountAddress", {"account_id": _user("account_id"), **{f: _user(f) for f in ADDRESS_FIELDS}})),
           {"account_id": "A0003", "address1": "12 Elm St", "address2": "Apt 4", "city": "Springfield", "country": "US",
            "state": "OR", "zip": "97403"})
ARTICLE = (_dag(_node(0, "createArticle", {"title": _user("title")}),
                _node(1, "updateArticle", {"slug": ArgSource(kind="node", node="n0", path="article_id"),
                                           "article": _user("article")})),
           {"title": "Grand Atlas", "article": {"title": "Blue Summit", "body": "quiet canvas 32"}})
ORDERS = (_dag(_node(0, "place_order", {"amount": _user("amount"), "order_type": _user("order_type"), "symbol": _user("symbol")}),
               _node(1, "place_order", {"amount": _user("order_amount"), "order_type": _user("order_type_2"),
                                        "symbol": _user("symbol_2")}, requirement=1), n_requirements=2),
          {"amount": 10, "order_type": "Buy", "symbol": "S0001", "order_amount": 20, "order_type_2": "Sell", "symbol_2": "S0002"})
CASES = {"car": CAR, "address": ADDRESS, "article": ARTICLE, "orders": ORDERS}


def _request(case: str, seed: int, policy: StatePolicy = NOTHING_STATED):
    dag, facts = CASES[case]
    return write_request(dag, _run(facts), TOOLS, ENV, random.Random(seed), policy)


def _task(request: str, facts: dict) -> Task:
    return Task(task_id="t-natural", env_id=ENV.env_id, dag_id="dag-natural", request=request, user_facts=facts,
                initial_state={}, gold_state={}, gold_state_hash="", gold_calls=[], n_tool_calls=0, dag_depth=0,
                n_reasoning_nodes=0, n_requirements=1)


SEEDS = range(25)


@pytest.mark.parametrize("case", sorted(CASES))
def test_hidden_facts_are_named_once_in_one_sentence(case):
    for seed in SEEDS:
        text = _request(case, seed).request
        identity = any(s in text for s in ("so you can find me", "to find my account", "look me up"))
        # one closing sentence, not one "I'll give you" per field (and maybe one saying who the user is)
        assert 1 <= len(HIDDEN_MARKERS.findall(text)) <= 1 + identity, text
        for f in CASES[case][1]:
            if f != "account_id":  # the user's own account: the agent asks who they are
                assert D.names_fact(text, f), (f, text)


def test_camel_case_names_are_split_into_words():
    for seed in SEEDS:
        text = _request("car", seed).request
        for raw in ("fuelAmount", "distanceToNextVehicle", "fillFuelTank", "setCruiseControl"):
            assert raw not in text, text
        assert "fuel amount" in text and "distance to next vehicle" in text, text
        assert text.count("distance to next vehicle") == 1, text


def test_no_object_repeats_the_verbs_noun():
    for seed in SEEDS:
        text = _request("car", seed).request
        assert "climate control for the climate control" not in text and "tank for the fuel tank" not in text, text
        assert "adjust the climate control" in text and "fill the fuel tank" in text, text


def test_a_records_address_fields_are_grouped():
    for seed in SEEDS:
        text = _request("address", seed).request
        assert "new address" in text, text
        for f in ("address 1", "address 2", "city", "country", "zip"):
            assert len(re.findall(rf"\b{f}\b", text)) == 1, (f, text)


def test_a_whole_record_update_is_not_the_article_of_the_article():
    for seed in SEEDS:
        text = _request("article", seed).request
        assert "article of the article" not in text and "the value from" not in text, text
        assert "article details" in text, text  # a record-valued fact is named as details


def test_numbered_facts_are_named_by_ordinals_the_offline_user_understands():
    keys = list(ORDERS[1])
    text = _request("orders", 0).request
    assert "second order type" in text and "second symbol" in text and "order type 2" not in text, text
    assert D.asks_for_facts("What is the second order type?", keys) == ["order_type_2"]
    assert D.asks_for_facts("What is the order type?", keys) == ["order_type"]
    assert "another order" in text, text  # the same kind of record twice


def test_a_read_no_write_needs_is_asked_as_information():
    for seed in SEEDS:
        text = _request("car", seed).request
        assert "car status" in text, text
        assert D.names_fact(text, "option"), text


@pytest.mark.parametrize("case", sorted(CASES))
def test_no_hidden_value_leaks_and_the_offline_user_reveals_every_fact(case):
    facts = CASES[case][1]
    for seed in SEEDS:
        draft = _request(case, seed, StatePolicy())
        for f in draft.hidden:
            assert not D.states_value(draft.request, facts[f]), (f, draft.request)
        task = _task(draft.request, facts)
        # the agent asks back with the request's own words: every named fact is revealed
        user = OfflineUser(task)
        asked = f"Could you tell me the following? {draft.request}"
        reply = user.reply([Message(role="user", content=draft.request), Message(role="assistant", content=asked)])
        named = {f for f in draft.hidden if f != "account_id"}
        assert set(D.parse_fact_lines(reply.content, facts)) >= named, (draft.request, reply.content)
        # and one fact at a time, by the label the request uses
        for f in named:
            user = OfflineUser(task)
            reply = user.reply([Message(role="assistant", content=f"What is the {D.fact_label(f)}?")])
            assert D.parse_fact_lines(reply.content, facts) == {f: facts[f]}, (f, reply.content)


@pytest.mark.parametrize("case", sorted(CASES))
def test_phrasing_is_deterministic_and_varied(case):
    texts = [_request(case, s).request for s in SEEDS]
    assert texts == [_request(case, s).request for s in SEEDS]
    assert len(set(texts)) >= 5


def test_dialogue_names_camel_case_facts_as_words():
    assert D.fact_words("distanceToNextVehicle") == "distance to next vehicle"
    assert D.fact_words("address1") == "address 1" and D.fact_label("slug_2") == "second slug"
    for text in ("the fuel amount", "the fuelAmount", "the fuel_amount"):
        assert D.names_fact(text, "fuelAmount"), text
    assert D.parse_fact_lines(D.fact_line("fuelAmount", 4.5), ["fuelAmount"]) == {"fuelAmount": 4.5}


def test_realstyle_camel_case_fixture_gives_word_requests(tmp_path):
    from autoforge.pipeline import run_factory
    from autoforge.types import Task as T
    from autoforge.warehouse import read_records

    wh = str(tmp_path / "w.duckdb")
    fixture = Path(__file__).parent / "fixtures" / "realstyle" / "device_smart_home.json"
    run_factory(paths=[str(fixture)], bundled=False, tasks_per_env=10, warehouse=wh)
    tasks = read_records(wh, T)
    assert tasks
    for t in tasks:
        assert len(HIDDEN_MARKERS.findall(t.request)) <= 2, t.request  # the facts' sentence and the identity one
        for k in t.user_facts:
            if re.search(r"[a-z][A-Z]", k):
                assert k not in t.request and D.fact_words(k) in t.request, (k, t.request)


def test_tool_names_without_a_verb_and_with_an_article_or_adverb_read_as_english():
    tools = {t.name: t for t in [_tool("membership", "write", "generic", "accounts", []),
                                 _tool("try-again", "write", "generic", "accounts", []),
                                 _tool("ask-the-oracle", "write", "generic", "accounts", [])]}
    dag = _dag(_node(0, "membership", {}), _node(1, "try-again", {}), _node(2, "ask-the-oracle", {}))
    for seed in range(5):
        text = write_request(dag, _run({}), tools, ENV, random.Random(seed), NOTHING_STATED).request
        assert "take care of the membership" in text and "try again" in text and "ask the oracle" in text, text
        assert "the the" not in text and "try the again" not in text, text
