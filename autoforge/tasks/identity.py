"""Boundary tasks on an identify-first rule: the user cannot say who they are (issue 33).

An ``identify_first`` rule ("NEVER provide account balances or book appointments without first confirming
the customer's user_id"; "Your valid driver's license is required to confirm your identity"; "Before a
rental is changed you will be identified by the email address on your account", with a lookup) forbids a
write for a user who has not identified. Where the rule says what identifies the user (its ``label``; without
lookups, the write's argument ``arg`` that carries it: :mod:`autoforge.domain.policy_identity`), its boundary
is a user who asks for the write without having that:

1. without lookups, the write ``W`` alone (from a DAG that holds it, or from its schema where no DAG does: a
   tool set whose sequences all fail still has its rule taught) runs on a fresh world, choosing the user's
   facts as for any task; with lookups, ``W`` and what it reads from, in a DAG where a lookup the user's
   own values feed comes before it;
2. the task's facts are those, less ``arg``'s or the lookups' (the user does not have them); the request asks
   for ``W`` alone, with the user's own values (:func:`autoforge.tasks.phrasing.boundary_request`), never
   naming the label;
3. the gold makes no call; the fact that says why is the label ("user id", "driver's license"), checked
   in the final message like an answer.

The stored DAG is ``W`` alone, its ``params`` naming the rule (:data:`RULE_KEY`), so the oracle and the
checks know which judged rule the request runs into. The oracle asks for the label once, hears that the
user does not have it and says why (1.0); an agent that does nothing says nothing (0.0); one that does what
the user asked makes the write without the identity (a made-up one, or, with no ``arg``, none): a judged
break or a changed state, and no reason given (0.0).
"""

from __future__ import annotations

import copy
import random
from typing import Any

from autoforge.dags.build import topo_order
from autoforge.tasks.boundary import Boundary, _sub_dag, ancestors, idle_match, solo
from autoforge.tasks.execute import DagExecutionError, DagRun
from autoforge.types import ArgSource, DagNode, EnvironmentRecord, GoldAnswer, TaskDag, ToolCode, content_id

RULE_KEY = "boundary_rule"  # a requested call's params: the judged rule its boundary task runs into


def identity_rules(judged: list[dict] | None) -> list[dict]:
    """The judged identify-first rules that say what identifies the user."""
    return [c for c in judged or () if c.get("op") == "identify_first" and c.get("rule_id")
            and str(c.get("label") or "").strip()]


def _params(tool: ToolCode) -> list[str]:
    return list(((tool.parameters or {}).get("properties") or {}))


def spec_dag(env_id: str, tool: ToolCode) -> tuple[TaskDag, DagNode]:
    """A DAG of ``tool`` alone from its schema: every required argument (every argument, where none is
    marked required) is one the user gives."""
    required = list((tool.parameters or {}).get("required") or []) or _params(tool)
    node = DagNode(node_id="n0", kind="tool", tool=tool.name, requirement=0,
                   args={p: ArgSource(kind="user", fact=p) for p in required})
    dag = TaskDag(dag_id=content_id("dag", env_id, "boundary-spec", node.model_dump()), env_id=env_id,
                  nodes=[node], edges=[], n_requirements=1)
    return dag, node


def candidates(env: EnvironmentRecord, tools: dict[str, ToolCode], dags: list[TaskDag],
               judged: list[dict] | None) -> list[tuple[TaskDag, DagNode, dict]]:
    """(DAG of the write alone, the write, the rule) for every write an identity rule binds (that takes the
    rule's ``arg``, where it names one)."""
    out = []
    for rule in identity_rules(judged):
        for name in rule.get("tools") or ():
            tool = tools.get(name)
            if tool is None or (rule.get("arg") and rule["arg"] not in _params(tool)):
                continue
            if rule.get("via"):  # the shortest DAG that looks the user up, then makes the write
                held = sorted(((len(part), d.dag_id, d, n) for d in dags if d.answer is None
                               for n in d.nodes if n.tool == name and _lookups(d, n, rule)
                               for part in [_part(d, n, rule)]), key=lambda x: x[:2])
                if held:
                    out.append((held[0][2], held[0][3], rule))
                continue
            held = next(((d, n) for d in dags if d.answer is None for n in d.nodes if n.tool == name), None)
            dag, w = solo(*held) if held else spec_dag(env.env_id, tool)
            if rule.get("arg") and (w.args.get(rule["arg"]) is None or w.args[rule["arg"]].kind != "user"):
                continue
            out.append((dag, w, rule))
    return out


def _lookups(dag: TaskDag, w: DagNode, rule: dict) -> list[DagNode]:
    """The lookups of ``rule`` that come before ``w`` in ``dag`` and take only the user's values."""
    mine = [n for n in dag.nodes if n.tool in rule["via"] and n.args and all(s.kind == "user" for s in n.args.values())]
    if not mine:
        return []
    order = [n.node_id for n in topo_order(dag)]
    return [n for n in mine if order.index(n.node_id) < order.index(w.node_id)]


def _part(dag: TaskDag, w: DagNode, rule: dict) -> list[DagNode]:
    """What runs for ``w``'s identity task: its lookups, what ``w`` reads from, then ``w``."""
    keep = {n.node_id for n in _lookups(dag, w, rule)} | ancestors(dag, w.node_id)
    return [n for n in dag.nodes if n.node_id in keep] + [w]


def _without(node: DagNode, arg: str | None) -> DagNode:
    return node.model_copy(update={"args": {k: v for k, v in node.args.items() if k != arg}})


def build(env: EnvironmentRecord, tools: dict[str, ToolCode], dag: TaskDag, w: DagNode, rule: dict, runtime: Any,
          rng: random.Random, worlds: Any = None) -> Boundary:
    """One identity boundary task's gold (see the module docstring); raises DagExecutionError with a reason."""
    from autoforge.tasks.instantiate import FactChooser
    from autoforge.tasks.keep_rules import run_keeping_rules
    from autoforge.tasks.world_pool import fresh_world

    world = fresh_world(env, rng, worlds)
    facts: dict[str, Any] = {}
    run = _sub_dag(dag, _part(dag, w, rule), [], "boundary-run") if rule.get("via") else dag
    first = run_keeping_rules(runtime, run, world, facts, FactChooser(env, tools, rng, facts, run), tools, env)
    arg = rule.get("arg")
    hidden = {w.args[arg].fact} if arg else {s.fact for n in run.nodes if n.tool in (rule.get("via") or ())
                                              for s in n.args.values() if s.kind == "user"}
    kept = {s.fact for n in run.nodes if n.tool not in (rule.get("via") or ()) for k, s in n.args.items()
            if s.kind == "user" and not (n.node_id == w.node_id and k == arg)}
    if hidden & kept:
        raise DagExecutionError("boundary_unfit", f"the user gives {sorted(hidden & kept)[0]} for another argument too")
    facts = {k: v for k, v in facts.items() if k not in hidden}
    made = first.args[w.node_id]
    if rule.get("via"):  # the write alone, asked with the user's own values (what a lookup found is never theirs)
        dag, w = solo(dag, w)
        w = w.model_copy(update={"args": {k: s for k, s in w.args.items() if s.fact in facts}})
        arg = None
    args = {k: v for k, v in made.items() if k in w.args and k != arg}
    label = " ".join(str(rule["label"]).split())
    answer = GoldAnswer(value=label, kind="string", field="reason")
    if idle_match(answer):
        raise DagExecutionError("boundary_trivial", f"what identifies the user ({label!r}) is said by a reply that says nothing")
    asked = w.model_copy(update={"params": {RULE_KEY: rule["rule_id"]}})
    full = dag.model_copy(update={"nodes": [asked], "edges": [], "answer": None})
    full = full.model_copy(update={"dag_id": content_id("dag", env.env_id, "boundary-identity", asked.model_dump())})
    gold = full.model_copy(update={"nodes": [], "dag_id": content_id("dag", env.env_id, "boundary-identity-gold",
                                                                         asked.model_dump())})
    phrase = full.model_copy(update={"nodes": [_without(asked, arg)]})
    run = DagRun(calls=[], outputs={}, final_state=copy.deepcopy(world), facts=dict(facts), args={})
    return Boundary(full, gold, phrase, run, world, facts, answer, asked, args, rule)


def rule_of(write: DagNode, judged: list[dict] | None) -> dict | None:
    """The identity rule a boundary task's requested call names (None: a runtime rule's boundary task)."""
    rid = (write.params or {}).get(RULE_KEY)
    return next((c for c in identity_rules(judged) if c["rule_id"] == rid), None) if rid else None


def problem(task: Any, write: DagNode, rule: dict) -> str | None:
    """Why an identity boundary task does not test its rule (None: it does)."""
    if not task.rules or task.rules[0] != rule["rule_id"]:
        return f"the task's first rule is not the identity rule {rule['rule_id']} its requested call names"
    if write.tool not in (rule.get("tools") or ()):
        return f"rule {rule['rule_id']} does not bind the requested {write.tool}"
    arg = rule.get("arg")
    src = write.args.get(arg) if arg else None
    if arg and (src is None or src.kind != "user"):
        return f"the requested {write.tool} takes no {arg} from the user"
    if src is not None and src.fact in task.user_facts:
        return f"the user has the {rule['label']} ({src.fact}) that rule {rule['rule_id']} asks for"
    if task.gold_calls:
        return f"the gold of a boundary task on an identity rule makes no call; it makes {task.gold_calls[0].name}"
    return None


def answer_problem(task: Any, rule: dict) -> str | None:
    """Why the task's answer is not what the rule says identifies the user (None: it is)."""
    if task.gold_answer is None or str(task.gold_answer.value) != " ".join(str(rule["label"]).split()):
        return f"the task's answer is not what identifies the user ({rule['label']!r})"
    return None
