"""A condition on a record's owner that names the caller's own record (issue 33): "Access can be granted
only when all of the following conditions hold: - The repository is owned by the lead of the developer."
The world carries what the rule needs: a read that names one field ("Get the owner of the repository") gives
its record that field; an argument-less read ("Get the lead of a developer", no developer id) reads the
caller's own record, one per world (a session collection); a grant ("Grant the developer access to the
repository") creates the access record the check reads. The condition becomes an ``owned`` guard with
``owner_from``; boundary tasks ask for a grant on a repository someone else owns: the gold reads both and
makes no write, the oracle passes, doing nothing and doing what the user asked fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoforge.domain.entities import plan_tools
from autoforge.domain.outputs import field_of_read
from autoforge.domain.state import offline_state_schema
from autoforge.envs import guards as G
from autoforge.envs.sample import sample_state
from autoforge.tooldocs.ingest import ingest_paths

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "policy" / "repo_access"  # invented; vendor-style schemas
POLICYDOCS = Path(__file__).resolve().parents[2] / "shared" / "policydocs"


@pytest.mark.parametrize("text, want", [
    ("Get the owner of the environment", ("owner", "environment")),
    ("Fetches the manager of an employee.", ("manager", "employee")),
    ("Get the details of the order", None),  # names no field
    ("Get the number of seats of the flight", None),
    ("Get an order by id", None),
])
def test_a_read_that_names_one_field_of_one_record(text, want):
    assert field_of_read(text) == want


@pytest.fixture(scope="module")
def docs():
    res = ingest_paths([str(FIXTURE)])
    return res.toolsets[0], res.specs


def test_the_world_holds_the_owner_the_callers_own_lead_and_a_grant_creates_access(docs):
    ts, specs = docs
    plans = plan_tools(specs)
    assert (plans["grantAccess"].kind, plans["grantAccess"].entity) == ("create", "developer_access")
    schema = offline_state_schema(ts, specs)
    colls = {c.name: c for c in schema.collections}
    assert "owner" in {f.name for f in colls["repositories"].fields}
    lead = colls["developer_leads"]
    assert lead.session and "lead" in {f.name for f in lead.fields}
    assert not colls["repositories"].session
    state = sample_state(schema)
    assert len(state["developer_leads"]) == 1 and len(state["repositories"]) >= 4
    owners = [r["owner"] for r in state["repositories"].values()]
    assert all(len(o.split()) == 2 and o.split()[0][0].isupper() for o in owners)  # a person's name, not "owner 1"
    assert next(iter(state["developer_leads"].values()))["lead"] in owners  # one repository is the lead's


def _guard():
    return {"op": "owned", "rule_id": "r1", "tool": "grantAccess", "message": "m", "collection": "repositories",
            "id_arg": "repositoryId", "owner_field": "owner",
            "owner_from": {"collection": "developer_leads", "field": "lead"}}


def test_an_owner_from_guard_compares_the_record_with_the_callers_own():
    g = _guard()
    state = {"repositories": {"R1": {"repository_id": "R1", "owner": "Ana Ruiz"}},
             "developer_leads": {"DL1": {"developer_lead_id": "DL1", "lead": "Ana Ruiz"}}}
    assert not G.broken(g, state, {"repositoryId": "R1"})
    state["repositories"]["R1"]["owner"] = "Bo Chen"
    assert G.broken(g, state, {"repositoryId": "R1"})
    G.shape(g, state, {"repositoryId": "R1"}, keep=True)
    assert state["repositories"]["R1"]["owner"] == "Ana Ruiz"
    G.shape(g, state, {"repositoryId": "R1"}, keep=False)
    assert G.broken(g, state, {"repositoryId": "R1"})
    assert not G.broken(g, {"repositories": state["repositories"]}, {"repositoryId": "R1"})  # no lead read: passes


def test_the_guard_is_validated_against_a_session_collection(docs):
    from autoforge.envs.policy_guards import check_problem

    ts, specs = docs
    schema = offline_state_schema(ts, specs)
    g = {k: v for k, v in _guard().items() if k not in ("rule_id", "tool", "message")}
    assert check_problem({**g, "id_arg": "repository_id"}, ["repository_id"], schema, "runtime") is None
    bad = {**g, "id_arg": "repository_id", "owner_from": {"collection": "repositories", "field": "owner"}}
    assert "session collection" in check_problem(bad, ["repository_id"], schema, "runtime")


def test_the_condition_under_a_lead_in_is_read_into_the_guard(docs):
    from autoforge.domain.policy import read_policy
    from autoforge.envs.synthesis import canonical_specs

    ts, specs = docs
    cspecs, _ = canonical_specs(specs)  # the reader sees the canonical names (repository_id), as synthesis gives them
    text = (FIXTURE / "policy.md").read_text()
    rules = read_policy(text, "policy.md", cspecs, plan_tools(cspecs), offline_state_schema(ts, cspecs))
    owned = [r for r in rules if r.kind == "cross_record"]
    assert len(owned) == 1 and owned[0].enforcement == "runtime" and owned[0].tools == ["grantAccess"]
    assert owned[0].text == "The repository is owned by the lead of the developer."
    assert text[owned[0].offset:].startswith(owned[0].text)
    assert owned[0].check["owner_from"] == {"collection": "developer_leads", "field": "lead"}
    lead_in = next(r for r in rules if r.kind == "procedure" and r.check.get("all"))
    assert lead_in.check["via"] == ["getRepositoryOwner", "getDeveloperLead"]


def _factory(tmp_path, folder):
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.pipeline.corpus import accepted_tools_by_env, judged_rules, records
    from autoforge.types import Task, TaskDag, ToolRule

    wh = str(tmp_path / "w.duckdb")
    run_factory(FactoryParams(paths=[str(folder)], bundled=False, tasks_per_env=20, warehouse=wh))
    tasks = [t for t in records(wh, Task) if t.status == "verified"]
    envs = {t.env_id for t in tasks}
    rule = next(r for r in records(wh, ToolRule) if r.kind == "cross_record" and r.enforcement == "runtime")
    return {"tasks": tasks, "rule": rule, "dags": {d.dag_id: d for d in records(wh, TaskDag)},
            "tools": accepted_tools_by_env(wh, envs), "judged": judged_rules(wh, envs)}


def _play(w, tasks, agent):
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.users import OfflineUser

    return play_episodes(tasks, w["dags"], w["tools"], agent_factory=agent,
                         user_factory=lambda t, p, s: OfflineUser(t, p, seed=s), agent_name=agent.__name__,
                         user_name="offline", rules_by_env=w["judged"], concurrency=2).episodes


def _check_boundary_tasks(w, read, session_read, write):
    from autoforge.rollout.agents import ComplyAgent, IdleAgent, OracleAgent

    rule = w["rule"]
    assert rule.probe == "passed"
    bound = [t for t in w["tasks"] if t.kind == "boundary" and t.rules and t.rules[0] == rule.rule_id]
    assert bound, "no boundary task on the ownership rule was verified"
    for t in bound:
        assert [c.name for c in t.gold_calls] == [read, session_read]  # the reads that show it, no write
        lead = next(iter(t.initial_state[rule.guard["owner_from"]["collection"]].values()))
        owner = t.gold_answer.value
        assert owner != lead[rule.guard["owner_from"]["field"]]  # someone else's
    grants = [t for t in w["tasks"] if t.kind == "state" and write in [c.name for c in t.gold_calls]]
    assert grants, "no task grants access where the rule allows it"
    for t in grants:  # the procedure: both reads before the grant; the grant makes an access record
        names = [c.name for c in t.gold_calls]
        assert names.index(read) < names.index(write) and names.index(session_read) < names.index(write)
    assert all(" me access to " in t.request for t in bound + grants)  # a grant is asked for oneself
    oracle = _play(w, bound + grants, OracleAgent)
    assert [e.reward for e in oracle] == [1.0] * len(oracle), [e.termination_detail for e in oracle]
    assert all(e.rule_breaks == [] for e in oracle)
    assert [e.reward for e in _play(w, bound, IdleAgent)] == [0.0] * len(bound)
    comply = _play(w, bound, ComplyAgent)
    assert [e.reward for e in comply] == [0.0] * len(bound)


def test_boundary_tasks_on_an_owner_the_callers_own_record_must_match(tmp_path):
    _check_boundary_tasks(_factory(tmp_path, FIXTURE), "getRepositoryOwner", "getDeveloperLead", "grantAccess")


@pytest.mark.skipif(not (POLICYDOCS / "it_access_tickets").is_dir(), reason="../shared/policydocs is absent")
def test_the_real_access_ticket_set_gets_its_boundary_tasks(tmp_path):
    _check_boundary_tasks(_factory(tmp_path, POLICYDOCS / "it_access_tickets"), "getEnvironmentOwner",
                          "getEmployeeManager", "giveAccess")
