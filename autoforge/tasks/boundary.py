"""Boundary tasks: the user asks for a write that a runtime rule forbids (issue 33).

A boundary task teaches an agent to keep a rule when the user asks it to break one. It is made
from a DAG that holds a write ``W`` whose tool carries a runtime guard ``g``
(:mod:`autoforge.envs.guards`) and whose inputs come from reads only:

1. the DAG's part that ``W`` needs (its ancestors, then ``W``) is run on a fresh world, choosing
   the user's facts as for any task;
2. the world (or, for a rule on an argument, the user's own value) is shaped so that ``W``'s call
   breaks exactly ``g`` (:func:`break_world`: a status the rule forbids, a window already passed, a
   counter at its limit, a record that belongs to someone else, nine guests where four are allowed);
3. the reads are run again on that world: they are the gold calls; ``W`` is never made. The
   request asks for ``W`` (:func:`autoforge.tasks.phrasing.boundary_request`); the sandbox must
   refuse ``W`` with ``g``'s rule id and leave the state as it was;
4. the fact that says *why* is the task's ``gold_answer`` (:func:`explain`): the record value that
   blocks the write (the status ``shipped``, the booking date, the owner) as the gold reads show it
   (a read of the record is added when none of them shows it), or the limit the rule sets on an
   argument (``4``). The final message must state it, checked like an answer task's.

The task's DAG (stored with it) is the gold reads followed by ``W`` (:func:`split`), and its
``answer`` points at the field the reads show (None for a limit on an argument). ``Task.rules``
starts with ``g``'s rule id. So the oracle does the reads and says why (1.0), an agent that does
nothing says nothing (0.0), and one that does what the user asked makes a call the rule engine
refuses, which is a rule break (0.0, :mod:`autoforge.rollout.rule_judge`).

Ops a boundary task can be built on (:data:`BOUNDARY_OPS`): status, window, count_limit,
record_limit, owned, covers (the world is shaped), unchanged, arg_limit, arg_in, arg_not (the user's
value is: the argument becomes one the user gives, never an id). ``arg_not`` only where its rule names
what the values are (``label``: "prohibited topics"), which is the fact to state (the value itself is the
user's own word); it binds reads too ("do not discuss prohibited topics" on ``lookupPolicyDocument``):
the user asks for the read, the gold makes no call and says why. ``member`` is not (the blocking fact
would be the user's own value). Of guards that check the same thing (a policy's
sentence and a tool's own), the first is the task's rule and the others follow it in ``Task.rules``.
A write that every DAG holds after another write gets a DAG of its own (:func:`solo`). A fact that
a reply saying nothing would state (a status ``completed``: "I have completed your request",
:data:`IDLE_MESSAGES`) makes no boundary task.

Rejection reasons: ``boundary_unfit`` (the rule cannot be broken alone on this DAG: the record is
not there, another rule refuses first, the value it reads is not the user's), ``boundary_drift``
(on the shaped world the reads pick another record), ``boundary_hidden`` (no read shows why),
``boundary_trivial`` (see above), and the reasons of any gold run.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from autoforge.dags.build import topo_order
from autoforge.envs import guards as G
from autoforge.tasks.execute import DagExecutionError, DagRun, resolve_path, run_dag, sourced_args
from autoforge.tasks.keep_rules import ARG_OPS, run_keeping_rules, value_enum
from autoforge.types import (AnswerSource, ArgSource, DagNode, EnvironmentRecord, GoldAnswer, TaskDag, ToolCode,
                             canonical_json, content_id)

BOUNDARY_OPS = ("status", "window", "count_limit", "record_limit", "record_min", "owned", "covers", "unchanged",
                "arg_limit", "arg_in", "arg_not")
_LIMIT_OPS = ("count_limit", "record_limit")
# What an agent that does nothing (or says no without reading anything) may say: a boundary task's fact must
# not be found in any of them (a status 'completed' is: "I have completed your request").
IDLE_MESSAGES = ("All done: I have completed your request.", "Done! Your request has been completed successfully.",
                 "I have finished everything you asked for.", "I'm sorry, I can't do that.",
                 "I'm sorry, that is not possible under our policy.")
MAX_LIST = 6  # an allowed-values answer of more items is a listing, not a reason (as answer tasks)
MAX_CHARS = 200


# --------------------------------------------------------------------------- the DAG


_NOT_CHECK = ("rule_id", "message", "tool")


def same_check(a: dict, b: dict) -> bool:
    """Two guards that check the same thing (two sentences of one rule: a policy's and a tool's own)."""
    return {k: v for k, v in a.items() if k not in _NOT_CHECK} == {k: v for k, v in b.items() if k not in _NOT_CHECK}


def twins(guards: list[dict], g: dict) -> list[str]:
    """The rule ids of ``g`` and of the guards that check what it checks (``g``'s first)."""
    return list(dict.fromkeys([str(g.get("rule_id"))] + [str(o.get("rule_id")) for o in guards
                                                          if o is not g and same_check(o, g) and o.get("rule_id")]))


def _firsts(guards: list[dict]) -> list[dict]:
    """``guards`` without those that repeat an earlier one's check (the rule engine names the first)."""
    out: list[dict] = []
    for g in guards:
        if not any(same_check(g, o) for o in out):
            out.append(g)
    return out


def _sources(node: DagNode) -> list[str]:
    return [s.node for s in node.args.values() if s.kind == "node" and s.node]


def ancestors(dag: TaskDag, node_id: str) -> set[str]:
    """The nodes ``node_id`` reads from, directly or through others (arguments and edges)."""
    nodes = {n.node_id: n for n in dag.nodes}
    parents: dict[str, set[str]] = {n.node_id: set(_sources(n)) for n in dag.nodes}
    for a, b in dag.edges:
        parents.setdefault(b, set()).add(a)
    out: set[str] = set()
    todo = list(parents.get(node_id, ()))
    while todo:
        x = todo.pop()
        if x in out or x not in nodes:
            continue
        out.add(x)
        todo += list(parents.get(x, ()))
    return out


def split(dag: TaskDag) -> tuple[TaskDag, DagNode]:
    """A boundary task's DAG as (its gold part: every node but the last, the requested write)."""
    order = topo_order(dag)
    if not order or order[-1].kind != "tool":
        raise DagExecutionError("boundary_unfit", "a boundary DAG ends in the write the user asks for")
    w = order[-1]
    gold = dag.model_copy(update={"nodes": [n for n in dag.nodes if n.node_id != w.node_id],
                                  "edges": [e for e in dag.edges if w.node_id not in e], "answer": None})
    return gold, w


def node_args(node: DagNode, outputs: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """``node``'s arguments from earlier outputs and the user's facts (as :func:`run_dag` resolves them)."""
    args = sourced_args(node, outputs)
    for name, src in node.args.items():
        if src.kind in ("node", "const"):
            continue
        if src.fact not in facts:
            raise DagExecutionError("missing_fact", f"user fact {src.fact!r} is not known", node.node_id)
        args[name] = facts[src.fact]
    return {name: args[name] for name in node.args}  # in the DAG's argument order


def candidates(dags: list[TaskDag], tools: dict[str, ToolCode]) -> list[tuple[TaskDag, DagNode, dict]]:
    """(DAG, write node, guard) for every guarded write a boundary task can be built on: its tool carries
    a guard of :data:`BOUNDARY_OPS` and every node it reads from is a read or a reasoning step. A guarded
    write that some DAG holds only after another write gets a DAG of its own (:func:`solo`): the write
    alone, every argument from the user."""
    out = []
    held: dict[str, tuple[TaskDag, DagNode]] = {}  # guarded write tool -> a DAG holding it
    for dag in dags:
        if dag.answer is not None:
            continue
        nodes = {n.node_id: n for n in dag.nodes}
        seen_tools: set[str] = set()
        for w in topo_order(dag):
            tool = tools.get(w.tool or "") if w.kind == "tool" else None
            if tool is None or tool.effect != "write" or not tool.guards or w.tool in seen_tools:
                continue
            seen_tools.add(w.tool)
            held.setdefault(w.tool, (dag, w))
            ups = ancestors(dag, w.node_id)
            if any(nodes[u].kind == "tool" and (tools.get(nodes[u].tool or "") is None
                                                or tools[nodes[u].tool].effect != "read") for u in ups):
                continue
            out += [(dag, w, g) for g in _firsts(tool.guards) if g.get("op") in BOUNDARY_OPS and g.get("rule_id")]
    labelled = {t.name for t in tools.values() if t.effect == "read" and any(_labelled(g) for g in t.guards or ())}
    for dag in dags if labelled else ():  # a read a rule on its arguments guards: asked alone, from a DAG holding it
        for w in dag.nodes:
            if w.tool not in labelled or w.tool in held:
                continue
            held[w.tool] = (dag, w)
    covered = {w.tool for _, w, _ in out}
    for name, (dag, w) in sorted(held.items()):
        if name not in covered:
            alone, node = solo(dag, w)
            read = tools[name].effect == "read"
            out += [(alone, node, g) for g in _firsts(tools[name].guards)
                    if g.get("op") in BOUNDARY_OPS and g.get("rule_id") and (not read or _labelled(g))]
    return [c for c in out if c[2].get("op") != "arg_not" or _labelled(c[2])]


def _labelled(g: dict) -> bool:
    """An ``arg_not`` rule that names what its values are (the fact a refusal states)."""
    return g.get("op") == "arg_not" and bool(str(g.get("label") or "").strip()) and bool(g.get("rule_id"))


def solo(dag: TaskDag, w: DagNode) -> tuple[TaskDag, DagNode]:
    """A DAG of ``w`` alone: every argument another node gave is one the user gives (named after it)."""
    taken = {s.fact for s in w.args.values() if s.kind == "user"}
    args = {}
    for name, src in w.args.items():
        if src.kind == "node":
            fact = name if name not in taken else f"{name}_given"
            taken.add(fact)
            src = ArgSource(kind="user", fact=fact)
        args[name] = src
    node = w.model_copy(update={"node_id": "n0", "args": args, "requirement": 0})
    return _sub_dag(dag.model_copy(update={"nodes": [node], "edges": []}), [node], [], "boundary-solo"), node


def coverage_order(cands: list[tuple[TaskDag, DagNode, dict]], rng: random.Random) -> list[tuple[TaskDag, DagNode, dict]]:
    """``cands`` shuffled, then interleaved by rule: every rule's first candidate before any rule's second."""
    cands = list(cands)
    rng.shuffle(cands)
    per: dict[str, list] = {}
    for c in cands:
        per.setdefault(c[2]["rule_id"], []).append(c)
    out = []
    while any(per.values()):
        for rid in sorted(per):
            if per[rid]:
                out.append(per[rid].pop(0))
    return out


def _sub_dag(dag: TaskDag, keep: list[DagNode], extra_edges: list[tuple[str, str]], tag: str) -> TaskDag:
    ids = {n.node_id for n in keep}
    edges = [tuple(e) for e in dag.edges if e[0] in ids and e[1] in ids] + [e for e in extra_edges]
    edges = sorted(set(edges), key=lambda e: (e[0], e[1]))
    reqs = sorted({n.requirement for n in keep})
    nodes = [n.model_copy(update={"requirement": reqs.index(n.requirement)}) for n in keep]
    return TaskDag(dag_id=content_id("dag", dag.env_id, tag, [n.model_dump() for n in nodes], edges), env_id=dag.env_id,
                   seq_id=dag.seq_id, nodes=nodes, edges=edges, n_requirements=len(reqs) or 1, run_id=dag.run_id)


# --------------------------------------------------------------------------- why the write is refused


def fact_field(g: dict) -> str | None:
    """The record field whose value says why a record guard refuses (None for an argument's rule)."""
    op = g.get("op")
    return {"status": g.get("field") or "status", "window": g.get("field"), "owned": g.get("owner_field"),
            "covers": g.get("field"), "unchanged": g.get("field"), "count_limit": g.get("counter"),
            "record_limit": g.get("field"), "record_min": g.get("field")}.get(op)


def fact_words(g: dict) -> str:
    """What the gold answer is, in words ('status', 'limit', 'allowed values')."""
    op = g.get("op")
    if op == "arg_not":
        return "reason"
    if op in ARG_OPS + _LIMIT_OPS:
        return "allowed values" if op == "arg_in" else "limit"
    return str(fact_field(g) or "reason").replace("_", " ")


def fact_of(g: dict, record: dict | None, args: dict) -> Any:
    """The fact that says why guard ``g`` refuses the call: the limit or the allowed values of a rule on an
    argument or a count, else the blocking value of the record (as a read showed it)."""
    op = g.get("op")
    if op == "arg_limit":
        n = G._size(args.get(g.get("arg")))
        hi, lo = g.get("max"), g.get("min")
        return hi if hi is not None and (n is None or lo is None or n > float(hi)) else lo
    if op == "arg_not":  # what the values are ("prohibited topics"), not the user's own value
        return g.get("label")
    if op == "arg_in":
        vals = list(g.get("values") or [])
        return vals[0] if len(vals) == 1 else vals
    if op in _LIMIT_OPS:
        return g.get("max")
    if op == "record_min":  # what is left ("no refills remaining": 0)
        return G._size((record or {}).get(g.get("field"))) if record is not None else None
    return (record or {}).get(fact_field(g) or "") if record is not None else None


def _shows(record: dict, key: Any) -> bool:
    return key is not None and any(not isinstance(v, (dict, list)) and str(v) == str(key) for v in record.values())


def _seen_state(guards: list[dict], args: dict, record: dict | None, outputs: dict[str, Any] | None = None) -> dict:
    """The state as far as the reads showed it: ``record`` under each collection a guard (or its ``when``)
    reads where the record shows the id the call names, and the caller's own record a guard compares with
    (``owner_from``) where a read in ``outputs`` showed it."""
    state: dict[str, dict] = {}
    if record is None:
        return state
    for g in guards:
        for part in (g, g.get("when") or {}):
            key = args.get(part.get("id_arg")) if part.get("id_arg") else None
            if part.get("collection") and _shows(record, key):
                state.setdefault(part["collection"], {})[str(key)] = record
        src = g.get("owner_from") or {}
        mine = session_record(outputs or {}, src.get("collection"), src.get("field")) if src else None
        if mine is not None:
            state.setdefault(src["collection"], {})["session"] = mine
    return state


def session_record(outputs: dict[str, Any], coll: str | None, field: str | None) -> dict | None:
    """The caller's own record of session collection ``coll`` as a read showed it: the one record listed
    under the collection's name (``{"employee_managers": [{...}]}``), or a record holding ``field``."""
    for out in outputs.values():
        if not isinstance(out, dict):
            continue
        listed = out.get(coll) if coll else None
        if isinstance(listed, list) and len(listed) == 1 and isinstance(listed[0], dict):
            return listed[0]
        if field and field in out and not isinstance(out.get(field), (dict, list)):
            return out
    return None


def explain(guards: list[dict], args: dict, record: dict | None = None,
            outputs: dict[str, Any] | None = None) -> tuple[dict, Any] | None:
    """(the guard the requested call breaks, the fact that says why), judged from the call's arguments and
    the record the reads showed (``record``, None: no read showed one; ``outputs``: every read's, where a
    guard compares with the caller's own record); None when none can be shown to break. Generation and
    the oracle agent call it with the same inputs, so they agree."""
    state = _seen_state(guards, args, record, outputs)
    for g in guards:
        if g.get("op") not in ARG_OPS and not state.get(g.get("collection")):
            continue
        try:
            bad = G.broken(g, state, args)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            bad = False
        if bad:
            return g, fact_of(g, record, args)
    return None


def gold_answer_of(g: dict, value: Any) -> GoldAnswer | None:
    """The fact as a :class:`GoldAnswer` (None: nothing a message can be checked for)."""
    from autoforge.tasks.answers import TOLERANCE

    words = fact_words(g)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return GoldAnswer(value=value, kind="number", tolerance=TOLERANCE, field=words)
    if isinstance(value, str):
        return GoldAnswer(value=value, kind="string", field=words) if 0 < len(value.strip()) <= MAX_CHARS else None
    if isinstance(value, list) and 2 <= len(value) <= MAX_LIST and all(
            isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        return GoldAnswer(value=sorted(value, key=repr), kind="list", tolerance=TOLERANCE, field=words)
    return None


def idle_match(answer: GoldAnswer) -> str | None:
    """The first of :data:`IDLE_MESSAGES` that states ``answer`` (None: an agent must find it out)."""
    from autoforge.tasks.answers import answer_match

    return next((m for m in IDLE_MESSAGES if answer_match(m, answer)), None)


def record_at(outputs: dict[str, Any], src: AnswerSource | None) -> dict | None:
    """The record that holds the answer's field (the object around ``src.path``), or None."""
    if src is None or src.node not in outputs:
        return None
    parent = src.path.rsplit(".", 1)[0] if "." in src.path else ""
    try:
        rec = resolve_path(outputs[src.node], parent, node=src.node)
    except DagExecutionError:
        return None
    return rec if isinstance(rec, dict) else None


def find_field(outputs: dict[str, Any], order: list[str], pk: str, key: Any, field: str) -> tuple[str, str] | None:
    """(node id, path to ``field``) of the first record shown in ``outputs`` whose ``pk`` is ``key`` and that
    holds ``field`` (``order``: the nodes to search, in order)."""
    def walk(obj: Any, path: str, depth: int) -> str | None:
        if depth > 5:
            return None
        if isinstance(obj, dict):
            if field in obj and pk in obj and str(obj[pk]) == str(key):
                return f"{path}.{field}" if path else field
            items = obj.items()
        elif isinstance(obj, list):
            items = ((str(i), v) for i, v in enumerate(obj))
        else:
            return None
        for k, v in items:
            if isinstance(v, (dict, list)) and "." not in str(k):
                hit = walk(v, f"{path}.{k}" if path else str(k), depth + 1)
                if hit is not None:
                    return hit
        return None

    for nid in order:
        if nid in outputs:
            hit = walk(outputs[nid], "", 0)
            if hit is not None:
                return nid, hit
    return None


# --------------------------------------------------------------------------- shaping the world


def break_world(g: dict, state: dict, args: dict, env: EnvironmentRecord, tool: ToolCode, rng: random.Random) -> None:
    """Change ``state`` / ``args`` in place so that the call breaks guard ``g`` and keeps the tool's others
    (raises ``boundary_unfit`` when it cannot)."""
    op = g.get("op")
    enum = value_enum(env, tool, g)
    if g.get("when") and op in ("owned", "covers"):  # a tier's rule: its row's condition first
        G.shape({"op": "none", "when": g["when"]}, state, args, keep=True)
    rec = G._record(g, state, args) if op not in ARG_OPS else None
    if op not in ARG_OPS and rec is None:
        raise DagExecutionError("boundary_unfit", f"the {g.get('collection')} record the rule reads is not there")
    if op == "owned":
        have = rec.get(g["owner_field"])
        others = sorted({canonical_json(r.get(g["owner_field"])): r.get(g["owner_field"])
                         for r in (state.get(g["collection"]) or {}).values()
                         if isinstance(r, dict) and r.get(g["owner_field"]) is not None
                         and str(r.get(g["owner_field"])) != str(have)}.items())
        if not others:
            raise DagExecutionError("boundary_unfit", f"no other {g['owner_field']} to give the record")
        rec[g["owner_field"]] = rng.choice(others)[1]
    elif op == "covers":
        want = G._size(args.get(g.get("arg")))
        have = rec.get(g["field"])
        if want is None or (g.get("side", "max") == "max" and want < 1):
            raise DagExecutionError("boundary_unfit", f"{g.get('arg')} gives no amount to compare")
        v = want / 2 if g.get("side", "max") == "max" else want + 1
        rec[g["field"]] = int(v) if isinstance(have, int) and not isinstance(have, bool) and float(v).is_integer() \
            else round(v, 2)
    elif op == "record_limit" and isinstance(rec.get(g["field"]), list):
        grow(g, state, args, env, rec)
    elif op == "record_min" and isinstance(rec.get(g["field"]), list):  # fewer real items, never made-up ones
        rec[g["field"]] = rec[g["field"]][:max(0, int(float(g["min"])) - 1)]
    elif op == "arg_not" and g.get("values"):  # any of the values the rule refuses
        args[g["arg"]] = rng.choice(list(g["values"]))
    else:
        G.shape(g, state, args, keep=False, enum=enum)
        if op in ("status", "arg_in") and enum:
            got = G._record(g, state, args).get(g.get("field") or "status") if op == "status" else args.get(g["arg"])
            if G._norm(got) not in {G._norm(e) for e in enum}:
                raise DagExecutionError("boundary_unfit", f"no value of {enum} breaks the rule")
        elif op in ("status", "arg_in"):  # no enum: a made-up value ('not_active') is no world
            raise DagExecutionError("boundary_unfit", "the rule's field has no listed values to break it with")
    others = [o for o in tool.guards if o is not g and o.get("rule_id") != g.get("rule_id") and not same_check(o, g)]
    for o in others:
        if G.broken(o, state, args):
            G.shape(o, state, args, keep=True, enum=value_enum(env, tool, o), force_when=False)
    got = G.refusal(tool.guards, state, args)
    if got is None or got[0] != g.get("rule_id"):
        raise DagExecutionError("boundary_unfit", f"the shaped call breaks {got[0] if got else 'no rule'}, not "
                                                  f"{g.get('rule_id')}")


def grow(g: dict, state: dict, args: dict, env: EnvironmentRecord, rec: dict) -> None:
    """A ``record_limit`` broken by a list that holds more real items (ids of the records its field names,
    never made-up ones) than leaves room for the call."""
    have = list(rec.get(g["field"]) or [])
    extra = args.get(g["arg"]) if g.get("arg") else None
    add = G._size(extra) if extra is not None else float(g.get("add", 1))
    need = max(0, int(float(g["max"]) - (add or 0)) + 1)
    if len(have) >= need:
        return
    if any(isinstance(x, (dict, list)) for x in have):
        pool = [copy.deepcopy(x) for x in have] * need  # items that are objects: repeated as they are
    else:
        coll = next((c for c in env.state_schema.collections if c.name == g.get("collection")), None)
        f = next((f for f in (coll.fields if coll else []) if f.name == g["field"]), None)
        target = f.ref if f is not None and f.ref else next(
            (c for c, recs in state.items() if isinstance(recs, dict) and any(str(x) in recs for x in have)), None)
        pool = [k for k in sorted((state.get(target) or {}) if target else {}) if str(k) not in {str(x) for x in have}]
        if have and isinstance(have[0], int):
            pool = [int(k) for k in pool if str(k).isdigit()]
    if len(have) + len(pool) < need:
        raise DagExecutionError("boundary_unfit", f"not enough records to fill {g['field']} past its limit")
    rec[g["field"]] = have + pool[:need - len(have)]


# --------------------------------------------------------------------------- one boundary task


class Boundary:
    """What :func:`build` makes: the gold run on the shaped world, the task's DAG and its answer."""

    def __init__(self, dag: TaskDag, gold: TaskDag, phrase_dag: TaskDag, run: DagRun, world: dict, facts: dict,
                 answer: GoldAnswer, write: DagNode, write_args: dict, guard: dict):
        self.dag, self.gold, self.phrase_dag, self.run, self.world = dag, gold, phrase_dag, run, world
        self.facts, self.answer, self.write, self.write_args, self.guard = facts, answer, write, write_args, guard


def _lookup_node(dag_nodes: list[DagNode], w: DagNode, g: dict, env: EnvironmentRecord,
                 tools: dict[str, ToolCode]) -> DagNode | None:
    """A read of the record the rule reads, given the id the write takes (a ``get`` of its collection)."""
    coll = next((c for c in env.state_schema.collections if c.name == g.get("collection")), None)
    src = w.args.get(g.get("id_arg") or "")
    if coll is None or src is None:
        return None
    for t in sorted(tools.values(), key=lambda t: (t.kind != "get", t.name)):
        if t.effect != "read" or t.collection != coll.name:
            continue
        params = list(((t.parameters or {}).get("properties") or {}))
        key = next((p for p in params if (t.arg_map or {}).get(p, p) == coll.primary_key), None)
        required = set((t.parameters or {}).get("required") or [])
        if key is None or required - {key}:
            continue
        return DagNode(node_id=_free_id(dag_nodes), kind="tool", tool=t.name, args={key: ArgSource(**src.model_dump())},
                       requirement=w.requirement)
    return None


def _session_read(dag_nodes: list[DagNode], coll: str | None, tools: dict[str, ToolCode]) -> DagNode | None:
    """A read of the caller's own record (a session collection's argument-less read), for the gold."""
    for t in sorted(tools.values(), key=lambda t: t.name):
        if t.effect == "read" and t.collection == coll and not ((t.parameters or {}).get("required") or []):
            return DagNode(node_id=_free_id(dag_nodes), kind="tool", tool=t.name, args={})
    return None


def _free_id(dag_nodes: list[DagNode]) -> str:
    """A node id the DAG does not use yet (b0, b1 ...) for a read the gold adds."""
    taken = {n.node_id for n in dag_nodes}
    return next(f"b{i}" for i in range(100) if f"b{i}" not in taken)


def build(env: EnvironmentRecord, tools: dict[str, ToolCode], dag: TaskDag, w: DagNode, g: dict, runtime: Any,
          rng: random.Random, worlds: Any = None) -> Boundary:
    """One boundary task's gold (see the module docstring); raises DagExecutionError with a reason.
    ``worlds``: the environment's :class:`~autoforge.tasks.world_pool.WorldPool` (None: a world made from ``rng``)."""
    from autoforge.tasks.instantiate import FactChooser
    from autoforge.tasks.world_pool import fresh_world

    tool = tools[w.tool or ""]
    ups = ancestors(dag, w.node_id)
    keep = [n for n in dag.nodes if n.node_id in ups]
    sub = _sub_dag(dag, keep + [w], [], "boundary-run")
    world = fresh_world(env, rng, worlds)
    facts: dict[str, Any] = {}
    # the facts, chosen on a world where the write works (as for any task)

    first = run_keeping_rules(runtime, sub, world, facts, FactChooser(env, tools, rng, facts, sub), tools, env)
    args = copy.deepcopy(first.args[w.node_id])
    shaped = copy.deepcopy(world)
    before = copy.deepcopy(args)
    break_world(g, shaped, args, env, tool, rng)
    from autoforge.domain.keys import is_key_param, key_fields

    new_args = dict(w.args)
    for name in sorted(set(args) | set(before)):
        if canonical_json(args.get(name)) == canonical_json(before.get(name)):
            continue
        src = w.args.get(name)
        if name not in args or is_key_param(name, key_fields(env)):
            raise DagExecutionError("boundary_unfit", f"breaking the rule changes {w.tool}.{name}, which names a "
                                                      "record, not a value the user asks for")
        if src is None or src.kind != "user":  # the value the user asks for (a constant or a looked-up one before)
            fact = next(f for f in [name] + [f"{name}_{k}" for k in range(2, 50)] if f not in facts)
            src = ArgSource(kind="user", fact=fact)
            new_args[name] = src
        facts[src.fact] = args[name]
    w = w.model_copy(update={"args": new_args})

    def gold_of(nodes: list[DagNode], extra: list[tuple[str, str]]) -> tuple[TaskDag, DagRun]:
        gd = _sub_dag(dag, nodes, extra, "boundary-gold")
        return gd, run_dag(runtime, gd, shaped, dict(facts))

    nodes, extra = list(keep), []
    gold, run = gold_of(nodes, extra)
    got = node_args(w, run.outputs, facts)
    if canonical_json(got) != canonical_json(args):
        raise DagExecutionError("boundary_drift", f"on the shaped world the reads give {w.tool} {got}, not {args}",
                                w.node_id)
    source = None
    record = None
    if g.get("op") not in ARG_OPS:
        coll = next(c for c in env.state_schema.collections if c.name == g.get("collection"))
        field, key = fact_field(g) or "", args.get(g.get("id_arg"))
        hit = find_field(run.outputs, [n.node_id for n in topo_order(gold)], coll.primary_key, key, field)
        if hit is None:  # no gold read shows the record: read it (the reads needed to find out)
            look = _lookup_node(nodes, w, g, env, tools)
            if look is not None:
                src = look.args[next(iter(look.args))]
                extra = [(src.node, look.node_id)] if src.kind == "node" and src.node else []
                nodes = nodes + [look]
                gold, run = gold_of(nodes, extra)
                hit = find_field(run.outputs, [look.node_id], coll.primary_key, key, field)
        if hit is None:
            raise DagExecutionError("boundary_hidden", f"no read shows the {field} of {coll.entity} {key}, which "
                                                       f"rule {g.get('rule_id')} reads")
        source = AnswerSource(node=hit[0], path=hit[1], field=fact_words(g))
        record = record_at(run.outputs, source)
        src = g.get("owner_from") or {}
        if src and session_record(run.outputs, src.get("collection"), src.get("field")) is None:
            mine = _session_read(nodes, src.get("collection"), tools)  # whose the owner must be: read it too
            if mine is not None:
                nodes = nodes + [mine]
                gold, run = gold_of(nodes, extra)
    why = explain(tool.guards, args, record, run.outputs)
    if why is None or why[0].get("rule_id") != g.get("rule_id"):
        raise DagExecutionError("boundary_hidden", f"what the reads show does not tell why rule {g.get('rule_id')} "
                                                   "refuses the write")
    answer = gold_answer_of(g, why[1])
    if answer is None:
        raise DagExecutionError("boundary_hidden", f"the fact behind rule {g.get('rule_id')} ({why[1]!r}) is nothing "
                                                   "a message can state")
    if idle_match(answer):
        raise DagExecutionError("boundary_trivial", f"the fact behind rule {g.get('rule_id')} ({why[1]!r}) is said by "
                                                    "a reply that says nothing")
    # the sandbox refuses the requested write with exactly this rule, and nothing changes
    obs = runtime.call(w.tool, copy.deepcopy(args))
    if getattr(obs, "rule_id", None) != g.get("rule_id"):
        raise DagExecutionError("boundary_unfit", f"the requested {w.tool} was not refused by rule {g.get('rule_id')}: "
                                                  f"{getattr(obs, 'error', None) or 'it succeeded'}", w.node_id)
    if canonical_json(runtime.get_state()) != canonical_json(run.final_state):
        raise DagExecutionError("boundary_unfit", f"the refused {w.tool} changed the state", w.node_id)
    full = _sub_dag(dag, nodes + [w], extra, "boundary").model_copy(update={"answer": source})
    full = full.model_copy(update={"dag_id": content_id("dag", dag.env_id, "boundary",
                                                        [n.model_dump() for n in full.nodes], full.edges,
                                                        source.model_dump() if source else None)})
    phrase = _sub_dag(dag, keep + [w], [], "boundary-phrase")
    return Boundary(full, gold, phrase, run, shaped, facts, answer, w, args, g)
