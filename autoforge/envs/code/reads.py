"""Templates of the read tools: lookup by fields, get by id (with linked records), list with filters."""

from __future__ import annotations

from autoforge.domain import words as nm
from autoforge.domain.coherence import schema_links
from autoforge.domain.fields import list_filter_field
from autoforge.domain.ids import is_integer_ids
from autoforge.envs.code.base import Code, record_schema
from autoforge.envs.code.context import Ctx
from autoforge.tooldocs.schema import json_type
from autoforge.types import CollectionSpec


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
    that point at one of ``x.coll``'s (a user's orders, an article's comments). A listing the record
    holds (``users.order_ids``, the inverse of ``orders.user_id``) is read from the children as well,
    so a read shows the link as it is after any write."""
    links: dict[str, tuple[CollectionSpec, str]] = {}
    by_name = {cc.name: cc for cc in x.schema.collections}
    for link in schema_links(x.schema):  # a listing the record holds is read from its children too
        if link.parent == x.coll.name and link.listing:
            links[link.listing] = (by_name[link.child], link.back)
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
