"""Fields: what one collection's records hold, and how list parameters and amounts map onto them.

:class:`CollectionDraft` gathers an entity's fields while the docs are read (types, enums,
formats, patterns, the status words its descriptions mention); :func:`list_filter_field` reads
how a list parameter filters (``min_price`` -> price, min); :func:`amount_target` finds the
numeric field an amount tool moves.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.ids import documented_id_style, id_param_entity
from autoforge.domain.tools import ToolPlan
from autoforge.tooldocs.schema import documented_pattern, json_type, unwrap
from autoforge.types import FieldSpec

LOWER_KEYS = re.compile(r"snake[_ ]case|lower[- ]?case|(?:cannot|can ?not|must not|no) (?:contain )?(?:any )?spaces", re.I)


@dataclass
class CollectionDraft:
    """One entity's fields as the docs are read, before its :class:`~autoforge.types.CollectionSpec` is built."""

    entity: str
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    status_words: list[str] = field(default_factory=list)  # status words the descriptions mention
    status_targets: list[list[str]] = field(default_factory=list)  # per status tool: candidate target statuses
    seen_types: dict[str, Counter] = field(default_factory=dict)  # field -> JSON types the docs gave it (id typing)
    lower_ids: bool = False  # the docs want its keys snake_case / lower case ("Keys must be snake_case")
    session: bool = False  # the caller's own record: only argument-less reads name it (CollectionSpec.session)

    def add(self, name: str, schema: dict | None = None, *, ref: str | None = None, note: bool = True) -> None:
        name = nm.snake(name) if not nm.is_identifier(name) else name
        if not name:
            return
        schema = schema or {}
        typ = json_type(schema)
        if note and schema:
            item = unwrap(schema.get("items")) if typ == "array" and isinstance(schema.get("items"), dict) else None
            self.seen_types.setdefault(name, Counter())[json_type(item) if item else typ] += 1
        enum = schema.get("enum")
        fmt = schema.get("format") or _format_from_name(name)
        if not fmt and typ == "string" and name.endswith("_id") and documented_id_style(schema) == "uuid":
            fmt = "uuid"  # "The order's UUID, e.g. 3f2b...": the collection's ids are UUIDs (ids.id_style)
        items = schema.get("items") if typ == "array" else None
        obj_props = schema.get("properties") if typ == "object" and isinstance(schema.get("properties"), dict) else None
        desc = (schema.get("description") or "")[:200]
        if name == f"{self.entity}_id" and LOWER_KEYS.search(schema.get("description") or ""):
            self.lower_ids = True
        pattern = schema.get("pattern") if documented_pattern(schema.get("pattern")) else None  # unusable: none
        minimum = schema.get("minimum") if isinstance(schema.get("minimum"), (int, float)) else None
        cur = self.fields.get(name)
        if cur is None:
            self.fields[name] = FieldSpec(name=name, type=typ, ref=ref, enum=list(enum) if enum else None,
                                          description=desc, format=fmt, items=items, pattern=pattern, minimum=minimum,
                                          properties=obj_props)
            return
        upd: dict[str, Any] = {}
        if obj_props and not cur.properties:
            upd["properties"] = obj_props
        if pattern and not cur.pattern:
            upd["pattern"] = pattern
        if minimum is not None and cur.minimum is None:
            upd["minimum"] = minimum
        if cur.type == "integer" and typ == "number":
            upd["type"] = "number"
        if cur.type == "string" and typ in ("array", "object") and not cur.enum:
            upd["type"] = typ
        if enum:
            merged = list(cur.enum or [])
            merged += [e for e in enum if e not in merged]
            upd["enum"] = merged
        if ref and not cur.ref:
            upd["ref"] = ref
        if items and not cur.items:
            upd["items"] = items
        if desc and not cur.description:
            upd["description"] = desc
        if fmt and not cur.format:
            upd["format"] = fmt
        if upd:
            self.fields[name] = cur.model_copy(update=upd)


def _format_from_name(name: str) -> str | None:
    n = name.lower()
    if n.endswith("_at") or n.endswith("timestamp") or n.endswith("datetime") or n.endswith("_time") and "date" in n:
        return "date-time"
    if n == "date" or n.endswith("_date") or n.startswith("date_") or n in ("birthday", "dob", "due", "deadline", "check_in", "check_out"):
        return "date"
    if n == "email" or n.endswith("_email"):
        return "email"
    return None


def suffix_field(name: str, fields: Any) -> str | None:
    """The one field named ``<something>_<name>`` (``instructions`` -> ``delivery_instructions``), if exactly one."""
    found = [f for f in fields if f.endswith(f"_{name}") and not f.endswith("_id") and not f.endswith("_ids")]
    return found[0] if len(found) == 1 and len(name) > 3 else None


def list_filter_field(param: str, fields: dict[str, Any]) -> tuple[str, str] | None:
    """How a list parameter filters: (field, op) with op eq | in | min | max | contains | text; None for paging.

    ``status`` -> (status, eq); ``min_price`` / ``price_min`` / ``price_from`` -> (price, min);
    ``name_contains`` -> (name, contains); ``query`` -> ("*", text); ``limit`` -> None.
    """
    p = nm.snake(param)
    if p in nm.PAGING_PARAMS or p in nm.SORT_PARAMS:
        return None
    if p in nm.QUERY_PARAMS:
        return ("*", "text")
    if p in fields:
        return (p, "eq")
    for pre, op in (("min_", "min"), ("max_", "max"), ("from_", "min"), ("to_", "max"), ("start_", "min"),
                    ("end_", "max"), ("earliest_", "min"), ("latest_", "max"), ("after_", "min"), ("before_", "max")):
        if p.startswith(pre) and len(p) > len(pre):
            return (_date_base(p[len(pre):], fields), op)
    for suf, op in (("_min", "min"), ("_max", "max"), ("_from", "min"), ("_to", "max"), ("_after", "min"),
                    ("_before", "max"), ("_gte", "min"), ("_lte", "max"), ("_start", "min"), ("_end", "max"),
                    ("_since", "min"), ("_until", "max"), ("_above", "min"), ("_below", "max"), ("_over", "min"), ("_under", "max")):
        if p.endswith(suf) and len(p) > len(suf):
            return (_date_base(p[: -len(suf)], fields), op)
    for suf in ("_contains", "_like", "_query", "_search", "_substring", "_prefix", "_keyword"):
        if p.endswith(suf):
            return (p[: -len(suf)], "contains")
    if p in ("after", "since"):
        return (_date_base("date", fields), "min")
    if p in ("before", "until"):
        return (_date_base("date", fields), "max")
    if p.endswith("_ids") and id_param_entity(p):
        return (f"{id_param_entity(p)}_id", "in")
    if p.endswith("s") and nm.singular(p) in fields and nm.singular(p) != p:
        return (nm.singular(p), "in")
    return (p, "eq")


def _date_base(base: str, fields: dict[str, Any]) -> str:
    """``start_date`` -> an existing date field when ``date`` itself is not a field."""
    if base in fields:
        return base
    if base in ("date", "time", "datetime"):
        for f in fields:
            if f.endswith("date") or f.endswith("_at") or f.endswith("_time"):
                return f
    return base


def amount_target(plan: ToolPlan, entities: list[str], fields_of: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The record and numeric field an amount tool moves: the field the name mentions, on
    whichever given record has it (``redeem_loyalty_points(guest_id, booking_id, points)`` ->
    guests.loyalty_points), else the plan's entity and its balance-like field."""
    hint = plan.field_hint or ""
    names = {hint, nm.plural(hint), f"{hint}s"} - {""}
    for e in dict.fromkeys(entities):
        for f in fields_of.get(e, {}):
            if f in names:
                return e, f
    return plan.entity, balance_field(fields_of.get(plan.entity, {}), plan)


def balance_field(fields: dict[str, Any], plan: ToolPlan) -> str:
    """The numeric field an amount tool moves: balance, credit, points, stock ..."""
    if plan.field_hint and plan.field_hint in fields:
        return plan.field_hint
    for cand in ("balance", "available_balance", "credit", "credits", "points", "loyalty_points", "stock",
                 "quantity", "inventory", "stock_quantity", "quantity_available", "amount_paid", "funds", "budget"):
        if cand in fields:
            return cand
    for f, spec in fields.items():
        t = spec.type if isinstance(spec, FieldSpec) else None
        if t in ("number", "integer") and any(w in f for w in ("balance", "stock", "points", "credit", "quantity")):
            return f
    if plan.verb in ("adjust", "increment", "decrement", "restock"):
        return "quantity"
    return "balance"
