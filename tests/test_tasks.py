"""Task generation and verification on the mock shop: the gold task by hand, and one bad task per check."""

from __future__ import annotations

import copy
import random
import re

import pytest

import dags_mock as m
from autoforge.dags.build import build_dags
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import sample_sequences
from autoforge.tasks.execute import DagExecutionError, run_dag
from autoforge.tasks.generate import generate_task, generate_tasks, split_of, state_change
from autoforge.tasks.instantiate import make_world
from autoforge.tasks.phrasing import PhrasingError, refine_request, write_request
from autoforge.tasks.verify import CHECKS, verify_tasks
from autoforge.types import ArgSource, Task, ToolCall, ToolCode, VerificationResult, canonical_json, content_id, state_hash


@pytest.fixture(scope="module")
def env():
    return m.make_env()


@pytest.fixture(scope="module")
def tools():
    return m.make_tools()


@pytest.fixture(scope="module")
def dags(env, tools):
    g = build_graph(env, tools)
    seqs = sample_sequences(g, tools, 30, seed=1, env=env)
    return build_dags(g, seqs, tools, env, seed=1, variants=2)[0]


def gold_task(tools) -> Task:
    """The hand-checked task: run the gold DAG on the hand-written state."""
    dag = m.gold_dag()
    run = run_dag(m.LocalEnvironment(tools), dag, m.STATE, dict(m.GOLD_FACTS))
    return Task(task_id=content_id("task", "gold"), env_id=m.ENV_ID, dag_id=dag.dag_id,
                request="Please cancel my most expensive order.", user_facts=dict(m.GOLD_FACTS),
                initial_state=copy.deepcopy(m.STATE), gold_state=run.final_state, gold_state_hash=state_hash(run.final_state),
                gold_calls=run.calls, n_tool_calls=3, dag_depth=4, n_reasoning_nodes=1, n_requirements=1)


def verify(env, tools, tasks, dags, factory=m.LocalEnvironment, existing=None):
    return verify_tasks(env, tools, tasks, dags, env_factory=factory, existing=existing)


def failed(results, task_id):
    return {r.check: r.reason for r in results if r.task_id == task_id and not r.passed}


# --------------------------------------------------------------------------- gold run


def test_gold_dag_final_state_is_hand_computed(tools):
    run = run_dag(m.LocalEnvironment(tools), m.gold_dag(), m.STATE, dict(m.GOLD_FACTS))
    assert run.final_state == m.gold_final_state()
    assert [(c.name, c.arguments) for c in run.calls] == [
        ("find_user_id_by_email", {"email": "ava.chen@example.com"}),
        ("list_user_orders", {"user_id": "U0001"}),
        ("cancel_order", {"order_id": "O0002"}),
    ]
    assert run.outputs["r0"]["order_id"] == "O0002"
    assert state_change(m.STATE, run.final_state) == {
        "orders": {"O0002": [m.STATE["orders"]["O0002"], m.gold_final_state()["orders"]["O0002"]]}}


def test_missing_fact_and_failing_call_raise(tools):
    with pytest.raises(DagExecutionError) as e:
        run_dag(m.LocalEnvironment(tools), m.gold_dag(), m.STATE, {})
    assert e.value.reason == "missing_fact"
    state = copy.deepcopy(m.STATE)
    state["orders"]["O0002"]["status"] = "shipped"  # the most expensive order can no longer be cancelled
    with pytest.raises(DagExecutionError) as e:
        run_dag(m.LocalEnvironment(tools), m.gold_dag(), state, dict(m.GOLD_FACTS))
    assert e.value.reason == "gold_call_error"


def test_gold_task_passes_every_check(env, tools):
    task = gold_task(tools)
    out, results, rejections = verify(env, tools, [task], [m.gold_dag()])
    assert [t.status for t in out] == ["verified"] and not rejections
    assert [r.check for r in results] == list(CHECKS) and all(r.passed for r in results)  # the registry's order


def test_kinds_and_checks_are_registries_that_fail_loud(tools):
    from autoforge.errors import ConfigError
    from autoforge.tasks.checks import check
    from autoforge.tasks.kinds import TASK_KINDS, task_kind

    assert list(TASK_KINDS) == ["state", "answer", "boundary"]
    assert task_kind("state").changes_state and not task_kind("answer").changes_state
    assert task_kind("answer").states_answer and not task_kind("state").states_answer
    with pytest.raises(ConfigError, match="valid kinds: state, answer, boundary"):
        task_kind("quiz")
    with pytest.raises(ConfigError, match="valid checks: policy_rule, replay_deterministic, changes_state"):
        check("looks_fine")
    task = gold_task(tools)
    with pytest.raises(ValueError, match="unknown task kind 'quiz'"):
        Task(**{**task.model_dump(), "kind": "quiz"})
    with pytest.raises(ValueError, match="unknown verification check 'looks_fine'"):
        VerificationResult(task_id="t", check="looks_fine", passed=True)


# --------------------------------------------------------------------------- instantiation and generation


def test_world_has_distractors(env):
    world = make_world(env, random.Random(0))
    users, orders = world["users"], world["orders"]
    assert len(users) >= 4 and set(world) == {"users", "products", "orders"}
    per_user = {u: sum(o["user_id"] == u for o in orders.values()) for u in users}
    assert min(per_user.values()) >= 2  # every user has other orders: a choice is needed
    firsts = [u["name"].split()[0] for u in users.values()]
    assert len(set(firsts)) < len(firsts)  # similar names
    assert all(o["product_id"] in world["products"] for o in orders.values())
    assert make_world(env, random.Random(0)) == world


def test_world_pool_hands_out_copies_of_worlds_made_once_in_any_order(env, monkeypatch):
    from autoforge.tasks import world_pool
    from autoforge.tasks.world_pool import WorldPool, pool_size

    made = []
    monkeypatch.setattr(world_pool, "make_world", lambda e, rng: made.append(1) or make_world(e, rng))
    rngs = [random.Random(f"0:d{i}:{i}") for i in range(40)]
    pool = WorldPool(env, 0, 5)
    worlds = [pool.draw(r) for r in rngs]
    assert len(made) == 5 and len({canonical_json(w) for w in worlds}) == 5  # five worlds, each made once
    assert worlds[0] == make_world(env, random.Random(f"0:world:{random.Random('0:d0:0').randrange(5)}"))
    worlds[0]["users"].clear()  # a candidate's gold run changes its copy, never the pool's world
    again = WorldPool(env, 0, 5)  # another order of draws (another process) gives each candidate the same world
    back = [again.draw(random.Random(f"0:d{i}:{i}")) for i in reversed(range(40))][::-1]
    assert back[1:] == worlds[1:] and back[0]["users"]
    assert [pool_size(n) for n in (0, 20, 110, 1100)] == [8, 8, 28, 275]


def test_generate_same_seed_same_ids(env, tools, dags):
    t1, r1 = generate_tasks(env, tools, dags, seed=4, n_tasks=25, env_factory=m.LocalEnvironment)
    t2, r2 = generate_tasks(env, tools, dags, seed=4, n_tasks=25, env_factory=m.LocalEnvironment)
    assert t1 and [t.task_id for t in t1] == [t.task_id for t in t2]
    assert [r.rejection_id for r in r1] == [r.rejection_id for r in r2]
    t3, _ = generate_tasks(env, tools, dags, seed=5, n_tasks=25, env_factory=m.LocalEnvironment)
    assert {t.task_id for t in t3} != {t.task_id for t in t1}
    skipped, _ = generate_tasks(env, tools, dags, seed=4, n_tasks=25, env_factory=m.LocalEnvironment,
                                skip_ids={t.task_id for t in t1})
    assert skipped == []
    for t in t1:
        assert t.gold_state_hash == state_hash(t.gold_state) != state_hash(t.initial_state)
        assert t.n_tool_calls == len(t.gold_calls) >= 2 and t.split == split_of(t.task_id)
        assert t.request and t.user_facts
    assert any(t.n_reasoning_nodes for t in t1) and any(t.n_requirements == 2 for t in t1)


def test_requests_do_not_leak_looked_up_ids(env, tools, dags):
    tasks, _ = generate_tasks(env, tools, dags, seed=2, n_tasks=25, env_factory=m.LocalEnvironment)
    for t in tasks:
        dag = next(d for d in dags if d.dag_id == t.dag_id)
        node_args = {(n.node_id, a) for n in dag.nodes if n.kind == "tool" for a, s in n.args.items() if s.kind == "node"}
        for c in t.gold_calls:
            for a, v in c.arguments.items():
                if (c.id, a) in node_args and a.endswith("_id") and v not in t.user_facts.values():
                    assert v not in t.request


def test_split_is_deterministic_and_about_ten_percent():
    ids = [content_id("task", i) for i in range(2000)]
    share = sum(split_of(i) == "test" for i in ids) / len(ids)
    assert 0.07 < share < 0.13 and [split_of(i) for i in ids] == [split_of(i) for i in ids]


def test_online_request_refinement_is_checked(env, tools):
    dag = m.gold_dag()
    run = run_dag(m.LocalEnvironment(tools), dag, m.STATE, dict(m.GOLD_FACTS))
    draft = write_request(dag, run, {t.name: t for t in tools}, env, random.Random(0))
    assert "O0002" not in draft.request and "email" in draft.hidden and "highest total" in draft.request

    class Fake:
        is_offline = False

        def __init__(self, text):
            self.text = text

        def structured(self, step, messages, response_model, **kw):
            assert step == "task_request"
            return response_model(request=self.text)

    good = refine_request(Fake("Hey, please cancel my priciest order (highest total)."), draft, run.facts, ["O0002"])
    assert good.request.startswith("Hey")
    with pytest.raises(PhrasingError):
        refine_request(Fake("Cancel order O0002 please."), draft, run.facts, ["O0002"])


# --------------------------------------------------------------------------- verification: each check can fail


def test_noop_task_fails_changes_state_and_do_nothing(env, tools):
    task = gold_task(tools)
    noop = task.model_copy(update={"task_id": "noop", "gold_state": task.initial_state,
                                   "gold_state_hash": state_hash(task.initial_state)})
    out, results, rejections = verify(env, tools, [noop], [m.gold_dag()])
    bad = failed(results, "noop")
    assert {"changes_state", "do_nothing_fails", "replay_deterministic"} <= set(bad)
    assert out[0].status == "rejected" and rejections[0].stage == "verify"


def test_read_only_solvable_task_fails(env, tools):
    # a tool tagged "read" that in fact cancels: the read calls alone reach S*
    sneaky = [t if t.name != "list_user_orders" else t.model_copy(update={"source": t.source.replace(
        '    return {"orders"', '    for o in state["orders"].values():\n        if o["order_id"] == "O0002":\n'
        '            o["status"] = "cancelled"\n    return {"orders"')}) for t in tools]
    task = gold_task(tools)
    _, results, _ = verify(env, sneaky, [task], [m.gold_dag()])
    assert "read_only_fails" in failed(results, task.task_id)


def test_untraceable_argument_fails(env, tools):
    task = gold_task(tools)
    calls = [c if c.name != "cancel_order" else ToolCall(name=c.name, arguments={"order_id": "O0004"}, id=c.id)
             for c in task.gold_calls]
    bad = task.model_copy(update={"task_id": "untraceable", "gold_calls": calls})
    _, results, _ = verify(env, tools, [bad], [m.gold_dag()])
    assert "traceable" in failed(results, "untraceable")
    # a user fact that the user does not know
    dag = m.gold_dag()
    dag2 = dag.model_copy(update={"nodes": [n if n.node_id != "n0" else n.model_copy(update={
        "args": {"email": ArgSource(kind="user", fact="secret")}}) for n in dag.nodes]})
    bad2 = task.model_copy(update={"task_id": "unknown_fact", "dag_id": "dag2"})
    _, results, _ = verify(env, tools, [bad2], [dag2.model_copy(update={"dag_id": "dag2"})])
    assert "traceable" in failed(results, "unknown_fact")


def test_guessable_id_fails(env, tools):
    task = gold_task(tools)
    leaky = task.model_copy(update={"task_id": "leaky", "request": "Please cancel order O0002."})
    _, results, _ = verify(env, tools, [leaky], [m.gold_dag()])
    assert "guessable" in failed(results, "leaky")["traceable"]


def test_duplicate_fails(env, tools):
    task = gold_task(tools)
    twin = task.model_copy(update={"task_id": content_id("task", "twin"), "request": "Cancel my biggest order."})
    out, results, _ = verify(env, tools, [task, twin], [m.gold_dag()])
    later = max(task.task_id, twin.task_id)
    assert failed(results, later) == {"not_duplicate": failed(results, later)["not_duplicate"]}
    assert not failed(results, min(task.task_id, twin.task_id))
    # against tasks verified earlier (the warehouse's keys)
    from autoforge.tasks.generate import duplicate_key

    _, results, _ = verify(env, tools, [twin], [m.gold_dag()], existing={duplicate_key(task, m.gold_dag()): task.task_id})
    assert "not_duplicate" in failed(results, twin.task_id)


class FlakyEnvironment(m.LocalEnvironment):
    """cancel_order stamps a counter that survives resets: a nondeterministic tool."""

    counter = 0

    def call(self, name, arguments):
        obs = super().call(name, arguments)
        if name == "cancel_order" and obs.ok:
            FlakyEnvironment.counter += 1
            self.state["orders"][arguments["order_id"]]["stamp"] = FlakyEnvironment.counter
        return obs


def test_nondeterministic_tool_fails_replay(env, tools):
    task = gold_task(tools)
    _, results, _ = verify(env, tools, [task], [m.gold_dag()], factory=FlakyEnvironment)
    assert "replay_deterministic" in failed(results, task.task_id)


def test_generated_tasks_verify(env, tools, dags):
    tasks, _ = generate_tasks(env, tools, dags, seed=3, n_tasks=30, env_factory=m.LocalEnvironment)
    out, results, rejections = verify(env, tools, tasks, dags)
    assert len(results) == len(CHECKS) * len(tasks)
    assert sum(t.status == "verified" for t in out) >= 0.9 * len(tasks)
    for r in rejections:
        assert r.reason in CHECKS


def test_generate_one_task_with_runtime_interface(env, tools, dags):
    by_name = {t.name: t for t in tools}
    task = None
    for i, dag in enumerate(dags):
        try:
            task = generate_task(env, by_name, dag, m.LocalEnvironment(tools), random.Random(i))
            break
        except (DagExecutionError, PhrasingError):
            continue
    assert task is not None and task.status == "generated"


# --------------------------------------------------------------------------- hidden facts, one value per fact, new ops

from autoforge.dags.build import DagKnobs, build_dag  # noqa: E402
from autoforge import dialogue as D  # noqa: E402
from autoforge.tasks.instantiate import FactChooser  # noqa: E402
from autoforge.tasks.phrasing import StatePolicy  # noqa: E402
from autoforge.types import ToolSequence  # noqa: E402


def _verbatim(task) -> list[str]:
    return [k for k, v in task.user_facts.items() if D.states_value(task.request, v)]


def test_request_states_no_hidden_value_and_names_every_hidden_fact(env, tools, dags):
    """With nothing stated, no fact value is in the request; each fact but the user's identity is named."""
    by_name = {t.name: t for t in tools}
    n = 0
    for i, dag in enumerate(dags):
        world = make_world(env, random.Random(i))
        facts: dict = {}
        try:
            run = run_dag(m.LocalEnvironment(tools), dag, world, facts, chooser=FactChooser(env, by_name, random.Random(i), facts))
        except DagExecutionError:
            continue
        draft = write_request(dag, run, by_name, env, random.Random(i), StatePolicy(0, 0, 0, 0))
        assert draft.stated == set() and draft.hidden == set(run.facts)
        for k, v in run.facts.items():
            assert not D.states_value(draft.request, v), (k, v, draft.request)
            if k not in ("email", "user_id"):  # the user's identity: the agent asks who they are
                assert D.names_fact(draft.request, k), (k, draft.request)
        n += 1
    assert n >= 20


def test_generated_requests_state_at_most_one_value_per_requirement(env, tools, dags):
    tasks, _ = generate_tasks(env, tools, dags, seed=6, n_tasks=40, env_factory=m.LocalEnvironment)
    n_facts = n_stated = 0
    for t in tasks:
        said = _verbatim(t)
        assert len(said) <= t.n_requirements, (t.request, t.user_facts)
        assert not {"email", "user_id"} & set(said)  # identity is never volunteered
        n_facts, n_stated = n_facts + len(t.user_facts), n_stated + len(said)
    assert n_facts and n_stated / n_facts < 0.3


def test_no_two_facts_of_one_parameter_share_a_value(env, tools, dags):
    """``quantity`` and ``order_quantity`` (two orders), ``order_status`` twice: distinct values, or no task."""
    tasks, rejections = generate_tasks(env, tools, dags, seed=7, n_tasks=40, env_factory=m.LocalEnvironment)
    stem = lambda k: re.sub(r"^(order|user|product)_(?!id)|_\d+$", "", k)  # noqa: E731
    for t in tasks:
        by_stem: dict = {}
        for k, v in t.user_facts.items():
            by_stem.setdefault(stem(k), []).append(v)
        for s, vals in by_stem.items():
            assert all(a != b for i, a in enumerate(vals) for b in vals[i + 1:]), (s, t.user_facts)


def _task_with_op(env, tools, graph, seq_tools, op, knobs):
    """A verified task whose DAG holds ``op`` (first DAG seed and world that work)."""
    by_name = {t.name: t for t in tools}
    seq = ToolSequence(seq_id=f"s_{op}", env_id=m.ENV_ID, tools=seq_tools)
    for seed in range(40):
        dag = build_dag(seq, graph, tools, env, seed=seed, knobs=knobs)
        if op not in {n.op for n in dag.nodes}:
            continue
        for i in range(10):
            try:
                task = generate_task(env, by_name, dag, m.LocalEnvironment(tools), random.Random(f"{seed}:{i}"))
            except (DagExecutionError, PhrasingError):
                continue
            return task, dag
    raise AssertionError(f"no task with a {op} node")


@pytest.mark.parametrize("op,seq,knobs", [
    ("compare", ["find_user_id_by_email", "list_user_orders", "cancel_order"], DagKnobs(p_compare=1)),
    ("count", ["find_user_id_by_email", "list_user_orders", "create_order"], DagKnobs(p_aggregate=1)),
    ("sum", ["find_user_id_by_email", "list_user_orders", "create_order"], DagKnobs(p_aggregate=1)),
])
def test_new_op_placements_give_verified_tasks_solvable_in_dialogue(env, tools, op, seq, knobs):
    from autoforge.rollout.agents import OracleAgent
    from autoforge.rollout.engine import run_episode
    from autoforge.rollout.toolcalls import tool_schemas
    from autoforge.rollout.users import OfflineUser

    task, dag = _task_with_op(env, tools, build_graph(env, tools), seq, op, knobs)
    out, results, _ = verify(env, tools, [task], [dag])
    assert out[0].status == "verified", failed(results, task.task_id)
    ep = run_episode(task, m.LocalEnvironment(tools), OracleAgent(), OfflineUser(task), tools=tool_schemas(tools), dag=dag).episode
    assert ep.reward == 1.0, (ep.termination, ep.termination_detail)
    words = {"compare": "whichever of", "count": "the number of", "sum": "the total quantity of"}[op]
    assert words in task.request, task.request


def test_camel_case_tool_names_are_phrased_as_words(tmp_path):
    import re
    from pathlib import Path as _P

    from autoforge.pipeline import run_factory
    from autoforge.warehouse import query

    wh = str(tmp_path / "w.duckdb")
    fixture = _P(__file__).parent / "fixtures" / "realstyle" / "ids_petshop_body.json"
    run_factory(paths=[str(fixture)], bundled=False, tasks_per_env=10, warehouse=wh)
    names = [r["name"] for r in query(wh, "SELECT name FROM tool_code", read_only_check=False)]
    camel = [n for n in names if re.search(r"[a-z][A-Z]", n)]
    requests = [r["request"] for r in query(wh, "SELECT request FROM tasks", read_only_check=False)]
    assert camel and requests
    assert not [q for q in requests for n in camel if n in q], "a request spells a camelCase tool name as one token"


# --------------------------------------------------------------------------- quality checks (autoforge.tasks.quality)


def test_an_overwritten_write_is_unobservable(env, tools):
    """Two delivery-date updates on one order: the first never shows in S*."""
    from autoforge.tasks.quality import check_writes_observable

    by = {t.name: t for t in tools}
    calls = [ToolCall(name="update_delivery_date", arguments={"order_id": "O0001", "delivery_date": "2025-04-01"}, id="a"),
             ToolCall(name="update_delivery_date", arguments={"order_id": "O0001", "delivery_date": "2025-04-09"}, id="b")]
    why = check_writes_observable(m.LocalEnvironment(tools), copy.deepcopy(m.STATE), calls, by)
    assert why and "overwritten" in why and "call 1" in why
    same = [ToolCall(name="update_delivery_date", arguments={"order_id": "O0001", "delivery_date": m.STATE["orders"]["O0001"]["delivery_date"]}, id="c")]
    assert "changes nothing" in check_writes_observable(m.LocalEnvironment(tools), copy.deepcopy(m.STATE), same, by)
    task = gold_task(tools)
    assert check_writes_observable(m.LocalEnvironment(tools), task.initial_state, task.gold_calls, by) is None


def test_arguments_out_of_their_domain_are_found(tools):
    from autoforge.tasks.quality import out_of_domain

    today = "2025-01-15"
    assert out_of_domain("status", "archived", {"enum": ["pending", "shipped"]}, today)
    assert out_of_domain("travel_class", "Grand Beacon", {"type": "string", "description": "One of 'economy', 'business' or 'first'."}, today)
    assert out_of_domain("travel_class", "business", {"type": "string", "description": "One of 'economy', 'business' or 'first'."}, today) is None
    assert out_of_domain("date_of_birth", "2025-06-01", {"type": "string"}, today)
    assert out_of_domain("order_id", "X9", {"type": "string", "pattern": "^O\\d{4}$"}, today)
    assert out_of_domain("amount", -5, {"type": "number"}, today)
    assert out_of_domain("quantity", 3, {"type": "integer", "maximum": 2}, today)
    assert out_of_domain("state", "archived", {"type": "string"}, today) is None  # no domain the docs give: not judged
    from autoforge.tasks.quality import check_args_in_domain

    booking = ToolCode(code_id="c", env_id="e", tool_id="t", name="book_room", source="", status="accepted", effect="write",
                       parameters={"type": "object", "properties": {"check_in": {"type": "string", "format": "date"},
                                                                    "check_out": {"type": "string", "format": "date"}}})
    bad = [ToolCall(name="book_room", arguments={"check_in": "2025-03-05", "check_out": "2025-03-01"})]
    assert "not after its start" in check_args_in_domain(bad, {"book_room": booking}, today)


def test_a_blueprint_holds_at_most_its_share_of_an_environments_tasks(env, tools, dags):
    from autoforge.tasks.generate import blueprint_key
    from autoforge.tasks.quality import blueprint_cap

    assert blueprint_cap(110) == 5 and blueprint_cap(10) == 2
    task = gold_task(tools)
    dag = m.gold_dag()
    others = [task.model_copy(update={"task_id": content_id("task", "bp", i)}) for i in range(3)]
    # three tasks already verified with this blueprint, cap 2 for this batch: the new one is dropped
    _, results, _ = verify_tasks(env, tools, [task], [dag], env_factory=m.LocalEnvironment,
                                 blueprints={blueprint_key(others[0].env_id, dag): 3})
    assert "near_duplicate" in failed(results, task.task_id)
    # generation retires a full blueprint's DAGs instead of drawing it again
    made, _ = generate_tasks(env, tools, dags, seed=3, n_tasks=30, env_factory=m.LocalEnvironment)
    from collections import Counter

    per = Counter(blueprint_key(t.env_id, next(d for d in dags if d.dag_id == t.dag_id)) for t in made)
    assert max(per.values()) <= blueprint_cap(30)


def test_list_items_are_drawn_from_and_checked_against_the_lists_vocabulary(env):
    """ "[Enum]: [...]" on an array parameter: items come from it, and other items are out of domain."""
    from autoforge.tasks.instantiate import WorldFiller
    from autoforge.tasks.quality import out_of_domain

    schema = {"type": "array", "items": {"type": "string"},
              "description": 'The doors to lock. [Enum]: ["driver", "passenger", "rear_left", "rear_right"]'}
    assert out_of_domain("door", ["door-160"], schema, "2025-01-15")
    assert out_of_domain("door", ["driver", "rear_left"], schema, "2025-01-15") is None
    filler = WorldFiller(env, random.Random(0), copy.deepcopy(m.STATE))
    for _ in range(5):
        assert set(filler.fill("door", None, schema, None)) <= {"driver", "passenger", "rear_left", "rear_right"}
