"""Initial states for tasks: the entities a DAG touches plus distractor records.

Paper (arXiv 2512.22857, Sec. 3.3, "environment initialization"): values V_i are generated
for every attribute K_i of the state structure, conditioned on the task DAG, so S_k holds
what the task needs. Offline we generate a small *world* from ``EnvironmentRecord.state_schema``
(every collection, several records each, references wired so every parent has two or more
children) and let the DAG's lookups pick their targets from it during the gold run:

- distractors by construction: other users, other orders of the same user, names that
  share a first name (``Ava Chen`` / ``Ava Cheng``), numbers drawn distinct so argmax/argmin
  have one answer;
- a lookup's user facts come from one target record whose key value is unique in its
  collection (the lookup has exactly one right answer);
- a write's data facts are new values (an enum value other than the current one, a fresh
  name, a different date).

Formats follow ``sample_state`` where it shows one (ISO dates, ids like ``U0001``). Integer-id
collections (``CollectionSpec.id_type``) keep their keys as strings ("3") and hold, pass and
compare the ids as ints (3).
"""

from __future__ import annotations

import copy
import math
import random
import re
from collections import Counter
from typing import Any

from autoforge.dags.gates import feeding_write, gate_of
from autoforge.dialogue import fact_words
from autoforge.domain import words as nm
from autoforge.domain.coherence import cohere
from autoforge.domain.keys import PERSON, is_key_param, key_fields, param_schemas
from autoforge.domain.values import order_pairs, random_uuid
from autoforge.envs import guards as G
from autoforge.envs.interface import EnvLike
from autoforge.domain.ids import free_key, id_key, id_pattern, id_shape, id_value, is_integer_ids, make_id
from autoforge.envs.sample import MAX_ITEMS, fit_pattern
from autoforge.tasks.envfacts import _EMPTY as _NO_SCHEMA, facts_for
from autoforge.tasks.leaves import FIRST, LAST, ValueGen, record_key, sample_value
from autoforge.tasks.execute import DagExecutionError
from autoforge.types import CollectionSpec, DagNode, EnvironmentRecord, FieldSpec, TaskDag, ToolCode



def _id_width(env: EnvironmentRecord, c: CollectionSpec) -> int:
    ids = list((env.sample_state.get(c.name) or {}).keys()) if isinstance(env.sample_state.get(c.name), dict) else []
    for i in ids:
        if isinstance(i, str) and i.startswith(c.id_prefix) and i[len(c.id_prefix):].isdigit():
            return len(i) - len(c.id_prefix)
    return 4


class WorldFiller:
    """Values for a whole world or for one tool argument, shaped by sample records and JSON Schema.

    Records are cloned from ``sample_state`` templates (so nested shapes — item lists, addresses —
    are right) and every leaf is redrawn; identifiers (fields named like a primary key, or
    matching an id pattern such as ``^P\\d{4}$``) point at records that exist.
    """

    def __init__(self, env: EnvironmentRecord, rng: random.Random, state: dict[str, dict]):
        self.env, self.rng, self.state = env, rng, state
        self.gen = ValueGen(env, rng)
        self.facts = facts_for(env)  # answers about the schema, asked once per environment
        self.by_pk = self.facts.by_pk
        self.by_prefix = {c.id_prefix: c for c in env.state_schema.collections}

    def existing_id(self, coll: CollectionSpec) -> Any:
        ids = sorted(self.state.get(coll.name) or {})
        return id_value(coll, self.rng.choice(ids)) if ids else None

    def id_for(self, name: str, schema: dict | None, pattern: str | None = None) -> str | None:
        coll = self.by_pk.get(name)
        pat = id_shape(pattern) if pattern else self.facts.id_pattern(schema)
        if coll is None and pat is not None:
            coll = self.by_prefix.get(pat[0])
        if coll is not None and self.state.get(coll.name):
            return self.existing_id(coll)
        if pat is not None:
            return f"{pat[0]}{self.rng.randint(1, 9):0{pat[1]}d}"
        return None

    def fill(self, name: str, template: Any, schema: dict | None, coll: CollectionSpec | None, person=None, depth: int = 0,
             siblings: tuple[str, ...] | None = None) -> Any:
        """A fresh value for ``name`` like ``template`` (a sample value) and valid for ``schema``;
        ``siblings``: the other keys of the object it sits in (default: the collection's fields)."""
        schema = schema if isinstance(schema, dict) else _NO_SCHEMA
        if depth > 4:
            return template
        if "const" in schema:
            return schema["const"]
        alts = [a for a in (schema.get("oneOf") or schema.get("anyOf") or []) if isinstance(a, dict)]
        if alts and not schema.get("type"):  # one alternative, filled like the template only if it has its shape
            alt = self.rng.choice(alts)
            props = set((alt.get("properties") or {}))
            fits = isinstance(template, dict) and props and set(template) <= props
            return self.fill(name, template if fits or not isinstance(template, dict) else None, alt, coll, person, depth + 1)
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            # half the records take the first value (usually the live state: active, pending,
            # scheduled), so writes whose precondition is that state find targets
            return schema["enum"][0] if self.rng.random() < 0.5 else self.rng.choice(schema["enum"])
        stype = schema.get("type")
        stype = next((t for t in stype if t != "null"), None) if isinstance(stype, list) else stype
        if (stype == "string" or isinstance(template, str) or stype is None) and (
                self.facts.is_key(name) or self.facts.id_pattern(schema)):
            v = self.id_for(name, schema)
            if v is not None:
                return v
        if stype == "integer" and is_integer_ids(self.by_pk.get(name)) and self.state.get(self.by_pk[name].name):
            return self.existing_id(self.by_pk[name])  # an integer id points at a record too
        if stype == "object" or isinstance(template, dict):
            props = schema.get("properties") or {}
            tmpl = template if isinstance(template, dict) else {}
            keys = tuple(dict.fromkeys(list(tmpl) + list(props)))
            return order_pairs({k: self.fill(k, tmpl.get(k), props.get(k), coll, person, depth + 1, keys) for k in keys})
        if stype == "array" or isinstance(template, list):
            items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
            if items and not items.get("description") and not items.get("enum") and schema.get("description"):
                items = self.facts.with_description(items, schema["description"])  # "[Enum]: [driver, passenger]" on the list
            tmpl = template if isinstance(template, list) else []
            lo = max(1, min(_number_or(schema.get("minItems"), 1), MAX_ITEMS))
            n = self.rng.randint(lo, max(lo, min(3, _number_or(schema.get("maxItems"), 3))))
            if not tmpl and not items:
                return []
            return [self.fill(name[:-1] if name.endswith("s") else name, tmpl[i % len(tmpl)] if tmpl else None, items,
                              coll, person, depth + 1) for i in range(n)]
        if stype in ("integer", "number") or (isinstance(template, (int, float)) and not isinstance(template, bool)):
            lo, hi, step = schema.get("minimum"), schema.get("maximum"), schema.get("multipleOf")
            v = self.gen.value(coll, None, name, {"type": stype or ("integer" if isinstance(template, int) else "number")})
            if isinstance(template, (int, float)) and not isinstance(template, bool) and template > 0:
                v = type(v)(max(1, round(template * self.rng.uniform(0.3, 2.5), 2 if isinstance(v, float) else None)))
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and hi >= lo:
                v = type(v)(self.rng.randint(int(lo), int(hi))) if (stype == "integer" or isinstance(v, int)) else round(self.rng.uniform(lo, hi), 2)
            if isinstance(step, (int, float)) and step > 0 and abs(v / step) < 1e15:  # a tiny step: no rounding
                v = type(v)(max(1, round(v / step)) * step)
            if isinstance(lo, (int, float)):
                v = max(v, lo)
            if isinstance(hi, (int, float)):
                v = min(v, hi)
            return v
        if stype == "boolean" or isinstance(template, bool):
            return self.rng.random() < 0.5
        value = self._string(name, schema, coll, person, siblings)
        pat = schema.get("pattern")
        if isinstance(pat, str) and pat and isinstance(value, str):  # a documented pattern holds: "2025-02", not filler
            return fit_pattern(pat, value, self.rng.randint(0, 27))
        return value

    def _string(self, name: str, schema: dict, coll: CollectionSpec | None, person, siblings: tuple[str, ...] | None) -> Any:
        """A string leaf's value from its name, siblings and schema, before its pattern is applied."""
        if siblings is None:
            siblings = self.facts.field_names(coll) if coll else ()
        dom = self.facts.domain(name, schema, siblings)
        if dom is not None:
            return dom.value(self.rng, record_key(self.rng, person, dom.name))
        fmt = schema.get("format")
        if fmt in ("uuid", "guid"):
            return random_uuid(self.rng)
        if fmt == "date":
            return self.gen.date()
        if fmt == "date-time":
            return self.gen.date(with_time=True)
        if fmt == "email":
            return self.gen.value(coll, None, "email", None, person=person)
        pat = schema.get("pattern") or ""
        if pat in ("^\\d{5}$", "^[0-9]{5}$"):
            return f"{self.rng.randint(10000, 99999)}"
        return self.gen.value(coll, None, name, schema or None, person=person)


def _number_or(value: Any, default: int) -> int:
    """A documented count (minItems, maxItems) as an int; ``default`` when it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return int(value)


def _field_schema(f: FieldSpec) -> dict:
    out: dict[str, Any] = {"type": f.type}
    if f.description:
        out["description"] = f.description
    if f.enum:
        out["enum"] = f.enum
    if f.type == "array" and getattr(f, "items", None):
        out["items"] = f.items
    if f.type == "object" and f.properties:  # nested fields keep their enums, consts and patterns
        out["properties"] = f.properties
    for k in ("format", "pattern", "minimum"):
        v = getattr(f, k, None)
        if v is not None:
            out[k] = v
    return out


def make_world(env: EnvironmentRecord, rng: random.Random, *, base: int = 4, fanout: tuple[int, int] = (2, 3),
               max_records: int = 12) -> dict[str, dict[str, dict]]:
    """A fresh state for one task: every collection filled, references wired, distractors built in.

    Pass 1 draws every record (cloned from a sample record, leaves redrawn; ids consecutive,
    so a tool's ``next_id`` continues them). Pass 2 wires scalar references round-robin, so
    each parent has two or more children. Pass 3 makes id lists (``order_ids``) the inverse
    of the scalar references where one exists (a random few where none does: the books of an
    order). Last, :func:`~autoforge.domain.coherence.cohere` settles derived numbers and dates.
    """
    colls = env.state_schema.collections
    names = {c.name for c in colls}
    roots = [c for c in colls if not any(f.ref in names and f.ref != c.name and f.type != "array" for f in c.fields)]
    sizes: dict[str, int] = {c.name: base + rng.randint(0, 2) for c in roots}
    sizes.update({c.name: 1 for c in roots if c.session})  # the caller's own record: one
    for _ in range(len(colls)):
        for c in colls:
            if c.name in sizes:
                continue
            parents = [sizes.get(f.ref) for f in c.fields if f.ref in names and f.type != "array" and f.ref != c.name]
            if parents and all(p is not None for p in parents):
                sizes[c.name] = min(max_records, max(parents) * rng.randint(*fanout))
    state: dict[str, dict[str, dict]] = {}
    filler = WorldFiller(env, rng, state)
    order = sorted(colls, key=lambda c: list(sizes).index(c.name) if c.name in sizes else len(sizes))
    for c in order:  # pass 1 (parents first, so nested ids can point at records that exist)
        n = sizes.get(c.name, base)
        width = getattr(c, "id_width", None) or _id_width(env, c)
        templates = [r for r in (env.sample_state.get(c.name) or {}).values() if isinstance(r, dict)] \
            if isinstance(env.sample_state.get(c.name), dict) else []
        firsts = [rng.choice(FIRST) for _ in range((n + 1) // 2)]  # pairs share a first name: similar distractors
        seen: dict[str, set] = {}
        recs: dict[str, dict] = {}
        for i in range(1, n + 1):
            rid = make_id(c, i, width, style=filler.facts.id_style(c))
            person = (firsts[(i - 1) // 2], rng.choice(LAST))
            tmpl = templates[(i - 1) % len(templates)] if templates else {}
            rec: dict[str, Any] = {}
            for f in c.fields:
                if f.name == c.primary_key:
                    rec[f.name] = id_value(c, rid)
                    continue
                if f.ref:
                    rec[f.name] = [] if f.type == "array" else None
                    continue
                v = filler.fill(f.name, tmpl.get(f.name), filler.facts.field_schema(f, _field_schema), c, person)
                for _ in range(5):  # distinct numbers/dates: argmax/argmin have one answer
                    if f.enum or f.type in ("boolean", "array", "object") or repr(v) not in seen.setdefault(f.name, set()):
                        break
                    v = filler.fill(f.name, tmpl.get(f.name), filler.facts.field_schema(f, _field_schema), c, person)
                seen.setdefault(f.name, set()).add(repr(v))
                rec[f.name] = v
            for k, v in tmpl.items():  # fields the sample has but the schema does not list
                if k not in rec:
                    rec[k] = filler.fill(k, v, None, c, person)
            recs[rid] = order_pairs(rec)  # start before end, check-in before check-out
        state[c.name] = recs
    by_name = {c.name: c for c in colls}
    for c in colls:  # pass 2: scalar references
        for f in c.fields:
            if f.ref and f.type != "array" and f.ref in state and f.name != c.primary_key:
                ids = _spread([id_value(by_name.get(f.ref), k) for k in state[f.ref]], len(state[c.name]), rng)
                for rec, pid in zip(state[c.name].values(), ids):
                    rec[f.name] = pid
    for c in colls:  # pass 3: id lists as inverse references
        for f in c.fields:
            if f.ref and f.type == "array" and f.ref in state:
                child = next((c2 for c2 in colls if c2.name == f.ref), None)
                back = next((g.name for g in (child.fields if child else []) if g.ref == c.name and g.type != "array"), None)
                for rid, rec in state[c.name].items():
                    if back:
                        mine = id_value(c, rid)
                        rec[f.name] = sorted(id_value(child, k) for k, r in state[f.ref].items() if r.get(back) == mine)
                    else:
                        pool = sorted(id_value(child, k) for k in state[f.ref])
                        rec[f.name] = sorted(rng.sample(pool, min(len(pool), rng.randint(1, 2)))) if pool else []
    return cohere(state, env.state_schema)  # derived numbers agree, dates in order


def _spread(parent_ids: list[Any], n: int, rng: random.Random) -> list[Any]:
    """``n`` parent ids, round-robin over shuffled parents: each parent gets n // len(parents) or more."""
    if not parent_ids:
        return [None] * n
    ids = sorted(parent_ids)
    rng.shuffle(ids)
    out = [ids[i % len(ids)] for i in range(n)]
    rng.shuffle(out)
    return out


# --------------------------------------------------------------------------- choosing facts


def _searchable(coll: CollectionSpec, records: list[dict]) -> list[str]:
    """The values a free-text search (``query``, ``keyword``) can look for in ``coll``: its records'
    names and titles (else any plain text field), one value per record, sorted."""
    plain = [f.name for f in coll.fields if f.type == "string" and not f.ref and not f.enum and not f.format
             and f.name != coll.primary_key and not f.name.endswith(("_id", "_ids"))]
    named = [f for f in plain if f.split("_")[-1] in ("title", "name")] or plain
    out = []
    for r in records:
        v = next((r.get(f) for f in named if isinstance(r.get(f), str) and r.get(f).strip()), None)
        if v is not None:
            out.append(v)
    return sorted(set(out))


_RECORD_ONLY = ("status", "window", "count_limit", "record_limit", "record_min")  # guards that read the record alone


_GATE_IN = re.compile(r"if record\.get\('status'\) not in \[([^\]]*)\]:")
_GATE_DONE = re.compile(r"if record\.get\('status'\) == '([^']*)':")


def _listed(text: str) -> set[str]:
    """The reprs of the string literals in a code list (``'pending', 'open'``)."""
    return {repr(m) for m in re.findall(r"'([^']*)'", text)}


def _is_id(v: Any) -> bool:
    """A value that may be an id: a string, or an int of an integer-id collection (not a bool)."""
    return isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))


class FactChooser:
    """Fills user facts during the gold run (a ``Chooser`` for :func:`run_dag`)."""

    def __init__(self, env: EnvironmentRecord, tools: dict[str, ToolCode], rng: random.Random,
                 facts: dict[str, Any] | None = None, dag: TaskDag | None = None):
        self.env, self.tools, self.rng = env, tools, rng
        self.dag = dag  # the DAG being run: a read's record is one the write it feeds accepts (:meth:`gated_by_write`)
        self.facts = facts if facts is not None else {}  # the facts chosen so far (the run's dict, filled in place)
        self.used: dict[str, list] = {}  # parameter (or reasoning field) -> values its facts took
        self.gen = ValueGen(env, rng)
        self.keys = key_fields(env)
        self.colls = {c.name: c for c in env.state_schema.collections}
        self.by_pk = {c.primary_key: c for c in env.state_schema.collections}
        self.targets: dict[str, dict] = {}  # node id -> record a lookup aims at
        self.me: dict[str, dict] = {}  # person-like collection -> the record of the user themself
        self._alike: dict[str, list] | None = None  # the DAG's facts named alike, by their words (:meth:`alike`)

    def __call__(self, node: DagNode, arg: str, args: dict[str, Any], env: EnvLike) -> Any:
        """A value for the fact behind ``node.args[arg]``, never one another fact for the same parameter
        already has: ``line_id`` and ``line_id_2`` equal would be one fact under two names (the
        attempt is rejected when no other value works)."""
        key = f"field:{node.params.get('field')}" if node.kind == "reasoning" else arg
        used = self.used.setdefault(key, [])
        src = node.args.get(arg)
        alike = self.alike(src.fact) if node.kind == "tool" and src is not None and src.fact else []
        twin = next((f for f, _, _ in alike if f in self.facts), None)
        if twin is not None and self.facts[twin] not in used and self.fits(node, arg, self.facts[twin]):
            used.append(self.facts[twin])  # the user's one phone number, whatever a tool calls it
            return self.facts[twin]
        strict = next(((n, a) for f, n, a in alike if f not in self.facts and n is not node and n.tool in self.tools
                       and (param_schemas(self.tools[n.tool]).get(a) or {}).get("pattern")), None) if twin is None else None
        for _ in range(6 if strict else 0):  # a later tool asks for it in a format: drawn in that one, if this fits it
            v = self.choose(strict[0], strict[1], {}, env)
            if v not in used and self.fits(node, arg, v):
                used.append(v)
                return v
        guards = self.guards_on(node, arg)
        state = env.get_state() if guards else None
        breaking = None  # a value that keeps no rule: the last resort (the gold run is then refused, reason policy_rule)
        for _ in range(10 if guards else 6):
            v = self.choose(node, arg, args, env)
            if v in used:
                continue
            if guards and G.refusal(guards, state, {**args, arg: v}) is not None:
                breaking = v if breaking is None else breaking
                continue
            used.append(v)
            return v
        if breaking is not None:
            kept = self.keep_rules(guards, state, {**args, arg: breaking}, arg)
            v = breaking if kept is None or kept in used else kept
            used.append(v)
            return v
        raise DagExecutionError("duplicate_fact", f"every value for {arg} is already another fact's ({v!r})", node.node_id)

    def alike(self, fact: str) -> list[tuple[str, DagNode, str]]:
        """(fact, node, argument) of the DAG's other facts the user would name like ``fact`` (``phoneNumber``
        and ``phone_number``): the user has one value for them."""
        if self._alike is None:
            groups: dict[str, list[tuple[str, DagNode, str]]] = {}
            for n in (self.dag.nodes if self.dag is not None else ()):
                for a, s in (n.args.items() if n.kind == "tool" else ()):
                    if s.kind == "user" and s.fact:
                        groups.setdefault(fact_words(s.fact), []).append((s.fact, n, a))
            self._alike = {w: g for w, g in groups.items() if len({f for f, _, _ in g}) > 1}
        return [x for x in self._alike.get(fact_words(fact), ()) if x[0] != fact] if self._alike else []

    def fits(self, node: DagNode, arg: str, value: Any) -> bool:
        """Does ``value`` pass ``node``'s tool's schema for ``arg`` (its type and pattern)?"""
        pschema = param_schemas(self.tools[node.tool or ""]).get(arg) or {}
        typ = pschema.get("type")
        if typ == "string" and not isinstance(value, str) or typ in ("integer", "number") and (
                isinstance(value, bool) or not isinstance(value, (int, float))):
            return False
        pat = pschema.get("pattern")
        return not (pat and isinstance(value, str) and re.search(pat, value) is None)

    def guards_on(self, node: DagNode, arg: str) -> list[dict]:
        """The runtime rules of a write's tool that read argument ``arg`` (its value is drawn so the gold
        call keeps them: :mod:`autoforge.envs.guards`)."""
        tool = self.tools.get(node.tool or "") if node.kind == "tool" else None
        if tool is None or tool.effect != "write" or not tool.guards:
            return []
        return [g for g in tool.guards if arg in (g.get("id_arg"), g.get("arg"), g.get("owner_arg"), g.get("item_arg"))]

    @staticmethod
    def keep_rules(guards: list[dict], state: dict, args: dict, arg: str) -> Any:
        """The nearest value of ``arg`` that keeps ``guards`` where a rule sets it (a limit, an owner, a
        listed item); None when the rule reads a record, not the argument."""
        trial = copy.deepcopy(args)
        for g in guards:
            if G.broken(g, state, trial) and g.get("op") not in _RECORD_ONLY:
                G.shape(g, copy.deepcopy(state), trial, keep=True)
        if G.refusal(guards, state, trial) is not None or arg not in trial:
            return None
        return trial[arg]

    def choose(self, node: DagNode, arg: str, args: dict[str, Any], env: EnvLike) -> Any:
        if node.kind == "reasoning":
            return self.reasoning_value(node, args, env.get_state())
        tool = self.tools[node.tool or ""]
        state = env.get_state()
        coll = self.colls.get(tool.collection or "")
        pschema = param_schemas(tool).get(arg) or {}
        held = self.held_items(tool, coll, arg, args, state) if pschema.get("type") == "array" else None
        if held is not None:  # return_items(order_id, item_ids): some of the items the order holds
            return held
        if pschema.get("type") in ("array", "object"):  # id lists, item lists, addresses: shaped by the schema
            filler = WorldFiller(self.env, self.rng, state)
            v = filler.fill(arg, None, pschema, coll)
            for _ in range(4):  # another fact's value again would be one fact under two names
                if v not in self.facts.values():
                    break
                v = filler.fill(arg, None, pschema, coll)
            return v
        karg = (tool.arg_map or {}).get(arg, arg)  # the code's name: ``slug`` keys the articles as article_id
        if is_key_param(karg, self.keys) and tool.kind == "create" and coll is not None and karg == coll.primary_key:
            return self.fresh_key(coll, state)  # core_memory_add(key, value): the new record's own key
        if is_key_param(arg, self.keys) or is_key_param(karg, self.keys):
            pat = id_pattern(pschema)  # return_location_id with pattern ^LC\\d{4}$ is a location
            owner = self.by_pk.get(karg) or self.by_pk.get(arg) or (WorldFiller(self.env, self.rng, state).by_prefix.get(pat[0]) if pat else None) or coll
            ids = [id_value(owner, k) for k in sorted((state.get(owner.name) or {}) if owner else [])]
            if not ids:
                raise DagExecutionError("no_candidate", f"no record to take {arg} from", node.node_id)
            if owner is not None and owner.entity in PERSON:  # one "me" per task
                me = self.me.get(owner.name)
                if me is None or me.get(owner.primary_key) not in ids:
                    rules = self.guards_on(node, arg)  # a member a write's rules let act (an active one)
                    ok = [i for i in ids if G.refusal(rules, state, {**args, arg: i}) is None] if rules else ids
                    me = state[owner.name][id_key(self.rng.choice(ok or ids))]
                    self.me[owner.name] = me
                return me.get(owner.primary_key, ids[0])
            placed = self.placed_in(tool, coll, owner, args, state)
            if placed is not None:
                return placed
            mine = self.related_to_me(owner, state) if owner is not None else []
            if owner is not None and owner is coll and tool.effect == "write":
                # the write's own record: one its status gate lets through (a return needs a delivered order)
                open_ = self.passes_gate(tool, owner, state) & self.inside(tool, owner, args, state)
                mine = [i for i in mine if i in open_] or ([] if any(i in open_ for i in ids) else mine)
                ids = [i for i in ids if i in open_] or ids
            elif owner is not None and coll is not None and owner is not coll and tool.effect == "write":
                # the order an item update names: one the writes on orders still accept (a pending one)
                live = self.live(owner, state)
                mine = [i for i in mine if i in live] or ([] if any(i in live for i in ids) else mine)
                ids = [i for i in ids if i in live] or ids
            elif owner is not None and tool.effect == "read":
                # get_order(order_id) feeding cancel_order: an order the cancel accepts (not a delivered one)
                gated = self.gated_by_write(node, owner, state)
                if gated is not None:
                    mine = [i for i in mine if i in gated] or ([] if any(i in gated for i in ids) else mine)
                    ids = [i for i in ids if i in gated] or ids
            pool = mine or ids
            current = self.current_value(tool, coll, karg, args, state)
            if current is not None:  # transfer_employee(department_id): another department than the one they are in
                pool = [i for i in pool if str(i) != str(current)] or [i for i in ids if str(i) != str(current)] or pool
            return self.rng.choice([i for i in pool if i not in self.facts.values()] or pool)

        if tool.effect == "write":
            return self.new_value(tool, coll, arg, args, state)
        return self.lookup_value(node, tool, coll, arg, state)

    def live(self, coll: CollectionSpec, state: dict) -> set[Any]:
        """Ids of ``coll`` records in a status some write on ``coll`` accepts (its status gate, as in
        :meth:`passes_gate`); every id when no write states a gate."""
        allowed: set[str] = set()
        for t in self.tools.values():
            if t.effect == "write" and t.collection == coll.name:
                m = _GATE_IN.search(t.source or "")
                if m:
                    allowed |= _listed(m.group(1))
        table = state.get(coll.name) or {}
        return {id_value(coll, k) for k, r in table.items()
                if not allowed or (isinstance(r, dict) and repr(r.get("status")) in allowed)}

    def gated_by_write(self, node: DagNode, coll: CollectionSpec, state: dict) -> set[Any] | None:
        """Ids of ``coll`` records the write that takes its record from ``node`` accepts (:meth:`passes_gate`;
        :func:`autoforge.dags.gates.feeding_write`); None when no write does."""
        w = feeding_write(self.dag, node.node_id, coll.name, coll.primary_key, self.tools) if self.dag else None
        return self.passes_gate(w, coll, state) if w is not None else None

    def inside(self, tool: ToolCode, coll: CollectionSpec, args: dict, state: dict) -> set[Any]:
        """Ids of ``coll`` records that sit in the parents the write's arguments already name (the
        items of the chosen order), where the code checks that reference and does not set it; a
        parent the write takes but that is not chosen yet is to be one still live (:meth:`live`)."""
        table = state.get(coll.name) or {}
        ok = {id_value(coll, k) for k in table}
        for f in coll.fields:
            parent = self.colls.get(f.ref or "")
            if parent is None or parent is coll or f.type == "array" or f"record[{f.name!r}] =" in (tool.source or ""):
                continue
            given = next((v for a, v in args.items() if (tool.arg_map or {}).get(a, a) == parent.primary_key), None)
            if given is not None:
                ok &= {id_value(coll, k) for k, r in table.items() if isinstance(r, dict) and str(r.get(f.name)) == str(given)}
            elif any((tool.arg_map or {}).get(a, a) == parent.primary_key for a in tool.parameters.get("properties") or {}):
                live = {str(i) for i in self.live(parent, state)}  # its parent is named next: one still live
                ok &= {id_value(coll, k) for k, r in table.items() if isinstance(r, dict) and str(r.get(f.name)) in live} or ok
        return ok

    def placed_in(self, tool: ToolCode, coll: CollectionSpec | None, owner: CollectionSpec | None, args: dict,
                  state: dict) -> Any:
        """For a write on a record of ``coll`` already chosen: the id of the ``owner`` record it sits in,
        when the code only checks that reference and does not set it (``update_item_quantity(order_id,
        item_id)``: the item's own order); None otherwise."""
        if tool.effect != "write" or coll is None or owner is None or owner is coll:
            return None
        fld = next((f.name for f in coll.fields if f.ref == owner.name and f.type != "array"), None)
        pk_arg = next((a for a in args if (tool.arg_map or {}).get(a, a) == coll.primary_key), None)
        if fld is None or pk_arg is None or f"record[{fld!r}] =" in (tool.source or ""):
            return None
        record = (state.get(coll.name) or {}).get(id_key(args[pk_arg]))
        return record.get(fld) if isinstance(record, dict) and record.get(fld) is not None else None

    def held_items(self, tool: ToolCode, coll: CollectionSpec | None, arg: str, args: dict, state: dict) -> list | None:
        """For a write on one record: a list argument naming items of a list the record holds (``item_ids``
        of an order: one or two of them), or their replacements (``new_item_ids``: as many items, of the
        same collection, that the record does not hold yet); None for any other argument."""
        if tool.effect != "write" or coll is None:
            return None
        karg = nm.snake((tool.arg_map or {}).get(arg, arg))
        replaces = karg.startswith(("new_", "replacement_"))
        base = karg.split("_", 1)[1] if replaces or karg.startswith("old_") else karg
        fld = next((f for f in coll.fields if f.name == base and f.type == "array"), None)
        pk_arg = next((a for a in args if (tool.arg_map or {}).get(a, a) == coll.primary_key), None)
        record = (state.get(coll.name) or {}).get(id_key(args[pk_arg])) if pk_arg else None
        if fld is None or not isinstance(record, dict) or not isinstance(record.get(base), list) or not record[base]:
            return None
        current = list(record[base])
        if not replaces:
            return sorted(self.rng.sample(current, self.rng.randint(1, min(2, len(current)))), key=repr)
        old = next((v for a, v in args.items() if nm.snake((tool.arg_map or {}).get(a, a)) in (base, f"old_{base}")
                    and isinstance(v, list)), None)
        want = len(old) if old else 1
        target = self.colls.get(fld.ref or "")
        pool = [id_value(target, k) for k in sorted(state.get(target.name) or {})] if target else []
        fresh = [v for v in pool if v not in current]
        if len(fresh) < want:
            return None
        return self.rng.sample(fresh, want)

    def passes_gate(self, tool: ToolCode, coll: CollectionSpec, state: dict) -> set[Any]:
        """Ids of ``coll`` records whose status the write's code accepts (:func:`autoforge.dags.gates.gate_of`:
        the offline templates' ``not in [...]`` and ``== 'x'`` (already x)); code without a gate accepts every record."""
        g = gate_of(tool)
        ok = {id_value(coll, rid) for rid, rec in (state.get(coll.name) or {}).items()
              if g is None or g.accepts(rec.get("status") if isinstance(rec, dict) else None)}
        # the write's runtime rules on the record alone (a status, a window, a count): records they let through
        rules = [r for r in tool.guards or () if r.get("collection") == coll.name and r.get("id_arg")
                 and r.get("op") in _RECORD_ONLY and not (r.get("op") == "record_limit" and r.get("arg"))]
        if rules:
            ok = {i for i in ok if G.refusal(rules, state, {r["id_arg"]: i for r in rules}) is None}
        return ok

    def current_value(self, tool: ToolCode, coll: CollectionSpec | None, field: str, args: dict, state: dict) -> Any:
        """The value a write's target record holds now in the field ``field`` sets (None: not such a write)."""
        if tool.effect != "write" or coll is None or field == coll.primary_key:
            return None
        pk_arg = next((a for a, v in args.items() if (tool.arg_map or {}).get(a, a) == coll.primary_key), None)
        if pk_arg is None:
            return None
        record = (state.get(coll.name) or {}).get(id_key(args[pk_arg]))
        return record.get(field) if isinstance(record, dict) else None

    def fresh_key(self, coll: CollectionSpec, state: dict) -> Any:
        """A key no record of ``coll`` has yet, shaped like the ones it has."""
        return free_key(coll, state.get(coll.name) or {}, width=_id_width(self.env, coll), avoid=self.facts.values())

    def related_to_me(self, coll: CollectionSpec, state: dict) -> list[Any]:
        """Ids of ``coll`` records that point at the task's user (their payment method, their order)."""
        out = []
        for person_coll, me in self.me.items():
            pk = next((c.primary_key for c in self.colls.values() if c.name == person_coll), None)
            my_id = me.get(pk) if pk else None
            refs = {f.name for f in coll.fields if f.ref == person_coll}
            for rid, rec in (state.get(coll.name) or {}).items():
                # a string id anywhere in the record; an integer id only in a field that references the person
                values = [v for v in rec.values() if isinstance(v, str)] if isinstance(my_id, str) else \
                    [rec.get(f) for f in refs]
                if my_id is not None and my_id in values:
                    out.append(id_value(coll, rid))
        return sorted(out)

    def reasoning_value(self, node: DagNode, args: dict[str, Any], state: dict | None = None) -> Any:
        field = node.params.get("field")
        items = [x for x in args.get("items") or [] if isinstance(x, dict)]
        # the item a find singles out feeds a write (find -> get_account -> close_account): one the write accepts
        hit = next(((c, g) for c in self.colls.values() if node.op == "find" and items and state is not None and all(
            c.primary_key in x for x in items) and (g := self.gated_by_write(node, c, state)) is not None), None)
        if hit is not None:  # (where some value singles out such an item)
            bad = {y.get(field) for y in items if y[hit[0].primary_key] not in hit[1]}
            ok = [x for x in items if x.get(field) not in bad]
            items = ok if 1 in Counter(x.get(field) for x in ok if x.get(field) is not None).values() else items
        counts = Counter(x.get(field) for x in items if x.get(field) is not None)
        want = (lambda k: k == 1) if node.op == "find" else (lambda k: k >= 2)
        pool = sorted((v for v, k in counts.items() if want(k)), key=repr) or (
            sorted(counts, key=repr) if node.op == "filter" else [])
        if not pool:
            raise DagExecutionError("ambiguous_reasoning", f"no value of {field} singles out an item", node.node_id)
        return self.rng.choice([v for v in pool if v not in self.facts.values()] or pool)

    def lookup_value(self, node: DagNode, tool: ToolCode, coll: CollectionSpec | None, arg: str, state: dict) -> Any:
        records = list((state.get(coll.name) or {}).values()) if coll else []
        if records and tool.kind == "list" and nm.snake((tool.arg_map or {}).get(arg, arg)) in nm.QUERY_PARAMS:
            words = _searchable(coll, records)
            if words:  # a search for words a record holds (its title, its name), so it finds something
                return self.rng.choice(words)
        if not records or arg not in records[0]:
            filler = WorldFiller(self.env, self.rng, state)
            return filler.fill(arg, None, param_schemas(tool).get(arg), coll)
        target = self.targets.get(node.node_id)
        if target is None:
            # the node's user-stated arguments together must single out one record
            fields = [a for a, s in node.args.items() if s.kind == "user" and a in records[0]]
            combo = lambda r: repr([r.get(a) for a in fields])  # noqa: E731
            counts = Counter(combo(r) for r in records)
            unique = [r for r in records if counts[combo(r)] == 1]
            if not unique:
                raise DagExecutionError("ambiguous_lookup", f"no {coll.entity} has a unique {fields}", node.node_id)
            gated = self.gated_by_write(node, coll, state)  # find_order(number) feeding a cancel: a cancellable one
            if gated is not None:
                unique = [r for r in unique if r.get(coll.primary_key) in gated] or unique
            me = self.me.get(coll.name) if coll.entity in PERSON else None
            if me is not None and any(r.get(coll.primary_key) == me.get(coll.primary_key) for r in unique):
                self.targets[node.node_id] = me
                return me[arg]
            children = self._child_counts(coll, state)
            best = max(children.get(r.get(coll.primary_key), 0) for r in unique)
            rich = [r for r in unique if children.get(r.get(coll.primary_key), 0) >= min(best, 2)]
            target = self.rng.choice(sorted(rich, key=lambda r: str(r.get(coll.primary_key))))
            self.targets[node.node_id] = target
            if coll.entity in PERSON:
                self.me.setdefault(coll.name, target)
        return target[arg]

    def _child_counts(self, coll: CollectionSpec, state: dict) -> Counter:
        out: Counter = Counter()
        for c in self.colls.values():
            for f in c.fields:
                if f.ref == coll.name and f.type != "array":
                    out.update(r.get(f.name) for r in (state.get(c.name) or {}).values() if _is_id(r.get(f.name)))
        return out

    def new_value(self, tool: ToolCode, coll: CollectionSpec | None, arg: str, args: dict, state: dict) -> Any:
        field = next((f for f in coll.fields if f.name == arg), None) if coll else None
        schema = param_schemas(tool).get(arg) or (_field_schema(field) if field else None)
        current = None
        if coll is not None and coll.primary_key in args:
            current = ((state.get(coll.name) or {}).get(id_key(args[coll.primary_key])) or {}).get(arg)
        template = current if current is not None else sample_value(self.env, coll.name, arg) if coll else None
        # a new value differs from the current one and, where the domain allows, from every other
        # fact of the task: two facts with one value would be one fact under two names to the user
        taken = [v for v in self.facts.values()]
        enum = (field.enum if field else None) or (schema or {}).get("enum")
        if enum:
            others = [v for v in enum if v != current]
            fresh = [v for v in others if v not in taken]
            return self.rng.choice(fresh or others or enum)
        filler = WorldFiller(self.env, self.rng, state)
        # a create's name is new: add_contact(user_name) refuses a name another record has
        held = {repr(r.get(arg)) for r in (state.get(coll.name) or {}).values() if isinstance(r, dict)} \
            if coll is not None and tool.kind == "create" and field is not None and field.type == "string" else set()
        v = None
        for i in range(12):
            v = filler.fill(arg, template, schema, coll)
            v = order_pairs({**args, arg: v})[arg]  # an end after the start already chosen
            if v != current and (v not in taken or i >= 8) and (repr(v) not in held or i >= 10):
                return v
        return v
