"""Verification and curation: a task is kept only if every check passes.

The checks, what each means and their order are the registry :data:`autoforge.tasks.checks.CHECKS`
(docs/design.md#stage-5-verification-and-curation). :func:`verify_task` runs them on a task that
changes the state, :func:`verify_answer_task` on one that does not (an answer task, whose reading
of each check the registry gives), :func:`verify_boundary_task` on a boundary task (the user asks for
a write a rule forbids); :func:`verify_tasks` adds ``near_duplicate`` last, over the
environment's blueprint counts. Every task's gold must keep the environment's rules (check
``policy_rule``, first: its reason names the rule).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from autoforge.dags.build import rejection, topo_order
from autoforge.domain.keys import is_key_param, key_fields, required_params
from autoforge.dialogue import mentions
from autoforge.envs.interface import EnvFactory
from autoforge.domain.placeholders import find_placeholders
from autoforge.domain.world_checks import Finding, enum_values, rejecting, task_findings
from autoforge.tasks.checks import CHECKS
from autoforge.tasks.execute import DagExecutionError, DagRun, run_calls, run_dag
from autoforge.envs.sandbox import TODAY
from autoforge.tasks.generate import StageResult, blueprint_key, duplicate_key, open_env
from autoforge.tasks.kinds import BOUNDARY, task_kind
from autoforge.tasks.rules import describe_break, gold_breaks
from autoforge.tasks.quality import (blueprint_cap, check_args_in_domain, check_ids_bound, check_tool_kinds,
                                     check_writes_observable)
from autoforge.types import (EnvironmentRecord, Rejection, StateSchema, Task, TaskDag, ToolCode, VerificationResult,
                             STATE_HASH_PREFIX, ToolCall, WorldCheck, canonical_json, state_hash_like)


ORDER = {name: i for i, name in enumerate(CHECKS)}


def _result(task: Task, check: str, reason: str | None, run_id: str | None) -> VerificationResult:
    return VerificationResult(task_id=task.task_id, check=check, passed=reason is None, reason=reason, run_id=run_id)


def check_replay(runtime: Any, task: Task, dag: TaskDag) -> tuple[str | None, DagRun | None]:
    reason, run, _ = replay(runtime, task, dag)
    return reason, run


def replay(runtime: Any, task: Task, dag: TaskDag, trace: list[dict] | None = None
           ) -> tuple[str | None, DagRun | None, DagExecutionError | None]:
    """:func:`check_replay` with the error that stopped a replay (reason ``policy_rule``: a rule refused it).
    ``trace``: the first replay's states, after the reset and after each call (:func:`~autoforge.tasks.execute.run_dag`)."""
    runs, h = [], []
    # a version-2 S*: the sandbox worker's own hash of each run's final state (kept call by call), so the second
    # run's state never crosses the pipe; a version-1 S* is compared as one, from the states
    kept = task.gold_state_hash.startswith(STATE_HASH_PREFIX) and hasattr(runtime, "state_hash")
    for i in range(2):
        try:
            runs.append(run_dag(runtime, dag, task.initial_state, dict(task.user_facts), trace=trace if i == 0 else None,
                                want_state=i == 0 or not kept))
        except DagExecutionError as exc:
            return f"replay {i + 1} failed: {exc}", None, exc
        h.append(runtime.state_hash() if kept else state_hash_like(runs[-1].final_state, task.gold_state_hash))
    if h[0] != h[1]:
        return f"two replays disagree on S* ({h[0][:12]} vs {h[1][:12]}): a tool is not deterministic", None, None
    if h[0] != task.gold_state_hash:
        return f"replay gives S* {h[0][:12]}, the task stores {task.gold_state_hash[:12]}", None, None
    replayed = [c.model_dump() for c in runs[0].calls]
    if canonical_json(replayed) != canonical_json([c.model_dump() for c in task.gold_calls]):
        return "replayed calls differ from the stored gold calls", None, None
    if canonical_json(runs[0].calls) != canonical_json(runs[1].calls):
        return "two replays made different calls", None, None
    return None, runs[0], None


def check_rules(task: Task, error: DagExecutionError | None, judged: list[dict] | None) -> str | None:
    """The ``policy_rule`` check of a task that is not a boundary task: the replay was not refused by a
    runtime rule, and the gold calls break no judged rule by their order."""
    if error is not None and error.reason == "policy_rule":
        return error.detail
    breaks = gold_breaks(task.gold_calls, judged)
    return describe_break(*breaks[0]) if breaks else None


def check_traceable(task: Task, dag: TaskDag, run: DagRun | None, tools: dict[str, ToolCode], keys: set[str]) -> str | None:
    if run is None:
        return "cannot trace arguments: the gold DAG does not replay"
    nodes = {n.node_id: n for n in dag.nodes}
    tool_nodes = [n for n in topo_order(dag) if n.kind == "tool"]
    if len(tool_nodes) != len(task.gold_calls):
        return f"{len(task.gold_calls)} gold calls but {len(tool_nodes)} tool nodes"
    order = {n.node_id: i for i, n in enumerate(topo_order(dag))}
    public = task.request + " " + canonical_json(task.user_facts)
    # ids the DAG itself takes from the user (the user knows their own id): not a leak when re-read later
    told = {canonical_json(task.user_facts.get(s.fact)) for n in dag.nodes for s in n.args.values() if s.kind == "user"}
    for call in task.gold_calls:
        node = nodes.get(call.id or "")
        if node is None or node.tool != call.name:
            return f"gold call {call.name} ({call.id}) matches no tool node of the DAG"
        tool = tools.get(call.name)
        if tool is None:
            return f"gold call {call.name} is not a tool of the environment"
        missing = [p for p in required_params(tool) if p not in call.arguments]
        if missing:
            return f"{call.name} misses required argument(s) {missing}"
        for arg, value in call.arguments.items():
            src = node.args.get(arg)
            where = f"{call.name}.{arg}={value!r}"
            if src is None:
                return f"{where} has no source in the DAG"
            if src.kind == "user":
                if src.fact not in task.user_facts:
                    return f"{where} reads user fact {src.fact!r}, which the user does not know"
                if canonical_json(task.user_facts[src.fact]) != canonical_json(value):
                    return f"{where} differs from user fact {src.fact}={task.user_facts[src.fact]!r}"
            elif src.kind == "node":
                if src.node not in nodes or order[src.node] >= order[node.node_id]:
                    return f"{where} reads {src.node}, which does not run before it"
                if canonical_json(run.args.get(node.node_id, {}).get(arg)) != canonical_json(value):
                    return f"{where} is not what {src.node}.{src.path or ''} gives on replay"
                if (is_key_param(arg, keys) and isinstance(value, str) and canonical_json(value) not in told
                        and mentions(public, value)):
                    return f"{where} must be looked up but appears in the request or the user's facts (guessable)"
            else:
                enum = ((tool.parameters.get("properties") or {}).get(arg) or {}).get("enum")
                if not (enum and len(enum) == 1 and enum[0] == value):
                    return f"{where} is a constant the agent cannot know"
    return None


def check_placeholders(task: Task, tools: dict[str, ToolCode], memo: dict[str, str | None] | None = None,
                       state_key: str | None = None) -> str | None:
    """The first placeholder value in the task's gold arguments or initial state, and where it is. ``memo``: the
    verdicts on whole initial states by ``state_key``, the state's hash (the tasks drawn from one pooled world
    share their initial state: it is read once)."""
    for i, call in enumerate(task.gold_calls):
        tool = tools.get(call.name)
        allowed = enum_values(tool.parameters) if tool else ()
        for path, why in find_placeholders(call.arguments, required=required_params(tool) if tool else (), allowed=allowed):
            return f"gold call {i + 1} ({call.name}) argument {path} is {why}"
    if memo is not None and state_key is not None and state_key in memo:
        return memo[state_key]
    found = next((f"initial state {path} is {why}" for path, why in find_placeholders(task.initial_state)), None)
    if memo is not None and state_key is not None:
        memo[state_key] = found
    return found


def _placeholders(task: Task, tools: dict[str, ToolCode], world: WorldInput | None, initial_hash: str) -> str | None:
    return check_placeholders(task, tools, world.initial if world is not None else None, initial_hash)


def gold_steps(runtime: Any, task: Task) -> tuple[list[tuple[dict, dict]], list[Any]]:
    """The state before and after each gold call, replayed from the task's initial state, and
    each call's output (None where it failed)."""
    runtime.reset(task.initial_state)
    before, steps, outputs = runtime.get_state(), [], []
    for call in task.gold_calls:
        obs = runtime.call(call.name, dict(call.arguments))
        outputs.append(getattr(obs, "output", None) if getattr(obs, "ok", False) else None)
        after = runtime.get_state()
        steps.append((before, after))
        before = after
    return steps, outputs


def hash_after(runtime: Any, state: dict, calls: list[ToolCall], like: str) -> str:
    """The state hash (:func:`~autoforge.types.state_hash_like` ``like``) after ``calls`` from a reset to ``state``:
    of a version-2 ``like``, the sandbox worker's own (kept up to date call by call: no state crosses the pipe)."""
    if not like.startswith(STATE_HASH_PREFIX) or not hasattr(runtime, "state_hash"):
        return state_hash_like(run_calls(runtime, state, calls), like)
    runtime.reset(state)
    for c in calls:
        runtime.call(c.name, dict(c.arguments))
    return runtime.state_hash()


def traced_steps(task: Task, run: DagRun, trace: list[dict]) -> tuple[list[tuple[dict, dict]], list[Any]]:
    """:func:`gold_steps` from a replay that made exactly the task's gold calls (:func:`replay` checked it),
    with ``trace`` its states after the reset and after each call: the same states, no second run."""
    steps = list(zip(trace[:-1], trace[1:]))
    if len(steps) != len(task.gold_calls):
        raise AssertionError(f"a replay of {len(task.gold_calls)} gold calls traced {len(steps)} steps")
    return steps, [run.outputs.get(c.id or "") for c in task.gold_calls]


WORLD_REASON_FINDINGS = 3  # findings a `world` rejection's reason spells out (all are stored in world_checks)


def check_world(runtime: Any, task: Task, schema: StateSchema, tools: dict[str, ToolCode],
                descriptions: dict[str, str] | None = None,
                replayed: tuple[list[tuple[dict, dict]], list[Any]] | None = None) -> tuple[str | None, list[Finding]]:
    """The ``world`` check: the task's findings (:func:`autoforge.domain.world_checks.task_findings`
    over the records of its initial state the gold run uses, its gold arguments and the states
    around each gold call) and the reason, naming each rejecting finding's kind, path and value
    (None: none of its findings is of a kind that rejects). ``replayed``: :func:`gold_steps`, where the caller has it."""
    steps, outputs = replayed if replayed is not None else gold_steps(runtime, task)
    findings = task_findings(schema, task, tools, steps, descriptions, outputs)
    bad = rejecting(findings)
    if not bad:
        return None, findings
    more = len(bad) - WORLD_REASON_FINDINGS
    reason = "; ".join(f.short() for f in bad[:WORLD_REASON_FINDINGS]) + (f"; and {more} more" if more > 0 else "")
    return f"{len(bad)} world-check finding(s): {reason}", findings


def check_not_duplicate(task: Task, dag: TaskDag, seen: dict[str, str], what: str, key: str | None = None) -> str | None:
    """None unless another task already holds this task's duplicate key (``seen`` records the first; ``key``: the
    key, where the caller has it)."""
    key = key or duplicate_key(task, dag)
    holder = seen.setdefault(key, task.task_id)
    return None if holder == task.task_id else f"same {what} as {holder}"


def verify_task(runtime: Any, task: Task, dag: TaskDag, tools: dict[str, ToolCode], keys: set[str],
                seen: dict[str, str], run_id: str | None = None, *, world: WorldInput | None = None,
                judged: list[dict] | None = None, dup_key: str | None = None) -> list[VerificationResult]:
    """All checks for one task; ``seen`` maps duplicate keys to the task id that holds them (``dup_key``: this
    task's, where the caller has it);
    ``world``: the environment's state schema and tool descriptions, and where the ``world``
    check leaves its findings (None: an empty schema, so only the arguments and the initial
    state's placeholders are judged); ``judged``: the environment's judged rules
    (:func:`autoforge.tasks.rules.judged_checks`)."""
    if task.kind == BOUNDARY:
        return verify_boundary_task(runtime, task, dag, tools, keys, seen, run_id, world=world, dup_key=dup_key,
                                    judged=judged)
    if not task_kind(task.kind).changes_state:
        return verify_answer_task(runtime, task, dag, tools, keys, seen, run_id, world=world, judged=judged,
                                  dup_key=dup_key)
    out = []
    trace: list[dict] = []
    reason, run, error = replay(runtime, task, dag, trace)
    out.append(_result(task, "policy_rule", check_rules(task, error, judged), run_id))
    out.append(_result(task, "replay_deterministic", reason, run_id))
    initial_hash = state_hash_like(task.initial_state, task.gold_state_hash)
    out.append(_result(task, "changes_state", "S* equals S: the task changes nothing"
                       if initial_hash == task.gold_state_hash else None, run_id))
    idle = hash_after(runtime, task.initial_state, [], task.gold_state_hash)
    out.append(_result(task, "do_nothing_fails", "doing nothing already reaches S*" if idle == task.gold_state_hash else None, run_id))
    reads = [c for c in task.gold_calls if tools.get(c.name) is not None and tools[c.name].effect == "read"]
    ro = hash_after(runtime, task.initial_state, reads, task.gold_state_hash)
    out.append(_result(task, "read_only_fails", f"the {len(reads)} read calls alone reach S*" if ro == task.gold_state_hash else None, run_id))
    out.append(_result(task, "traceable", check_traceable(task, dag, run, tools, keys), run_id))
    out.append(_result(task, "not_duplicate", check_not_duplicate(task, dag, seen, "DAG shape and state change", dup_key), run_id))
    # the states around each gold call, read by two checks: from the first replay where it made the stored gold calls
    replayed = traced_steps(task, run, trace) if reason is None and run is not None else gold_steps(runtime, task)
    out.append(_result(task, "writes_observable", check_writes_observable(runtime, task.initial_state, task.gold_calls,
                                                                          tools, steps=replayed[0]), run_id))
    out.append(_result(task, "args_in_domain", check_args_in_domain(task.gold_calls, tools, TODAY), run_id))
    out.append(_result(task, "no_placeholders", _placeholders(task, tools, world, initial_hash), run_id))
    out.append(_result(task, "world", _world(runtime, task, tools, world, replayed), run_id))
    out.append(_result(task, "answer_not_given", None, run_id))
    out.append(_result(task, "ids_bound", ids_bound(task, run, tools, keys), run_id))
    return out


@dataclass
class WorldInput:
    """What the ``world`` check reads beyond the task (the environment's), and the findings it left."""

    schema: StateSchema
    descriptions: dict[str, str] = field(default_factory=dict)  # tool name -> its documented description
    findings: dict[str, list[Finding]] = field(default_factory=dict)  # task id -> its findings
    initial: dict[str, str | None] = field(default_factory=dict)  # initial-state hash -> its placeholder verdict


def _world(runtime: Any, task: Task, tools: dict[str, ToolCode], world: WorldInput | None,
           replayed: tuple[list[tuple[dict, dict]], list[Any]] | None = None) -> str | None:
    schema = world.schema if world is not None else StateSchema(collections=[])
    reason, found = check_world(runtime, task, schema, tools, world.descriptions if world is not None else None, replayed)
    if world is not None and found:
        world.findings[task.task_id] = found
    return reason


def verify_answer_task(runtime: Any, task: Task, dag: TaskDag, tools: dict[str, ToolCode], keys: set[str],
                       seen: dict[str, str], run_id: str | None = None, *, world: WorldInput | None = None,
                       judged: list[dict] | None = None, dup_key: str | None = None) -> list[VerificationResult]:
    """The checks of an answer task (same names as a state task's; see the module docstring)."""
    from autoforge.tasks.answers import answer_given_away, answer_match, gold_answer

    out = []
    reason, run, error = replay(runtime, task, dag)
    out.append(_result(task, "policy_rule", check_rules(task, error, judged), run_id))
    if reason is None and run is not None and task.gold_answer is not None:
        try:
            again = gold_answer(dag, run)
        except DagExecutionError as exc:
            again, reason = None, f"the replay gives no answer: {exc}"
        if again is not None and canonical_json(again.value) != canonical_json(task.gold_answer.value):
            reason = f"the replay answers {again.value!r}, the task stores {task.gold_answer.value!r}"
    out.append(_result(task, "replay_deterministic", reason, run_id))
    gold = task.gold_answer
    initial_hash = state_hash_like(task.initial_state, task.gold_state_hash)
    changed = initial_hash != task.gold_state_hash
    out.append(_result(task, "changes_state", "an answer task must leave the state as it was" if changed else
                       ("the task has no gold answer" if gold is None else None), run_id))
    out.append(_result(task, "do_nothing_fails", "an empty final message matches the answer"
                       if gold is not None and answer_match("", gold) else None, run_id))
    # the last read is needed: no earlier output already states the answer (else the chain is padding)
    early = [nid for nid in (run.outputs if run else {}) if dag.answer and nid != dag.answer.node
             and gold is not None and answer_match(canonical_json(run.outputs[nid]), gold)]
    out.append(_result(task, "read_only_fails", f"{early[0]}'s output already states the answer: the last read adds nothing"
                       if early else None, run_id))
    out.append(_result(task, "traceable", check_traceable(task, dag, run, tools, keys), run_id))
    out.append(_result(task, "not_duplicate", check_not_duplicate(task, dag, seen, "DAG shape, facts and answer", dup_key), run_id))
    out.append(_result(task, "writes_observable", check_tool_kinds(task.gold_calls, tools), run_id))
    out.append(_result(task, "args_in_domain", check_args_in_domain(task.gold_calls, tools, TODAY), run_id))
    out.append(_result(task, "no_placeholders", _placeholders(task, tools, world, initial_hash), run_id))
    out.append(_result(task, "world", _world(runtime, task, tools, world), run_id))
    out.append(_result(task, "answer_not_given", answer_given_away(task.request, gold, task.user_facts) if gold else None,
                       run_id))
    out.append(_result(task, "ids_bound", ids_bound(task, run, tools, keys), run_id))
    return out


def verify_boundary_task(runtime: Any, task: Task, dag: TaskDag, tools: dict[str, ToolCode], keys: set[str],
                         seen: dict[str, str], run_id: str | None = None, *, world: WorldInput | None = None,
                         dup_key: str | None = None, judged: list[dict] | None = None) -> list[VerificationResult]:
    """The checks of a boundary task (:mod:`autoforge.tasks.boundary`; same names, read as the registry says):
    its gold is the DAG's reads, its requested write is the DAG's last node. On an identity rule
    (:mod:`autoforge.tasks.identity`, one of ``judged``) the write is not made: the user lacks what the rule asks."""
    from autoforge.tasks import identity
    from autoforge.tasks.answers import answer_given_away, answer_match
    from autoforge.tasks.boundary import explain, idle_match, node_args, record_at, split

    out = []
    try:
        gold_dag, write = split(dag)
    except DagExecutionError as exc:
        return [_result(task, c, str(exc), run_id) for c in CHECKS if c != "near_duplicate"]
    reason, run, error = replay(runtime, task, gold_dag)
    gold = task.gold_answer
    rule = task.rules[0] if task.rules else None
    tool = tools.get(write.tool or "")
    # the requested write, after the gold reads: refused by the task's rule, the state as it was
    refused = why_rules = None
    args = None
    ident = identity.rule_of(write, judged)
    if ident is not None:  # a judged rule: what the user does not have is the reason, no call is tried
        why_rules, refused = identity.problem(task, write, ident), ident["rule_id"]
        reason = reason or identity.answer_problem(task, ident)
    elif run is not None and tool is not None:
        try:
            args = node_args(write, run.outputs, task.user_facts)
        except DagExecutionError as exc:
            why_rules = f"the requested {write.tool} cannot be made: {exc}"
        if args is not None:
            before = runtime.state_hash() if hasattr(runtime, "state_hash") else canonical_json(runtime.get_state())
            obs = runtime.call(write.tool, dict(args))
            refused = getattr(obs, "rule_id", None)
            after = runtime.state_hash() if hasattr(runtime, "state_hash") else canonical_json(runtime.get_state())
            if refused is None or refused != rule:
                why_rules = (f"the requested {write.tool} is not refused by the task's rule {rule}: "
                             f"{'refused by ' + refused if refused else (getattr(obs, 'error', None) or 'it succeeds')}")
            elif before != after:
                why_rules = f"the refused {write.tool} changed the state"
    if error is not None and error.reason == "policy_rule":
        why_rules = error.detail
    elif tool is None:
        why_rules = f"the requested write {write.tool} is not a tool of the environment"
    writes = [c.name for c in task.gold_calls if tools.get(c.name) is not None and tools[c.name].effect != "read"]
    if why_rules is None and writes:
        why_rules = f"the gold of a boundary task makes no write; it makes {writes[0]}"
    out.append(_result(task, "policy_rule", why_rules, run_id))
    # the fact that says why, again from what the replayed reads show
    if reason is None and run is not None and gold is not None and tool is not None and args is not None:
        got = explain(tool.guards, args, record_at(run.outputs, dag.answer), run.outputs)
        if got is None or got[0].get("rule_id") != rule:
            reason = f"the replayed reads do not show why rule {rule} refuses {write.tool}"
        elif canonical_json(got[1] if not isinstance(got[1], list) else sorted(got[1], key=repr)) != canonical_json(gold.value):
            reason = f"the replay gives the reason {got[1]!r}, the task stores {gold.value!r}"
    out.append(_result(task, "replay_deterministic", reason, run_id))
    initial_hash = state_hash_like(task.initial_state, task.gold_state_hash)
    changed = initial_hash != task.gold_state_hash
    out.append(_result(task, "changes_state", "a boundary task must leave the state as it was" if changed else
                       ("the task has no gold answer" if gold is None else None), run_id))
    idle = idle_match(gold) if gold is not None else None
    out.append(_result(task, "do_nothing_fails", f"a reply that says nothing ({idle!r}) states the answer"
                       if gold is not None and (idle is not None or answer_match("", gold)) else None, run_id))
    out.append(_result(task, "read_only_fails", None if refused else
                       "cannot check the requested write: the gold reads do not replay" if run is None else
                       f"doing what the user asked ({write.tool}) is not refused by a rule", run_id))
    out.append(_result(task, "traceable", check_traceable(task, gold_dag, run, tools, keys), run_id))
    out.append(_result(task, "not_duplicate", check_not_duplicate(task, dag, seen, "DAG shape, facts and answer", dup_key), run_id))
    out.append(_result(task, "writes_observable", check_tool_kinds(task.gold_calls, tools), run_id))
    out.append(_result(task, "args_in_domain", check_args_in_domain(task.gold_calls, tools, TODAY), run_id))
    out.append(_result(task, "no_placeholders", _placeholders(task, tools, world, initial_hash), run_id))
    out.append(_result(task, "world", _world(runtime, task, tools, world), run_id))
    out.append(_result(task, "answer_not_given", answer_given_away(task.request, gold, task.user_facts) if gold else None,
                       run_id))
    out.append(_result(task, "ids_bound", ids_bound(task, run, tools, keys), run_id))
    return out


def ids_bound(task: Task, run: DagRun | None, tools: dict[str, ToolCode], keys: set[str]) -> str | None:
    """``ids_bound`` (:func:`autoforge.tasks.quality.check_ids_bound`) on the replay's outputs."""
    if run is None:
        return "cannot check identifiers: the gold DAG does not replay"
    return check_ids_bound(task.gold_calls, run.outputs, task.user_facts, task.request, tools, keys)


def verify_tasks(env: EnvironmentRecord, tools: Iterable[ToolCode], tasks: list[Task], dags: Iterable[TaskDag], *,
                 existing: dict[str, str] | None = None, blueprints: dict[str, int] | None = None,
                 env_factory: EnvFactory | None = None, run_id: str | None = None,
                 descriptions: dict[str, str] | None = None, world_rows: list[WorldCheck] | None = None,
                 judged: list[dict] | None = None) -> tuple[list[Task], list[VerificationResult], list[Rejection]]:
    """Check the tasks of one environment. ``existing``: duplicate keys of tasks already verified;
    ``blueprints``: blueprint key -> tasks of it already verified (this environment's);
    ``descriptions``: tool name -> its documented description (what a write may change).

    Returns the tasks with ``status`` set (verified / rejected), one result per check and task,
    and one Rejection (stage ``verify``, reason = first failed check) per rejected task. The world
    checks' findings of each task are appended to ``world_rows`` when it is given (a verified task
    holds only findings of kinds that do not reject, ``domain.world_checks.FINDING_KINDS``).
    """
    mine = sorted((t for t in tools if t.env_id == env.env_id and t.status == "accepted"), key=lambda t: t.name)
    by_name = {t.name: t for t in mine}
    dag_by_id = {d.dag_id: d for d in dags}
    keys = key_fields(env)
    seen = dict(existing or {})
    held = dict(blueprints or {})
    cap = blueprint_cap(len(tasks) + sum(held.values()))
    world = WorldInput(env.state_schema, dict(descriptions or {}))
    out_tasks, results, rejections = [], [], []
    with open_env(mine, env_factory) as runtime:
        for task in sorted(tasks, key=lambda t: t.task_id):
            dag = dag_by_id.get(task.dag_id)
            keys_of = {}
            if dag is None:
                rs = [_result(task, c, f"DAG {task.dag_id} not found", run_id) for c in CHECKS]
            else:
                dup = duplicate_key(task, dag)
                rs = verify_task(runtime, task, dag, by_name, keys, seen, run_id, world=world, judged=judged, dup_key=dup)
                bp = blueprint_key(task.env_id, dag)
                keys_of = {"duplicate_key": dup, "blueprint_key": bp}
                near = None
                if all(r.passed for r in rs):
                    if held.get(bp, 0) >= cap:
                        near = (f"its blueprint (tool sequence and argument sources) already holds {held[bp]} tasks, "
                                f"the cap for this environment ({cap})")
                    else:
                        held[bp] = held.get(bp, 0) + 1
                rs.append(_result(task, "near_duplicate", near, run_id))
                rs.sort(key=lambda r: ORDER[r.check])  # the registry's order (near_duplicate is decided last)
            results.extend(rs)
            failed = [r for r in rs if not r.passed]
            status = "rejected" if failed else "verified"
            out_tasks.append(task.model_copy(update={"status": status, "run_id": run_id or task.run_id, **keys_of}))
            if failed:
                rejections.append(rejection("verify", task.task_id, failed[0].check, failed[0].reason, run_id))
            if world_rows is not None:  # a rejected task's findings; a verified one holds only kinds that keep it
                world_rows.extend(WorldCheck.of(env.env_id, task.task_id, f, run_id)
                                  for f in world.findings.get(task.task_id, []))
    return out_tasks, results, rejections


@dataclass
class VerifyResult(StageResult):
    """A verify stage's result for one environment: a :class:`StageResult` with the world-check
    findings of its tasks (``world_checks`` rows)."""

    world_checks: list[WorldCheck] = field(default_factory=list)

    def records(self) -> list[Any]:
        return [*super().records(), *self.world_checks]


def verify_env(env: EnvironmentRecord, tools: list[ToolCode], tasks: list[Task], dags: list[TaskDag], *,
               existing: dict[str, str] | None = None, blueprints: dict[str, int] | None = None,
               env_factory: EnvFactory | None = None, run_id: str | None = None,
               descriptions: dict[str, str] | None = None, judged: list[dict] | None = None) -> VerifyResult:
    """Stage 5 for one environment: every check on ``tasks``; ``existing`` maps duplicate keys of
    tasks verified earlier to their ids, ``blueprints`` counts their blueprints, ``descriptions``
    gives each tool's documented description (the ``world`` check reads what a write may change),
    ``judged`` its judged rules (the ``policy_rule`` check)."""
    rows: list[WorldCheck] = []
    out, results, rejections = verify_tasks(env, tools, tasks, dags, existing=existing, blueprints=blueprints,
                                            env_factory=env_factory, run_id=run_id, descriptions=descriptions,
                                            world_rows=rows, judged=judged)
    return VerifyResult(env.env_id, tasks=out, results=results, rejections=rejections, attempts=len(tasks),
                        world_checks=rows)
