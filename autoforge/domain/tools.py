"""The per-tool reading: a tool's verb, main entity and kind (lookup, get, list, create, ...).

:func:`analyze_tool` reads one tool's name, parameters, output schema and effect into a
:class:`ToolPlan`, which the state-structure inference (:mod:`autoforge.domain.state`) and the
code templates (:mod:`autoforge.envs.code`) share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autoforge.domain import words as nm
from autoforge.domain.ids import id_param_entity
from autoforge.domain.tool_kinds import special_kind, tool_kind
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import ToolSpec

READ_KINDS = {"lookup", "get", "list"}
WRITE_KINDS = {"create", "update", "delete", "status", "link", "unlink", "amount"}
AMOUNT_PARAMS = ("amount", "quantity", "qty", "delta", "points", "value", "sum", "credits", "units", "change", "adjustment", "count")
UNIQUE_FIELDS = {"email", "username", "user_name", "phone", "phone_number", "code", "sku", "slug", "handle",
                 "login", "isbn", "serial_number", "confirmation_code", "reference", "tracking_number", "license_plate",
                 "account_number", "iban", "order_number", "ticket_number", "employee_number", "badge_id", "name", "title"}

# Words of tool names about the login session rather than a record (``ticket_login``,
# ``trading_get_login_status``, ``authenticate_twitter``).
SESSION_WORDS = {"login", "logout", "logon", "logoff", "signin", "signout", "authenticate", "authentication", "auth"}


@dataclass
class ToolPlan:
    """How the offline backend reads one tool: its verb, main entity and template kind."""

    name: str
    verb: str
    entity: str  # singular, e.g. "order"
    kind: str  # a name in autoforge.domain.tool_kinds.TOOL_KINDS: lookup | get | list | create | ... | handoff
    effect: str  # read | write
    by_fields: list[str] = field(default_factory=list)  # lookup: the fields searched by
    returns_id: bool = False  # lookup: return only the id
    other: str | None = None  # link/unlink/amount: the second entity (assign_ticket_to_agent -> agent)
    count_only: bool = False  # list: count_* returns only a number
    target_status: list[str] = field(default_factory=list)  # status: candidate status words
    field_hint: str | None = None  # a field the name mentions (update_order_address -> address)


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
    special = special_kind(spec)
    if special:  # a scratchpad, a calculator or a hand-off (domain/tool_kinds.py): not about a record
        return ToolPlan(name=spec.name, verb=verb, entity="handoff" if special == "handoff" else "", kind=special,
                        effect=tool_kind(special).effect)
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
    role = _role_reference(verb, head, entity, known, id_ents) if spec.effect != "read" else None
    if role:  # setPreferredLocker(recipientId, lockerId): the recipient's preferred locker changes, not the locker
        entity, field_hint, pk_given = role[0], role[1], True
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
    if role:
        other = None
    plan = ToolPlan(name=spec.name, verb=verb, entity=entity, kind="generic", effect="write", field_hint=field_hint)
    amount = _amount_param(params)
    status_targets = nm.STATUS_VERBS.get(verb, [])
    if verb == "refund":
        status_targets = ["refunded", "returned", "cancelled"]
    if verb == "pay":
        status_targets = ["paid", "completed", "settled"]

    read_like = verb in nm.READ_VERBS and verb not in {"verify"} or spec.effect == "read"
    counted = _counted_owner(verb, head, amount, single, entity) if spec.effect != "read" else None
    if spec.effect != "read" and verb in nm.AMOUNT_VERBS and amount:
        plan.kind = "amount"
    elif counted:
        # add_lesson_credits(student_id, credits): adds to the student's lesson_credits, creates no lesson
        plan.kind, plan.entity, plan.field_hint = "amount", counted, "_".join(head)
        entity = counted
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


def _role_reference(verb: str, head: list[str], entity: str, known: set[str], id_ents: dict[str, str]) -> tuple[str, str] | None:
    """(record, role) of a write that sets a role-named reference on another record: ``set_preferred_locker(
    recipient_id, locker_id)`` sets the recipient's preferred_locker_id, ``set_default_payment_method(user_id,
    payment_method_id)`` the user's default_payment_method_id; None otherwise."""
    if verb not in nm.UPDATE_VERBS | {"set", "save", "choose", "pick", "select", "make"} or len(head) < 2:
        return None
    role = "_".join(head)
    if role in known or nm.singular(role) in known or not role.endswith(entity) or role == entity:
        return None
    holders = {e for p, e in id_ents.items() if e != entity and not nm.snake(p).endswith("_ids")}
    if len(holders) != 1 or entity not in id_ents.values():
        return None
    return holders.pop(), nm.singular(role)


# enable_roaming(line_id) sets the line's own flag (roaming_enabled), not its status
TOGGLE_VERBS = {"enable": True, "activate": True, "disable": False, "deactivate": False, "turn_on": True, "turn_off": False}
# actions on what a record already holds: their other arguments are the action's, not new values of
# the record's fields (a return's payment method is where the refund goes, not the order's new one)
ACTION_VERBS = {"return", "refund", "exchange", "cancel", "void", "dispute", "close", "complete", "reject", "decline"}

ADD_VERBS = {"add", "grant", "give", "gift", "load", "buy", "purchase"}
# nouns that are an amount held on a record, not a record of their own ("add credits", "grant points")
HELD_AMOUNTS = {"credit", "credits", "point", "points", "fund", "funds", "balance", "minute", "minutes", "hour",
                "hours", "day", "days", "mile", "miles", "token", "tokens", "coin", "coins", "allowance", "quota"}


def _counted_owner(verb: str, head: list[str], amount: str | None, single: list[str], entity: str) -> str | None:
    """The record an "add <amount>" tool adds to, or None: ``add_lesson_credits(student_id, credits)``,
    ``grant_points(member_id, points)``, ``add_funds(wallet_id, amount)`` name an amount held on the
    record whose id they take (its lesson_credits, points, balance), not a new record."""
    if verb not in ADD_VERBS or not amount or not head:
        return None
    if nm.snake(amount) not in head and head[-1] not in HELD_AMOUNTS:
        return None
    owners = [e for e in single if e != entity or len(head) == 1]
    return owners[0] if len(owners) == 1 else None


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
