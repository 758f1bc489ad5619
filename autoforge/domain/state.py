"""Offline state-structure inference: a tool set's docs -> :class:`StateSchema`.

Paper (arXiv 2512.22857, Sec. 3.1, "environment synthesis"): an LLM reads the tool docs and
writes the state S as a database of named collections. The offline backend reads the same
docs with rules:

* entities come from id parameters (``order_id`` -> ``orders``, ``from_account_id`` ->
  ``accounts``), from tool names (``get_order``, ``list_orders``, ``find_user_id_by_email``)
  and from output schemas (object properties are fields; arrays of objects are list fields
  whose items, when they carry their own ``<x>_id``, also describe entity ``x``);
* where a tool has no output schema, from the sentence that says what it returns
  (:mod:`~autoforge.domain.outputs`: "Returns the order with its status, total and the books it
  contains"): the fields it names, and references for the phrases that name other entities;
* every collection is keyed by ``<entity>_id`` with ids ``<PREFIX>0001``;
* a field named ``<other>_id`` (or an array ``<other>_ids``) is a reference to ``others``;
* enums (statuses) come from schemas, from status verbs (``cancel_*`` adds ``cancelled``)
  and from status words in descriptions.

The reading is split by concern: ids (:mod:`~autoforge.domain.ids`), the per-tool reading
(:mod:`~autoforge.domain.tools`), entities and aliases (:mod:`~autoforge.domain.entities`),
fields (:mod:`~autoforge.domain.fields`) and statuses (:mod:`~autoforge.domain.statuses`);
this module builds the :class:`StateSchema` from them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.entities import id_aliases, plan_tools
from autoforge.domain.fields import CollectionDraft, amount_target, list_filter_field, suffix_field
from autoforge.domain.ids import ROLE_PEOPLE, documented_id_style, id_param_entity, id_pattern, walk_ids
from autoforge.domain.outputs import field_of_read, keyed_by, keyed_values, prose_output
from autoforge.domain.rules import status_mentions
from autoforge.domain.statuses import status_words
from autoforge.domain.values import quoted_vocabulary
from autoforge.domain.tool_kinds import tool_kind
from autoforge.domain.tools import TOGGLE_VERBS, WRITE_KINDS, ToolPlan, is_selector
from autoforge.tooldocs.schema import json_type, props, unwrap
from autoforge.types import CollectionSpec, StateSchema, ToolSet, ToolSpec

PEOPLE = ("user", "customer", "employee", "member", "person", "staff", "patient", "student", "client", "agent")
# the entities that are people: a person's listed records (orders, bookings) are theirs alone
PEOPLE_ENTITIES = frozenset(PEOPLE) | {"guest", "passenger", "traveler", "owner", "tenant", "buyer", "seller", "driver",
                                       "rider", "teacher", "instructor", "attendee", "player", "contact", "author"}


class _Builder:
    def __init__(self, aliases: dict[str, str], id_info: dict[str, tuple[str, int]]) -> None:
        self.colls: dict[str, CollectionDraft] = {}
        self.aliases = aliases
        self.id_info = id_info
        self.id_votes: dict[str, Counter] = {}  # entity -> JSON types its ids are documented with
        self.patterned: set[str | None] = set()  # entities with a documented id pattern (not only an example)
        self.prose_lists: set[str] = set()  # ``<entity>_ids`` fields read from a returns sentence only
        # output properties some tool documents as a mapping of records ("booking_history: a dictionary
        # keyed by booking_id"): property name -> the entity of its values (see :meth:`note_mappings`)
        self.mappings: dict[str, str] = {}

    def note_mappings(self, schema: Any, depth: int = 0) -> None:
        """Note every property of an output schema that is a mapping of records keyed by an id
        (:func:`~autoforge.domain.outputs.keyed_by`): its values are records of that id's entity,
        wherever a tool of the set shows the property."""
        s = unwrap(schema) if isinstance(schema, dict) else {}
        if depth > 4 or not s:
            return
        if json_type(s) == "array":
            self.note_mappings(s.get("items"), depth + 1)
            return
        for k, v in props(s).items():
            v = unwrap(v) if isinstance(v, dict) else {}
            key = keyed_by(v)
            e = id_param_entity(key, self.aliases) if key else None
            if e:
                self.mappings[nm.snake(k)] = e
            self.note_mappings(v, depth + 1)

    def coll(self, entity: str) -> CollectionDraft:
        if entity not in self.colls:
            c = CollectionDraft(entity)
            c.add(f"{entity}_id", {"type": "string", "description": f"primary key of {nm.plural(entity)}"}, note=False)
            self.colls[entity] = c
        return self.colls[entity]

    def note_id(self, entity: str | None, schema: Any) -> None:
        """One documented id of ``entity`` (a parameter, an output field): its JSON type is a vote."""
        s = unwrap(schema) if isinstance(schema, dict) else {}
        if not entity or not s:
            return
        typ = json_type(s)
        if typ == "array":
            item = unwrap(s.get("items")) if isinstance(s.get("items"), dict) else {}
            typ = json_type(item) if item else None
        style = documented_id_style(s)
        if style == "uuid" and entity in self.colls:  # "the booking's UUID": the collection's keys are UUIDs
            self.colls[entity].add(f"{entity}_id", {"type": "string", "format": "uuid"}, note=False)
        if typ == "string" and style == "integer":
            typ = "integer"  # "the numeric id of the order" typed as a string: an integer id all the same
        if typ in ("integer", "string", "number"):  # ``issue_number: number`` is an integer id
            self.id_votes.setdefault(entity, Counter())["integer" if typ == "number" else typ] += 1

    def integer_entities(self) -> set[str]:
        """Entities whose ids the docs type as integers (more integer than string mentions, no
        documented string pattern): ``get_ticket(ticket_id: integer)`` / ``{"id": integer}``."""
        votes: dict[str, Counter] = {e: Counter(v) for e, v in self.id_votes.items()}
        for c in self.colls.values():
            for name, types in c.seen_types.items():
                e = c.entity if name == f"{c.entity}_id" else (
                    id_param_entity(name, self.aliases) if name.endswith(("_id", "_ids")) else None)
                if e:
                    box = votes.setdefault(e, Counter())
                    for t in ("integer", "string"):
                        box[t] += types.get(t, 0)
                    box["integer"] += types.get("number", 0)
        return {e for e, v in votes.items() if e in self.colls and e not in self.id_info and v["integer"] > v["string"]}

    def harvest(self, schema: dict | None, hint: str | None, depth: int = 0, follow: bool = True) -> None:
        """Record the fields an output schema shows for entity ``hint`` (and nested entities)."""
        s = unwrap(schema)
        if depth > 4 or not s:
            return
        if json_type(s) == "array":
            self.harvest(s.get("items"), hint, depth + 1)
            return
        properties = props(s)
        if not properties:
            return
        # A wrapper ({"order": {...}} or {"orders": [...], "count": 3}): descend instead of recording.
        wrapped = [k for k, v in properties.items() if json_type(unwrap(v)) in ("object", "array")
                   and nm.singular(nm.snake(k)) in self.colls and f"{nm.singular(nm.snake(k))}_id" not in properties]
        own_pk = hint and (f"{hint}_id" in properties or "id" in properties)
        if wrapped and not own_pk:
            for k in wrapped:
                self.harvest(properties[k], nm.singular(nm.snake(k)), depth + 1)
            return
        entity = hint if hint else None
        first_key = next((id_param_entity(k, self.aliases) for k in properties if nm.snake(k).endswith("_id")), None)
        if follow and entity and f"{entity}_id" not in properties and "id" not in properties and first_key in self.colls:
            entity = first_key  # a record of another entity (assign_user_to_project returns the project)
        if entity is None:
            ids = [id_param_entity(k, self.aliases) for k in properties if k.endswith("_id")]
            entity = next((e for e in ids if e), None)
        if entity is None:
            return
        c = self.coll(entity)
        for k, v in properties.items():
            v = unwrap(v) if isinstance(v, dict) else {}
            name = f"{entity}_id" if k == "id" else nm.snake(k)
            if name in self.mappings and json_type(v) in ("object", None):
                # a mapping of records (keyed by their id): its values are records of their own
                # entity, not a nested object of this one (one value's fields where a tool shows one)
                self.harvest(keyed_values(v) if keyed_by(v) is not None else v, self.mappings[name], depth + 1,
                             follow=False)
                continue
            c.add(name, v)
            if json_type(v) == "array":
                item = unwrap(v.get("items"))
                sub = self.aliases.get(nm.singular(name), nm.singular(name))
                if props(item) and (f"{sub}_id" in props(item) or sub in self.colls):
                    self.harvest(item, sub, depth + 1)

    def build(self) -> StateSchema:
        entities = set(self.colls)
        people = next((p for p in PEOPLE if p in entities), None)
        prefixes: set[str] = {self.id_info[e][0] for e in entities if e in self.id_info}
        integer = self.integer_entities()
        int_colls = {nm.plural(e) for e in integer}
        out = []
        for entity, c in self.colls.items():
            fields = []
            for f in c.fields.values():
                ref = f.ref
                e = id_param_entity(f.name, self.aliases)
                if e and f.name != f"{entity}_id":
                    if e in entities:
                        ref = nm.plural(e)
                    elif e in ROLE_PEOPLE and people:
                        ref = nm.plural(people)
                if f.name == f"{entity}_id" and entity in integer:
                    f = f.model_copy(update={"type": "integer", "pattern": None, "format": None})
                elif ref in int_colls and f.type in ("string", "integer"):
                    f = f.model_copy(update={"type": "integer", "pattern": None})
                elif ref in int_colls and f.type == "array":
                    items = dict(f.items or {})
                    if json_type(items) in ("string", None) or not items:
                        f = f.model_copy(update={"items": {**{k: v for k, v in items.items() if k != "pattern"}, "type": "integer"}})
                elif f.name == f"{entity}_id" and entity in self.id_info and entity not in self.patterned \
                        and not f.pattern and f.type == "string":  # ids shown by example: their pattern
                    pre, width = self.id_info[entity]
                    f = f.model_copy(update={"pattern": f"^{pre}\\d{{{width}}}$"})
                said = quoted_vocabulary(f.description or "") if f.name == "status" and not f.enum and f.type == "string" else []
                if said:  # "Claim can be in Open or Closed state.": the documented values, as a schema's enum would be
                    f = f.model_copy(update={"enum": said})
                if f.name == "status" and (c.status_words or c.status_targets) and f.type not in ("object", "array", "boolean", "number", "integer"):
                    # a documented enum is kept; words from descriptions only fill a missing one,
                    # and a status verb's target is added when none of its candidates is there
                    merged = list(f.enum or [w for w in c.status_words])
                    for cands in c.status_targets:
                        if not any(t in merged for t in cands):
                            merged.append(cands[0])
                        elif not f.enum and not any(t[:4] == cands[0][:4] for t in merged):
                            # statuses read from verbs: close_ticket and resolve_ticket end in two
                            # statuses (closed, resolved), not one, so a resolve is seen after a close
                            merged.append(cands[0])
                    f = f.model_copy(update={"enum": merged})
                if ref != f.ref:
                    f = f.model_copy(update={"ref": ref})
                fields.append(f)
            if entity in integer:
                out.append(CollectionSpec(name=nm.plural(entity), entity=entity, primary_key=f"{entity}_id",
                                          id_prefix="", id_width=1, id_type="integer", fields=fields))
                continue
            prefix, width = self.id_info.get(entity) or (_prefix(entity, prefixes), 4)
            if c.lower_ids and entity not in self.id_info:
                prefix = prefix.lower() + "_"  # am_0001: a key the docs' snake_case rule accepts
            out.append(CollectionSpec(name=nm.plural(entity), entity=entity, primary_key=f"{entity}_id",
                                      id_prefix=prefix, id_width=width, fields=fields, session=c.session))
        return StateSchema(collections=out)


def _prefix(entity: str, taken: set[str]) -> str:
    ws = [w for w in entity.split("_") if w] or ["x"]
    letters = re.sub(r"[^a-z]", "", entity) or "x"
    cands = ["".join(w[0] for w in ws).upper(), ws[-1][:1].upper()] if len(ws) > 1 else [letters[:1].upper()]
    cands += [letters[:n].upper() for n in range(2, len(letters) + 1)]
    for cand in cands:
        if cand and cand not in taken:
            taken.add(cand)
            return cand
    n = 2
    while f"{letters[:3].upper()}{n}X" in taken:
        n += 1
    taken.add(f"{letters[:3].upper()}{n}X")
    return f"{letters[:3].upper()}{n}X"


def offline_state_schema(toolset: ToolSet | str, specs: list[ToolSpec]) -> StateSchema:
    """Infer collections, fields, keys, references and enums from a tool set's docs.

    ``toolset`` only names the fallback collection when no entity can be read at all.
    """
    specs = list(specs)
    aliases, id_info = id_aliases(specs)
    plans = plan_tools(specs)
    # a scratchpad or a calculator holds nothing: its parameters are no record's fields
    specs = [s for s in specs if tool_kind(plans[s.name].kind).stores]
    b = _Builder(aliases, id_info)
    b.patterned = {id_param_entity(k, aliases) for k, v in walk_ids(specs) if id_pattern(v) or (
        isinstance(v, dict) and id_pattern(unwrap(v).get("items")))}
    # 1. entities in the order tools mention them
    for spec in specs:
        plan = plans[spec.name]
        b.coll(plan.entity)
        if plan.other:
            b.coll(plan.other)
        for p, ps in props(spec.parameters).items():
            e = id_param_entity(p, aliases)
            if e:
                b.coll(e)
                b.note_id(e, ps)
            elif nm.snake(p) == "id":
                b.note_id(plan.entity, ps)
    # 2. fields from output schemas (the most complete picture of a record); mappings of records first
    for spec in specs:
        b.note_mappings(spec.output_schema)
    for spec in specs:
        plan = plans[spec.name]
        # a delete reports what it removed (delete_message -> {receiver_id, ...}): the message's fields,
        # not a record of the receiver
        b.harvest(spec.output_schema, plan.entity, follow=plan.kind != "delete")
    # 2b. fields a "Returns ..." sentence names, where no output schema shows the record
    for spec in specs:
        if spec.output_schema is None:
            _add_prose_output(b, spec, plans[spec.name])
    # 2c. the one field a read names ("Get the owner of the environment"); an argument-less read of it
    # ("Get the manager of an employee", no employee id) reads the caller's own record
    for spec in specs:
        if spec.output_schema is None:
            _add_field_of_read(b, spec, plans, specs)
    # 3. fields from parameters
    for spec in specs:
        plan = plans[spec.name]
        c = b.coll(plan.entity)
        params = props(spec.parameters)
        for p, ps in params.items():
            ps = unwrap(ps) if isinstance(ps, dict) else {}
            sp = nm.snake(p)
            if sp == "id" or is_selector(sp, ps):
                continue
            if plan.kind in ("create", "update", "generic", "handoff") or (plan.kind == "status" and sp == "status"):
                base = sp[4:] if sp.startswith("new_") else sp[8:] if sp.startswith("updated_") else sp
                if base in nm.PAGING_PARAMS or base in nm.SORT_PARAMS:
                    continue
                if plan.kind == "create" and plan.other and id_param_entity(p, aliases) == plan.other:
                    c.add(sp, ps)
                elif plan.kind == "update" and base not in c.fields and suffix_field(base, c.fields):
                    pass  # update_delivery_instructions(instructions): sets the existing delivery_instructions
                elif plan.kind == "update" and _role_of(plan.field_hint, base):
                    c.add(f"{plan.field_hint}_id", ps)  # set_preferred_locker(locker_id): preferred_locker_id
                elif not (plan.kind in ("update", "status") and base == f"{plan.entity}_id"):
                    c.add(base, ps)
            elif plan.kind == "lookup" and sp in plan.by_fields:
                c.add(sp, ps)
            elif plan.kind == "list":
                fname = list_filter_field(sp, c.fields)
                if fname and fname[0] not in c.fields:
                    typ = ps if fname[1] in ("eq", "in") else {"type": json_type(ps), "format": ps.get("format")}
                    if fname[1] == "in":
                        typ = unwrap(ps.get("items")) if json_type(ps) == "array" else ps
                    if fname[1] != "text":
                        c.add(fname[0], {k: v for k, v in typ.items() if v is not None})
                elif fname and fname[1] == "eq" and ps.get("enum"):
                    c.add(fname[0], ps)
            elif plan.kind in ("link", "unlink") and plan.other and id_param_entity(p, aliases) == plan.other:
                other_fields = b.coll(plan.other).fields
                links_back = any(f.type == "array" and f.ref == nm.plural(plan.entity) for f in other_fields.values())
                if p.endswith("_ids"):
                    c.add(sp, ps)
                elif not links_back and not any(f.type == "array" and f.ref == nm.plural(plan.other) for f in c.fields.values()):
                    c.add(sp, {"type": "string"})
        if plan.kind == "amount":
            cands = [plan.entity] + [id_param_entity(p, aliases) for p in params if id_param_entity(p, aliases)]
            ent, fld = amount_target(plan, cands, {e: b.coll(e).fields for e in cands})
            b.coll(ent).add(fld, {"type": "number"})
        if _flag_switch(plan):  # enable_roaming(line_id): the line's roaming flag, not its status
            if not any(f.type == "boolean" and plan.field_hint in n for n, f in c.fields.items()):
                c.add(f"{plan.field_hint}_enabled", {"type": "boolean"})
        elif plan.kind == "status" or (plan.kind == "create" and "status" in c.fields):
            c.add("status", {"type": "string"})
            c.status_words += [w for w in status_words(spec.description) if w not in c.status_words]
            if plan.target_status:
                c.status_targets.append(plan.target_status)
        elif "status" in c.fields:
            c.status_words += [w for w in status_words(spec.description) if w not in c.status_words]
        if plan.kind == "create" and plan.other:
            c.add(f"{plan.other}_id", {"type": "string"})
        if plan.effect == "write" and plan.kind in WRITE_KINDS | {"generic"}:
            _add_prose_rules(c, spec, plan)
    for c in b.colls.values():
        for name in [n for n in c.fields if n in b.prose_lists]:
            if name[:-1] in c.fields:  # "the books it contains" where the order holds one book_id: that one
                del c.fields[name]
        if "status" in c.fields and c.fields["status"].type in ("object", "array", "boolean", "number", "integer"):
            c.status_words, c.status_targets = [], []  # ``status: {fuel_level, door_status}`` is a report and ``status: true`` a flag, not a workflow state
            continue
        nested = [unwrap(v)["enum"] for f in c.fields.values() if f.type == "object" and f.properties
                  for k, v in f.properties.items() if k == "status" and isinstance(v, dict) and unwrap(v).get("enum")]
        if "status" in c.fields and not c.fields["status"].enum and len(nested) == 1:
            # freeze_membership(member_id) on members whose `membership.status` documents the statuses
            c.fields["status"] = c.fields["status"].model_copy(update={"enum": list(nested[0])})
        if "status" in c.fields and not c.fields["status"].enum and not c.status_words:
            c.status_words = ["active", "inactive"]
        elif "status" in c.fields and not c.fields["status"].enum:
            initial = [s for s in nm.INITIAL_STATUSES if s in c.status_words]
            if not initial:
                c.status_words.insert(0, "pending" if any(s in c.status_words for s in ("cancelled", "canceled", "shipped", "delivered", "paid", "completed")) else "active")
    if not b.colls:
        name = toolset.name if isinstance(toolset, ToolSet) else str(toolset)
        b.coll(nm.singular(nm.snake(name)) or "record")
    _complete_links(b, {plans[s.name].entity for s in specs})
    return b.build()


def _complete_links(b: _Builder, tool_entities: set[str]) -> None:
    """The other side of a one-to-many link the docs show from the parent only: a person's records
    ("Returns the user's profile with their orders": ``users.order_ids``) and a record's parts that
    no tool is about ("the order with all of its items") each name their owner (``orders.user_id``,
    ``items.order_id``), so the world holds the link both ways. A list of records that stand on
    their own (the books an order contains, listed by orders and searched by themselves) stays
    many-to-many."""
    listed_by: dict[str, list[str]] = {}
    for entity, c in b.colls.items():
        for f in c.fields.values():
            sub = id_param_entity(f.name, b.aliases) if f.type == "array" and f.name.endswith("_ids") else None
            if sub and sub != entity and sub in b.colls:
                listed_by.setdefault(sub, []).append(entity)
    for child, parents in listed_by.items():
        if len(set(parents)) != 1:
            continue  # listed by two kinds of record: shared, not owned
        parent = parents[0]
        cc = b.colls[child]
        if any(id_param_entity(n, b.aliases) == parent for n in cc.fields if n.endswith("_id")):
            continue  # the child already names its parent
        owner_is_person = parent in PEOPLE_ENTITIES and child not in PEOPLE_ENTITIES
        if owner_is_person or child not in tool_entities:
            cc.add(f"{parent}_id", {"type": "string", "description": f"the {parent.replace('_', ' ')} this "
                                    f"{child.replace('_', ' ')} belongs to"}, note=False)


def _flag_switch(plan: ToolPlan) -> bool:
    """A switch of the record's own flag: ``enable_roaming(line_id)``, ``disable_autopay(account_id)``."""
    return plan.kind == "status" and plan.verb in TOGGLE_VERBS and bool(plan.field_hint) and plan.field_hint != plan.entity


def _role_of(hint: str | None, base: str) -> bool:
    """``base`` is the id the role ``hint`` names: ``locker_id`` for preferred_locker."""
    return bool(hint) and base.endswith("_id") and hint != base[:-3] and hint.endswith(f"_{base[:-3]}")


def _add_prose_rules(c: CollectionDraft, spec: ToolSpec, plan: ToolPlan) -> None:
    """What the prose's status rules need in the record (autoforge.domain.rules): a status field
    holding the statuses they name ("only for a draft invoice", "becomes 'escalated'") and the
    timestamp fields they record ("records frozen_at")."""
    src, res, stamps = status_mentions(spec, plan.entity)
    if plan.kind != "delete" and (src or res):
        c.add("status", {"type": "string"})
        c.status_words += [w for w in src + res if w and w not in c.status_words]
        if res and plan.kind != "delete":
            c.status_targets.append(res[:1])
    if plan.kind != "delete":
        for f in stamps:
            if nm.is_identifier(f):
                c.add(f, {"type": "string", "format": "date" if f.endswith(("_on", "_date")) else "date-time"})


def _add_field_of_read(b: _Builder, spec: ToolSpec, plans: dict[str, ToolPlan], specs: list[ToolSpec]) -> None:
    """"Get the owner of the environment" (``getEnvironmentOwner(environmentId)``): environments hold an
    ``owner``. "Get the manager of an employee" with no argument, on ``employee_managers`` that no tool
    names by id: the caller's own record (``session``), one per world, holding ``manager``."""
    plan = plans[spec.name]
    said = field_of_read(spec.description) if plan.effect == "read" else None
    if said is None:
        return
    x, e = said
    e = b.aliases.get(e, e)
    if plan.entity == e and props(spec.parameters):
        c = b.coll(e)
        if x not in c.fields and not suffix_field(x, c.fields):
            c.add(x, {"type": "string", "description": f"the {x.replace('_', ' ')} of the {e.replace('_', ' ')}"}, note=False)
    elif plan.entity == f"{e}_{x}" and not any(props(s.parameters) for s in specs if plans[s.name].entity == plan.entity):
        c = b.coll(plan.entity)
        c.session = True
        c.add(x, {"type": "string", "description": f"the {x.replace('_', ' ')} of the session's {e.replace('_', ' ')}"},
              note=False)


def _add_prose_output(b: _Builder, spec: ToolSpec, plan: ToolPlan) -> None:
    """The fields the description says the tool returns ("Returns the order with its status, total
    and the books it contains"), added to the record they belong to: a phrase naming another
    entity of the tool set becomes a reference to it (``book_ids``, ``desk_id``, and a role such as
    "start station" becomes ``start_station_id`` referring to stations)."""
    out = prose_output(spec.description, plan.entity)
    if out is None:
        return
    noun = b.aliases.get(out.noun, out.noun) if out.noun else None
    entity = noun if noun in b.colls and noun != plan.other else plan.entity
    c = b.coll(entity)
    for f in out.fields:
        name = f.name
        if name in (f"{entity}_id", "id") or (name.endswith("_id") and id_param_entity(name, b.aliases) == entity):
            continue
        ws = name.split("_")
        last = nm.singular(ws[-1]) if f.noun else None
        target = b.aliases.get(last, last) if last else None
        if target in b.colls and target != entity and f.schema.get("type") in ("string", "array"):
            many = nm.is_plural(ws[-1]) and len(ws) == 1
            key = f"{target}_ids" if many else (f"{target}_id" if len(ws) == 1 else f"{name}_id")
            if key in c.fields or f"{target}_id" in c.fields and not many and len(ws) == 1:
                continue
            spec_ = {"type": "array", "items": {"type": "string"}} if many else {"type": "string"}
            c.add(key, spec_, ref=nm.plural(target), note=False)
            if many:
                b.prose_lists.add(key)
        elif name not in c.fields and not suffix_field(name, c.fields):
            c.add(name, f.schema, note=False)
