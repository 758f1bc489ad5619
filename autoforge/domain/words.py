"""Word-level rules the offline backend uses to read tool names and parameter names.

The paper (arXiv 2512.22857, Sec. 3.1) has an LLM read the docs; the offline backend stands
in with these deterministic rules: split names into words, singular/plural, which verb a
tool name starts with and what that verb does to state. Everything here is pure string
work, shared by state-structure inference (:mod:`autoforge.domain.state`), the code
templates (:mod:`autoforge.envs.code`), DAG sampling and task phrasing. The Python names
the code gives public names are :mod:`autoforge.envs.pynames`.
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache

# --------------------------------------------------------------------------- words


@lru_cache(maxsize=65536)  # a pure function of one word, asked ~200,000 times per factory run
def snake(name: str) -> str:
    """``getOrderDetails`` / ``get-order details`` -> ``get_order_details``."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"[^0-9A-Za-z]+", "_", s)
    return s.strip("_").lower()


def words(name: str) -> list[str]:
    return [w for w in snake(name).split("_") if w]


_IRREGULAR_PLURAL = {
    "person": "people", "child": "children", "man": "men", "woman": "women",
    "datum": "data", "criterion": "criteria", "analysis": "analyses", "index": "indexes",
    "status": "statuses", "bus": "buses", "quiz": "quizzes", "leaf": "leaves", "shelf": "shelves",
}
_IRREGULAR_SINGULAR = {v: k for k, v in _IRREGULAR_PLURAL.items()}
# Words that look plural but are not, or are the same in both numbers.
_INVARIANT = {
    "news", "series", "species", "data", "info", "information", "status", "address", "access",
    "class", "business", "analysis", "basis", "canvas", "campus", "bonus", "virus", "census",
    "equipment", "inventory", "stock", "feedback", "metadata", "settings", "details", "sms",
}


def plural(word: str) -> str:
    """``order`` -> ``orders``, ``category`` -> ``categories``, ``address`` -> ``addresses``."""
    if not word:
        return word
    parts = word.split("_")
    last = parts[-1]
    if last in _IRREGULAR_PLURAL:
        out = _IRREGULAR_PLURAL[last]
    elif last in _IRREGULAR_SINGULAR or last in {"data", "equipment", "inventory", "stock", "feedback", "metadata", "settings", "details"}:
        out = last
    elif re.search(r"[^aeiou]y$", last):
        out = last[:-1] + "ies"
    elif re.search(r"(s|x|z|ch|sh)$", last):
        out = last + "es"
    else:
        out = last + "s"
    return "_".join(parts[:-1] + [out])


@lru_cache(maxsize=8192)  # asked for every word of every field name the world checks read
def singular(word: str) -> str:
    """``orders`` -> ``order``, ``categories`` -> ``category``, ``addresses`` -> ``address``."""
    if not word:
        return word
    parts = word.split("_")
    last = parts[-1]
    if last in _IRREGULAR_SINGULAR:
        out = _IRREGULAR_SINGULAR[last]
    elif last in _INVARIANT or last in _IRREGULAR_PLURAL:
        out = last
    elif last.endswith("ies") and len(last) > 4:
        out = last[:-3] + "y"
    elif re.search(r"(sses|xes|zzes|ches|shes)$", last):
        out = last[:-2]
    elif last.endswith("ses") and len(last) > 4 and last[-4] in "aeiou":  # "statuses"/"purchases"
        out = last[:-1] if last[-4] != "u" else last[:-2]
    elif last.endswith("s") and not re.search(r"(ss|us|is|ics)$", last) and len(last) > 2:
        out = last[:-1]
    else:
        out = last
    return "_".join(parts[:-1] + [out])


def is_plural(word: str) -> bool:
    last = word.split("_")[-1]
    return singular(last) != last


def is_identifier(name: str) -> bool:
    """Can ``name`` be a Python parameter of generated code (sandbox forbids a leading ``_``)?"""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


# --------------------------------------------------------------------------- verbs

READ_VERBS = {
    "get", "fetch", "retrieve", "read", "show", "view", "describe", "lookup", "look", "find",
    "search", "list", "query", "check", "count", "browse", "calculate", "compute", "estimate",
    "quote", "verify", "validate", "filter", "lookup", "locate", "see", "inspect", "track",
    "preview", "display", "summarize", "compare", "explore", "discover", "recommend", "resolve_id",
}
LIST_VERBS = {"list", "search", "browse", "query", "filter", "explore", "discover", "recommend"}
LOOKUP_VERBS = {"find", "lookup", "look", "locate", "get", "fetch", "retrieve", "search", "resolve"}
CREATE_VERBS = {
    "create", "add", "new", "register", "book", "place", "open", "submit", "insert", "post",
    "schedule", "reserve", "issue", "send", "make", "generate", "log", "record", "file", "enroll",
    "subscribe", "request", "apply", "upload", "write", "save", "start", "invite", "rate", "review",
    "comment", "report", "plan", "order", "purchase", "buy", "rent", "hire", "sign", "mkdir", "touch",
}
UPDATE_VERBS = {
    "update", "edit", "modify", "change", "set", "rename", "patch", "move", "reschedule", "mark",
    "replace", "upgrade", "downgrade", "configure", "extend", "adjust_details", "toggle", "reassign",
    "restock", "prioritize", "tag", "label", "flag", "pin", "unpin", "star", "set_status",
}
DELETE_VERBS = {"delete", "remove", "destroy", "purge", "erase", "drop", "discard", "clear", "unregister", "rm", "rmdir"}
LINK_VERBS = {"assign", "link", "attach", "associate", "connect", "bind", "allocate", "share", "transfer_to", "enlist"}
UNLINK_VERBS = {"unassign", "unlink", "detach", "dissociate", "disconnect", "unbind", "unshare", "deallocate"}
AMOUNT_VERBS = {
    "transfer", "refund", "deposit", "withdraw", "pay", "charge", "adjust", "increment", "decrement",
    "credit", "debit", "top", "topup", "redeem", "spend", "reload", "fund", "award", "deduct", "bill",
}
# Verbs that move a record to a status: verb -> candidate status words (first match in the enum wins).
STATUS_VERBS: dict[str, list[str]] = {
    "cancel": ["cancelled", "canceled"],
    "void": ["voided", "void", "cancelled", "canceled"],
    "revoke": ["revoked", "cancelled", "canceled", "inactive"],
    "terminate": ["terminated", "cancelled", "closed", "inactive"],
    "deactivate": ["inactive", "deactivated", "disabled", "suspended"],
    "disable": ["disabled", "inactive", "deactivated"],
    "activate": ["active", "activated", "enabled"],
    "enable": ["enabled", "active"],
    "reactivate": ["active", "activated", "enabled"],
    "suspend": ["suspended", "inactive", "on_hold", "paused"],
    "pause": ["paused", "on_hold", "suspended"],
    "resume": ["active", "in_progress", "open"],
    "close": ["closed", "resolved", "completed", "done"],
    "reopen": ["open", "reopened", "active"],
    "archive": ["archived", "inactive", "closed"],
    "unarchive": ["active", "open"],
    "restore": ["active", "open", "restored"],
    "approve": ["approved", "accepted", "confirmed", "active"],
    "reject": ["rejected", "declined", "denied", "cancelled"],
    "decline": ["declined", "rejected", "denied", "cancelled"],
    "deny": ["denied", "rejected", "declined"],
    "accept": ["accepted", "approved", "confirmed"],
    "confirm": ["confirmed", "approved", "active"],
    "complete": ["completed", "done", "closed", "finished", "fulfilled"],
    "finish": ["finished", "completed", "done"],
    "fulfill": ["fulfilled", "completed", "shipped", "delivered"],
    "resolve": ["resolved", "closed", "done"],
    "escalate": ["escalated", "urgent", "high"],
    "ship": ["shipped", "in_transit", "dispatched"],
    "dispatch": ["dispatched", "shipped", "in_transit"],
    "deliver": ["delivered", "completed"],
    "return": ["returned", "return_requested", "refunded"],
    "publish": ["published", "active", "live"],
    "unpublish": ["draft", "unpublished", "inactive"],
    "checkin": ["checked_in", "active", "in_stock", "available"],
    "checkout": ["checked_out", "completed", "closed"],
    "lock": ["locked", "suspended", "frozen"],
    "freeze": ["frozen", "locked", "suspended"],
    "unlock": ["active", "unlocked"],
    "unfreeze": ["active", "unlocked"],
    "block": ["blocked", "suspended"],
    "unblock": ["active", "unblocked"],
    "hold": ["on_hold", "held", "paused"],
    "release": ["released", "active", "available"],
    "start": ["in_progress", "active", "started", "running"],
    "stop": ["stopped", "inactive", "paused"],
    "expire": ["expired", "inactive"],
    "verify": ["verified", "active"],
    "submit": ["submitted", "pending", "in_review"],
    "withdraw": ["withdrawn", "cancelled"],
    "dismiss": ["dismissed", "closed"],
    "acknowledge": ["acknowledged", "in_progress"],
    "retire": ["retired", "inactive"],
    "discontinue": ["discontinued", "inactive"],
}
# Statuses after which a record should not change any more (default precondition).
TERMINAL_STATUSES = {
    "cancelled", "canceled", "deleted", "closed", "completed", "delivered", "refunded", "rejected",
    "archived", "terminated", "expired", "voided", "void", "returned", "done", "finished",
    "resolved", "declined", "denied", "failed", "retired", "discontinued", "withdrawn", "fulfilled",
}
# Statuses a new record starts in (first one present in the enum wins).
INITIAL_STATUSES = [
    "pending", "active", "open", "new", "draft", "scheduled", "confirmed", "created", "requested",
    "submitted", "todo", "available", "booked", "planned", "in_stock", "enabled", "unpaid",
]
# Verbs whose object is a new record of a derived collection: book_flight -> bookings.
VERB_NOUNS = {
    "book": "booking", "reserve": "reservation", "order": "order", "purchase": "purchase",
    "buy": "purchase", "register": "registration", "enroll": "enrollment", "subscribe": "subscription",
    "rent": "rental", "apply": "application", "review": "review", "rate": "rating", "comment": "comment",
    "invite": "invitation", "hire": "hire", "report": "report", "request": "request",
}
ALL_VERBS = (READ_VERBS | LIST_VERBS | LOOKUP_VERBS | CREATE_VERBS | UPDATE_VERBS | DELETE_VERBS | LINK_VERBS
             | UNLINK_VERBS | AMOUNT_VERBS | set(STATUS_VERBS) | {"check", "sign", "top", "look"}) - {"order", "file", "record", "log", "report", "comment", "review", "request", "plan", "rate", "post", "tag", "label", "flag", "star", "pin", "file", "book", "new"}
# Words that are verbs and nouns alike: a name that starts with one and ends with a plain verb
# (``issue_read``, ``order_update``) is resource first.
NOUN_VERBS = {"issue", "order", "book", "post", "comment", "file", "record", "log", "report", "review", "request",
              "schedule", "plan", "rate", "tag", "label", "flag", "star", "pin", "reserve", "message", "note", "sub"}
# Plain verbs that may end a resource-first name.
TRAILING_VERBS = {"read", "write", "get", "list", "create", "update", "delete", "add", "remove", "search", "set",
                  "retrieve", "replace", "fetch", "edit", "modify", "find", "view", "show", "clear", "insert", "upsert"}
PREPOSITIONS = {"to", "from", "for", "by", "in", "on", "with", "of", "into", "onto", "at", "per", "and"}
# Words that end a tool name without naming the entity: get_order_details -> order.
NAME_SUFFIXES = {"details", "detail", "info", "information", "data", "record", "records", "summary", "profile", "status", "list", "history", "all", "by", "id", "ids"}
# Parameters that steer a list instead of filtering on a field.
PAGING_PARAMS = {"limit", "offset", "page", "page_size", "per_page", "max_results", "top", "skip", "cursor", "page_token", "count"}
SORT_PARAMS = {"sort", "sort_by", "order_by", "sort_order", "order", "direction", "ascending", "descending"}
QUERY_PARAMS = {"query", "q", "keyword", "keywords", "search", "search_term", "term", "text", "contains"}


def verb_of(name: str) -> tuple[str, list[str]]:
    """Split a tool name into its verb and the remaining words.

    ``find_user_id_by_email`` -> ("find", ["user", "id", "by", "email"]);
    ``check_in_reservation`` -> ("checkin", ["reservation"]); ``topUpCard`` -> ("top", ["up", "card"]).
    """
    ws = words(name)
    if not ws:
        return "", []
    if len(ws) >= 2 and ws[-1] in TRAILING_VERBS and not set(ws[:-1]) & (ALL_VERBS - NOUN_VERBS):
        return ws[-1], ws[:-1]  # ``issue_read``, ``sub_issue_write``, ``core_memory_add``: resource first, verb last
    lead: list[str] = []
    sep = next((c for c in "./:" if c in name), None)
    action = words(name.rsplit(sep, 1)[1]) if sep else []
    known = ALL_VERBS | CREATE_VERBS | UPDATE_VERBS | READ_VERBS
    if action and action[0] in known and ws[0] not in ALL_VERBS and len(action) < len(ws):
        lead, ws = ws[: len(ws) - len(action)], action  # ``appointments.book`` -> book appointments
    elif ws[0] not in ALL_VERBS:  # resource first (MCP ``orders.get``, ``appointments.list_for_pet``, ``user_lookup``)
        i = next((k for k, w in enumerate(ws[:4]) if k and w in ALL_VERBS and ws[k - 1] not in PREPOSITIONS), None)
        if i is not None:
            lead, ws = ws[:i], ws[i:]
    if len(ws) >= 2 and ws[0] in {"check", "sign", "log", "top", "look", "set"} and ws[1] in {"in", "out", "up", "status"}:
        return ws[0] + ws[1], lead + ws[2:]
    return ws[0], lead + ws[1:]
