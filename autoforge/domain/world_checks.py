"""World checks: what makes a simulated world impossible, found in plain records.

A world is a state (collections of records keyed by id) read against its :class:`StateSchema`,
and a task adds its gold calls, their arguments and the state before and after each call. The
checks name every :class:`Finding` (kind, path, value, message) of the kinds in
:data:`FINDING_KINDS`:

* ``dangling_reference``: a reference field, or a list of ids, names a record the state lacks;
  ``nested_reference``: an id inside a nested object does (``items[0].product_id``; the key names
  of :func:`autoforge.domain.coherence.nested_refs`, which the sample worlds resolve);
* ``placeholder``: a documentation hint instead of a value (``YYYY-MM-DD``, ``string``, ``<id>``;
  :mod:`autoforge.domain.placeholders` judges each value), or an empty required argument;
* ``empty_container``: ``{}`` or ``[]`` where content is required (a required argument, a nested
  object whose schema lists required keys, an object field whose schema lists its properties);
* ``type_mismatch``: a value that is not its declared JSON type (an integer is an int), a record
  whose id differs from the key it is stored under, or a gold argument outside its parameter's
  type, format, enum, pattern or range; ``format_mismatch``: a state value outside its field's
  documented enum, format, pattern or minimum (a date field holds an ISO date or the format its
  description gives);
* ``write_outside_effect``: a gold write whose state change touches a collection or a field
  that neither the tool's parameters and arguments, its name, its description nor its plan
  (kind and main collection, :class:`autoforge.types.ToolCode`) names.

Every kind is stored; the kinds that ``rejects`` (all but ``format_mismatch``) make
verification reject a task. Functions are pure: the stage code
(environment synthesis, verification) runs the calls and hands the states in. Unbound ids in gold calls are the ``ids_bound`` verification check's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Iterable, Iterator

from autoforge.domain.coherence import nested_refs
from autoforge.domain.ids import id_key, id_value
from autoforge.domain.keys import key_canon, name_tokens, param_schemas, required_params
from autoforge.domain import words as nm
from autoforge.domain.placeholders import find_placeholders
from autoforge.domain.statuses import status_words
from autoforge.domain.tool_kinds import in_tasks
from autoforge.domain.values import fits_format, format_hint
from autoforge.domain.words import singular
from autoforge.patterns import PatternError, found
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, Task, ToolCall, ToolCode, canonical_json

@dataclass(frozen=True)
class FindingKind:
    """One kind of world-check finding. ``rejects``: verification rejects a task holding one (check
    ``world``); the others are stored and shown (``world_checks``, ``v_world_checks``) but keep the
    task, until the sample worlds stop producing them."""

    name: str
    description: str
    rejects: bool = True


FINDING_KINDS: dict[str, FindingKind] = {k.name: k for k in (
    FindingKind("dangling_reference", "a reference field or a list of ids names a record that does not exist"),
    FindingKind("nested_reference", "an id inside a record's nested object or list (an order's items[0].product_id) "
                                    "names a record that does not exist"),
    FindingKind("placeholder", "a documentation hint instead of a value (a format template, a type name, an e.g. "
                               "phrase, a <slot>, xxx, TBD), or an empty required argument"),
    FindingKind("empty_container", "an empty object or list where content is required"),
    FindingKind("type_mismatch", "a value that is not its declared JSON type, a record stored under another id, or a "
                                 "gold argument outside its parameter's type, format, enum, pattern or range"),
    FindingKind("format_mismatch", "a state value outside its field's documented enum, format, pattern or minimum"),
    FindingKind("write_outside_effect", "a write changes a collection or field its parameters, name, description and "
                                        "plan do not name"),
)}


def rejects(kind: str) -> bool:
    """Whether a finding of ``kind`` rejects a task at verification (:data:`FINDING_KINDS`)."""
    return FINDING_KINDS[kind].rejects


@dataclass(frozen=True)
class Finding:
    """One thing wrong with a world: ``kind`` (a name in :data:`FINDING_KINDS`), where it is
    (``orders.O0001.user_id``, ``call 2 (book_flight).date``), the value found there, and why."""

    kind: str
    path: str
    value: Any
    message: str

    def __post_init__(self) -> None:
        if self.kind not in FINDING_KINDS:
            raise ValueError(f"unknown world-check kind {self.kind!r}; valid: {', '.join(FINDING_KINDS)}")

    @property
    def rejects(self) -> bool:
        """Whether a task holding this finding is rejected (its kind's flag in :data:`FINDING_KINDS`)."""
        return FINDING_KINDS[self.kind].rejects

    def short(self) -> str:
        """``kind at path: value`` (a rejection's detail)."""
        return f"{self.kind} at {self.path}: {_clip(self.value)} ({self.message})"


def _clip(value: Any, n: int = 60) -> str:
    s = canonical_json(value) if not isinstance(value, str) else repr(value)
    return s if len(s) <= n else s[:n - 3] + "..."


# --------------------------------------------------------------------------- values vs a declared type

_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
               "object": (dict,)}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_TIME = re.compile(r"\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


def _is_type(value: Any, typ: str) -> bool:
    if typ not in _JSON_TYPES:
        return True
    if isinstance(value, bool):
        return typ == "boolean"
    if typ == "integer" and isinstance(value, float):
        return False
    return isinstance(value, _JSON_TYPES[typ])


def _iso_date(v: str) -> bool:
    try:
        date.fromisoformat(v)
        return len(v) == 10
    except ValueError:
        return False


def _iso_datetime(v: str) -> bool:
    try:
        datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith(("Z", "z")) else v)
        return "T" in v.upper() or " " in v
    except ValueError:
        return False


# JSON Schema formats whose values have one checkable shape
_FORMATS = {"date": (_iso_date, "an ISO date (YYYY-MM-DD)"),
            "date-time": (_iso_datetime, "an ISO date-time"),
            "time": (lambda v: _TIME.fullmatch(v) is not None, "a time (HH:MM[:SS])"),
            "email": (lambda v: _EMAIL.fullmatch(v) is not None, "an email address"),
            "uri": (lambda v: _URI.fullmatch(v) is not None, "a URI"),
            "url": (lambda v: _URI.fullmatch(v) is not None, "a URL")}


def type_error(value: Any, schema: dict[str, Any]) -> str | None:
    """Why ``value`` is not of the JSON type ``schema`` declares (None: it is, or none is declared)."""
    typ = schema.get("type") if isinstance(schema, dict) else None
    types = [t for t in (typ if isinstance(typ, list) else [typ]) if isinstance(t, str) and t != "null"]
    if value is not None and types and not any(_is_type(value, t) for t in types):
        return f"a {type(value).__name__} where the schema declares {'/'.join(types)}"
    return None


# Words of a name that say it holds a date or a time (a description's format template is read as its format)
_TEMPORAL_WORDS = {"date", "time", "datetime", "timestamp", "day", "dob", "birthday", "birthdate", "at", "expiry",
                   "expiration", "deadline", "until", "since", "start", "end", "month", "year", "departure", "arrival"}


def _temporal(name: str, schema: dict[str, Any]) -> bool:
    return schema.get("format") in ("date", "date-time", "time") or _temporal_name(name)


@functools.lru_cache(maxsize=4096)
def _temporal_name(name: str) -> bool:
    """A field or argument name with a word that says it holds a date or a time (names repeat in every record)."""
    return bool(set(name_tokens(name)) & _TEMPORAL_WORDS)


def value_mismatch(value: Any, schema: dict[str, Any], name: str = "", *, depth: int = 0) -> str | None:
    """Why ``value`` (of the field or argument ``name``) is not what ``schema`` (a JSON Schema, or a
    state field's) declares, or None: its type, enum, format, pattern, minimum and maximum; list
    items and object properties are judged too (a few levels deep). A date/time template in the
    description ("in MM/YYYY format") is the format of a value whose name or format is temporal
    (elsewhere it may speak of another case: "use YYYY-MM-DD for date fields"). None values are
    unset, not wrong."""
    if value is None or not isinstance(schema, dict) or depth > 4:
        return None
    why = type_error(value, schema)
    if why:
        return why
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not isinstance(value, (list, dict)) and value not in enum:
        return f"not one of the documented values {_clip(enum, 80)}"
    if isinstance(value, str) and value:
        hint = format_hint(schema.get("description") or "") if _temporal(name, schema) else None
        fmt = schema.get("format")
        if hint and fmt in (None, "date", "date-time", "time"):
            if not fits_format(value, hint):
                return f"not in the documented format {hint}"
        elif fmt in _FORMATS and not _FORMATS[fmt][0](value):
            return f"not {_FORMATS[fmt][1]} (format {fmt})"
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and pattern:
            try:
                if not found(pattern, value):
                    return f"does not match the documented pattern {pattern!r}"
            except PatternError:
                pass  # a pattern this host cannot run is no evidence either way
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)) and value < lo:
            return f"below the documented minimum {lo}"
        if isinstance(hi, (int, float)) and value > hi:
            return f"above the documented maximum {hi}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            why = value_mismatch(v, schema["items"], name, depth=depth + 1)
            if why:
                return f"item {i} {_clip(v)} is {why}"
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for k, sub in schema["properties"].items():
            why = value_mismatch(value.get(k), sub, k, depth=depth + 1) if isinstance(sub, dict) else None
            if why:
                return f"its {k} {_clip(value.get(k))} is {why}"
    return None


def _empty(v: Any) -> bool:
    return isinstance(v, (dict, list)) and not v


def empty_required(value: Any, schema: dict[str, Any], path: str, *, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of each required key of a nested object in ``value`` that is missing or an
    empty container (the schema's ``required`` lists, walked through properties and list items)."""
    if not isinstance(schema, dict) or depth > 4:
        return
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        for k in schema.get("required") or []:
            if isinstance(k, str) and (k not in value or _empty(value[k])):
                yield f"{path}.{k}", value.get(k)
        for k, sub in props.items():
            if k in value:
                yield from empty_required(value[k], sub, f"{path}.{k}", depth=depth + 1)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from empty_required(v, schema["items"], f"{path}[{i}]", depth=depth + 1)


# --------------------------------------------------------------------------- a state

def field_schema(f: FieldSpec) -> dict[str, Any]:
    """A state field as a JSON Schema (what :func:`value_mismatch` reads)."""
    out: dict[str, Any] = {"type": f.type, "description": f.description}
    for k in ("enum", "format", "pattern", "minimum", "items", "properties"):
        v = getattr(f, k)
        if v is not None:
            out[k] = v
    if f.type == "array" and f.enum and "items" not in out:  # an enum on a list field lists the items' values
        out = {**out, "enum": None, "items": {"enum": f.enum}}
    return {k: v for k, v in out.items() if v is not None}


_SCHEMAS: dict[int, tuple[FieldSpec, dict[str, Any]]] = {}  # id(field) -> (the field, its schema): read-only use


def _schema_of(f: FieldSpec) -> dict[str, Any]:
    """:func:`field_schema`, once per field object (the world check reads every field of every record it
    judges, ~200,000 per factory run); the entry holds the field, so its id is not reused while it lives."""
    hit = _SCHEMAS.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    if len(_SCHEMAS) > 20_000:
        _SCHEMAS.clear()
    out = field_schema(f)
    _SCHEMAS[id(f)] = (f, out)
    return out


def _ref_of(f: FieldSpec) -> str | None:
    if f.ref:
        return f.ref
    items = f.items if isinstance(f.items, dict) else {}
    return items.get("ref") if isinstance(items.get("ref"), str) else None


def state_findings(schema: StateSchema, state: dict[str, Any], where: str = "",
                   records: set[tuple[str, str]] | None = None) -> list[Finding]:
    """Every finding of ``state`` read against ``schema``: dangling references, placeholders,
    empty declared objects and type/format mismatches (``where`` prefixes each path); only in
    ``records`` (``(collection, key)`` pairs) when it is given."""
    pre = f"{where} " if where else ""
    out: list[Finding] = []
    for coll in schema.collections:
        table = state.get(coll.name)
        if table is None:
            continue
        if not isinstance(table, dict):
            out.append(Finding("type_mismatch", f"{pre}{coll.name}", table, "a collection must map ids to records"))
            continue
        allowed = [v for f in coll.fields for v in (f.enum or [])]
        nested = nested_refs(schema, coll)
        for key, rec in table.items():
            if records is not None and (coll.name, key) not in records:
                continue
            base = f"{coll.name}.{key}"
            if not isinstance(rec, dict):
                out.append(Finding("type_mismatch", f"{pre}{base}", rec, "a record must be an object"))
                continue
            out.extend(_record_findings(coll, key, rec, state, f"{pre}{base}"))
            for f in coll.fields:
                if isinstance(rec.get(f.name), (dict, list)):
                    out.extend(_nested_findings(rec[f.name], nested, state, f"{pre}{base}.{f.name}"))
            for path, why in find_placeholders(rec, f"{pre}{base}", allowed=allowed):
                out.append(Finding("placeholder", path, _at(rec, path[len(pre) + len(base) + 1:]), why))
    return out


def _record_findings(coll: CollectionSpec, key: str, rec: dict, state: dict, base: str) -> Iterator[Finding]:
    pk = rec.get(coll.primary_key)
    if pk is not None and id_key(pk) != key:
        yield Finding("type_mismatch", f"{base}.{coll.primary_key}", pk,
                      f"the record is stored under {key!r} but its {coll.primary_key} says {pk!r}")
    for f in coll.fields:
        v = rec.get(f.name)
        if v is None:
            continue
        path = f"{base}.{f.name}"
        why = type_error(v, _schema_of(f))
        if why:
            yield Finding("type_mismatch", path, v, why)
        elif why := value_mismatch(v, _schema_of(f), f.name):
            yield Finding("format_mismatch", path, v, why)
        if f.type == "object" and f.properties and v == {}:
            yield Finding("empty_container", path, v, f"an empty object where the schema lists {sorted(f.properties)[:6]}")
        for p, got in empty_required(v, _schema_of(f), path):
            yield Finding("empty_container", p, got, "a required key is missing or empty")
        ref = _ref_of(f)
        if ref and f.name != coll.primary_key:
            target = state.get(ref)
            for x in (v if isinstance(v, list) else [v]):
                if isinstance(x, (str, int)) and not isinstance(x, bool) and x != "" and (
                        not isinstance(target, dict) or id_key(x) not in target):
                    yield Finding("dangling_reference", path, x, f"names {ref} {x!r}, which the state does not hold")


def _nested_findings(value: Any, refs: dict[str, str], state: dict, path: str, depth: int = 0) -> Iterator[Finding]:
    """Dangling references inside a record's nested objects and lists (an order's ``items[0].product_id``)."""
    if depth > 4:
        return
    if isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nested_findings(v, refs, state, f"{path}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            ref = refs.get(k)
            target = state.get(ref) if ref else None
            if ref and isinstance(v, (str, int)) and not isinstance(v, bool) and v != "" and isinstance(target, dict) \
                    and id_key(v) not in target:
                yield Finding("nested_reference", f"{path}.{k}", v, f"names {ref} {v!r}, which the state does not hold")
            elif isinstance(v, (dict, list)):
                yield from _nested_findings(v, refs, state, f"{path}.{k}", depth + 1)


def _at(value: Any, path: str) -> Any:
    """The value at a :func:`find_placeholders` path (``a.b[2].c``) inside ``value``, or None."""
    cur = value
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(cur, list):
            i = int(part[1:-1])
            cur = cur[i] if i < len(cur) else None
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
    return cur


# --------------------------------------------------------------------------- a task's gold calls

def enum_values(schema: Any) -> list:
    """Every value any ``enum`` in a JSON Schema lists (documented choices are values, even "string")."""
    out: list = []
    if isinstance(schema, dict):
        if isinstance(schema.get("enum"), list):
            out.extend(schema["enum"])
        for v in schema.values():
            out.extend(enum_values(v))
    elif isinstance(schema, list):
        for v in schema:
            out.extend(enum_values(v))
    return out


def call_label(i: int, call: ToolCall) -> str:
    return f"call {i + 1} ({call.name})"


def argument_findings(calls: list[ToolCall], tools: dict[str, ToolCode]) -> list[Finding]:
    """Findings of the gold arguments against each tool's parameter schema: empty required
    arguments, placeholders, type/format mismatches."""
    out: list[Finding] = []
    for i, call in enumerate(calls):
        tool = tools.get(call.name)
        if tool is None:
            continue
        label = call_label(i, call)
        props = param_schemas(tool)
        for p in required_params(tool):
            v = call.arguments.get(p)
            if v == "":
                out.append(Finding("placeholder", f"{label}.{p}", v, "empty for a required argument"))
            elif _empty(v):
                out.append(Finding("empty_container", f"{label}.{p}", v, "empty for a required argument"))
        for p, v in call.arguments.items():
            sub = props.get(p) or {}
            why = value_mismatch(v, sub, p)
            if why:
                out.append(Finding("type_mismatch", f"{label}.{p}", v, why))
            for path, got in empty_required(v, sub, f"{label}.{p}"):
                out.append(Finding("empty_container", path, got, "a required key is missing or empty"))
        for path, why in find_placeholders(call.arguments, allowed=enum_values(tool.parameters)):
            out.append(Finding("placeholder", f"{label}.{path}", _at(call.arguments, path), why))
    return out


# --------------------------------------------------------------------------- what a write changes

# Fields a write keeps up on its own: when it changed (``updated_at``), and the record's lifecycle stamp
_STAMP_WORDS = {"at", "updated", "modified", "timestamp", "time", "date", "last", "version", "revision"}
_GENERIC_WORDS = {"id", "ids", "new", "the", "a", "of", "to", "for", "by", "is", "data", "info", "value", "name"}
_STATUS_WORDS = {"status", "state"}


def changed_cells(before: dict, after: dict) -> Iterator[tuple[str, str, str | None, Any]]:
    """``(collection, key, field, new value)`` of each change from ``before`` to ``after``; ``field``
    None for a record added or removed (its value then the record, or None when removed). Values
    are compared as Python compares them (fast on whole tables; ``1`` and ``1.0`` are one value)."""
    for coll in sorted(set(before) | set(after)):
        a, b = before.get(coll), after.get(coll)
        if a == b:
            continue
        if not isinstance(a, dict) or not isinstance(b, dict):
            yield coll, "", None, b
            continue
        for key in sorted(set(a) | set(b)):
            ra, rb = a.get(key), b.get(key)
            if ra == rb:
                continue
            if not isinstance(ra, dict) or not isinstance(rb, dict):
                yield coll, key, None, rb
                continue
            for f in sorted(set(ra) | set(rb)):
                if ra.get(f) != rb.get(f):
                    yield coll, key, f, rb.get(f)


def _words_of(text: str) -> set[str]:
    return {singular(w) for w in name_tokens(text)}


def _arg_names(value: Any, depth: int = 0) -> Iterator[str]:
    if isinstance(value, dict) and depth < 4:
        for k, v in value.items():
            yield k
            yield from _arg_names(v, depth + 1)
    elif isinstance(value, list) and depth < 4:
        for v in value:
            yield from _arg_names(v, depth + 1)


def _id_values(value: Any, depth: int = 0) -> set[str]:
    """Every string or integer inside a call's arguments, as state keys (the records it names)."""
    if isinstance(value, dict) and depth < 4:
        return {k for v in value.values() for k in _id_values(v, depth + 1)}
    if isinstance(value, list) and depth < 4:
        return {k for v in value for k in _id_values(v, depth + 1)}
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return {id_key(value)}
    return set()


@dataclass
class _Effect:
    """What a write's docs name: collections and words (parameters, arguments, name, description)."""

    collections: set[str]
    words: set[str]
    names: set[str]  # canonical spellings of parameter and argument names
    kind: str
    moves_status: bool  # a status tool, a status verb (cancel, approve) or a description that speaks of statuses


def stated_effect(tool: ToolCode, call: ToolCall, schema: StateSchema, description: str = "") -> _Effect:
    """What the docs of ``tool`` say a call of it may change: its main collection (the plan's), the
    collections its parameters identify or its name and description name, those linked to them by
    a reference (the other side of a link is kept up), and the words of its parameters, the call's
    argument names, its name and its description."""
    params = list(param_schemas(tool)) + list(_arg_names(call.arguments))
    names = {key_canon(p) for p in params}
    words = {w for p in params for w in _words_of(p)} | _words_of(tool.name) | _words_of(description)
    words -= _GENERIC_WORDS
    colls: set[str] = {tool.collection} if tool.collection else set()
    for c in schema.collections:
        if key_canon(c.primary_key) in names or {singular(c.entity), singular(c.name)} & words:
            colls.add(c.name)
    linked = set()
    for c in schema.collections:
        for f in c.fields:
            ref = _ref_of(f)
            if ref in colls:
                linked.add(c.name)
            if c.name in colls and ref:
                linked.add(ref)
    moves_status = (tool.kind == "status" or bool(set(name_tokens(tool.name)) & set(nm.STATUS_VERBS))
                    or bool(_STATUS_WORDS & words) or bool(status_words(description)))
    return _Effect(colls | linked, words, names, tool.kind, moves_status)


def _field_stated(coll: CollectionSpec | None, fname: str, eff: _Effect, other_ok: bool) -> bool:
    """Whether the docs name a change of field ``fname`` (``other_ok``: another field of the record
    is named, so a number derived from it, such as a total, may follow)."""
    toks = [t for t in name_tokens(fname)]
    ws = {singular(t) for t in toks}
    if key_canon(fname) in eff.names or (ws - _GENERIC_WORDS) & eff.words:
        return True
    if ws & _STAMP_WORDS or fname.endswith(("_at", "At")):
        return True
    if ws & _STATUS_WORDS:
        return eff.moves_status
    spec = next((f for f in (coll.fields if coll else []) if f.name == fname), None)
    if spec is not None and _ref_of(spec):
        return True  # a reference kept up by a link, create or delete
    if toks and toks[-1] in ("id", "ids"):
        return True
    if eff.kind == "amount" and spec is not None and spec.type in ("number", "integer"):
        return True
    return other_ok and spec is not None and spec.type in ("number", "integer")


def write_findings(calls: list[ToolCall], tools: dict[str, ToolCode], steps: list[tuple[dict, dict]],
                   schema: StateSchema, descriptions: dict[str, str] | None = None) -> list[Finding]:
    """Findings of the gold writes: each change a write makes (``steps[i]``: the state before and
    after call ``i``) to a collection or field its stated effect (:func:`stated_effect`) does not
    name."""
    out: list[Finding] = []
    by_name = {c.name: c for c in schema.collections}
    for i, (call, (before, after)) in enumerate(zip(calls, steps)):
        tool = tools.get(call.name)
        if tool is None or tool.effect != "write" or not in_tasks(tool.kind):
            continue
        eff = stated_effect(tool, call, schema, (descriptions or {}).get(call.name, ""))
        cells = list(changed_cells(before, after))
        named = {(c, k) for c, k, f, _ in cells if f is not None and c in eff.collections
                 and _field_stated(by_name.get(c), f, eff, False)}
        # a record the call names by its id: its numbers may follow (an order's items take from a product's stock)
        named |= {(c, k) for c, k, f, _ in cells if k in _id_values(call.arguments)}
        for coll, key, fname, value in cells:
            label = call_label(i, call)
            if coll not in eff.collections:
                out.append(Finding("write_outside_effect", f"{label}: {coll}.{key}" + (f".{fname}" if fname else ""), value,
                                   f"changes {coll}, which {call.name}'s parameters, name, description and plan do not name"))
            elif fname is not None and not _field_stated(by_name.get(coll), fname, eff, (coll, key) in named):
                out.append(Finding("write_outside_effect", f"{label}: {coll}.{key}.{fname}", value,
                                   f"changes {fname}, which {call.name}'s parameters, name, description and plan do not name"))
    return out


def used_records(state: dict[str, Any], calls: list[ToolCall], steps: list[tuple[dict, dict]],
                 outputs: list[Any]) -> set[tuple[str, str]]:
    """The ``(collection, key)`` records of ``state`` a gold run uses: those a call changes, and
    those whose id a call's arguments or outputs hold (what the agent is shown or acts on)."""
    ids = {k for c in calls for k in _id_values(c.arguments)} | {k for o in outputs for k in _id_values(o)}
    out = {(c, k) for before, after in steps for c, k, _f, _v in changed_cells(before, after)}
    for coll, table in state.items():
        if isinstance(table, dict):
            out |= {(coll, k) for k in table if k in ids}
    return out


def task_findings(schema: StateSchema, task: Task, tools: dict[str, ToolCode], steps: list[tuple[dict, dict]] | None = None,
                  descriptions: dict[str, str] | None = None, outputs: list[Any] | None = None) -> list[Finding]:
    """Every finding of ``task``: its initial state (:func:`state_findings`), its gold arguments
    (:func:`argument_findings`) and, given the states around each gold call, its writes
    (:func:`write_findings`). Given the calls' ``outputs`` too, the initial state is judged on
    the records the gold run uses (:func:`used_records`); the rest of it is the environment's
    sample world, whose findings synthesis stores."""
    scope = used_records(task.initial_state, task.gold_calls, steps, outputs) if steps is not None and outputs is not None \
        else None
    out = state_findings(schema, task.initial_state, "initial state", scope)
    out.extend(argument_findings(task.gold_calls, tools))
    if steps is not None:
        out.extend(write_findings(task.gold_calls, tools, steps, schema, descriptions))
    return out


def rejecting(findings: Iterable[Finding]) -> list[Finding]:
    """The findings whose kind rejects a task (:func:`rejects`)."""
    return [f for f in findings if rejects(f.kind)]


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """Findings per kind (every kind, zeros included, in registry order)."""
    out = dict.fromkeys(FINDING_KINDS, 0)
    for f in findings:
        out[f.kind] += 1
    return out
