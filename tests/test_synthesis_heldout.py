"""Generalisation: tool docs the offline rules were not written against (tests/fixtures/heldout_tooldocs).

Four domains written unlike the bundled corpus: an MCP vet clinic with dotted, resource-first
names (``pets.get``, ``appointments.check_in``) and camelCase ids with dashed patterns
(``PET-0007``); an OpenAPI 3 YAML asset tracker with kebab-case operationIds, path parameters
and ids that are not called ``*_id`` (``assetTag``, ``employeeNumber``, ``heldBy``) and a
``state`` query parameter; an OpenAI ``$defs`` gym with nested objects, ``anyOf``, ``from``/``state``
parameters and verbs such as ``freeze_membership`` and ``reassign_trainer``; an OpenAI courier
with camelCase and kebab names, a tool named ``return`` and a ``class`` parameter.

Same bar as the bundled corpus (issue 3 "Done when"): >= 90% of tools accepted per domain and
every accepted tool runs in the sandbox on the sample state, called with its public names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoforge.envs.runtime import Environment
from autoforge.envs.smoke import smoke_arguments
from autoforge.envs.synthesis import synthesize_environment, toolset_specs
from autoforge.tooldocs.ingest import ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "heldout_tooldocs"
CORPUS = ingest_paths([FIXTURES])
DOMAINS = sorted(t.name for t in CORPUS.toolsets)
_RESULTS: dict = {}


def synth(domain: str):
    if domain not in _RESULTS:
        toolset = next(t for t in CORPUS.toolsets if t.name == domain)
        specs = toolset_specs(toolset, CORPUS.specs)
        _RESULTS[domain] = (synthesize_environment(toolset, specs), specs)
    return _RESULTS[domain]


def test_the_heldout_docs_ingest_cleanly():
    assert DOMAINS == ["courier", "gym", "it_assets", "vet_clinic"] and not CORPUS.errors
    assert {d.format for d in CORPUS.docs} == {"mcp", "openapi", "openai"}


@pytest.mark.parametrize("domain", DOMAINS)
def test_heldout_domain_synthesizes_and_every_accepted_tool_runs(domain):
    res, specs = synth(domain)
    env = res.environment
    rate = env.n_tools_accepted / env.n_tools
    print(f"{domain}: {env.n_tools_accepted}/{env.n_tools} accepted ({rate:.0%})")
    assert rate >= 0.9, {t.name: t.reason for t in res.tools if t.status == "rejected"}
    kinds = {t.kind for t in res.accepted}
    assert {"get", "list", "create"} <= kinds and len(kinds) >= 4, kinds
    assert "generic" not in kinds  # every tool was read by a real template
    by_spec = {s.tool_id: s for s in specs}
    with Environment(res.tools, timeout_s=5) as rt:
        rt.reset(env.sample_state)
        start = rt.state_hash()
        n_ok = 0
        for tool in res.accepted:
            rt.reset(env.sample_state)
            args = smoke_arguments(by_spec[tool.tool_id], env.sample_state, env.state_schema, tool.collection,
                                   tool.kind, arg_map=tool.arg_map)
            assert set(args) <= set(tool.parameters["properties"])  # public names only
            obs = rt.call(tool.name, args)
            assert obs.kind in ("ok", "tool_error"), (tool.name, args, obs)
            n_ok += obs.ok
            if tool.effect == "read" or obs.kind == "tool_error":
                assert rt.state_hash() == start, f"{tool.name} ({tool.effect}, {obs.kind}) changed the state"
        assert n_ok >= 0.8 * len(res.accepted)  # the smoke call reaches the success path, not only errors


def _collections(domain: str) -> dict:
    return {c.name: c for c in synth(domain)[0].environment.state_schema.collections}


def _tools(domain: str) -> dict:
    return {t.name: t for t in synth(domain)[0].tools}


def test_resource_first_names_and_dashed_id_patterns_read_as_entities():
    colls = _collections("vet_clinic")
    assert set(colls) == {"owners", "pets", "vets", "appointments", "vaccinations", "invoices"}
    assert colls["pets"].id_prefix == "PET-" and all(k.startswith("PET-") for k in synth("vet_clinic")[0].environment.sample_state["pets"])
    tools = _tools("vet_clinic")
    kinds = {n: (t.kind, t.collection) for n, t in tools.items()}
    assert kinds["pets.get"] == ("get", "pets") and kinds["pets.list"] == ("list", "pets")
    assert kinds["owners.find_by_phone"] == ("lookup", "owners") and kinds["appointments.book"] == ("create", "appointments")
    assert kinds["appointments.check_in"] == ("status", "appointments") and kinds["invoices.pay"] == ("amount", "invoices")
    assert tools["pets.get"].function_name == "pets_get" and tools["pets.get"].arg_map == {"petId": "pet_id"}


def test_ids_not_named_id_are_found_from_their_documented_patterns():
    colls = _collections("it_assets")
    assert set(colls) == {"assets", "employees", "locations", "tickets"}
    assets = {f.name: f for f in colls["assets"].fields}
    assert assets["employee_id"].ref == "employees" and assets["location_id"].ref == "locations"  # heldBy, locationCode
    tools = _tools("it_assets")
    assert tools["check-out-asset"].arg_map == {"assetTag": "asset_id", "employeeNumber": "employee_id", "dueDate": "due_date"}
    assert tools["list-locations"].arg_map == {"state": "state_"}
    courier = _collections("courier")
    assert set(courier) == {"customers", "shipments", "depots"}  # trackingNumber -> shipments (trackShipment, cancelShipment)
    assert _tools("courier")["return"].function_name == "return_" and _tools("courier")["return"].kind == "status"


def test_heldout_write_tools_do_what_their_docs_say():
    res, _ = synth("it_assets")
    state = res.environment.sample_state
    in_stock = next(k for k, a in sorted(state["assets"].items()) if a["status"] == "in_stock")
    employee = sorted(state["employees"])[0]
    with Environment(res.tools) as env:
        env.reset(state)
        out = env.call("check-out-asset", {"assetTag": in_stock, "employeeNumber": employee, "dueDate": "2025-02-01"})
        assert out.ok and out.output["status"] == "checked_out" and out.output["employee_id"] == employee
        again = env.call("check-out-asset", {"assetTag": in_stock, "employeeNumber": employee})
        assert again.kind == "tool_error"  # only in_stock assets can be checked out
        back = env.call("check-in-asset", {"assetTag": in_stock})
        assert back.ok and back.output["status"] == "in_stock"
        assert env.call("get-asset", {"assetTag": "AT99999"}).kind == "tool_error"
        assert env.call("get-asset", {"assetTag": "bad"}).kind == "invalid_arguments"  # the public schema's pattern
    gym, _ = synth("gym")
    state = gym.environment.sample_state
    active = next(k for k, m in sorted(state["members"].items()) if m["status"] == "active")
    with Environment(gym.tools) as env:
        env.reset(state)
        frozen = env.call("freeze_membership", {"member_id": active, "until": "2025-03-01"})
        assert frozen.ok and frozen.output["status"] == "frozen"
        assert env.call("freeze_membership", {"member_id": active, "until": "2025-03-01"}).kind == "tool_error"
        moved = env.call("update_member_address", {"member_id": active, "street": "1 Main St", "city": "Austin",
                                                   "state": "TX"})
        assert moved.ok and moved.output["state"] == "TX"
        assert env.call("list_payments", {"member_id": active, "from": "2025-01-01"}).ok
