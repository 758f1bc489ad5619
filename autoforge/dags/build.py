"""From a tool sequence to a validated task DAG (tool nodes + reasoning nodes + edges).

Paper (arXiv 2512.22857, Sec. 3.2): reasoning nodes are inserted into the (merged) sequence
and reasoning edges say which output feeds which input "through a reasoning process"; the
result G_k = (T''_k, E_k) is the blueprint of one task. Offline rules stand in for the LLM:

- each required parameter of a tool is bound to the most recent earlier node whose output
  has a field of that name (tool graph bindings for tool producers, the record's fields for
  reasoning producers), preferring a single value over a list;
- a binding out of a list (``orders.*.order_id``) needs a choice: a select node
  (``argmax``/``argmin`` on a numeric or date field, ``find`` by an enum field whose value
  the user states, or ``filter`` then ``argmax``), whose result then feeds the parameter;
  or ``compare`` of the ``argmax`` and ``argmin`` items by a second field ("compare totals");
- a write's numeric parameter may be a ``count``/``sum`` over a record list the task owns
  (optionally filtered), by name affinity (:mod:`autoforge.dags.aggregates`);
- a write's date or numeric parameter may instead be derived from the target record's
  current value (``add_days``, ``add``) rather than stated by the user;
- the user's identity (their email, their id) is one fact however often it is needed, and a
  repeated lookup of the user is dropped;
- any other parameter is a user fact (``ArgSource(kind="user")``), instantiated per task.

:func:`validate_dag` checks the result (acyclic by networkx, every argument sourced from an
upstream node or a user fact, at least one write) and raises :class:`DagError` with a
short reason category, which the stage records as a Rejection.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import networkx as nx

from autoforge.dags.aggregates import ListSource, countable, list_sources, sum_fields
from autoforge.dags.answers import choose_answer
from autoforge.dags.graph import EntityIndex
from autoforge.domain.keys import (PERSON, is_key_param, key_fields, output_paths, param_schemas, required_params,
                                   value_types)
from autoforge.dags.reasoning import OPS, get_op
from autoforge.dags.sequences import is_lookup
from autoforge.domain.argument_rules import argument_rule
from autoforge.domain.rules import sentences
from autoforge.errors import AutoforgeError
from autoforge.types import (ArgSource, DagNode, EnvironmentRecord, Rejection, TaskDag, ToolCode, ToolGraph, ToolSequence,
                             content_id)

ID_LIST = re.compile(r"(?:^|\.)[A-Za-z0-9]*_?ids\.\*$|(?:^|\.)[a-z0-9_]*Ids\.\*$")
DATE_WORDS = ("date", "deadline", "due", "_at", "time", "_on", "birthday")


class DagError(AutoforgeError):
    """A sequence could not become a valid DAG; ``reason`` is a short category for the funnel."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass
class DagKnobs:
    """Offline reasoning-insertion knobs (DEFAULT: the paper gives no numbers)."""

    p_chain: float = 0.35  # list choice as filter(enum) -> argmax/argmin instead of one select
    p_find: float = 0.35  # list choice by an enum value the user states (find) instead of argmax/argmin
    p_add_days: float = 0.6  # a write's date parameter as add_days(current value) instead of a stated date
    p_add: float = 0.4  # a write's numeric parameter as add(current value, delta)
    p_compare: float = 0.25  # list choice as compare(argmax f, argmin f) on a second field g ("compare totals")
    p_aggregate: float = 0.6  # a write's numeric parameter as count/sum over a list the task owns (aggregates.py)
    p_aggregate_filter: float = 0.5  # ... counting/summing only the items whose enum field has a stated value
    optional_for_update: bool = True  # an update with only optional data parameters gets one of them


HANDLE_FIELDS = {"name", "title", "subject", "label", "username", "user_name", "display_name", "full_name", "email",
                 "file_name", "filename", "headline"}


def is_handle(name: str, types: set[str] | None = None) -> bool:
    """A text field that names its record for a person (a user's name, an article's title)."""
    if types is not None and "string" not in types:
        return False
    n = name.lower()
    return n in HANDLE_FIELDS or n.endswith(("_name", "_title")) and not n.endswith("_id")


def is_date_like(name: str, types: set[str] | None = None) -> bool:
    if types and not types & {"string", "unknown"}:
        return False
    n = name.lower()
    return any(w in n for w in DATE_WORDS) and not n.endswith("_id")


@dataclass
class _Producer:
    node_id: str
    tool: str | None  # None for reasoning nodes
    fields: dict[str, set[str]] = field(default_factory=dict)  # output paths -> types (record fields for reasoning)
    collection: str | None = None


def _enum_of(env: EnvironmentRecord | None, collection: str | None, fname: str, schema: dict | None) -> list | None:
    if schema and isinstance(schema.get("enum"), list):
        return schema["enum"]
    if env is None:
        return None
    for c in env.state_schema.collections:
        if collection is None or c.name == collection:
            for f in c.fields:
                if f.name == fname and f.enum:
                    return f.enum
    return None


def _item_schema(schema: dict | None, list_path: str) -> dict:
    cur: Any = schema or {}
    for part in list_path.split("."):
        if not isinstance(cur, dict):
            return {}
        cur = (cur.get("properties") or {}).get(part, {}) if part != "*" else cur.get("items", {})
    items = cur.get("items", {}) if isinstance(cur, dict) else {}
    return items if isinstance(items, dict) else {}


class _Builder:
    def __init__(self, seq: ToolSequence, graph: ToolGraph, tools: dict[str, ToolCode], env: EnvironmentRecord | None,
                 rng: random.Random, knobs: DagKnobs):
        self.seq, self.tools, self.env, self.rng, self.k = seq, tools, env, rng, knobs
        self.keys = key_fields(env)
        self.index = EntityIndex(env)
        self.edge_map = {(e.src, e.dst): e.bindings for e in graph.edges}
        self.nodes: list[DagNode] = []
        self.edges: set[tuple[str, str]] = set()
        self.producers: list[_Producer] = []
        self.facts: set[str] = set()
        self.n_tool = self.n_reason = 0
        self.pk_of = {c.name: c.primary_key for c in env.state_schema.collections} if env else {}
        self.entity_of = {c.name: c.entity for c in env.state_schema.collections} if env else {}
        self.by_pk = {c.primary_key: c.entity for c in env.state_schema.collections} if env else {}
        self.coll_by_word: dict[str, str] = {}
        for c in env.state_schema.collections if env else []:
            self.coll_by_word.update({c.name: c.name, c.entity: c.name})
        self.shared: set[str] = set()
        self.lists: list[ListSource] = []  # lists of records the task owns (count/sum sources)

    # ------------------------------------------------------------------ helpers
    def is_key(self, tool: ToolCode, param: str) -> bool:
        """An identifier parameter of ``tool``: by its name, or by naming an entity's id (``pet`` of type integer)."""
        return is_key_param(param, self.keys) or self.index.param_entity(tool, param, param_schemas(tool).get(param, {})) is not None

    def fact(self, base: str, *, shared: bool = False, entity: str | None = None) -> ArgSource:
        """A user fact named after the parameter.

        ``shared``: the user's own identity (their email, their user id) is one fact however
        often the DAG needs it, so a merged task never asks for the same value under two
        names. Otherwise a taken name gets the entity as prefix (``booking_check_in``, which
        the user and the agent can tell apart from a search's ``check_in``), then a number."""
        if shared and base in self.shared:
            return ArgSource(kind="user", fact=base)
        names = [base] + ([f"{entity}_{base}"] if entity and not base.startswith(entity + "_") else [])
        # ``file_name_2`` and a parameter ``file_name2`` read alike ("file name 2"): one name each
        squashed = {f.replace("_", "") for f in self.facts}
        taken = lambda n: n in self.facts or n.replace("_", "") in squashed  # noqa: E731
        name = next((n for n in names if not taken(n)), None)
        i = 2
        while name is None or taken(name):
            name, i = f"{base}_{i}", i + 1
        self.facts.add(name)
        if shared and name == base:
            self.shared.add(name)
        return ArgSource(kind="user", fact=name)

    def is_identity(self, tool: ToolCode, param: str) -> bool:
        """Is ``param`` of ``tool`` something that identifies the user themself (shared fact)?"""
        owner = self.by_pk.get(param)
        if owner is not None:
            return owner in PERSON
        coll = self.entity_of.get(tool.collection or "")
        return tool.effect == "read" and coll in PERSON and is_lookup(tool, self.keys)

    def select_value_fact(self, entity: str, field_name: str) -> ArgSource:
        """The user fact a find/filter compares with: ``room_type`` (not ``room_room_type``)."""
        base = field_name if field_name.startswith(entity + "_") else f"{entity}_{field_name}"
        return self.fact(base)

    def add_reasoning(self, op: str, args: dict[str, ArgSource], params: dict, req: int, fields: dict, coll: str | None) -> str:
        nid = f"r{self.n_reason}"
        self.n_reason += 1
        self.nodes.append(DagNode(node_id=nid, kind="reasoning", op=op, params=params, args=args, requirement=req))
        for a in args.values():
            if a.kind == "node":
                self.edges.add((a.node, nid))
        if get_op(op).returns == "object":
            self.producers.append(_Producer(nid, None, fields, coll))
        return nid

    def select(self, prod: _Producer, list_path: str, rest: str, req: int) -> ArgSource:
        """A reasoning choice of one item out of ``prod``'s list at ``list_path``."""
        tool = self.tools[prod.tool] if prod.tool else None
        item = _item_schema(tool.output_schema if tool else None, list_path)
        prefix = list_path + ".*."
        fields = {p[len(prefix):]: t for p, t in prod.fields.items() if p.startswith(prefix) and "." not in p[len(prefix):]}
        coll = tool.collection if tool else prod.collection
        props = item.get("properties") or {}
        numeric = sorted(f for f, t in fields.items() if t & {"integer", "number"} and not is_key_param(f, self.keys))
        dates = sorted(f for f, t in fields.items() if is_date_like(f, t))
        enums = sorted(f for f in fields if not is_key_param(f, self.keys) and _enum_of(self.env, coll, f, props.get(f)))
        ordered = numeric + dates
        src = ArgSource(kind="node", node=prod.node_id, path=list_path)
        entity = self.entity_of.get(coll or "", (coll or "item").rstrip("s"))
        if len(ordered) >= 2 and self.rng.random() < self.k.p_compare:
            # two candidates by one field, the winner by another: "whichever of my most and my least
            # expensive order was placed later" (paper: "compare totals")
            f1, f2 = self.rng.sample(ordered, 2)
            hi = self.add_reasoning("argmax", {"items": src}, {"field": f1}, req, fields, coll)
            lo = self.add_reasoning("argmin", {"items": src}, {"field": f1}, req, fields, coll)
            rid = self.add_reasoning("compare", {"left": ArgSource(kind="node", node=hi), "right": ArgSource(kind="node", node=lo)},
                                     {"field": f2, "pick": self.rng.choice(["max", "min"])}, req, fields, coll)
        elif enums and ordered and self.rng.random() < self.k.p_chain:
            ef = self.rng.choice(enums)
            fid = self.add_reasoning("filter", {"items": src, "value": self.select_value_fact(entity, ef)}, {"field": ef}, req, {}, coll)
            src = ArgSource(kind="node", node=fid, path=None)
            op = self.rng.choice(["argmax", "argmin"])
            rid = self.add_reasoning(op, {"items": src}, {"field": self.rng.choice(ordered)}, req, fields, coll)
        elif enums and (not ordered or self.rng.random() < self.k.p_find):
            ef = self.rng.choice(enums)
            rid = self.add_reasoning("find", {"items": src, "value": self.select_value_fact(entity, ef)}, {"field": ef}, req, fields, coll)
        elif ordered:
            op = self.rng.choice(["argmax", "argmin"])
            rid = self.add_reasoning(op, {"items": src}, {"field": self.rng.choice(ordered)}, req, fields, coll)
        elif handles := sorted(f for f, t in fields.items() if (is_handle(f, t) or f == entity and "string" in t)
                               and not is_key_param(f, self.keys)):  # or named as its record: a message's message
            # nothing to rank or class the items by, but a name each has: "the user whose user name is
            # Ava Chen" (the instantiation picks a value only one item has)
            hf = self.rng.choice(handles)
            rid = self.add_reasoning("find", {"items": src, "value": self.select_value_fact(entity, hf)}, {"field": hf}, req,
                                     fields, coll)
        else:
            raise DagError("unresolvable_list", f"{prod.tool}.{list_path} has no field to choose an item by")
        return ArgSource(kind="node", node=rid, path=rest)

    def bind(self, param: str, dst: str, req: int) -> ArgSource | None:
        """The most recent producer of ``param`` (a single value first, else a list + select)."""
        star: tuple[_Producer, str] | None = None
        single: list[tuple[int, int, ArgSource]] = []  # (rank, -position, source): own entity first, then latest
        dtool = self.tools[dst]
        pent = self.index.param_entity(dtool, param, param_schemas(dtool).get(param, {}))
        for i, prod in enumerate(reversed(self.producers)):
            own = self.pk_of.get(prod.collection or "") == param or bool(
                pent and prod.collection in self.index.colls and self.index.coll_entity(prod.collection) == pent[0])
            if prod.tool is None:
                if param in prod.fields and is_key_param(param, self.keys):
                    single.append((0 if own else 1, i, ArgSource(kind="node", node=prod.node_id, path=param)))
                continue
            ptool = self.tools[prod.tool]
            pnode = next(n for n in self.nodes if n.node_id == prod.node_id)
            for b in self.edge_map.get((prod.tool, dst), []):
                if b.param != param:
                    continue
                top = b.output_path.split(".", 1)[0]
                if ptool.effect == "write" and top in param_schemas(ptool) and top not in pnode.args and not own:
                    continue  # a write echoes an optional input it was not given: the field will be empty
                if "*" not in b.output_path:
                    single.append((0 if own else 1, i, ArgSource(kind="node", node=prod.node_id, path=b.output_path)))
                elif star is None and not ID_LIST.search(b.output_path):
                    star = (prod, b.output_path)  # a list of bare ids (a user's order_ids) has no field to choose by:
                    # the user names which one (a fact the instantiation draws from the records linked to them)
        if single:
            return min(single, key=lambda x: (x[0], x[1]))[2]
        if star is None:
            return None
        prod, path = star
        list_path, rest = path.split(".*.", 1) if ".*." in path else (path.rsplit(".*", 1)[0], None)
        return self.select(prod, list_path, rest or "", req)

    def derived(self, tool: ToolCode, param: str, types: set[str], args: dict[str, ArgSource], req: int) -> ArgSource | None:
        """A write's data parameter computed from the target record's current value (add_days / add)."""
        pk = self.pk_of.get(tool.collection or "")
        target = args.get(pk) if pk else None
        if target is None or target.kind != "node":
            return None
        prod = next((p for p in self.producers if p.node_id == target.node), None)
        if prod is None:
            return None
        base = (target.path or "").rsplit(".", 1)[0] if target.path and "." in target.path else ""
        path = f"{base}.{param}" if base else param
        if path not in prod.fields:
            return None
        src = ArgSource(kind="node", node=prod.node_id, path=path)
        coll = tool.collection
        if is_date_like(param, types) and self.rng.random() < self.k.p_add_days:
            days = self.rng.choice([1, 2, 3, 5, 7, 10, 14])
            rid = self.add_reasoning("add_days", {"date": src}, {"days": days, "field": param}, req, {}, coll)
            return ArgSource(kind="node", node=rid, path=None)
        if types & {"integer", "number"} and not types & {"boolean"} and self.rng.random() < self.k.p_add:
            delta = self.rng.choice([1, 2, 3, 5, 10])
            rid = self.add_reasoning("add", {"value": src}, {"delta": delta, "field": param}, req, {}, coll)
            return ArgSource(kind="node", node=rid, path=None)
        return None

    def aggregate(self, param: str, types: set[str], req: int) -> ArgSource | None:
        """A write's numeric parameter as ``count``/``sum`` over a list the task owns (aggregates.py)."""
        if not types & {"integer", "number"} or is_date_like(param, types):
            return None
        cands: list[tuple[str, ListSource, str | None]] = []
        for src in self.lists:
            cands += [("sum", src, f) for f in sum_fields(param, types, src, self.keys)]
            if countable(param, types):
                cands.append(("count", src, None))
        if not cands or self.rng.random() >= self.k.p_aggregate:
            return None
        op, lst, fname = self.rng.choice(cands)
        items = ArgSource(kind="node", node=lst.node_id, path=lst.path)
        entity = self.entity_of.get(lst.collection or "") or lst.path.rsplit(".", 1)[-1].rstrip("s")
        enums = sorted(f for f in lst.fields if not is_key_param(f, self.keys) and _enum_of(self.env, lst.collection, f, None))
        if enums and self.rng.random() < self.k.p_aggregate_filter:
            ef = self.rng.choice(enums)
            fid = self.add_reasoning("filter", {"items": items, "value": self.select_value_fact(entity, ef)}, {"field": ef}, req,
                                     {}, lst.collection)
            items = ArgSource(kind="node", node=fid, path=None)
        params = {"field": fname} if op == "sum" else {}
        rid = self.add_reasoning(op, {"items": items}, params, req, {}, lst.collection)
        return ArgSource(kind="node", node=rid, path=None)

    def register_lists(self, nid: str, tool: ToolCode) -> None:
        """Remember the record lists a read that takes an identifier returned (count/sum sources)."""
        if tool.effect == "read" and not is_lookup(tool, self.keys):
            self.lists += list_sources(nid, output_paths(tool.output_schema), self.coll_by_word)

    def one_of_choice(self, tool: ToolCode, params: list[str]) -> list[str]:
        """One parameter of each "at least one of A or B" group the parameters' prose states and the
        required ones leave empty (``add_issue_comment(body?, reaction?)``: "Required unless reaction is
        provided"): the code refuses a call with neither, so the task gives one of them."""
        schemas = param_schemas(tool)
        out: list[str] = []
        for p, ps in schemas.items():
            desc = ps.get("description") if isinstance(ps, dict) else None
            for sentence in sentences(desc) if isinstance(desc, str) else []:
                rule = argument_rule(sentence, p, schemas)
                if rule is None or not rule.values or rule.values[0] != "one_of":
                    continue
                group = [q for q in rule.values[1:] if q in schemas]
                if group and not any(q in params or q in out for q in group):
                    data = [q for q in group if not self.is_key(tool, q)]
                    out.append(self.rng.choice(sorted(data or group)))
        return out

    # ------------------------------------------------------------------ main
    def hoist_lookups(self, names: list[str], reqs: list[int]) -> tuple[list[str], list[int]]:
        """Move a later lookup before the first tool that needs its identifier, so the id is
        looked up instead of asked for (and never both: that would make it guessable)."""
        names, reqs = list(names), list(reqs)
        i = 0
        while i < len(names):
            tool = self.tools.get(names[i])
            for p in required_params(tool) if tool else []:
                if not is_key_param(p, self.keys):
                    continue
                fed = any(b.param == p for n in names[:i] for b in self.edge_map.get((n, names[i]), []))
                if fed:
                    continue
                for j in range(i + 1, len(names)):
                    src = self.tools.get(names[j])
                    if src is None or src.effect != "read" or any(is_key_param(q, self.keys) for q in required_params(src)):
                        continue
                    if any(b.param == p and "*" not in b.output_path for b in self.edge_map.get((names[j], names[i]), [])):
                        names.insert(i, names.pop(j))
                        reqs.pop(j)
                        reqs.insert(i, reqs[i])  # the lookup now serves the tool it feeds
                        break
            i += 1
        return names, reqs

    def build(self) -> TaskDag:
        reqs = self.seq.requirements or [0] * len(self.seq.tools)
        names, reqs = self.hoist_lookups(self.seq.tools, reqs)
        for name, req in zip(names, reqs):
            tool = self.tools.get(name)
            if tool is None:
                raise DagError("unknown_tool", f"sequence {self.seq.seq_id} names {name!r}, not an accepted tool of {self.seq.env_id}")
            schemas = param_schemas(tool)
            params = list(required_params(tool))
            pk = self.pk_of.get(tool.collection or "")
            if tool.kind not in ("create", "list", "lookup") and pk:
                # echo(content, file_name=None) writes to the file it names: the record's own key is
                # needed even where the docs mark it optional (without it the call fails: not found)
                params += [p for p in schemas if p not in params and (tool.arg_map or {}).get(p, p) == pk]
            params += self.one_of_choice(tool, params)
            data = [p for p in params if not self.is_key(tool, p)]
            if tool.effect == "write" and not data and self.k.optional_for_update and tool.kind in ("update", "llm"):
                optional = sorted(p for p in schemas if p not in params and not self.is_key(tool, p))
                if optional:
                    params.append(self.rng.choice(optional))
            if is_lookup(tool, self.keys) and self.entity_of.get(tool.collection or "") in PERSON and any(
                    n.tool == name for n in self.nodes):
                continue  # the user is looked up once: a second identical lookup would only repeat the first
            nid = f"n{self.n_tool}"
            self.n_tool += 1
            args: dict[str, ArgSource] = {}
            entity = self.entity_of.get(tool.collection or "")
            answer = self.seq.goal == "answer"
            for p in sorted(params, key=lambda x: (not self.is_key(tool, x), x)):
                key = self.is_key(tool, p)
                src = self.bind(p, name, req) if key or answer else None  # answer chains: a value feeds the next read
                if src is None and tool.effect == "write" and not key:
                    types = value_types(schemas.get(p, {}))
                    src = self.aggregate(p, types, req) or self.derived(tool, p, types, args, req)
                if src is None:
                    data_param = tool.effect == "write" and not key
                    src = self.fact(p, shared=self.is_identity(tool, p), entity=entity if data_param else None)
                args[p] = src
            self.nodes.append(DagNode(node_id=nid, kind="tool", tool=name, args=args, requirement=req))
            for a in args.values():
                if a.kind == "node":
                    self.edges.add((a.node, nid))
            self.producers.append(_Producer(nid, name, output_paths(tool.output_schema), tool.collection))
            self.register_lists(nid, tool)
        n_req = len({n.requirement for n in self.nodes if n.kind == "tool" and self.tools[n.tool].effect == "write"}) or 1
        edges = sorted(self.edges)
        nodes = self.nodes
        answer = None
        if self.seq.goal == "answer":  # the last read's output answers the user (dags/answers.py)
            last = next((n for n in reversed(nodes) if n.kind == "tool"), None)
            answer = choose_answer(self.tools[last.tool], last.node_id, self.keys, self.rng) if last else None
            if answer is None:
                raise DagError("no_answer", f"the last read of {self.seq.tools} returns nothing to ask for "
                                            "(only identifiers, echoes of its inputs or booleans)")
        dag = TaskDag(dag_id=content_id("dag", self.seq.env_id, [n.model_dump() for n in nodes], edges,
                                        *([answer.model_dump()] if answer else [])),
                      env_id=self.seq.env_id, seq_id=self.seq.seq_id, nodes=nodes, edges=edges, n_requirements=n_req,
                      answer=answer)
        validate_dag(dag, self.tools)
        return dag


def build_dag(seq: ToolSequence, graph: ToolGraph, tools: Iterable[ToolCode], env: EnvironmentRecord | None = None, *,
              seed: int = 0, knobs: DagKnobs | None = None, run_id: str | None = None) -> TaskDag:
    """One DAG from one sequence (raises :class:`DagError` with a reason category)."""
    by_name = {t.name: t for t in tools if t.env_id == seq.env_id and t.status == "accepted"}
    rng = random.Random(f"{seed}:{seq.seq_id}")
    dag = _Builder(seq, graph, by_name, env, rng, knobs or DagKnobs()).build()
    return dag.model_copy(update={"run_id": run_id}) if run_id else dag


def build_dags(graph: ToolGraph, seqs: Iterable[ToolSequence], tools: Iterable[ToolCode], env: EnvironmentRecord | None = None,
               *, seed: int = 0, variants: int = 1, knobs: DagKnobs | None = None,
               run_id: str | None = None) -> tuple[list[TaskDag], list[Rejection]]:
    """DAGs for the sequences of one environment; ``variants`` DAGs per sequence (other random
    reasoning choices), identical DAGs kept once. Failures become Rejection rows (stage ``sample``)."""
    tools = list(tools)
    dags: dict[str, TaskDag] = {}
    rejections: list[Rejection] = []
    for seq in seqs:
        for v in range(variants):
            try:
                dag = build_dag(seq, graph, tools, env, seed=seed * 1000 + v, knobs=knobs, run_id=run_id)
            except DagError as exc:
                rejections.append(rejection("sample", seq.seq_id, exc.reason, exc.detail, run_id))
                break
            dags.setdefault(dag.dag_id, dag)
    return list(dags.values()), rejections


def rejection(stage: str, item: str, reason: str, detail: str | None = None, run_id: str | None = None) -> Rejection:
    return Rejection(rejection_id=content_id("rej", stage, item, reason), stage=stage, item_id=item, reason=reason,
                     detail=detail, run_id=run_id)


# --------------------------------------------------------------------------- validation


def dag_graph(dag: TaskDag) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(n.node_id for n in dag.nodes)
    g.add_edges_from(dag.edges)
    return g


def dag_depth(dag: TaskDag) -> int:
    """Nodes on the longest path (a single node has depth 1)."""
    return nx.dag_longest_path_length(dag_graph(dag)) + 1 if dag.nodes else 0


def topo_order(dag: TaskDag) -> list[DagNode]:
    """Nodes in a topological order, ties broken by their position in ``dag.nodes`` (stable)."""
    pos = {n.node_id: i for i, n in enumerate(dag.nodes)}
    by_id = {n.node_id: n for n in dag.nodes}
    return [by_id[i] for i in nx.lexicographical_topological_sort(dag_graph(dag), key=lambda x: pos[x])]


def validate_dag(dag: TaskDag, tools: dict[str, ToolCode]) -> None:
    """Raise DagError unless the DAG is acyclic, fully sourced and ends in at least one write."""
    ids = [n.node_id for n in dag.nodes]
    if len(set(ids)) != len(ids):
        raise DagError("duplicate_node", f"DAG {dag.dag_id} repeats a node id")
    known = set(ids)
    for a, b in dag.edges:
        if a not in known or b not in known:
            raise DagError("dangling_edge", f"edge {a}->{b} names an unknown node")
    g = dag_graph(dag)
    if not nx.is_directed_acyclic_graph(g):
        raise DagError("cyclic_dag", f"DAG {dag.dag_id} has a cycle: {nx.find_cycle(g)}")
    ancestors = {n: nx.ancestors(g, n) for n in ids}
    writes = 0
    for n in dag.nodes:
        if n.kind == "tool":
            tool = tools.get(n.tool or "")
            if tool is None:
                raise DagError("unknown_tool", f"node {n.node_id} calls {n.tool!r}, not a tool of the environment")
            missing = [p for p in required_params(tool) if p not in n.args]
            if missing:
                raise DagError("unsourced_argument", f"node {n.node_id} ({n.tool}) has no source for {missing}")
            writes += tool.effect == "write"
        else:
            spec = OPS.get(n.op or "")
            if spec is None:
                raise DagError("unknown_op", f"node {n.node_id} uses op {n.op!r}; valid: {sorted(OPS)}")
            missing = [a for a in spec.args if a not in n.args]
            if missing:
                raise DagError("unsourced_argument", f"reasoning node {n.node_id} ({n.op}) lacks {missing}")
        for arg, src in n.args.items():
            if src.kind == "node" and (src.node not in ancestors[n.node_id]):
                raise DagError("unsourced_argument", f"{n.node_id}.{arg} reads {src.node}, which is not upstream")
            if src.kind == "user" and not src.fact:
                raise DagError("unsourced_argument", f"{n.node_id}.{arg} is a user fact without a name")
    if writes == 0 and dag.answer is None:
        raise DagError("no_write_tool", f"DAG {dag.dag_id} has no write: it could not change state")
