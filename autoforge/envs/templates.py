"""Offline tool code: one Python function per tool, written from templates.

Paper (arXiv 2512.22857, Sec. 3.1): an LLM writes each tool's code over the state S. The
offline backend writes the same kind of code from templates chosen by the tool's verb,
parameters, effect and output schema (:func:`autoforge.domain.tools.analyze_tool`):

========  ===========================================================================
lookup    ``find_user_id_by_email``: match records by one or more fields -> id or record
get       ``get_order``: record by id
list      ``list_orders`` / ``search_products``: equality, ranges (``min_``/``max_``),
          substrings (``name_contains``, ``query``), id lists, ``limit``/``offset``
create    ``create_order``: new id from ``next_id``, defaults, reference checks, unique
          email/username, derived totals (price x quantity), stock/seat decrements
update    ``update_order_address``: set given fields; status preconditions from the docs
status    ``cancel_order`` / ``approve_request``: move to a target status from allowed ones
delete    ``delete_product``
link      ``assign_ticket_to_agent`` (set a reference) / ``add_item_to_cart`` (append)
unlink    the inverse of link
amount    ``transfer_funds`` / ``deposit`` / ``withdraw`` / ``adjust_stock`` with
          insufficient-funds and non-negative preconditions
generic   anything else: behaves as get/list (read) or update/create (write)
========  ===========================================================================

The output is real Python source. It goes through exactly the checks and the sandbox that
LLM code goes through (:mod:`autoforge.envs.checks`): no imports, no names starting with
``_``, only the injected helpers ``NOW``, ``TODAY``, ``next_id`` and ``copy``. A failed
precondition returns ``{"error": ...}``; nothing raises on purpose.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain import words as nm
from autoforge.envs import pynames
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.domain.rules import parse_rules
from autoforge.envs.rule_engine import argument_checks
from autoforge.domain.fields import amount_target, list_filter_field, suffix_field
from autoforge.domain.ids import id_param_entity, is_integer_ids
from autoforge.domain.statuses import status_rules, status_words
from autoforge.domain.tools import AMOUNT_PARAMS, ToolPlan
from autoforge.tooldocs.schema import json_type, props, unwrap
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, ToolSpec

# Names the generated code uses itself: a parameter with one of these names (or one that is not
# a usable identifier: ``order-id``, ``from``, ``state``) gets another Python name
# (:func:`pynames.argument_names`; recorded as ToolCode.arg_map, applied by the runtime).
RESERVED = {"state", "db", "args", "table", "record", "result", "results", "key", "value", "new_id", "other",
            "target", "item", "items_list", "copy", "NOW", "TODAY", "next_id", "add_days", "error", "len", "str",
            "int", "float", "isinstance", "sorted", "list", "dict", "bool", "round", "min", "max", "sum", "any",
            "all", "found", "amount_value", "source", "dest", "text", "limit_value", "offset_value", "bound",
            "balance_value", "existing", "ref_table", "ref_record", "wanted", "kept", "changed", "rest", "stock",
            "current", "remaining"}
NULL_DEFAULTS = {"None", "none", "null", "NULL", "nil"}  # a documented string default that means no value
INCREASE_VERBS = {"deposit", "credit", "top", "topup", "refund", "fund", "reload", "award", "increment", "restock", "add"}
DECREASE_VERBS = {"withdraw", "debit", "pay", "charge", "spend", "redeem", "deduct", "decrement", "bill", "use", "consume"}
STOCK_FIELDS = ("stock", "seats_available", "available_seats", "quantity_available", "stock_quantity", "inventory",
                "capacity_remaining", "remaining", "available", "seats_left", "spots_left", "available_spots",
                "available_rooms", "rooms_available", "copies_available", "available_copies", "tickets_available")
PAID_FIELDS = ("amount_paid", "paid_amount", "paid", "total_paid")
TOTAL_FIELDS = ("total", "total_price", "total_amount", "amount", "cost", "total_cost", "price")


@dataclass
class ToolDraft:
    """Generated code plus what the synthesizer records about it (see :class:`ToolCode`)."""

    name: str
    source: str
    kind: str
    collection: str | None
    effect: str
    output_schema: dict[str, Any] | None
    function_name: str = ""  # the Python function (ToolCode.function_name)
    arg_map: dict[str, str] | None = None  # public -> Python argument names, where they differ (ToolCode.arg_map)
    rules: list[ParsedRule] = field(default_factory=list)  # rules the prose states; enforcement "code" where written


# --------------------------------------------------------------------------- small helpers


def lit(value: Any) -> str:
    """A Python literal for a JSON value (``None``/``True``, not ``null``/``true``)."""
    return repr(json.loads(json.dumps(value)))


def func_name(tool_name: str) -> str:
    """The Python function name of a tool (:func:`pynames.function_name`)."""
    return pynames.function_name(tool_name)


class Code:
    """A tiny source emitter with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> "Code":
        self.lines.append("    " * self.depth + line)
        return self

    def indent(self) -> "Code":
        self.depth += 1
        return self

    def dedent(self) -> "Code":
        self.depth -= 1
        return self

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _loose(schema: Any, depth: int = 0) -> Any:
    """A nested schema without ``required`` lists: the code may not fill every documented sub-field."""
    if not isinstance(schema, dict) or depth > 8:
        return schema
    out = {k: v for k, v in schema.items() if k not in ("required", "minItems", "additionalProperties")}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _loose(v, depth + 1) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _loose(out["items"], depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [_loose(v, depth + 1) for v in out[key]]
    return out


def field_schema(f: FieldSpec) -> dict[str, Any]:
    """The JSON Schema of one record field, as tool outputs carry it (``x-ref``: the collection an id points at)."""
    s: dict[str, Any] = {"type": f.type}
    if f.enum:
        s["enum"] = list(f.enum)
    if f.format:
        s["format"] = f.format
    if f.type == "array":
        s["items"] = _loose(f.items) if f.items else ({"type": "string"} if f.ref else {})
    if f.type == "object" and f.properties:
        s["properties"] = _loose(f.properties)
    if f.ref:
        s["x-ref"] = f.ref
    return s


def record_schema(coll: CollectionSpec) -> dict[str, Any]:
    return {"type": "object", "properties": {f.name: field_schema(f) for f in coll.fields}, "required": [coll.primary_key]}


class Ctx:
    """Everything one template needs: the spec, its plan, the schema and the parameter names."""

    def __init__(self, spec: ToolSpec, plan: ToolPlan, schema: StateSchema):
        self.spec, self.plan, self.schema = spec, plan, schema
        self.by_entity = {c.entity: c for c in schema.collections}
        self.coll = self.by_entity.get(plan.entity) or schema.collections[0]
        self.fields = {f.name: f for f in self.coll.fields}
        self.params: dict[str, dict] = {k: (unwrap(v) if isinstance(v, dict) else {}) for k, v in props(spec.parameters).items()}
        self.required = set((spec.parameters or {}).get("required") or [])
        self.py = pynames.argument_names(list(self.params), pynames.CODE_RESERVED | RESERVED)  # public -> Python name
        self.db = "state"  # the sandbox requires the first parameter to be named ``state``
        self._rules: dict[str, list[ParsedRule]] = {}

    def rules(self) -> list[ParsedRule]:
        """The rules the tool's prose states, read against the current main collection."""
        if self.coll.name not in self._rules:
            self._rules[self.coll.name] = parse_rules(self.spec, self.coll, self.plan.verb, self.plan.target_status)
        return self._rules[self.coll.name]

    def _in_enum(self, values: list) -> list[str]:
        sf = self.status_field()
        enum = {str(e).lower(): e for e in (sf.enum or [])} if sf is not None else {}
        return list(dict.fromkeys(enum[str(v).lower()] for v in values if str(v).lower() in enum))

    def source_rule(self, target: str | None) -> tuple[ParsedRule | None, list[str]]:
        """The first source-status rule whose statuses the collection has, and those statuses."""
        for r in self.rules():
            if r.kind == "source_status":
                allowed = [v for v in self._in_enum(r.values) if v != target]
                if allowed:
                    return r, allowed
        return None, []

    def result_rule(self) -> tuple[ParsedRule | None, str | None]:
        """The first result-status rule whose status the collection has, and that status."""
        for r in self.rules():
            if r.kind == "result_status":
                got = self._in_enum(r.values)
                if got:
                    return r, got[0]
        return None, None

    def emit_rule_effects(self, c: Code, status_done: bool = False, stamped: set[str] | None = None) -> None:
        """The stated result status (unless the template set it) and the stated timestamps."""
        rule, value = self.result_rule()
        if rule is not None and not status_done:
            c(f"record['status'] = {value!r}")
            rule.enforcement = "code"
        stamped = set(stamped or ())
        for r in self.rules():
            if r.kind == "side_effect" and r.field and nm.is_identifier(r.field):
                if r.field not in stamped:
                    fmt = self.fields[r.field].format if r.field in self.fields else None
                    c(f"record[{r.field!r}] = {'TODAY' if fmt == 'date' else 'NOW'}")
                    stamped.add(r.field)
                r.enforcement = "code"

    def set_main(self, coll: CollectionSpec) -> None:
        """Make ``coll`` the collection the tool reads or writes (recorded as ToolCode.collection)."""
        self.coll = coll
        self.fields = {f.name: f for f in coll.fields}

    def ent(self, p: str) -> str | None:
        """The entity an id parameter points at: by name (``order_id``), else through a field of
        the same name that references a collection (``manager_id`` -> employees)."""
        e = id_param_entity(p)
        if e is None or e in self.by_entity:
            return e
        sp = nm.snake(p)
        for c in [self.coll, *self.schema.collections]:
            for f in c.fields:
                if f.name == sp and f.ref:
                    target = next((cc.entity for cc in self.schema.collections if cc.name == f.ref), None)
                    if target:
                        return target
        return e

    def next_id(self, coll: CollectionSpec) -> str:
        width = "" if coll.id_width == 4 else f", {coll.id_width}"
        return f"next_id({self.db}, {coll.name!r}, {coll.id_prefix!r}{width})"

    @staticmethod
    def key(expr: str, coll: CollectionSpec) -> str:
        """The state key for an id value ``expr`` of ``coll``: integer ids are stored under their
        strings (``state['pets']['3']``), string ids as they are."""
        return f"str({expr})" if is_integer_ids(coll) else expr

    @staticmethod
    def id_schema(coll: CollectionSpec) -> dict[str, Any]:
        """The JSON Schema of one id of ``coll`` in an output."""
        return {"type": "integer" if is_integer_ids(coll) else "string", "x-ref": coll.name}

    # parameter access ---------------------------------------------------------------
    def v(self, p: str) -> str:
        """Python expression for the value of (public) parameter ``p``: its Python name."""
        return self.py[p]

    @property
    def arg_map(self) -> dict[str, str]:
        return {p: py for p, py in self.py.items() if p != py}

    def signature(self, doc: str) -> list[str]:
        name = func_name(self.spec.name)
        parts = ["state"]
        req = [p for p in self.params if p in self.required]
        opt = [p for p in self.params if p not in self.required]
        parts += [self.py[p] for p in req]
        for p in opt:
            default = self.params[p].get("default")
            if isinstance(default, str) and default.strip() in NULL_DEFAULTS:
                default = None  # ``"default": "None"``: the docs' way of saying "not given" (If None, return all)
            ok = default is None or isinstance(default, (str, int, float, bool))
            parts.append(f"{self.py[p]}={lit(default) if ok else 'None'}")
        head = f"def {name}({', '.join(parts)}):"
        doc = re.sub(r"\s+", " ", doc).replace("\\", "/").replace('"""', "'").strip()[:300] or self.spec.name
        return [head, f'    """{doc}"""']

    def table(self, coll: CollectionSpec | None = None) -> str:
        coll = coll or self.coll
        return f"{self.db}.setdefault({coll.name!r}, {{}})"

    def pk_param(self, entity: str | None = None) -> str | None:
        """The parameter holding the id of a record of ``entity`` (default: the main entity)."""
        entity = entity or self.plan.entity
        ids = [p for p in self.params if self.ent(p) == entity and not nm.snake(p).endswith("_ids")]
        exact = [p for p in ids if nm.snake(p) == f"{entity}_id"]
        if exact:
            return exact[0]
        if ids:
            return ids[0]
        if "id" in self.params and entity == self.plan.entity:
            return "id"
        return None

    def ref_params(self, skip: set[str]) -> list[tuple[str, CollectionSpec]]:
        """Id parameters pointing at a collection (validated before anything changes)."""
        out = []
        for p in self.params:
            if p in skip:
                continue
            e = self.ent(p)
            if e and e in self.by_entity and not nm.snake(p).endswith("_ids"):
                out.append((p, self.by_entity[e]))
        return out

    def emit_ref_checks(self, c: Code, skip: set[str]) -> None:
        for p, coll in self.ref_params(skip):
            v = self.v(p)
            c(f"if {v} is not None and {self.key(v, coll)} not in {self.db}.get({coll.name!r}, {{}}):")
            c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({v}) + ' not found'}}")

    def emit_fetch(self, c: Code, pk: str, coll: CollectionSpec | None = None, var: str = "record") -> None:
        coll = coll or self.coll
        v = self.v(pk)
        c(f"{var} = {self.db}.get({coll.name!r}, {{}}).get({self.key(v, coll)})")
        c(f"if {var} is None:")
        c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({v}) + ' not found'}}")

    def field_for(self, p: str) -> str | None:
        """The record field a write parameter sets: ``new_address`` -> address."""
        sp = nm.snake(p)
        for cand in (p, sp, sp[4:] if sp.startswith("new_") else None, sp[8:] if sp.startswith("updated_") else None):
            if cand and cand in self.fields:
                return cand
        return suffix_field(sp, self.fields)

    def status_field(self) -> FieldSpec | None:
        return self.fields.get("status")

    def allowed_from(self, target: str | None) -> list[str] | None:
        """Statuses a record may be in before this tool changes it (None: no precondition).

        Rules the description states win (:func:`autoforge.domain.statuses.status_rules`: "Only pending
        orders can be cancelled", "Checked-in bookings cannot be cancelled"); otherwise every
        non-terminal status of the enum is allowed."""
        sf = self.status_field()
        if sf is None or not sf.enum:
            return None
        rule, from_rule = self.source_rule(target)
        if rule is not None:
            return from_rule
        enum = [e for e in sf.enum if isinstance(e, str)]
        allowed, forbidden = status_rules(self.spec.description, enum, self.coll.entity, target)
        if allowed:
            return allowed
        rest = [e for e in enum if e not in nm.TERMINAL_STATUSES and e != target and e not in forbidden]
        return rest if rest and len(rest) < len(enum) else None

    def emit_status_precondition(self, c: Code, verb_text: str, target: str | None) -> None:
        allowed = self.allowed_from(target)
        rule, from_rule = self.source_rule(target)
        if rule is not None and allowed == from_rule:
            rule.enforcement = "code"
        if target is not None:
            c(f"if record.get('status') == {target!r}:")
            c(f"    return {{'error': {self.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({self.coll.primary_key!r})) + ' is already {target}'}}")
        if allowed:
            c(f"if record.get('status') not in {lit(allowed)}:")
            msg = f" cannot be {verb_text}: status is "
            c(f"    return {{'error': {self.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({self.coll.primary_key!r})) + {msg!r} + str(record.get('status')) + ' (allowed: {', '.join(allowed)})'}}")


# --------------------------------------------------------------------------- templates


def t_lookup(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    by = [p for p in x.plan.by_fields if p in x.params] or [p for p in x.params if p in x.required][:1] or list(x.params)[:1]
    pk = x.coll.primary_key
    c(f"for key in sorted({x.db}.get({x.coll.name!r}, {{}})):")
    c.indent()
    c(f"record = {x.db}[{x.coll.name!r}][key]")
    for p in by:
        f = x.field_for(p) or nm.snake(p)
        v = x.v(p)
        if json_type(x.params[p]) == "string":
            c(f"if {v} is not None and str(record.get({f!r}, '')).strip().lower() != str({v}).strip().lower():")
        else:
            c(f"if {v} is not None and record.get({f!r}) != {v}:")
        c("    continue")
    if x.plan.returns_id:
        c(f"return {{{pk!r}: {'int(key)' if is_integer_ids(x.coll) else 'key'}}}")
        out = {"type": "object", "properties": {pk: x.id_schema(x.coll)}, "required": [pk]}
    else:
        c("return copy.deepcopy(record)")
        out = record_schema(x.coll)
    c.dedent()
    desc = " and ".join(f"{nm.snake(p).replace('_', ' ')} ' + str({x.v(p)}) + '" for p in by)
    c(f"return {{'error': 'no {x.coll.entity.replace('_', ' ')} found with {desc}'}}")
    return c.text(), out


def back_links(x: Ctx) -> dict[str, tuple[CollectionSpec, str]]:
    """``{<child>_ids: (child collection, its reference field)}``: the records of other collections
    that point at one of ``x.coll``'s (a user's orders, an article's comments), unless the record
    already lists them."""
    links: dict[str, tuple[CollectionSpec, str]] = {}
    for cc in x.schema.collections:
        if cc.name == x.coll.name:
            continue
        for f in cc.fields:
            name = f"{cc.entity}_ids"
            if f.ref == x.coll.name and f.type != "array" and name not in x.fields and name not in links:
                links[name] = (cc, f.name)
    return links


def t_get(x: Ctx) -> tuple[str, dict]:
    """The record by id, with the ids of the records that point at it (read tools return what is
    linked, so the tool graph leads from a user to the writes on their orders)."""
    pk = x.pk_param()
    if pk is None:
        return t_list(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    links = back_links(x)
    out = record_schema(x.coll)
    if not links:
        c("return copy.deepcopy(record)")
        return c.text(), out
    c("result = copy.deepcopy(record)")
    c(f"own = str(record.get({x.coll.primary_key!r}))")
    for name, (cc, ref) in links.items():
        c(f"result[{name!r}] = [r.get({cc.primary_key!r}) for k, r in sorted({x.db}.get({cc.name!r}, {{}}).items())"
          f" if isinstance(r, dict) and str(r.get({ref!r})) == own]")
        out["properties"][name] = {"type": "array", "items": x.id_schema(cc)}
    c("return result")
    return c.text(), out


def t_list(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_ref_checks(c, skip=set())
    limit = next((p for p in x.params if nm.snake(p) in ("limit", "max_results", "page_size", "per_page", "top")), None)
    offset = next((p for p in x.params if nm.snake(p) in ("offset", "skip")), None)
    c("results = []")
    c(f"table = {x.db}.get({x.coll.name!r}, {{}})")
    c("for key in sorted(table):")
    c.indent()
    c("record = table[key]")
    for p, ps in x.params.items():
        how = list_filter_field(p, x.fields)
        if how is None:
            continue
        f, op = how
        v = x.v(p)
        ptype = json_type(ps)
        if f not in x.fields and op != "text":
            plural_f = nm.plural(f)
            if plural_f in x.fields and x.fields[plural_f].type == "array":
                c(f"if {v} is not None and {v} not in (record.get({plural_f!r}) or []):")
                c("    continue")
            continue  # a parameter with no matching field does not filter (documented as best effort)
        c(f"value = record.get({f!r})")
        if op == "eq":
            if x.fields[f].type == "array":
                c(f"if {v} is not None and {v} not in (value or []):")
            elif ptype == "string" and not x.fields[f].ref and not x.fields[f].enum and f != x.coll.primary_key:
                c(f"if {v} is not None and str(value).strip().lower() != str({v}).strip().lower():")
            else:
                c(f"if {v} is not None and value != {v}:")
        elif op == "in":
            c(f"if {v} is not None and value not in {v}:")
        elif op in ("min", "max"):
            cmp = "<" if op == "min" else ">"
            if ptype in ("number", "integer"):
                guard = "(isinstance(value, (int, float)) and not isinstance(value, bool))"
            else:
                guard = "isinstance(value, str)"
                v = f"str({v})"
            c(f"if {x.v(p)} is not None and (not {guard} or value {cmp} {v}):")
        elif op == "contains":
            c(f"if {v} is not None and str({v}).lower() not in str(value if value is not None else '').lower():")
        elif op == "text":
            c("text = ' '.join(str(item) for item in record.values() if isinstance(item, str)).lower()")
            c(f"if {v} is not None and str({v}).lower() not in text:")
        c("    continue")
    c("results.append(copy.deepcopy(record))")
    c.dedent()
    if offset:
        c(f"if {x.v(offset)} is not None and {x.v(offset)} > 0:")
        c(f"    results = results[{x.v(offset)}:]")
    if limit:
        c(f"if {x.v(limit)} is not None and {x.v(limit)} >= 0:")
        c(f"    results = results[:{x.v(limit)}]")
    if x.plan.count_only:
        c("return {'count': len(results)}")
        return c.text(), {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}
    c(f"return {{{x.coll.name!r}: results, 'count': len(results)}}")
    out = {"type": "object", "properties": {x.coll.name: {"type": "array", "items": record_schema(x.coll)},
                                            "count": {"type": "integer"}}, "required": [x.coll.name, "count"]}
    return c.text(), out


def _default_value(f: FieldSpec, coll: CollectionSpec) -> str:
    if f.name == "status" and f.enum:
        initial = next((s for s in nm.INITIAL_STATUSES if s in f.enum), f.enum[0])
        return lit(initial)
    if f.enum:
        return lit(f.enum[0])
    if f.name in ("created_at", "updated_at", "submitted_at", "requested_at", "booked_at", "placed_at", "opened_at"):
        return "NOW" if f.format != "date" else "TODAY"
    if f.name in ("created_on", "created_date", "date_created", "opened_on"):
        return "TODAY"
    return {"array": "[]", "object": "{}", "boolean": "False", "integer": "0" if not f.ref else "None",
            "number": "0"}.get(f.type, "None")


def t_create(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    coll = x.coll
    pk = coll.primary_key
    # the new record's own id, chosen by the caller: optional in a body (addPet's ``id``) or a
    # required natural key (``core_memory_add(key)``, read as core_memory_id)
    client = next((p for p in x.params if nm.snake(p) in ("id", pk) and (p not in x.required or nm.snake(p) == pk)), None)
    skip = {client} if client else set()
    x.emit_ref_checks(c, skip=skip)
    if client:  # the request body may carry the new record's id: a taken one is refused
        cv = x.v(client)
        c(f"if {cv} is not None and {x.key(cv, coll)} in {x.db}.get({coll.name!r}, {{}}):")
        c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({cv}) + ' already exists'}}")
    # unique fields (email, username ...) may not repeat
    for p in x.params:
        f = x.field_for(p)
        if f in ("email", "username", "user_name", "sku", "slug", "handle", "login", "code", "phone"):
            v = x.v(p)
            c(f"for existing in {x.db}.get({coll.name!r}, {{}}).values():")
            c(f"    if {v} is not None and str(existing.get({f!r}, '')).lower() == str({v}).lower():")
            c(f"        return {{'error': 'a {coll.entity.replace('_', ' ')} with {f} ' + str({v}) + ' already exists'}}")
    qty = next((p for p in x.params if nm.snake(p) in ("quantity", "qty", "seats", "passengers", "num_seats", "guests", "num_guests", "tickets", "count", "units", "nights")), None)
    qty_v = f"({x.v(qty)} if {x.v(qty)} is not None else 1)" if qty else "1"
    # referenced records with stock/seats: check and decrement; price x quantity feeds the total
    priced = None
    for p, rcoll in x.ref_params(skip=skip):
        rf = {f.name: f for f in rcoll.fields}
        stock = next((s for s in STOCK_FIELDS if s in rf and rf[s].type in ("integer", "number")), None)
        if "price" in rf and priced is None:
            priced = (p, rcoll)
        if stock:
            v = x.v(p)
            c(f"if {v} is not None:")
            c(f"    ref_record = {x.db}[{rcoll.name!r}][{x.key(v, rcoll)}]")
            c(f"    if (ref_record.get({stock!r}) or 0) < {qty_v}:")
            c(f"        return {{'error': 'not enough {stock.replace('_', ' ')} for {rcoll.entity.replace('_', ' ')} ' + str({v}) + ': ' + str(ref_record.get({stock!r}) or 0) + ' left'}}")
    if qty and json_type(x.params[qty]) in ("integer", "number"):
        c(f"if {x.v(qty)} is not None and {x.v(qty)} <= 0:")
        c(f"    return {{'error': '{nm.snake(qty)} must be positive'}}")
    if client:
        c(f"new_id = {x.key(x.v(client), coll)} if {x.v(client)} is not None else {x.next_id(coll)}")
    else:
        c(f"new_id = {x.next_id(coll)}")
    c("record = {")
    given = {x.field_for(p): p for p in x.params if x.field_for(p) and p != client}
    for f in coll.fields:
        if f.name == pk:
            c(f"    {pk!r}: {'int(new_id)' if is_integer_ids(coll) else 'new_id'},")
        elif f.name in given:
            p = given[f.name]
            dv = _default_value(f, coll)
            plain = p in x.required or dv == "None"
            c(f"    {f.name!r}: {x.v(p)}," if plain else f"    {f.name!r}: {x.v(p)} if {x.v(p)} is not None else {dv},")
        else:
            c(f"    {f.name!r}: {_default_value(f, coll)},")
    c("}")
    for p in x.params:  # parameters that name no field are kept on the record too
        if not x.field_for(p) and nm.snake(p) not in nm.PAGING_PARAMS and p != client:
            c(f"if {x.v(p)} is not None:")
            c(f"    record[{nm.snake(p)!r}] = {x.v(p)}")
    total = next((t for t in TOTAL_FIELDS if t in x.fields and t not in given and x.fields[t].type in ("number", "integer")), None)
    if priced and total and total != "price":
        p, rcoll = priced
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{total!r}] = round(({x.db}[{rcoll.name!r}][{x.key(x.v(p), rcoll)}].get('price') or 0) * {qty_v}, 2)")
    for p, rcoll in x.ref_params(skip=skip):
        rf = {f.name: f for f in rcoll.fields}
        stock = next((s for s in STOCK_FIELDS if s in rf and rf[s].type in ("integer", "number")), None)
        if stock:
            k = x.key(x.v(p), rcoll)
            c(f"if {x.v(p)} is not None:")
            c(f"    {x.db}[{rcoll.name!r}][{k}][{stock!r}] = ({x.db}[{rcoll.name!r}][{k}].get({stock!r}) or 0) - {qty_v}")
    if "status" in x.fields:
        x.emit_rule_effects(c)
    c(f"{x.table()}[new_id] = record")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(coll)


OFF_WORDS = {"logout": "login", "log_out": "login", "signout": "signin", "logoff": "logon"}


def verb_flag(x: Ctx) -> tuple[list[str], bool] | None:
    """The boolean field a data-less write's verb names, and the value it sets: ``message_login`` ->
    ``login_status`` = True, ``follow_user`` -> ``profile.following`` = True, ``unfavorite`` ->
    ``favorited`` = False (one level of nesting is looked into)."""
    for w in nm.words(x.spec.name):
        on = True
        if w in OFF_WORDS:
            w, on = OFF_WORDS[w], False
        elif w.startswith("un") and len(w) > 5:
            w, on = w[2:], False
        stems = [w, w[:-1]] if w.endswith("e") else [w, w + w[-1]]
        names = {w + "_status", "is_" + w + "ed", w + "_enabled", "logged_in" if w == "login" else ""} | {
            st + suf for st in stems for suf in ("ed", "d", "ing")}
        names.discard("")
        for f in x.coll.fields:
            if f.type == "boolean" and f.name in names:
                return [f.name], on
        for f in x.coll.fields:
            if f.type == "object" and isinstance(f.properties, dict):
                for k, v in f.properties.items():
                    if nm.snake(k) in names and isinstance(v, dict) and v.get("type") == "boolean":
                        return [f.name, k], on
    return None


def _emit_flag(x: Ctx, c: Code, path: list[str], on: bool) -> None:
    holder = "record" if len(path) == 1 else "target"
    if len(path) == 2:
        c(f"target = record.get({path[0]!r})")
        c("if not isinstance(target, dict):")
        c(f"    target = record[{path[0]!r}] = {{}}")
    c(f"if {holder}.get({path[-1]!r}) is {on}:")
    c(f"    return {{'error': {x.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({x.coll.primary_key!r})) + "
      f"' already has {path[-1].replace('_', ' ')} = {str(on).lower()}'}}")
    c(f"{holder}[{path[-1]!r}] = {on}")


def t_update(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        return t_create(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    if x.allowed_from(None) and (status_words(x.spec.description) or x.source_rule(None)[0] is not None):
        # only a precondition the prose states ("Only pending orders can be edited"): an edit of a
        # closed ticket the docs do not forbid is allowed, as a delete is
        x.emit_status_precondition(c, "updated", None)
    sets = [(p, x.field_for(p) or nm.snake(p)) for p in x.params if p != pk and nm.snake(p) not in nm.PAGING_PARAMS]
    for p, f in sets:
        fs = x.fields.get(f)
        if fs and fs.enum and not x.params[p].get("enum"):
            c(f"if {x.v(p)} is not None and {x.v(p)} not in {lit(fs.enum)}:")
            c(f"    return {{'error': 'invalid {f}: ' + str({x.v(p)}) + ' (expected one of {', '.join(map(str, fs.enum))})'}}")
    if sets:
        c("changed = []")
        for p, f in sets:
            c(f"if {x.v(p)} is not None:")
            c(f"    record[{f!r}] = {x.v(p)}")
            c(f"    changed.append({f!r})")
        c("if not changed:")
        c(f"    return {{'error': 'nothing to update: give at least one of {', '.join(p for p, _ in sets)}'}}")
    elif (flag := verb_flag(x)) is not None:  # a write with nothing to set changes what its verb names
        _emit_flag(x, c, *flag)
    x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)


TOGGLE_VERBS = {"enable": True, "activate": True, "disable": False, "deactivate": False, "turn_on": True, "turn_off": False}


def _toggle_field(x: Ctx) -> str | None:
    """enable_roaming(line_id) -> the boolean field ``roaming_enabled`` of the line, if there is one."""
    hint = x.plan.field_hint
    if x.plan.verb not in TOGGLE_VERBS or not hint:
        return None
    return next((f.name for f in x.coll.fields if f.type == "boolean" and hint in f.name), None)


def t_status(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        return t_generic(x)
    toggle = _toggle_field(x)
    if toggle:
        on = TOGGLE_VERBS[x.plan.verb]
        c = Code()
        for line in x.signature(x.spec.description):
            c(line)
        c.indent()
        x.emit_fetch(c, pk)
        x.emit_ref_checks(c, skip={pk})
        x.emit_status_precondition(c, "changed", None)
        c(f"if record.get({toggle!r}) is {on}:")
        c(f"    return {{'error': {x.coll.entity.replace('_', ' ') + ' '!r} + str({x.v(pk)}) + ' already has {toggle.replace('_', ' ')} = {str(on).lower()}'}}")
        c(f"record[{toggle!r}] = {on}")
        c("return copy.deepcopy(record)")
        return c.text(), record_schema(x.coll)
    sf = x.status_field()
    enum = list(sf.enum or []) if sf else []
    target = next((t for t in x.plan.target_status if t in enum), x.plan.target_status[0] if x.plan.target_status else "done")
    rule, stated = x.result_rule()
    if rule is not None:
        target = stated
        rule.enforcement = "code"
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    x.emit_status_precondition(c, target.replace("_", " "), target)
    c(f"record['status'] = {target!r}")
    for p, rcoll in x.ref_params(skip={pk}):  # check_out_asset(asset, employee): the record now points at it
        f = x.field_for(p) or next((fs.name for fs in x.coll.fields if fs.ref == rcoll.name and fs.type == "string"), None)
        if f:
            c(f"if {x.v(p)} is not None:")
            c(f"    record[{f!r}] = {x.v(p)}")
    for p in x.params:
        if p == pk or x.ent(p):
            continue
        f = x.field_for(p) or nm.snake(p)
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{f!r}] = {x.v(p)}")
    if f"{target}_at" in x.fields:
        c(f"record[{target + '_at'!r}] = NOW")
    x.emit_rule_effects(c, status_done=True, stamped={f"{target}_at"} if f"{target}_at" in x.fields else None)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    if x.plan.verb == "refund":
        _emit_refund_credit(x, c)
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)


def _emit_refund_credit(x: Ctx, c: Code) -> None:
    """A refunded record gives its total back to the balance of the person it references."""
    total = next((t for t in TOTAL_FIELDS if t in x.fields), None)
    if not total:
        return
    for f in x.coll.fields:
        if f.ref and f.ref != x.coll.name:
            rcoll = next((cc for cc in x.schema.collections if cc.name == f.ref), None)
            if rcoll and any(ff.name == "balance" for ff in rcoll.fields):
                c(f"ref_record = {x.db}.get({rcoll.name!r}, {{}}).get({x.key(f'record.get({f.name!r})', rcoll)})")
                c("if ref_record is not None:")
                c(f"    ref_record['balance'] = round((ref_record.get('balance') or 0) + (record.get({total!r}) or 0), 2)")
                return


def _by_parent(x: Ctx) -> tuple[str, str] | None:
    """(parameter, field) of a delete that names no record of its own but one it points at:
    delete_message(receiver_id) -> the message whose ``receiver_id`` is the given user."""
    for p, rcoll in x.ref_params(skip=set()):
        f = x.field_for(p) or next((fs.name for fs in x.coll.fields if fs.ref == rcoll.name and fs.type != "array"), None)
        if f and f in x.fields and x.fields[f].ref == rcoll.name:
            return p, f
    return None


def t_delete_by_parent(x: Ctx, p: str, f: str) -> tuple[str, dict]:
    """Delete the latest record of the main collection that points at the given one (the last
    by ``created_at``/``sent_at`` where the records have one, else by id)."""
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_ref_checks(c, skip=set())
    when = next((fs.name for fs in x.coll.fields if fs.name in ("created_at", "sent_at", "timestamp", "posted_at", "date")), None)
    num = "int(k)" if is_integer_ids(x.coll) else "k"
    order = f"key=lambda k: (str({x.db}[{x.coll.name!r}][k].get({when!r}) or ''), {num})" if when else (
        "key=lambda k: int(k)" if is_integer_ids(x.coll) else "")
    c(f"found = [k for k in sorted({x.db}.get({x.coll.name!r}, {{}}){', ' + order if order else ''}) "
      f"if {x.db}[{x.coll.name!r}][k].get({f!r}) == {x.v(p)}]")
    c("if not found:")
    c(f"    return {{'error': 'no {x.coll.entity.replace('_', ' ')} with {f.replace('_', ' ')} ' + str({x.v(p)})}}")
    c(f"record = {x.db}[{x.coll.name!r}].pop(found[-1])")
    pk = x.coll.primary_key
    c(f"return {{{pk!r}: record.get({pk!r}), {nm.snake(p)!r}: {x.v(p)}, 'deleted': True}}")
    out = {"type": "object", "properties": {pk: x.id_schema(x.coll), nm.snake(p): {"type": x.fields[f].type},
                                            "deleted": {"type": "boolean"}}, "required": [pk, "deleted"]}
    return c.text(), out


def t_delete(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        parent = _by_parent(x)
        return t_delete_by_parent(x, *parent) if parent else t_generic(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    if x.allowed_from(None) and (status_words(x.spec.description) or x.source_rule(None)[0] is not None):
        x.emit_status_precondition(c, "deleted", None)
    c(f"{x.db}[{x.coll.name!r}].pop({x.key(x.v(pk), x.coll)})")
    c(f"return {{{x.coll.primary_key!r}: {x.v(pk)}, 'deleted': True}}")
    out = {"type": "object", "properties": {x.coll.primary_key: x.id_schema(x.coll),
                                            "deleted": {"type": "boolean"}}, "required": [x.coll.primary_key, "deleted"]}
    return c.text(), out


@dataclass
class LinkShape:
    """How a link/unlink tool changes state: which record, which field, which value."""

    mode: str  # "list": add/remove an id in a list field · "items": add/remove an item dict · "set": set/clear a reference
    target: CollectionSpec
    target_param: str
    field: str
    value_param: str | None  # the parameter whose value goes into the field / list


def _link_shape(x: Ctx) -> LinkShape | None:
    """Read the link from the schema (paper Sec. 3.1 leaves this to the LLM):

    A. the other record lists ids of this entity (``assign_user_to_project``: projects.member_ids);
    B. this record lists ids of the other (``users.project_ids``);
    C. "add X to Y" with item fields (``add_item_to_cart``): an item dict appended to Y's list;
    D. otherwise this record gets a reference (``assign_task``: tasks.assignee_id = user).
    """
    other = x.plan.other
    ocoll = x.by_entity.get(other) if other else None
    epk, opk = x.pk_param(), (x.pk_param(other) if other else None)
    if ocoll is not None and epk and opk:
        for f in ocoll.fields:
            if f.type == "array" and f.ref == x.coll.name:
                return LinkShape("list", ocoll, opk, f.name, epk)
        for f in x.coll.fields:
            if f.type == "array" and f.ref == ocoll.name:
                return LinkShape("list", x.coll, epk, f.name, opk)
    list_param = next((p for p in x.params if nm.snake(p).endswith("_ids") and x.ent(p) == other), None)
    if epk and list_param:
        return LinkShape("list", x.coll, epk, nm.snake(list_param), list_param)
    if ocoll is not None and opk and not epk and x.plan.verb in nm.CREATE_VERBS | {"append", "remove", "delete"}:
        rest = [p for p in x.params if p != opk]
        if rest:
            ofields = {f.name for f in ocoll.fields}
            lst = f"{x.plan.entity}_ids" if f"{x.plan.entity}_ids" in ofields else nm.plural(x.plan.entity)
            return LinkShape("items", ocoll, opk, lst, None)
    if epk and opk:
        sp = nm.snake(opk)
        fld = sp if sp in x.fields else f"{other}_id"
        return LinkShape("set", x.coll, epk, fld, opk)
    return None


def t_link(x: Ctx, unlink: bool = False) -> tuple[str, dict]:
    shape = _link_shape(x)
    if shape is None:
        return t_generic(x)
    target, tp, fld, vp = shape.target, shape.target_param, shape.field, shape.value_param
    ent = target.entity.replace("_", " ")
    own = x.coll
    if target is not own:
        x.set_main(target)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, tp, target)
    x.emit_ref_checks(c, skip={tp})
    if target is own:
        x.emit_status_precondition(c, "changed", None)
    extra = [p for p in x.params if p not in (tp, vp)]
    if shape.mode == "list":
        vals = x.v(vp) if nm.snake(vp).endswith("_ids") else f"[{x.v(vp)}]"
        c(f"current = list(record.get({fld!r}) or [])")
        c(f"for value in {vals}:")
        if unlink:
            c("    if value not in current:")
            c(f"        return {{'error': str(value) + ' is not in {fld.replace('_', ' ')} of {ent} ' + str({x.v(tp)})}}")
            c("    current.remove(value)")
        else:
            c("    if value in current:")
            c(f"        return {{'error': str(value) + ' is already in {fld.replace('_', ' ')} of {ent} ' + str({x.v(tp)})}}")
            c("    current.append(value)")
        c(f"record[{fld!r}] = current")
    elif shape.mode == "set":
        if unlink:
            c(f"if record.get({fld!r}) != {x.v(vp)}:")
            c(f"    return {{'error': {ent + ' '!r} + str({x.v(tp)}) + ' is not linked to ' + str({x.v(vp)})}}")
            c(f"record[{fld!r}] = None")
        else:
            c(f"if record.get({fld!r}) == {x.v(vp)}:")
            c(f"    return {{'error': {ent + ' '!r} + str({x.v(tp)}) + ' is already assigned to ' + str({x.v(vp)})}}")
            c(f"record[{fld!r}] = {x.v(vp)}")
    else:  # items: append / remove an item dict keyed by its first id parameter
        key = next((p for p in extra if x.ent(p)), extra[0])
        kf = nm.snake(key)
        c(f"current = list(record.get({fld!r}) or [])")
        if unlink:
            c(f"kept = [item for item in current if not (isinstance(item, dict) and item.get({kf!r}) == {x.v(key)})]")
            c("if len(kept) == len(current):")
            c(f"    return {{'error': str({x.v(key)}) + ' is not in ' + {ent + ' '!r} + str({x.v(tp)})}}")
            c("current = kept")
        else:
            c("item = {}")
            for p in extra:
                c(f"if {x.v(p)} is not None:")
                c(f"    item[{nm.snake(p)!r}] = {x.v(p)}")
            c("current.append(item)")
        c(f"record[{fld!r}] = current")
        extra = []
    for p in extra:
        if x.ent(p):
            continue
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{(x.field_for(p) or nm.snake(p))!r}] = {x.v(p)}")
    if target is own:
        x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in {f.name for f in target.fields}:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(target)


def t_amount(x: Ctx) -> tuple[str, dict]:
    amount = next((p for p in x.params if nm.snake(p) in AMOUNT_PARAMS or nm.snake(p).endswith("_amount")), None)
    cands = [x.plan.entity] + [x.ent(p) for p in x.params if x.ent(p) in x.by_entity]
    ent_name, bal = amount_target(x.plan, cands, {e: {f.name: f for f in x.by_entity[e].fields} for e in cands if e in x.by_entity})
    if ent_name != x.coll.entity:
        x.set_main(x.by_entity[ent_name])
    ids = [p for p in x.params if x.ent(p) == x.coll.entity and not nm.snake(p).endswith("_ids")]
    if amount is None or not ids:
        return t_generic(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    a = x.v(amount)
    ent = x.coll.entity.replace("_", " ")
    if len(ids) >= 2:  # transfer between two records of one collection
        src = next((p for p in ids if re.match(r"(from|source|src|sender|origin)_", nm.snake(p))), ids[0])
        dst = next((p for p in ids if p != src), ids[1])
        x.emit_fetch(c, src, var="source")
        x.emit_fetch(c, dst, var="dest")
        x.emit_ref_checks(c, skip={src, dst})
        c(f"if {x.v(src)} == {x.v(dst)}:")
        c(f"    return {{'error': 'cannot transfer from a {ent} to itself'}}")
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        c(f"if (source.get({bal!r}) or 0) < {a}:")
        c(f"    return {{'error': 'insufficient {bal.replace('_', ' ')}: ' + {ent + ' '!r} + str({x.v(src)}) + ' has ' + str(source.get({bal!r}) or 0) + ', needs ' + str({a})}}")
        c(f"source[{bal!r}] = round((source.get({bal!r}) or 0) - {a}, 2)")
        c(f"dest[{bal!r}] = round((dest.get({bal!r}) or 0) + {a}, 2)")
        sk, dk = nm.snake(src), nm.snake(dst)
        c(f"return {{{sk!r}: {x.v(src)}, {dk!r}: {x.v(dst)}, {nm.snake(amount)!r}: {a}, "
          f"{'from_' + bal!r}: source[{bal!r}], {'to_' + bal!r}: dest[{bal!r}]}}")
        num = {"type": "number"}
        out = {"type": "object", "properties": {sk: x.id_schema(x.coll), dk: x.id_schema(x.coll),
                                                nm.snake(amount): num, f"from_{bal}": num, f"to_{bal}": num},
               "required": [sk, dk, nm.snake(amount)]}
        return c.text(), out
    pk = ids[0]
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    x.emit_status_precondition(c, "changed", None)
    verb = x.plan.verb
    due = next((f for f in ("amount_due", "amount", "total", "total_amount", "balance_due") if f in x.fields and f != bal), None)
    if bal in PAID_FIELDS and due:  # paying a bill/invoice: amount_paid grows up to what is due
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        c(f"remaining = round((record.get({due!r}) or 0) - (record.get({bal!r}) or 0), 2)")
        c(f"if {a} > remaining:")
        c(f"    return {{'error': {nm.snake(amount)!r} + ' ' + str({a}) + ' exceeds the ' + str(remaining) + ' still due on ' + {ent + ' '!r} + str({x.v(pk)})}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) + {a}, 2)")
        sf = x.status_field()
        paid = next((st for st in ("paid", "settled", "completed") if sf and sf.enum and st in sf.enum), None)
        if paid:
            c(f"if record[{bal!r}] >= (record.get({due!r}) or 0):")
            c(f"    record['status'] = {paid!r}")
    elif verb in INCREASE_VERBS or verb in DECREASE_VERBS:
        sign = "+" if verb in INCREASE_VERBS else "-"
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        if sign == "-":
            c(f"if (record.get({bal!r}) or 0) < {a}:")
            c(f"    return {{'error': 'insufficient {bal.replace('_', ' ')}: ' + {ent + ' '!r} + str({x.v(pk)}) + ' has ' + str(record.get({bal!r}) or 0) + ', needs ' + str({a})}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) {sign} {a}, 2)")
    else:  # adjust: a signed change that may not go below zero
        c(f"if (record.get({bal!r}) or 0) + {a} < 0:")
        c(f"    return {{'error': {bal.replace('_', ' ')!r} + ' of ' + {ent + ' '!r} + str({x.v(pk)}) + ' cannot go below zero (now ' + str(record.get({bal!r}) or 0) + ')'}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) + {a}, 2)")
    for p in x.params:
        if p in (pk, amount) or x.ent(p):
            continue
        f = x.field_for(p) or nm.snake(p)
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{f!r}] = {x.v(p)}")
    x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)


def t_generic(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if x.plan.effect == "read":
        return t_get(x) if pk else t_list(x)
    return t_update(x) if pk else t_create(x)


TEMPLATES = {
    "lookup": t_lookup, "get": t_get, "list": t_list, "create": t_create, "update": t_update,
    "status": t_status, "delete": t_delete, "link": t_link, "unlink": lambda x: t_link(x, unlink=True),
    "amount": t_amount, "generic": t_generic,
}


def offline_tool_code(spec: ToolSpec, plan: ToolPlan, schema: StateSchema,
                      public: dict[str, str] | None = None) -> ToolDraft:
    """Write one tool's source from the template its plan names (``public``: canonical -> documented
    parameter names, for the messages of refused calls)."""
    if plan.kind not in TEMPLATES:
        raise KeyError(f"unknown template kind {plan.kind!r}; valid: {sorted(TEMPLATES)}")
    x = Ctx(spec, plan, schema)
    source, out = TEMPLATES[plan.kind](x)
    checks = argument_checks(x.rules(), x.py, public)
    if checks:  # argument rules first: a refused call never touches the state
        lines = source.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 2
        source = "\n".join(lines[:at] + ["    " + c for c in checks] + lines[at:])
    return ToolDraft(name=spec.name, source=source, kind=plan.kind, collection=x.coll.name,
                     effect=plan.effect, output_schema=out, function_name=func_name(spec.name), arg_map=x.arg_map,
                     rules=x.rules())
