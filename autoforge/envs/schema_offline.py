"""Offline state-structure inference: a tool set's docs -> :class:`StateSchema`.

Paper (arXiv 2512.22857, Sec. 3.1, "environment synthesis"): an LLM reads the tool docs and
writes the state S as a database of named collections. The offline backend reads the same
docs with rules:

* entities come from id parameters (``order_id`` -> ``orders``, ``from_account_id`` ->
  ``accounts``), from tool names (``get_order``, ``list_orders``, ``find_user_id_by_email``)
  and from output schemas (object properties are fields; arrays of objects are list fields
  whose items, when they carry their own ``<x>_id``, also describe entity ``x``);
* every collection is keyed by ``<entity>_id`` with ids ``<PREFIX>0001``;
* a field named ``<other>_id`` (or an array ``<other>_ids``) is a reference to ``others``;
* enums (statuses) come from schemas, from status verbs (``cancel_*`` adds ``cancelled``)
  and from status words in descriptions.

:func:`analyze_tool` is the per-tool reading (verb, entity, kind) shared with the code
templates in :mod:`autoforge.envs.templates`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain import words as nm
from autoforge.tooldocs.schema import documented_pattern, json_type, props, unwrap
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, ToolSet, ToolSpec

READ_KINDS = {"lookup", "get", "list"}
WRITE_KINDS = {"create", "update", "delete", "status", "link", "unlink", "amount"}
# Prefixes of id parameters that name a role, not an entity: from_account_id -> account.
ROLE_PREFIXES = ("from_", "to_", "source_", "src_", "destination_", "dest_", "target_", "origin_", "new_",
                 "old_", "primary_", "secondary_", "parent_", "sender_", "receiver_", "recipient_", "current_")
# Id fields naming a person's role; they point at the people collection when there is one.
ROLE_PEOPLE = {"owner", "assignee", "author", "creator", "requester", "reporter", "manager", "approver",
               "reviewer", "sender", "recipient", "host", "organizer", "instructor", "holder", "agent"}
PEOPLE = ("user", "customer", "employee", "member", "person", "staff", "patient", "student", "client", "agent")
AMOUNT_PARAMS = ("amount", "quantity", "qty", "delta", "points", "value", "sum", "credits", "units", "change", "adjustment", "count")
UNIQUE_FIELDS = {"email", "username", "user_name", "phone", "phone_number", "code", "sku", "slug", "handle",
                 "login", "isbn", "serial_number", "confirmation_code", "reference", "tracking_number", "license_plate",
                 "account_number", "iban", "order_number", "ticket_number", "employee_number", "badge_id", "name", "title"}
STATUS_WORDS = set(nm.TERMINAL_STATUSES) | set(nm.INITIAL_STATUSES) | {
    s for targets in nm.STATUS_VERBS.values() for s in targets} | {
    "processing", "shipped", "in_progress", "paid", "overdue", "in_transit", "on_hold", "inactive", "suspended",
    "approved", "checked_in", "checked_out", "waitlisted", "escalated", "unpaid", "partially_paid", "out_of_stock"}


# --------------------------------------------------------------------------- per-tool reading


LOWER_KEYS = re.compile(r"snake[_ ]case|lower[- ]?case|(?:cannot|can ?not|must not|no) (?:contain )?(?:any )?spaces", re.I)
# Words of tool names about the login session rather than a record (``ticket_login``,
# ``trading_get_login_status``, ``authenticate_twitter``).
SESSION_WORDS = {"login", "logout", "logon", "logoff", "signin", "signout", "authenticate", "authentication", "auth"}


@dataclass
class ToolPlan:
    """How the offline backend reads one tool: its verb, main entity and template kind."""

    name: str
    verb: str
    entity: str  # singular, e.g. "order"
    kind: str  # lookup | get | list | create | update | delete | status | link | unlink | amount | generic
    effect: str  # read | write
    by_fields: list[str] = field(default_factory=list)  # lookup: the fields searched by
    returns_id: bool = False  # lookup: return only the id
    other: str | None = None  # link/unlink/amount: the second entity (assign_ticket_to_agent -> agent)
    count_only: bool = False  # list: count_* returns only a number
    target_status: list[str] = field(default_factory=list)  # status: candidate status words
    field_hint: str | None = None  # a field the name mentions (update_order_address -> address)


def id_param_entity(param: str, aliases: dict[str, str] | None = None) -> str | None:
    """``order_id`` -> order; ``from_account_id`` -> account; ``tag_ids`` -> tag; ``id`` -> None.

    ``aliases`` maps role entities to the entity they are (``manager`` -> ``employee`` when both
    ids follow the documented pattern ``^E\\d{4}$``)."""
    p = nm.snake(param)
    if p.endswith("_ids"):
        base = p[:-4]
    elif p.endswith("_id"):
        base = p[:-3]
    else:
        return None
    for pre in ROLE_PREFIXES:
        if base.startswith(pre) and len(base) > len(pre):
            base = base[len(pre):]
            break
    if not base:
        return None
    ent = nm.singular(base)
    return (aliases or {}).get(ent, ent)


def _segments(rest: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Words before the first preposition (the head) and the words after each preposition."""
    head: list[str] = []
    segs: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for w in rest:
        if w in nm.PREPOSITIONS and (head or cur is not None):
            cur = segs.setdefault(w, [])
            continue
        (head if cur is None else cur).append(w)
    return head, segs


def _amount_param(params: dict) -> str | None:
    for p in params:
        if nm.snake(p) in AMOUNT_PARAMS or nm.snake(p).endswith("_amount"):
            return p
    return None


def output_keys(schema: dict | None, aliases: dict[str, str] | None = None) -> list[str]:
    """Entities whose id the top level of an output schema carries, in the documented order."""
    out = []
    for k in props(unwrap(schema)):
        e = id_param_entity(k, aliases) if nm.snake(k).endswith("_id") else None
        if e and e not in out:
            out.append(e)
    return out


def _head_entity(head: list[str], known: set[str], id_entities: set[str]) -> str | None:
    """The entity the name's head words denote: ``user_orders`` -> order (the last known noun),
    ``order_address`` -> order (a known prefix; the rest names a field), else all words joined."""
    if not head:
        return None
    joined = nm.singular("_".join(head))
    if joined in known:
        return joined
    for i in range(1, len(head)):
        cand = nm.singular("_".join(head[i:]))
        if cand in known:
            return cand
    for j in range(len(head) - 1, 0, -1):
        cand = nm.singular("_".join(head[:j]))
        if cand in known:
            return cand
    if len(id_entities) == 1 and joined not in known:
        (only,) = id_entities
        if only in head or nm.plural(only) in head:
            return only
    return joined


def analyze_tool(spec: ToolSpec, known: set[str], aliases: dict[str, str] | None = None) -> ToolPlan:
    """Read one tool's name, parameters and effect into a :class:`ToolPlan`."""
    aliases = aliases or {}
    verb, rest = nm.verb_of(spec.name)
    head, segs = _segments(rest)
    params = props(spec.parameters)
    id_ents = {p: id_param_entity(p, aliases) for p in params if id_param_entity(p, aliases)}
    head_has_id = bool(head) and head[-1] in {"id", "ids"}
    while head and head[-1] in nm.NAME_SUFFIXES:
        head = head[:-1]
    plural_head = bool(head) and nm.is_plural(head[-1]) and not head_has_id
    ws0 = nm.words(spec.name)[:1]
    resource_first = bool(ws0) and not verb.startswith(ws0[0])  # ``owners.get``: the resource is named in plural
    entity = _head_entity(head, known, set(id_ents.values()))
    entity = aliases.get(entity, entity) if entity else entity
    if SESSION_WORDS & set(nm.words(spec.name)) and not id_ents.keys() - {"user_id"}:
        entity = "session"  # ticket_login / trading_logout / get_login_status: one login session
    if entity is None:
        entity = next(iter(id_ents.values()), None) or "record"
    # the record's own key: `order_id` (not a role id such as manager_id -> employee)
    pk_given = any(e == entity and nm.snake(p) == f"{e}_id" for p, e in id_ents.items()) or "id" in params
    field_hint = None
    # delete_message(receiver_id), "Delete the latest message sent to a receiver": a record of the
    # entity the name says, chosen by the record it points at (not the receiver)
    by_parent = (verb in nm.DELETE_VERBS and spec.effect != "read" and entity in known and not pk_given
                 and bool(id_ents) and entity not in id_ents.values())
    # Evidence from the output: the record a tool returns is keyed by its first `<x>_id` field.
    out_keys = output_keys(spec.output_schema, aliases)
    single = [e for p, e in id_ents.items() if not nm.snake(p).endswith("_ids")]
    creates = verb in nm.CREATE_VERBS or verb in nm.VERB_NOUNS or verb in {"checkout", "checkin", "hire", "add"}
    by_output = False
    if out_keys and out_keys[0] != entity and not segs.get("to") and not segs.get("from") and not by_parent:
        first = out_keys[0]
        if spec.effect != "read" and creates and first not in single and verb not in nm.READ_VERBS:
            entity, pk_given = first, False  # checkout_book(member_id, book_id) -> {loan_id, ...}: creates a loan
        elif first in single and (entity not in known or verb not in nm.CREATE_VERBS) and (not pk_given or spec.effect != "read"):
            # apply_promo_code(order_id) / change_line_plan(line_id, plan_id) return the record that changed
            field_hint, entity, pk_given, by_output = entity, first, True, True
    elif out_keys and out_keys[0] == entity and pk_given and spec.effect != "read":
        by_output = True  # rate_order(order_id) returns the order: it changes the order
    changes_one = verb in nm.STATUS_VERBS or verb in nm.UPDATE_VERBS or verb in nm.DELETE_VERBS or verb in {"refund", "pay"}
    if not pk_given and changes_one and spec.effect != "read" and id_ents and not segs.get("to") and not creates \
            and not by_parent:
        # check_in_patient(appointment_id): the record that changes is the one whose id is given;
        # prefer the id the output schema is keyed by
        out_props = props(unwrap(spec.output_schema))
        single = [e for p, e in id_ents.items() if not p.endswith("_ids")]
        keyed = [e for e in single if f"{e}_id" in out_props]
        if keyed or single:
            field_hint, entity = entity, (keyed or single)[0]
            pk_given = True
    other = None
    for prep in ("to", "from", "into", "onto", "for", "with", "in", "on"):
        if segs.get(prep):
            cand = nm.singular("_".join(w for w in segs[prep] if w not in nm.NAME_SUFFIXES) or segs[prep][0])
            cand = aliases.get(cand, cand)
            if cand in known and cand != entity:
                other = cand
                break
    if other is None:
        others = [e for e in id_ents.values() if e != entity]
        other = others[0] if others else None
    plan = ToolPlan(name=spec.name, verb=verb, entity=entity, kind="generic", effect="write", field_hint=field_hint)
    amount = _amount_param(params)
    status_targets = nm.STATUS_VERBS.get(verb, [])
    if verb == "refund":
        status_targets = ["refunded", "returned", "cancelled"]
    if verb == "pay":
        status_targets = ["paid", "completed", "settled"]

    read_like = verb in nm.READ_VERBS and verb not in {"verify"} or spec.effect == "read"
    if spec.effect != "read" and verb in nm.AMOUNT_VERBS and amount:
        plan.kind = "amount"
    elif spec.effect != "read" and verb in nm.UNLINK_VERBS or (verb in nm.DELETE_VERBS and other and ("from" in segs)):
        plan.kind, plan.other = "unlink", other
    elif spec.effect != "read" and (verb in nm.LINK_VERBS or (verb in nm.CREATE_VERBS | {"append"} and "to" in segs and other)):
        plan.kind, plan.other = "link", other
    elif spec.effect != "read" and verb in nm.DELETE_VERBS and (pk_given or by_parent):
        plan.kind = "delete"
    elif spec.effect != "read" and status_targets and pk_given and verb not in nm.UPDATE_VERBS:
        plan.kind, plan.target_status = "status", list(status_targets)
    elif spec.effect != "read" and verb in nm.UPDATE_VERBS and pk_given:
        plan.kind = "update"
    elif spec.effect != "read" and verb in nm.CREATE_VERBS:
        if not pk_given or (not by_output and _client_id(spec, entity)):
            plan.kind = "create"  # add_pet(id?, name, ...): a create whose body may carry the new record's id
        elif by_output:
            plan.kind = "update"
        elif verb in nm.VERB_NOUNS:
            plan.kind, plan.other, plan.entity = "create", entity, nm.VERB_NOUNS[verb]
        else:
            plan.kind = "update"
    elif read_like:
        plan.effect = "read"
        by = segs.get("by") or []
        by_fields = [w for w in "_".join(by).split("_and_")] if by else []
        by_fields = [f for f in by_fields if f and f in {nm.snake(p) for p in params}] or (
            ["_".join(by)] if by and "_".join(by) in {nm.snake(p) for p in params} else [])
        required = [p for p in (spec.parameters or {}).get("required", [])]
        if by_fields and not pk_given:
            plan.kind, plan.by_fields, plan.returns_id = "lookup", by_fields, head_has_id
        elif verb in nm.LOOKUP_VERBS and head_has_id and not pk_given and params:
            plan.kind, plan.by_fields, plan.returns_id = "lookup", [p for p in params if p in required] or list(params)[:1], True
        elif verb == "count" or verb in nm.LIST_VERBS or (plural_head and not (resource_first and pk_given)):
            plan.kind, plan.count_only = "list", verb == "count"
        elif pk_given:
            plan.kind = "get"
        elif params and required and all(nm.snake(p) in UNIQUE_FIELDS for p in required):
            plan.kind, plan.by_fields = "lookup", list(required)
        else:
            plan.kind = "list"
    else:
        plan.kind = "generic"
        plan.effect = "read" if spec.effect == "read" else "write"
    if plan.kind in ("amount", "update", "status", "delete", "generic") and entity not in known and id_ents:
        plan.field_hint = entity  # transfer_credit -> moves users' credit/balance
        plan.entity = next(iter(id_ents.values()))
        if plan.other == plan.entity:
            plan.other = None
    if plan.kind in READ_KINDS:
        plan.effect = "read"
    return plan


# "Create a new directory in the current directory." (mkdir, touch): a sentence saying the tool makes
# the record it names
NEW_RECORD = re.compile(r"(?:^|[.:;]\s+)(?:create|add|make|register)s? (?:a |an )?(?:new|empty)\b", re.I)


SELECTOR_PARAMS = {"method", "action", "operation", "op", "mode", "command"}


def is_selector(name: str, schema: dict | None) -> bool:
    """A parameter that picks what the tool does, not a value it stores (``issue_write(method='create'|'update')``,
    ``issue_read(method='get_comments')``): not a field of the record."""
    s = schema or {}
    desc = s.get("description") if isinstance(s.get("description"), str) else ""
    return nm.snake(name) in SELECTOR_PARAMS and (bool(s.get("enum")) or bool(re.search(r"\boptions?\b|\bone of\b|^- ", desc, re.I | re.M)))


def _client_id(spec: ToolSpec, entity: str) -> str | None:
    """The optional parameter of a create that carries the new record's own id (``id`` or
    ``<entity>_id`` in a request body such as petstore's ``addPet``), if any."""
    params = props(spec.parameters)
    required = set((spec.parameters or {}).get("required") or [])
    for p in params:
        if nm.snake(p) in ("id", f"{entity}_id") and p not in required:
            return p
    own = [p for p in params if nm.snake(p) == f"{entity}_id"]
    others = [p for p in params if nm.snake(p).endswith("_id") and p not in own]
    if own and not others and (nm.verb_of(spec.name)[0] in {"add", "create", "insert", "new", "register", "store", "save"}
                               or NEW_RECORD.search(spec.description or "")):
        return own[0]  # ``core_memory_add(key, value)`` / ``mkdir(dir_name)``: the caller names the new record
    return None


# --------------------------------------------------------------------------- schema building


@dataclass
class _Coll:
    entity: str
    fields: dict[str, FieldSpec] = field(default_factory=dict)
    status_words: list[str] = field(default_factory=list)  # status words the descriptions mention
    status_targets: list[list[str]] = field(default_factory=list)  # per status tool: candidate target statuses
    seen_types: dict[str, Counter] = field(default_factory=dict)  # field -> JSON types the docs gave it (id typing)
    lower_ids: bool = False  # the docs want its keys snake_case / lower case ("Keys must be snake_case")

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


# AC0001, PET-0001, 1Z0000001. The prefix is spelled "digits, a letter, letters or digits" rather than
# [A-Z0-9]*[A-Z][A-Z0-9]* (the same strings, and the same matches): that form backtracks quadratically
# on a long run of letters, and these expressions read document text.
ID_PATTERN = re.compile(r"^\^?([0-9]*[A-Z][A-Z0-9]*[-_]?)\\d\{(\d+)\}\$?$")
MAX_ID_WIDTH = 20  # digits of a documented id shape; \d{999999999} is not an id (its ids would fill memory)
MAX_ID_PATTERN_CHARS = 80  # an id shape is short; a longer pattern is read as no id shape


def id_pattern(schema: dict | None, examples: bool = False) -> tuple[str, int] | None:
    """``{"pattern": "^AC\\d{4}$"}`` -> ("AC", 4): the prefix and width of documented ids.

    ``examples``: without a pattern, an example the schema gives (``"The invoice id, such as 'INV-00042'"``,
    or ``example: "INV-00042"``) documents the same: ("INV-", 5)."""
    s = (unwrap(schema) or {}) if isinstance(schema, dict) else {}
    pat = s.get("pattern")
    shape = id_shape(pat)
    if shape:
        return shape
    if examples and pat is None and json_type(s) == "string":
        return example_id_pattern(s)
    return None


def id_shape(pattern: Any) -> tuple[str, int] | None:
    """``"^AC\\d{4}$"`` -> ("AC", 4); None for anything else, for a pattern that cannot be used
    (:func:`~autoforge.tooldocs.schema.documented_pattern`), and for a width over :data:`MAX_ID_WIDTH`
    (the pattern is then ignored as an id shape)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_ID_PATTERN_CHARS:
        return None
    m = ID_PATTERN.match(pattern)
    if not m or not 0 <= int(m.group(2)) <= MAX_ID_WIDTH or documented_pattern(pattern) is None:
        return None
    return (m.group(1), int(m.group(2)))


_EXAMPLE_ID = re.compile(r"([0-9]*[A-Z][A-Z0-9]*[-_]?)(\d{2,10})")  # prefix spelled as in ID_PATTERN
_CUED_ID = re.compile(r"(?:such as|for example|for instance|e\.g\.|like|format)\s*[:,]?\s*['\"`‘’“”]?"
                      r"([0-9]*[A-Z][A-Z0-9]*[-_]?\d{2,10})(?![\w-])", re.IGNORECASE)


def example_id_pattern(schema: dict) -> tuple[str, int] | None:
    """(prefix, width) of the id a string schema shows by example: its ``example`` / ``examples``,
    or one its description quotes after "such as" / "e.g." (:func:`autoforge.envs.domains.example_value`)."""
    from autoforge.envs.domains import example_value

    examples = schema.get("examples")
    cands: list[Any] = [schema.get("example")] + (list(examples)[:3] if isinstance(examples, list) else [])
    desc = schema.get("description")
    if isinstance(desc, str):
        cands.append(example_value(desc))
        cands += [m.group(1) for m in _CUED_ID.finditer(desc)]  # "The customer's id, e.g. 'CUS-0012'"
    for v in cands:
        m = _EXAMPLE_ID.fullmatch(v) if isinstance(v, str) else None
        if m:
            return (m.group(1), len(m.group(2)))
    return None


def id_key(value: Any) -> str:
    """The state key of an id value: ids are keys as strings (``3`` -> ``"3"``; ``"T0001"`` as is)."""
    return value if isinstance(value, str) else str(value)


def id_value(coll: CollectionSpec | None, key: Any) -> Any:
    """The value a record holds for state key ``key`` of ``coll``: an int for integer-id collections."""
    if coll is not None and getattr(coll, "id_type", "string") == "integer" and isinstance(key, str) \
            and key.lstrip("-").isdigit():
        return int(key)
    return key


def is_integer_ids(coll: CollectionSpec | None) -> bool:
    return coll is not None and getattr(coll, "id_type", "string") == "integer"


class _Builder:
    def __init__(self, aliases: dict[str, str], id_info: dict[str, tuple[str, int]]) -> None:
        self.colls: dict[str, _Coll] = {}
        self.aliases = aliases
        self.id_info = id_info
        self.id_votes: dict[str, Counter] = {}  # entity -> JSON types its ids are documented with
        self.patterned: set[str | None] = set()  # entities with a documented id pattern (not only an example)

    def coll(self, entity: str) -> _Coll:
        if entity not in self.colls:
            c = _Coll(entity)
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
                                      id_prefix=prefix, id_width=width, fields=fields))
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


def _walk_ids(specs: list[ToolSpec]):
    """Every ``(name, schema)`` of an id-like property in parameters and output schemas."""
    def walk(schema: Any, depth: int = 0):
        s = unwrap(schema) if isinstance(schema, dict) else {}
        if depth > 5:
            return
        for k, v in props(s).items():
            if id_param_entity(k):
                yield k, v
            yield from walk(v, depth + 1)
        if isinstance(s.get("items"), dict):
            yield from walk(s["items"], depth + 1)

    for spec in specs:
        yield from walk(spec.parameters)
        yield from walk(spec.output_schema)


def id_aliases(specs: list[ToolSpec]) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    """Role entities that are another entity, read from documented id patterns.

    ``manager_id`` and ``employee_id`` both documented as ``^E\\d{4}$`` -> manager is an
    employee. Of the entities sharing a prefix, the one most tools are about keeps it.
    Returns (aliases, {entity: (prefix, width)})."""
    said = described_aliases(specs)
    if said:
        aliases, info = _pattern_aliases(specs)
        return {**said, **aliases}, {e: pat for e, pat in info.items() if e not in said}
    return _pattern_aliases(specs)


# "The ID of the sub-issue to be prioritized after" / "User ID of the user to send the message to."
_DESCRIBED_ID = [re.compile(r"^\W*(?:the |a |an )?(?:numeric |unique )?(?:id|identifier) of (?:the |a |an )?([a-z][a-z-]*)", re.I),
                 re.compile(r"^\W*(?:the |a |an )?([a-z][a-z-]*) id of (?:the|a|an) ", re.I)]


def described_aliases(specs: list[ToolSpec]) -> dict[str, str]:
    """Role ids whose description names the entity they are: ``receiver_id`` ("User ID of the user to
    send the message to") is a user's id, ``after_id`` ("The ID of the sub-issue to be prioritized
    after") a sub-issue's. Only for a role no tool name mentions, naming an entity a tool name does."""
    known = known_entities(specs)
    named_by_tools = {nm.singular(w) for spec in specs for w in nm.words(spec.name)}
    named_by_tools |= {e for e in known if all(w in named_by_tools for w in e.split("_"))}
    found: dict[str, Counter] = {}  # role -> entities its descriptions name
    for spec in specs:
        for p, ps in props(spec.parameters).items():
            e = id_param_entity(p)
            s = unwrap(ps) if isinstance(ps, dict) else {}
            desc = s.get("description") if isinstance(s.get("description"), str) else ""
            if not e or not desc or e in named_by_tools:
                continue
            for rx in _DESCRIBED_ID:
                m = rx.search(desc)
                if m:
                    named = nm.singular(nm.snake(m.group(1).replace("-", "_")))
                    if named != e and named in known and named in named_by_tools:
                        found.setdefault(e, Counter())[named] += 1
                    break
    return {e: c.most_common(1)[0][0] for e, c in found.items() if c}


def _pattern_aliases(specs: list[ToolSpec]) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    info: dict[str, tuple[str, int]] = {}
    for examples in (False, True):  # documented patterns first, then ids shown by example ("such as 'INV-00042'")
        for k, v in _walk_ids(specs):
            e = id_param_entity(k)
            pat = id_pattern(v, examples) or (id_pattern(unwrap(v).get("items"), examples) if isinstance(v, dict) else None)
            if e and pat and e not in info:
                info[e] = pat
    if not info:
        return {}, {}
    known = known_entities(specs)
    mentions: dict[str, int] = {}
    for spec in specs:
        plan = analyze_tool(spec, known)
        mentions[plan.entity] = mentions.get(plan.entity, 0) + 2
        for p in props(spec.parameters):
            e = id_param_entity(p)
            if e and nm.snake(p) == f"{e}_id":
                mentions[e] = mentions.get(e, 0) + 1
    by_prefix: dict[tuple[str, int], list[str]] = {}
    for e, pat in info.items():
        by_prefix.setdefault(pat, []).append(e)
    aliases: dict[str, str] = {}
    for pat, ents in by_prefix.items():
        if len(ents) < 2:
            continue
        canon = max(ents, key=lambda e: (mentions.get(e, 0), e not in ROLE_PEOPLE, -len(e)))
        for e in ents:
            if e != canon:
                aliases[e] = canon
    return aliases, {e: pat for e, pat in info.items() if e not in aliases}


def known_entities(specs: list[ToolSpec], aliases: dict[str, str] | None = None) -> set[str]:
    """Entities named by id parameters or id output fields anywhere in the tool set."""
    return {id_param_entity(k, aliases) for k, _ in _walk_ids(specs)} - {None}


def plan_tools(specs: list[ToolSpec]) -> dict[str, ToolPlan]:
    aliases, _ = id_aliases(specs)
    known = known_entities(specs, aliases)
    return {s.name: analyze_tool(s, known, aliases) for s in specs}


def offline_state_schema(toolset: ToolSet | str, specs: list[ToolSpec]) -> StateSchema:
    """Infer collections, fields, keys, references and enums from a tool set's docs.

    ``toolset`` only names the fallback collection when no entity can be read at all.
    """
    specs = list(specs)
    aliases, id_info = id_aliases(specs)
    plans = plan_tools(specs)
    b = _Builder(aliases, id_info)
    b.patterned = {id_param_entity(k, aliases) for k, v in _walk_ids(specs) if id_pattern(v) or (
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
    # 2. fields from output schemas (the most complete picture of a record)
    for spec in specs:
        plan = plans[spec.name]
        # a delete reports what it removed (delete_message -> {receiver_id, ...}): the message's fields,
        # not a record of the receiver
        b.harvest(spec.output_schema, plan.entity, follow=plan.kind != "delete")
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
            if plan.kind in ("create", "update", "generic") or (plan.kind == "status" and sp == "status"):
                base = sp[4:] if sp.startswith("new_") else sp[8:] if sp.startswith("updated_") else sp
                if base in nm.PAGING_PARAMS or base in nm.SORT_PARAMS:
                    continue
                if plan.kind == "create" and plan.other and id_param_entity(p, aliases) == plan.other:
                    c.add(sp, ps)
                elif plan.kind == "update" and base not in c.fields and _suffix_field(base, c.fields):
                    pass  # update_delivery_instructions(instructions): sets the existing delivery_instructions
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
        if plan.kind == "status" or (plan.kind == "create" and "status" in c.fields):
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
    return b.build()


def _add_prose_rules(c: _Coll, spec: ToolSpec, plan: ToolPlan) -> None:
    """What the prose's status rules need in the record (autoforge.envs.rules): a status field
    holding the statuses they name ("only for a draft invoice", "becomes 'escalated'") and the
    timestamp fields they record ("records frozen_at")."""
    from autoforge.envs.rules import status_mentions

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


def _suffix_field(name: str, fields: Any) -> str | None:
    """The one field named ``<something>_<name>``, if exactly one (see templates.suffix_field)."""
    found = [f for f in fields if f.endswith(f"_{name}") and not f.endswith("_id") and not f.endswith("_ids")]
    return found[0] if len(found) == 1 and len(name) > 3 else None


def status_words(text: str) -> list[str]:
    """Status words a description mentions ("Only 'pending' orders can be cancelled")."""
    found: list[str] = []
    for w in re.findall(r"[a-z_]+", (text or "").lower().replace(" ", " ")):
        if w in STATUS_WORDS and w not in found and w not in {"open", "new", "hold", "return", "active"} | {"review", "report"}:
            found.append(w)
    return found


NEGATIONS = {"cannot", "can't", "not", "never", "no", "nor", "unless", "except", "without"}
TARGET_CUES = {"be", "become", "becomes", "to", "as", "marked", "set"}


def status_rules(text: str, enum: list[str], entity: str, target: str | None = None) -> tuple[list[str], list[str]]:
    """Statuses a description allows and forbids before a change (our reading of prose rules).

    "Only pending orders can be cancelled" / "Cancel a confirmed booking" (first sentence) -> allowed;
    "Checked-in bookings cannot be cancelled" -> forbidden. A status right after "be"/"to"
    ("can only be completed", "the status becomes 'returned'") names the outcome, not a
    precondition, and is skipped."""
    allowed: list[str] = []
    forbidden: list[str] = []
    ent_words = {entity.split("_")[-1], nm.plural(entity.split("_")[-1])}
    for k, sentence in enumerate(re.split(r"[.;!?]+", (text or "").lower())):
        flat = " " + re.sub(r"[-_'\"`]+", " ", sentence) + " "
        words_ = flat.split()
        negated = any(w in NEGATIONS for w in words_) or "n't" in sentence
        for value in enum:
            if not isinstance(value, str) or value == target:
                continue
            phrase = value.replace("_", " ").replace("-", " ").lower()
            for m in re.finditer(r"(?<= )" + re.escape(phrase) + r"(?= )", flat):
                before = flat[: m.start()].split()
                after = flat[m.end():].split()
                if before and before[-1] in TARGET_CUES:
                    continue
                if negated:
                    forbidden.append(value)
                elif "only" in words_ or "must" in words_ or (k == 0 and before and before[-1] in ("a", "an", "the")
                                                             and after and after[0] in ent_words):
                    allowed.append(value)
    allowed = [v for v in dict.fromkeys(allowed) if v not in forbidden]
    return allowed, list(dict.fromkeys(forbidden))


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
