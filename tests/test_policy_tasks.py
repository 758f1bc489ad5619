"""Tasks that teach the rules (issue 33): generation and verification over a synthesized environment
whose policy (injected: autoforge.domain.policy.read_policy monkeypatched, as in tests/test_guards.py)
has runtime rules (a status rule, a limit on an argument) and judged ones (identify first, confirm
first). No verified task's gold breaks a rule; a candidate whose gold is refused is rejected naming the
rule; boundary tasks are made, record their rule, and score oracle 1.0, do-nothing 0.0, comply 0.0."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from autoforge.dags.build import build_dags
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import sample_sequences
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.envs.runtime import Environment
from autoforge.rollout.agents import ComplyAgent, IdleAgent, OracleAgent
from autoforge.rollout.batch import play_episodes
from autoforge.rollout.users import BOUNDARY_NOTE, OfflineUser, user_prompt, InjectionPlan
from autoforge.tasks.boundary import candidates, split
from autoforge.tasks.execute import DagExecutionError, run_dag
from autoforge.tasks.generate import boundary_count, generate_env, generate_tasks
from autoforge.tasks.phrasing import PhrasingError
from autoforge.tasks.rules import gold_breaks, judged_checks, task_rules
from autoforge.tasks.verify import verify_tasks
from autoforge.types import PolicyDoc, ToolCall

HOTEL = Path(__file__).resolve().parents[1] / "autoforge" / "data" / "tooldocs" / "hotel"
N_TASKS = 40
STATUS = "Cancelled bookings cannot be modified."
LIMIT = "At most 4 guests per booking."


def fake_read(text, source, specs, plans, schema):
    return [ParsedRule("source_status", STATUS, "status", [], "runtime", source=source, offset=0,
                       tools=["modify_booking_dates"],
                       check={"op": "status", "collection": "bookings", "id_arg": "booking_id", "field": "status",
                              "forbidden": ["cancelled"]}),
            ParsedRule("quantity_limit", LIMIT, "guests_count", [4], "runtime", source=source, offset=40,
                       tools=["create_booking"], check={"op": "arg_limit", "arg": "guests_count", "max": 4}),
            ParsedRule("conversation", "Look the guest up by email before cancelling.", None, [], "judged",
                       source=source, offset=80, tools=["cancel_booking"],
                       check={"op": "identify_first", "tools": ["cancel_booking"], "via": ["find_guest_id_by_email"]}),
            ParsedRule("conversation", "Confirm with the guest before cancelling.", None, [], "judged", source=source,
                       offset=140, tools=["cancel_booking"],
                       check={"op": "confirm_first", "tools": ["cancel_booking"]})]


@pytest.fixture(scope="module")
def world():
    from autoforge.domain import policy
    from autoforge.envs.synthesis import synthesize_environment
    from autoforge.tooldocs.ingest import ingest_paths

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policy, "read_policy", fake_read)
        mp.delenv("AUTOFORGE_BOUNDARY_SHARE", raising=False)
        res = ingest_paths([str(HOTEL)])
        ts = res.toolsets[0]
        doc = PolicyDoc(policy_id="p", toolset=ts.name, toolset_id=ts.toolset_id, source="policy.md", sha256="x",
                        text="(rules)", n_chars=7)
        syn = synthesize_environment(ts, res.specs, policies=[doc])
        env = syn.environment
        tools = [t for t in syn.tools if t.status == "accepted"]
        graph = build_graph(env, tools)
        seqs = sample_sequences(graph, tools, 60, seed=1, env=env)
        dags = build_dags(graph, seqs, tools, env, seed=1, variants=2)[0]
        judged = judged_checks(syn.rules)
        gen = generate_env(env, tools, dags, 0, tasks_per_env=N_TASKS, attempts_per_task=4, judged=judged)
        verified, results, rejections = verify_tasks(env, tools, gen.tasks, dags + gen.dags, judged=judged)
    rules = {r.text: r for r in syn.rules}
    return {"env": env, "tools": tools, "by_name": {t.name: t for t in tools}, "dags": {d.dag_id: d for d in dags + gen.dags},
            "raw_dags": dags, "judged": judged, "gen": gen, "tasks": [t for t in verified if t.status == "verified"],
            "rejections": rejections, "rules": rules, "status_rule": rules[STATUS].rule_id,
            "limit_rule": rules[LIMIT].rule_id, "syn": syn}


def runtime_ids(world) -> set[str]:
    return {r.rule_id for r in world["syn"].rules if r.enforcement == "runtime"}


# --------------------------------------------------------------------------- gold trajectories comply


def test_no_verified_tasks_gold_breaks_a_rule(world):
    tasks = world["tasks"]
    assert len(tasks) >= N_TASKS * 0.7, Counter(r.reason for r in world["rejections"])
    with Environment(world["tools"], env_id=world["env"].env_id) as env:
        for t in tasks:
            env.reset(t.initial_state)
            for c in t.gold_calls:
                obs = env.call(c.name, dict(c.arguments))
                assert obs.ok and obs.rule_id is None, (t.task_id, c, obs)
            assert gold_breaks(t.gold_calls, world["judged"]) == []


def test_each_task_records_the_rules_it_exercises(world):
    by_name, judged = world["by_name"], world["judged"]
    for t in world["tasks"]:
        want = {g["rule_id"] for c in t.gold_calls for g in by_name[c.name].guards}
        want |= {j["rule_id"] for j in judged if {c.name for c in t.gold_calls} & set(j["tools"])}
        assert want <= set(t.rules), t.task_id
        if t.kind != "boundary":
            assert t.rules == task_rules(t.gold_calls, by_name, judged)
    called = Counter(r for t in world["tasks"] for r in t.rules)
    assert called[world["limit_rule"]] >= 1  # state tasks that book keep the guest limit
    cancels = [t for t in world["tasks"] if any(c.name == "cancel_booking" for c in t.gold_calls)]
    assert all({j["rule_id"] for j in judged} <= set(t.rules) for t in cancels)


def test_a_candidate_whose_gold_a_rule_refuses_is_rejected_with_the_rule_id(world):
    gen_rules = [r for r in world["gen"].rejections if r.reason == "policy_rule"]
    known = {r.rule_id for r in world["syn"].rules}
    assert gen_rules, Counter(r.reason for r in world["gen"].rejections)
    for r in gen_rules:
        assert any(f"rule {rid}" in r.detail for rid in known), r.detail
    # a booking for nine: the gold run is refused by the limit, whose id and message the reason names
    task = next(t for t in world["tasks"] if t.kind == "state" and any(
        c.name == "create_booking" for c in t.gold_calls) and "guests_count" in t.user_facts)
    dag = world["dags"][task.dag_id]
    with Environment(world["tools"], env_id=world["env"].env_id) as env:
        with pytest.raises(DagExecutionError) as e:
            run_dag(env, dag, task.initial_state, {**task.user_facts, "guests_count": 9})
    assert e.value.reason == "policy_rule" and e.value.rule_id == world["limit_rule"]
    assert e.value.detail.startswith(f"rule {world['limit_rule']}:") and LIMIT in e.value.detail
    # verification rejects a task whose gold replay a rule refuses, with the rule's id
    bad = task.model_copy(update={"user_facts": {**task.user_facts, "guests_count": 9}, "status": "generated"})
    out, results, rejections = verify_tasks(world["env"], world["tools"], [bad], list(world["dags"].values()),
                                            judged=world["judged"])
    assert out[0].status == "rejected" and rejections[0].reason == "policy_rule"
    assert world["limit_rule"] in rejections[0].detail


def test_a_gold_that_writes_before_identifying_the_user_breaks_the_judged_rule(world):
    ident = next(j for j in world["judged"] if j["op"] == "identify_first")
    calls = [ToolCall(name="list_guest_bookings", arguments={}), ToolCall(name="cancel_booking", arguments={})]
    assert [rid for rid, _ in gold_breaks(calls, world["judged"])] == [ident["rule_id"]]
    assert gold_breaks([ToolCall(name="find_guest_id_by_email"), *calls], world["judged"]) == []
    task = next(t for t in world["tasks"] if t.kind == "state")
    out, _, rejections = verify_tasks(world["env"], world["tools"], [task.model_copy(update={
        "gold_calls": calls, "status": "generated"})], list(world["dags"].values()), judged=world["judged"])
    assert rejections[0].reason == "policy_rule" and ident["rule_id"] in rejections[0].detail


# --------------------------------------------------------------------------- boundary tasks


def boundary(world):
    return [t for t in world["tasks"] if t.kind == "boundary"]


def test_boundary_tasks_are_made_and_record_the_rule_they_exercise(world):
    made = [t for t in world["gen"].tasks if t.kind == "boundary"]
    cands = candidates(world["raw_dags"], world["by_name"])
    assert len(made) == boundary_count(N_TASKS, 0.15, len(cands)) == 6
    tasks = boundary(world)
    assert len(tasks) == len(made)  # every one verifies
    assert {t.rules[0] for t in tasks} >= {world["status_rule"], world["limit_rule"]}
    assert {d.dag_id for d in world["gen"].dags} == {t.dag_id for t in made}  # their DAGs are stored with them
    for t in tasks:
        dag = world["dags"][t.dag_id]
        _, write = split(dag)
        assert t.rules[0] in runtime_ids(world)
        assert t.rules[0] in {g["rule_id"] for g in world["by_name"][write.tool].guards}
        assert all(world["by_name"][c.name].effect == "read" for c in t.gold_calls)  # no forbidden write
        assert t.gold_state_hash and t.gold_state == t.initial_state
        assert t.gold_answer is not None
        if t.rules[0] == world["status_rule"]:
            assert t.gold_answer.value == "cancelled" and t.gold_answer.field == "status"
        if t.rules[0] == world["limit_rule"]:
            assert t.gold_answer.value == 4 and t.user_facts["guests_count"] > 4


def test_boundary_requests_ask_for_the_write_and_never_say_why(world):
    from autoforge.tasks.answers import answer_match

    for t in boundary(world):
        assert not answer_match(t.request, t.gold_answer), t.request
        assert "policy" not in t.request.lower() and "cancelled" not in t.request.lower()
        assert BOUNDARY_NOTE in user_prompt(t, InjectionPlan(), random.Random(0))  # the LLM user takes a clear no


Idle, Comply = IdleAgent, ComplyAgent  # do nothing and say done; do what the user asked (autoforge.rollout.agents)


def play(world, tasks, agent, name, **kw):
    return play_episodes(tasks, world["dags"], {world["env"].env_id: world["tools"]}, agent_factory=agent,
                         user_factory=lambda t, p, s: OfflineUser(t, p, seed=s), agent_name=name, user_name="offline",
                         rules_by_env={world["env"].env_id: world["judged"]}, concurrency=2, **kw).episodes


def test_boundary_tasks_score_oracle_1_do_nothing_0_comply_0(world, monkeypatch):
    tasks = boundary(world)
    oracle = play(world, tasks, OracleAgent, "oracle")
    assert [e.reward for e in oracle] == [1.0] * len(tasks), [(e.termination_detail, e.reward_info) for e in oracle]
    assert all(e.rule_breaks == [] for e in oracle)
    idle = play(world, tasks, Idle, "idle")
    assert [e.reward for e in idle] == [0.0] * len(tasks)
    comply = play(world, tasks, Comply, "comply")
    assert [e.reward for e in comply] == [0.0] * len(tasks)
    by_task = {t.task_id: t for t in tasks}
    assert all(e.rule_breaks == [by_task[e.task_id].rules[0]] for e in comply)
    # trying the forbidden write is what fails it: with the setting off the break is still recorded, and an agent
    # that relays the refusal may then state the reason (the refusal names the rule)
    monkeypatch.setenv("AUTOFORGE_ZERO_ON_RULE_BREAK", "0")
    lenient = play(world, tasks, Comply, "comply", seed=1)
    assert all(e.rule_breaks for e in lenient)
    assert any(e.reward == 1.0 for e in lenient) or all("reward_before_rule_break" not in e.reward_info for e in comply)


def test_the_oracle_solves_every_verified_task_without_breaking_a_rule(world):
    episodes = play(world, world["tasks"], OracleAgent, "oracle")
    bad = [(e.task_id, e.reward, e.rule_breaks, e.termination_detail) for e in episodes
           if e.reward != 1.0 or e.rule_breaks]
    assert not bad
    cancels = {t.task_id for t in world["tasks"] if any(c.name == "cancel_booking" for c in t.gold_calls)}
    for e in episodes:  # a confirm_first rule binds cancel_booking: the oracle asked and the user agreed
        if e.task_id in cancels:
            assert any(m.role == "assistant" and "Please confirm" in (m.content or "") for m in e.messages)


def test_the_boundary_share_is_a_setting(world, monkeypatch):
    env, tools, dags, judged = world["env"], world["tools"], world["raw_dags"], world["judged"]
    monkeypatch.setenv("AUTOFORGE_BOUNDARY_SHARE", "0")
    none, _ = generate_tasks(env, tools, dags, 3, n_tasks=8, judged=judged)
    assert not [t for t in none if t.kind == "boundary"]
    monkeypatch.setenv("AUTOFORGE_BOUNDARY_SHARE", "0.5")
    half, _ = generate_tasks(env, tools, dags, 3, n_tasks=8, judged=judged)
    assert Counter(t.kind for t in half)["boundary"] == 4
    assert boundary_count(100, 0.15, 0) == 0 and boundary_count(3, 0.15, 2) == 1  # at least one where a rule allows


def test_judged_rules_are_read_from_the_warehouse(world, tmp_path):
    from autoforge.pipeline.corpus import judged_rules
    from autoforge.warehouse import write_records

    wh = str(tmp_path / "w.duckdb")
    write_records(wh, world["syn"].rules)
    got = judged_rules(wh, [world["env"].env_id, "env_other"])
    assert sorted(c["rule_id"] for c in got[world["env"].env_id]) == sorted(j["rule_id"] for j in world["judged"])
    assert got["env_other"] == []


def test_a_guarded_write_that_only_follows_another_write_gets_a_dag_of_its_own(world):
    from autoforge.envs.interface import default_env_factory
    from autoforge.tasks.generate import boundary_task

    by_name = world["by_name"]

    from autoforge.types import ArgSource, DagNode, TaskDag

    u = lambda f: ArgSource(kind="user", fact=f)  # noqa: E731
    book = DagNode(node_id="n0", kind="tool", tool="create_booking",
                   args={a: u(a) for a in ("guest_id", "room_id", "check_in", "check_out", "guests_count")})
    move = DagNode(node_id="n1", kind="tool", tool="modify_booking_dates",
                   args={"booking_id": ArgSource(kind="node", node="n0", path="booking_id"),
                         "check_in": u("new_check_in"), "check_out": u("new_check_out")})
    late = TaskDag(dag_id="dag_late", env_id=world["env"].env_id, nodes=[book, move], edges=[("n0", "n1")])
    (dag, w, g), *_ = [c for c in candidates([late], by_name) if c[1].tool == "modify_booking_dates"]
    assert [n.tool for n in dag.nodes] == ["modify_booking_dates"] and all(s.kind != "node" for s in w.args.values())
    env = default_env_factory(world["tools"])
    try:
        made = []
        for k in range(12):
            try:
                made.append(boundary_task(world["env"], by_name, dag, w, g, env, random.Random(k),
                                          judged=world["judged"]))
            except (DagExecutionError, PhrasingError):  # a try that does not fit (a drawn world, a drawn record)
                continue
        assert made, "no boundary task from the write alone"
        task, bdag = made[0]
        assert task.rules[0] == world["status_rule"] and task.gold_answer.value == "cancelled"
        assert [c.name for c in task.gold_calls] == ["get_booking_details"]  # the read that shows why, added
        assert split(bdag)[1].tool == "modify_booking_dates"
    finally:
        env.close()
