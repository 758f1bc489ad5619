"""Task generation: DAG -> initial state -> gold run -> request + hidden facts -> Task.

Paper (arXiv 2512.22857, Sec. 3.3): environment initialization (values for every attribute,
conditioned on the DAG), tool-sequence execution in topological order (gold final state
S*_k), task refinement (minimum necessary information). D_k = (Q_k, S_k, S*_k, F).

Ids: ``task_id = content_id("task", env_id, dag, state change, hash(S))`` — the same seed
gives the same tasks, so a re-run upserts. The train/test split comes from the id's hash
(``test_fraction``, default 10%), so it never changes between runs.
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from autoforge.dags.build import dag_depth, rejection, topo_order
from autoforge.dialogue import fact_words
from autoforge.domain.keys import is_key_param, key_fields
from autoforge.envs.interface import EnvFactory, default_env_factory
from autoforge.llm.record import drain_calls
from autoforge.envs.sandbox import TODAY
from autoforge.tasks.execute import DagExecutionError, DagRun, run_dag
from autoforge.tasks.instantiate import FactChooser
from autoforge.tasks.world_pool import WorldPool, fresh_world, pool_size
from autoforge.tasks import identity
from autoforge.tasks.kinds import ANSWER, BOUNDARY, task_kind
from autoforge.tasks.phrasing import PhrasingError, boundary_request, refine_request, write_request
from autoforge.tasks.keep_rules import run_keeping_rules
from autoforge.tasks.rules import describe_break, gold_breaks, task_rules
from autoforge.tasks.quality import (blueprint_cap, check_args_in_domain, check_ids_bound, check_writes_observable,
                                     sequence_cap)
from autoforge.types import (DagNode, EnvironmentRecord, ToolCall, LLMCall, Rejection, Task, TaskDag, ToolCode, VerificationResult, canonical_json,
                             content_hash, content_id, legacy_state_hash, same_json, state_hash)

TEST_FRACTION = 0.10  # share of tasks held out for evaluation (DEFAULT; the paper reports no split)


def state_change(before: dict, after: dict) -> dict:
    """Changed records only: ``{collection: {id: [before_record_or_None, after_record_or_None]}}``."""
    out: dict[str, dict] = {}
    for coll in sorted(set(before) | set(after)):
        a, b = before.get(coll) or {}, after.get(coll) or {}
        if not isinstance(a, dict) or not isinstance(b, dict):
            if not same_json(a, b):
                out[coll] = {"*": [a, b]}
            continue
        diff = {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if not same_json(a.get(k), b.get(k))}
        if diff:
            out[coll] = diff
    return out


def dag_shape(dag: TaskDag) -> list:
    """The DAG without ids, fact names or op constants: which tools/ops, wired how."""
    pos = {n.node_id: i for i, n in enumerate(dag.nodes)}
    nodes = [[n.kind, n.tool or n.op, sorted((a, s.kind, pos.get(s.node or "", -1)) for a, s in n.args.items())] for n in dag.nodes]
    shape = [nodes, sorted([pos[a], pos[b]] for a, b in dag.edges)]
    if dag.answer is not None:  # what an answer task asks for is part of its blueprint (the count vs the content)
        shape.append([pos.get(dag.answer.node, -1), dag.answer.path])
    return shape


def duplicate_key(task: Task, dag: TaskDag) -> str:
    """Two tasks are duplicates when they share the DAG shape and the state change (answer tasks,
    which change nothing: the DAG shape, the facts and the answer)."""
    if not task_kind(task.kind).changes_state:
        return content_hash([task.env_id, dag_shape(dag), task.user_facts, task.gold_answer.model_dump() if task.gold_answer else None])
    return content_hash([task.env_id, dag_shape(dag), state_change(task.initial_state, task.gold_state)])


def blueprint_key(env_id: str, dag: TaskDag) -> str:
    """The blueprint of the tasks made from ``dag``: environment, tool sequence and argument sources (the DAG shape)."""
    return content_hash([env_id, dag_shape(dag)])


def split_of(task_id: str, test_fraction: float = TEST_FRACTION) -> str:
    bucket = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) % 10_000
    return "test" if bucket < test_fraction * 10_000 else "train"


def lookup_ids(dag: TaskDag, outputs: dict[str, Any], calls_args: dict[str, dict], keys: set[str]) -> list[str]:
    """Identifier values the agent must find with tools (gold arguments sourced from node outputs)."""
    out = set()
    for n in dag.nodes:
        if n.kind != "tool":
            continue
        for arg, src in n.args.items():
            if src.kind == "node" and is_key_param(arg, keys):
                v = calls_args.get(n.node_id, {}).get(arg)
                if isinstance(v, str) and v:
                    out.add(v)
    return sorted(out)


def refuse_leaks(request: str, forbidden: list[str]) -> None:
    """Raise PhrasingError when the request names an identifier the agent must look up."""
    from autoforge.dialogue import mentions

    leaked = [v for v in forbidden if mentions(request, v)]
    if leaked:
        raise PhrasingError("leaked_id", f"the request names {leaked}, which the agent must look up")


@contextmanager
def open_env(tools: list[ToolCode], env_factory: EnvFactory | None) -> Iterator[Any]:
    env = (env_factory or default_env_factory)(tools)
    try:
        yield env
    finally:
        close = getattr(env, "close", None)
        if callable(close):
            close()


def keep_judged(calls: list, judged: list[dict] | None) -> None:
    """Raise ``policy_rule`` (naming the rule) when the gold calls break a judged rule by their order."""
    breaks = gold_breaks(calls, judged)
    if breaks:
        raise DagExecutionError("policy_rule", describe_break(*breaks[0]), rule_id=breaks[0][0])


def generate_task(env: EnvironmentRecord, tools: dict[str, ToolCode], dag: TaskDag, runtime: Any, rng: random.Random, *,
                  client: Any = None, test_fraction: float = TEST_FRACTION, batch_id: str | None = None,
                  run_id: str | None = None, judged: list[dict] | None = None, worlds: WorldPool | None = None) -> Task:
    """One task from one DAG (raises DagExecutionError / PhrasingError with a reason category). ``judged``:
    the environment's judged rules (:func:`autoforge.tasks.rules.judged_checks`); a gold run that a runtime
    rule refuses, or whose calls break a judged rule by their order, is rejected with reason ``policy_rule``.
    ``worlds``: the environment's pool the initial state is drawn from (None: a world made from ``rng``)."""
    world = fresh_world(env, rng, worlds)
    facts: dict[str, Any] = {}
    if dag.answer is not None:
        return _answer_task(env, tools, dag, runtime, rng, world, facts, test_fraction=test_fraction, batch_id=batch_id,
                            run_id=run_id, judged=judged)
    run = run_keeping_rules(runtime, dag, world, facts, FactChooser(env, tools, rng, facts, dag), tools, env)
    keep_judged(run.calls, judged)
    change = state_change(world, run.final_state)
    if not change:
        raise DagExecutionError("no_state_change", "the gold run leaves the state as it was")
    why = check_writes_observable(runtime, world, run.calls, tools)
    if why:
        raise DagExecutionError("unobservable_write", why)
    why = check_args_in_domain(run.calls, tools, TODAY)
    if why:
        raise DagExecutionError("out_of_domain", why)
    draft = write_request(dag, run, tools, env, rng)
    forbidden = lookup_ids(dag, run.outputs, run.args, key_fields(env))
    if client is not None and not getattr(client, "is_offline", True):
        draft = refine_request(client, draft, facts, forbidden)
    refuse_leaks(draft.request, forbidden)
    why = check_ids_bound(run.calls, run.outputs, facts, draft.request, tools, key_fields(env))
    if why:
        raise DagExecutionError("unbound_id", why)
    task_id = content_id("task", env.env_id, dag.dag_id, change, legacy_state_hash(world))  # v1 in the id: ids stay as in older warehouses
    return _task(task_id, env, dag, draft.request, facts, world, run, test_fraction, batch_id, run_id,
                 rules=task_rules(run.calls, tools, judged))


def _task(task_id: str, env: EnvironmentRecord, dag: TaskDag, request: str, facts: dict[str, Any], world: dict, run: Any,
          test_fraction: float, batch_id: str | None, run_id: str | None, **kind: Any) -> Task:
    """The Task record of a gold run (``kind``: kind/gold_answer for answer tasks). Two facts named alike
    (``phoneNumber``, ``phone_number``) with different values are refused (``indistinct_facts``): the user
    could not tell the agent which is which."""
    why = indistinct_facts(facts)
    if why:
        raise PhrasingError("indistinct_facts", why)
    n_tools = sum(1 for n in dag.nodes if n.kind == "tool")
    return Task(
        task_id=task_id, env_id=env.env_id, dag_id=dag.dag_id, request=request,
        user_facts=dict(sorted(facts.items())), initial_state=world, gold_state=run.final_state,
        gold_state_hash=state_hash(run.final_state), gold_calls=run.calls, n_tool_calls=n_tools,
        dag_depth=dag_depth(dag), n_reasoning_nodes=len(dag.nodes) - n_tools, n_requirements=dag.n_requirements,
        status="generated", split=split_of(task_id, test_fraction), batch_id=batch_id, run_id=run_id, **kind,
    )


def indistinct_facts(facts: dict[str, Any]) -> str | None:
    """Why two of ``facts`` cannot be told apart in a dialogue (named alike, different values), or None."""
    seen: dict[str, str] = {}
    for k in sorted(facts):
        other = seen.setdefault(fact_words(k), k)
        if other != k and canonical_json(facts[other]) != canonical_json(facts[k]):
            return f"facts {other} and {k} are both the user's {fact_words(k)}, with different values"
    return None


def _answer_task(env: EnvironmentRecord, tools: dict[str, ToolCode], dag: TaskDag, runtime: Any, rng: random.Random,
                 world: dict, facts: dict[str, Any], *, test_fraction: float, batch_id: str | None,
                 run_id: str | None, judged: list[dict] | None = None) -> Task:
    """An answer task (read-only DAG): S* == S, and the last read's output is the gold answer."""
    from autoforge.tasks.answers import ComputeChooser, answer_given_away, answer_request, gold_answer

    run = run_dag(runtime, dag, world, facts, chooser=ComputeChooser(tools, rng, FactChooser(env, tools, rng, facts, dag)))
    keep_judged(run.calls, judged)
    if state_change(world, run.final_state):
        raise DagExecutionError("changes_state", "an answer task's reads changed the state")
    why = check_args_in_domain(run.calls, tools, TODAY)
    if why:
        raise DagExecutionError("out_of_domain", why)
    gold = gold_answer(dag, run)
    request = answer_request(dag, tools, rng)
    why = answer_given_away(request, gold, facts)
    if why:
        raise PhrasingError("answer_given", why)
    refuse_leaks(request, lookup_ids(dag, run.outputs, run.args, key_fields(env)))
    why = check_ids_bound(run.calls, run.outputs, facts, request, tools, key_fields(env))
    if why:
        raise DagExecutionError("unbound_id", why)
    task_id = content_id("task", env.env_id, dag.dag_id, gold.model_dump(), canonical_json(facts), legacy_state_hash(world))  # v1: stable ids
    return _task(task_id, env, dag, request, facts, world, run, test_fraction, batch_id, run_id, kind=ANSWER, gold_answer=gold,
                 rules=task_rules(run.calls, tools, judged))


def boundary_task(env: EnvironmentRecord, tools: dict[str, ToolCode], dag: TaskDag, write: DagNode, guard: dict,
                  runtime: Any, rng: random.Random, *, client: Any = None, test_fraction: float = TEST_FRACTION,
                  batch_id: str | None = None, run_id: str | None = None,
                  judged: list[dict] | None = None, worlds: WorldPool | None = None) -> tuple[Task, TaskDag]:
    """A boundary task (:mod:`autoforge.tasks.boundary`): the user asks for ``write``, which ``guard`` forbids
    on the task's world; the gold makes the reads that show why. Returns the task and its DAG (the gold
    reads, then the requested write), which is stored with it. Raises DagExecutionError / PhrasingError."""
    from autoforge.tasks.answers import answer_given_away
    from autoforge.tasks.boundary import build, twins

    ident = guard.get("op") == "identify_first"  # the user cannot say who they are (tasks.identity)
    b = (identity.build if ident else build)(env, tools, dag, write, guard, runtime, rng, worlds)
    run = DagRun(calls=b.run.calls, outputs=b.run.outputs, final_state=b.run.final_state, facts=b.facts,
                 args={**b.run.args, write.node_id: b.write_args})
    draft = boundary_request(b.phrase_dag, run, tools, env, rng)
    forbidden = lookup_ids(b.dag, run.outputs, run.args, key_fields(env))
    if client is not None and not getattr(client, "is_offline", True):
        draft = refine_request(client, draft, b.facts, forbidden)
    refuse_leaks(draft.request, forbidden)
    why = answer_given_away(draft.request, b.answer, b.facts)
    if why:
        raise PhrasingError("answer_given", why)
    why = check_args_in_domain(run.calls, tools, TODAY)
    if why:
        raise DagExecutionError("out_of_domain", why)
    why = check_ids_bound(run.calls, run.outputs, b.facts, draft.request, tools, key_fields(env))
    if why:
        raise DagExecutionError("unbound_id", why)
    rid = str(guard.get("rule_id"))
    task_id = content_id("task", env.env_id, b.dag.dag_id, BOUNDARY, rid, b.answer.model_dump(), canonical_json(b.facts),
                         legacy_state_hash(b.world))
    first = [rid] if ident else twins(tools[write.tool or ""].guards, guard)  # its rule, then any that checks the same
    task = _task(task_id, env, b.gold, draft.request, b.facts, b.world, run, test_fraction, batch_id, run_id,
                 kind=BOUNDARY, gold_answer=b.answer, rules=task_rules(run.calls, tools, judged, first=first))
    return task.model_copy(update={"dag_id": b.dag.dag_id, "n_requirements": b.dag.n_requirements}), b.dag


MAX_FAIL_STREAK = 4  # a DAG that fails this many instantiations in a row is retired (DEFAULT)
PROVEN_TURNS = 1  # turns for DAGs that just made a task, per fresh turn of the shuffled round (DEFAULT, see generate_tasks)


def attempt_weight(dag: TaskDag) -> int:
    """Turns a DAG gets per round: 1 for 2-3 tool calls, 2 for 4, 3 for 5 or more (DEFAULT).

    Long DAGs fail instantiation more often (more calls whose preconditions can fail), so equal
    turns would skew the verified mix toward short tasks; the paper wants high-difficulty tasks."""
    n = sum(1 for x in dag.nodes if x.kind == "tool")
    return max(1, min(3, n - 2))


def coverage_first(cycle: list[TaskDag], writes: set[str]) -> list[TaskDag]:
    """``cycle`` with, first, its first DAG holding each write tool no earlier one holds (in the
    cycle's order), then the rest as they were: a write that few DAGs hold gets its turn before the
    tasks run out (a login that two of 146 sequences hold, where the others fill the batch)."""
    front: list[int] = []
    covered: set[str] = set()
    for i, d in enumerate(cycle):
        new = {n.tool for n in d.nodes if n.kind == "tool" and n.tool in writes} - covered
        if new:
            front.append(i)
            covered |= new
    first = set(front)
    return [cycle[i] for i in front] + [d for i, d in enumerate(cycle) if i not in first]


def generate_tasks(env: EnvironmentRecord, tools: Iterable[ToolCode], dags: list[TaskDag], seed: int, *,
                   n_tasks: int = 120, max_attempts: int | None = None, env_factory: EnvFactory | None = None,
                   client: Any = None, test_fraction: float = TEST_FRACTION, skip_ids: set[str] | None = None,
                   batch_id: str | None = None, run_id: str | None = None,
                   proven_turns: int = PROVEN_TURNS, judged: list[dict] | None = None,
                   boundary_share: float | None = None,
                   dags_out: list[TaskDag] | None = None) -> tuple[list[Task], list[Rejection]]:
    """Up to ``n_tasks`` tasks for one environment, instantiating its DAGs round-robin.

    A round is every DAG :func:`attempt_weight` times, in an order shuffled by ``seed`` (the first DAG
    of each write tool moved to the front, :func:`coverage_first`); each
    attempt has its own seed, which picks its world from the environment's pool
    (:class:`~autoforge.tasks.world_pool.WorldPool`, about ``n_tasks / 4`` worlds). After each of these fresh turns, ``proven_turns`` turns go
    to DAGs that made a task on their last try (first come, first served; one that fails leaves
    the queue), so a DAG that instantiates well makes more tasks, up to its blueprint and
    sequence caps, instead of every DAG getting one try. Walks scale with ``n_tasks`` and the
    extra walks of a big batch are the rarer, harder ones (a ~1k-task batch keeps 24% of its
    attempts, a ~10k one 20% when each DAG gets one try): the proven turns keep the yield from
    falling with the batch. ``proven_turns=0`` is the plain round-robin. A DAG that fails
    :data:`MAX_FAIL_STREAK` attempts in a row is retired, so structurally failing DAGs stop
    taking turns. A failed attempt becomes a Rejection (stage ``generate``, item
    ``<dag_id>#<attempt>``). Ids in ``skip_ids`` (already in the warehouse) are not returned
    again, so re-running never resets a verified task to ``generated``; they still count toward
    ``n_tasks``.

    Boundary tasks (:func:`boundary_task`) come first: ``boundary_share`` of ``n_tasks`` (None: the
    ``AUTOFORGE_BOUNDARY_SHARE`` setting, default 0.15; at least one where any DAG holds a guarded
    write), made round-robin over the environment's rules (:func:`autoforge.tasks.boundary.coverage_order`)
    in at most :data:`BOUNDARY_ATTEMPTS` tries each; their DAGs are appended to ``dags_out``. The
    other tasks fill the rest. ``judged``: the environment's judged rules (their ids go into
    ``Task.rules``; a gold that breaks one by its order is rejected, reason ``policy_rule``).
    """
    mine = sorted((t for t in tools if t.env_id == env.env_id and t.status == "accepted"), key=lambda t: t.name)
    by_name = {t.name: t for t in mine}
    dags = sorted((d for d in dags if d.env_id == env.env_id), key=lambda d: d.dag_id)
    # a DAG whose tool order breaks a judged rule (a write before the lookup that identifies the user) makes
    # no task that keeps it: one rejection, no turns
    tasks: dict[str, Task] = {}
    rejections: list[Rejection] = []
    out_of_order = {d.dag_id: b[0] for d in dags if (b := gold_breaks(
        [ToolCall(name=n.tool or "") for n in topo_order(d) if n.kind == "tool"], judged))}
    rejections += [rejection("generate", f"{dag_id}#rules", "policy_rule", describe_break(*b)[:500], run_id)
                   for dag_id, b in sorted(out_of_order.items())]
    cycle = [d for d in dags if d.dag_id not in out_of_order for _ in range(attempt_weight(d))]
    random.Random(seed).shuffle(cycle)
    cycle = coverage_first(cycle, {t.name for t in mine if t.effect == "write"})
    if n_tasks <= 0 or not (dags or identity.identity_rules(judged)):  # no DAG: an identity rule's boundary tasks still
        return [], rejections
    skip_ids = skip_ids or set()
    seen: set[str] = set()
    streak = {d.dag_id: 0 for d in dags}
    shape = {d.dag_id: blueprint_key(env.env_id, d) for d in dags}
    tools_of = {d.dag_id: tuple(n.tool for n in d.nodes if n.kind == "tool") for d in dags}
    same_shape: dict[str, list[str]] = {}  # blueprint -> its DAGs
    same_seq: dict[tuple, list[str]] = {}  # gold tool sequence -> its DAGs
    for d in dags:
        same_shape.setdefault(shape[d.dag_id], []).append(d.dag_id)
        same_seq.setdefault(tools_of[d.dag_id], []).append(d.dag_id)
    held: dict[str, int] = {}  # blueprint -> tasks made of it
    cap = blueprint_cap(n_tasks)
    per_seq: dict[tuple, int] = {}  # gold tool sequence -> tasks made of it
    seq_cap = sequence_cap(n_tasks)
    proven: deque[TaskDag] = deque()  # DAGs whose last try made a task, waiting for their next turn
    queued: set[str] = set()  # their ids
    budget = max_attempts or n_tasks * 3
    done = attempt = 0
    worlds = WorldPool(env, seed, pool_size(n_tasks))
    done = _boundary_tasks(env, by_name, dags, seed, n_tasks, runtime_factory=lambda: open_env(mine, env_factory),
                           client=client, test_fraction=test_fraction, batch_id=batch_id, run_id=run_id, judged=judged,
                           share=boundary_share, skip_ids=skip_ids, seen=seen, tasks=tasks, rejections=rejections,
                           dags_out=dags_out, worlds=worlds)

    def try_dag(dag: TaskDag, runtime: Any) -> bool:
        """One instantiation attempt of ``dag``; True when it made a new task."""
        nonlocal attempt, done
        rng = random.Random(f"{seed}:{dag.dag_id}:{attempt}")
        item = f"{dag.dag_id}#{attempt}"
        attempt += 1
        try:
            task = generate_task(env, by_name, dag, runtime, rng, client=client, test_fraction=test_fraction,
                                 batch_id=batch_id, run_id=run_id, judged=judged, worlds=worlds)
        except (DagExecutionError, PhrasingError) as exc:
            where = node_label(dag, getattr(exc, "node", None))
            rejections.append(rejection("generate", item, exc.reason, (exc.detail + (f" (at {where})" if where else ""))[:500],
                                        run_id))
            streak[dag.dag_id] += 1
            return False
        if task.task_id in seen:
            rejections.append(rejection("generate", item, "duplicate", f"same as {task.task_id}", run_id))
            streak[dag.dag_id] += 1
            return False
        seen.add(task.task_id)
        streak[dag.dag_id] = 0
        held[shape[dag.dag_id]] = held.get(shape[dag.dag_id], 0) + 1
        if held[shape[dag.dag_id]] >= cap:  # the blueprint is full: its DAGs stop taking turns
            for d in same_shape[shape[dag.dag_id]]:
                streak[d] = MAX_FAIL_STREAK
        per_seq[tools_of[dag.dag_id]] = per_seq.get(tools_of[dag.dag_id], 0) + 1
        if per_seq[tools_of[dag.dag_id]] >= seq_cap:  # so is the tool sequence: variety over sequences
            for d in same_seq[tools_of[dag.dag_id]]:
                streak[d] = MAX_FAIL_STREAK
        done += 1
        if task.task_id not in skip_ids:
            tasks[task.task_id] = task
        return True

    def more() -> bool:
        return attempt < budget and done < n_tasks

    if not cycle:
        return list(tasks.values()), rejections
    with open_env(mine, env_factory) as runtime:
        while more():
            live = [d for d in cycle if streak[d.dag_id] < MAX_FAIL_STREAK]
            if not live:
                break
            for dag in live:
                if not more():
                    break
                if streak[dag.dag_id] >= MAX_FAIL_STREAK:
                    continue
                if try_dag(dag, runtime) and proven_turns > 0 and dag.dag_id not in queued:
                    proven.append(dag)
                    queued.add(dag.dag_id)
                turns = proven_turns
                while turns > 0 and proven and more():
                    again = proven.popleft()
                    queued.discard(again.dag_id)
                    if streak[again.dag_id] >= MAX_FAIL_STREAK:  # its blueprint or sequence filled up meanwhile
                        continue
                    turns -= 1
                    if try_dag(again, runtime) and again.dag_id not in queued:
                        proven.append(again)
                        queued.add(again.dag_id)
    return list(tasks.values()), rejections


BOUNDARY_ATTEMPTS = 6  # tries per boundary task wanted (DEFAULT): a shaped world fails more often than a plain one


def boundary_count(n_tasks: int, share: float, n_candidates: int) -> int:
    """Boundary tasks wanted of ``n_tasks``: ``share`` of them, at least one where there is a candidate."""
    if n_candidates == 0 or share <= 0 or n_tasks <= 0:
        return 0
    return min(n_tasks, max(1, round(share * n_tasks)))


def _boundary_tasks(env: EnvironmentRecord, tools: dict[str, ToolCode], dags: list[TaskDag], seed: int, n_tasks: int, *,
                    runtime_factory: Any, client: Any, test_fraction: float, batch_id: str | None, run_id: str | None,
                    judged: list[dict] | None, share: float | None, skip_ids: set[str], seen: set[str],
                    tasks: dict[str, Task], rejections: list[Rejection], dags_out: list[TaskDag] | None,
                    worlds: WorldPool | None = None) -> int:
    """The boundary tasks of :func:`generate_tasks` (into ``tasks``, ``rejections``, ``seen``); returns how many."""
    from autoforge.settings import setting
    from autoforge.tasks.boundary import candidates, coverage_order

    share = setting("boundary_share") if share is None else share
    cands = candidates(dags, tools) + identity.candidates(env, tools, dags, judged) if share and share > 0 else []
    want = boundary_count(n_tasks, share or 0.0, len(cands))
    if not want:
        return 0
    order = coverage_order(cands, random.Random(f"{seed}:boundary"))
    streak: dict[tuple, int] = {}
    made = attempt = 0
    with runtime_factory() as runtime:
        while made < want and attempt < want * BOUNDARY_ATTEMPTS:
            live = [c for c in order if streak.get((c[0].dag_id, c[1].node_id, c[2]["rule_id"]), 0) < MAX_FAIL_STREAK]
            if not live:
                break
            for dag, w, g in live:
                if made >= want or attempt >= want * BOUNDARY_ATTEMPTS:
                    break
                key = (dag.dag_id, w.node_id, g["rule_id"])
                rng = random.Random(f"{seed}:boundary:{dag.dag_id}:{w.node_id}:{g['rule_id']}:{attempt}")
                item = f"{dag.dag_id}#b{attempt}"
                attempt += 1
                try:
                    task, bdag = boundary_task(env, tools, dag, w, g, runtime, rng, client=client,
                                               test_fraction=test_fraction, batch_id=batch_id, run_id=run_id,
                                               judged=judged, worlds=worlds)
                except (DagExecutionError, PhrasingError) as exc:
                    where = node_label(dag, getattr(exc, "node", None))
                    rejections.append(rejection("generate", item, exc.reason, (
                        f"boundary task on rule {g['rule_id']}: {exc.detail}" + (f" (at {where})" if where else ""))[:500],
                        run_id))
                    streak[key] = streak.get(key, 0) + 1
                    continue
                if task.task_id in seen:
                    rejections.append(rejection("generate", item, "duplicate", f"same as {task.task_id}", run_id))
                    streak[key] = streak.get(key, 0) + 1
                    continue
                seen.add(task.task_id)
                streak[key] = 0
                made += 1
                if task.task_id not in skip_ids:
                    tasks[task.task_id] = task
                    if dags_out is not None and all(d.dag_id != bdag.dag_id for d in dags_out):
                        dags_out.append(bdag)
    return made


# --------------------------------------------------------------------------- one environment (the stage's unit)


@dataclass
class StageResult:
    """What one environment gave a generate or verify stage (records only; the pipeline writes them)."""

    env_id: str
    tasks: list[Task] = field(default_factory=list)
    results: list[VerificationResult] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    attempts: int = 0
    llm_calls: list[LLMCall] = field(default_factory=list)  # online backend: every call, for the warehouse
    dags: list[TaskDag] = field(default_factory=list)  # DAGs made by the stage: boundary tasks' (gold reads + the write)

    def records(self) -> list[Any]:
        return [*self.dags, *self.tasks, *self.results, *self.rejections, *self.llm_calls]


def generate_env(env: EnvironmentRecord, tools: list[ToolCode], dags: list[TaskDag], seed: int, *, tasks_per_env: int,
                 attempts_per_task: int, env_factory: EnvFactory | None = None, client: Any = None,
                 skip_ids: set[str] | None = None, test_fraction: float = TEST_FRACTION, batch_id: str | None = None,
                 run_id: str | None = None, judged: list[dict] | None = None,
                 boundary_share: float | None = None) -> StageResult:
    """Stage 4 for one environment: up to ``tasks_per_env`` tasks from its DAGs, in at most
    ``tasks_per_env * attempts_per_task`` instantiations (their defaults: ``pipeline.GenerateParams``);
    ``judged``: its judged rules, ``boundary_share``: see :func:`generate_tasks`."""
    made: list[TaskDag] = []
    tasks, rejections = generate_tasks(env, tools, dags, seed, n_tasks=tasks_per_env,
                                       max_attempts=tasks_per_env * attempts_per_task, env_factory=env_factory, client=client,
                                       test_fraction=test_fraction, skip_ids=skip_ids, batch_id=batch_id, run_id=run_id,
                                       judged=judged, boundary_share=boundary_share, dags_out=made)
    return StageResult(env.env_id, tasks=tasks, rejections=rejections, attempts=len(tasks) + len(rejections),
                       llm_calls=drain_calls(client, run_id), dags=[d.model_copy(update={"run_id": run_id}) for d in made])


def stage_counts(results: list[StageResult], seconds: float) -> dict[str, Any]:
    """Counts of a generate or verify stage, for its run row and the funnel."""
    verified = sum(1 for r in results for t in r.tasks if t.status == "verified")
    verifying = any(r.results for r in results)
    return {"environments": len(results), "in": sum(r.attempts for r in results),
            "out": verified if verifying else sum(len(r.tasks) for r in results),
            "tasks": sum(len(r.tasks) for r in results), "verified": verified,
            "rejected": sum(len(r.rejections) for r in results), "seconds": round(seconds, 3)}


def node_label(dag: TaskDag, node_id: str | None) -> str | None:
    """Where in ``dag`` a failure happened, in tool names: ``search_books`` for a tool node, ``argmax
    over search_books`` for a reasoning node (the tools whose outputs it reads). None: no such node."""
    nodes = {n.node_id: n for n in dag.nodes}
    node = nodes.get(node_id or "")
    if node is None:
        return None
    if node.kind == "tool":
        return node.tool
    feeds, seen, todo = [], set(), [s.node for s in node.args.values() if s.kind == "node" and s.node]
    while todo:  # through reasoning nodes (a filter before an argmax) to the tools they read
        up = nodes.get(todo.pop(0))
        if up is None or up.node_id in seen:
            continue
        seen.add(up.node_id)
        if up.kind == "tool":
            feeds.append(up.tool)
        else:
            todo += [s.node for s in up.args.values() if s.kind == "node" and s.node]
    return f"{node.op} over {', '.join(dict.fromkeys(feeds))}" if feeds else node.op
