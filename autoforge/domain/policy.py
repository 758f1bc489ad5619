"""The offline reader of policy rules: a policy document's statements (and the limits a tool's own
prose states) into typed :class:`ParsedRule` records with checks the rule engine runs.

Every statement that reads like a rule (``must``, ``only``, ``cannot``, ``at most``, ``within`` ...)
becomes one record or more; one that matches no form is kept as ``unparsed`` with why, never
dropped. A form that matches but cannot be bound to this tool set (no tool it governs, no argument
or field that holds the quantity) keeps its kind and says why it is not enforced. The forms, in
the order they are tried (docs/policies.md lists them with examples):

==============  ===========================================================  ===============
kind            sentence forms                                               check
==============  ===========================================================  ===============
conversation    "verify / authenticate the customer('s identity) before ..." identify_first
                "get (explicit) confirmation before ...", "ask ... to confirm" confirm_first
                "transfer / escalate to a human agent only when ..."         transfer_when
count_limit     "can be <verb>ed only once", "at most twice", "no more than  count_limit
                3 times", "a single <noun> per <record>" for a verb
time_window     "within N hours/days of <date>", "N days after <date>"       window since
                "at least N hours before <date>", "before <date>"             window until
money           "<amount> cannot exceed the <field>", "must not be more than" covers max
                "must cover the <field>", "at least the <field>"              covers min
quantity_limit  "at most / up to / no more than / a maximum of / limited to  arg_limit,
                / cannot exceed N <noun>", "at least N <noun>", "one <noun>   record_limit
                per <record>", "N <unit> per request"
cross_record    "the <thing> must belong to the <owner>", "<owner>'s own"    owned
                "the <item> must be (part) of / in / on the <record>"        member
prohibition     "cannot change the (number of) <field>", "<field> cannot be  unchanged
                changed / added later"; "<argument> cannot be <value>",      arg_not, arg_in
                "<argument> must be <value> or <value>" (the argument's enum)
source_status   "only <status> <records> can be <verb>ed", "<status>          status
                <records> cannot be <verb>ed", "... while it is <status>"
==============  ===========================================================  ===============

Checks name canonical arguments and the state schema's collections and fields;
:func:`autoforge.envs.policy_guards.bind` maps them onto the public names and validates them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.policy_text import NUM, STOP, Statement, number, overlap, statements, stem, words_of
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.domain.statuses import status_rules
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import CollectionSpec, StateSchema, ToolSpec

RULE_CUE = re.compile(
    r"\b(must|only|cannot|can ?not|can't|may not|never|requires?|required|at most|at least|no more than|not allowed"
    r"|unless|should|need to|needs to|has to|have to|eligible|allowed|permitted|limit(?:ed|s)?|maximum|minimum|max"
    r"|within|prior to|no later than|up to|exceed\w*|always|do not|don't|once|twice|before)\b", re.I)
# Verbs that say the same thing about a record (a policy says "changed", the tool is modify_booking)
VERB_GROUPS = [
    {"modify", "change", "update", "edit", "amend", "alter", "reschedule", "adjust", "move", "upgrade", "downgrade"},
    {"cancel", "void", "revoke", "terminate", "abort"},
    {"create", "book", "reserve", "place", "open", "submit", "register", "order", "purchase", "buy", "rent",
     "schedule", "new", "file", "enroll"},
    {"refund", "reimburse"}, {"return", "exchange"}, {"renew", "extend", "extension", "renewal"},
    {"delete", "remove", "close"}, {"top", "topup", "recharge", "reload", "add"}, {"transfer", "send", "pay", "payment"},
    {"redeem", "spend", "use", "apply"}, {"check_in", "checkin"}, {"check_out", "checkout"},
]
PEOPLE = {"customer", "user", "caller", "guest", "member", "patient", "client", "employee", "account", "holder",
          "passenger", "traveler", "traveller", "subscriber", "borrower", "student", "owner", "renter", "driver"}
_IDENT = re.compile(r"\bauthenticat\w*|\b(verif\w+|identif\w+|validat\w+|confirm\w*)\b[^.]{0,40}?"
                    r"\b(identity|identities|who (?:they|he|she) (?:are|is)|user[ _]?id|customer[ _]?id|account holder|"
                    + "|".join(sorted(PEOPLE - {"account", "holder", "owner"})) + r")s?\b(?!\s*(?:'s)?\s*(?:request|choice|answer))", re.I)
_IDENT_BACK = re.compile(r"\b(" + "|".join(sorted(PEOPLE - {"account", "holder", "owner"})) + r")s?\b[^.]{0,30}?"
                         r"\b(?:not|never|un)\s*(?:been\s+|be\s+)?(identif\w+|verif\w+|authenticat\w+)", re.I)
_IDENT_WHEN = re.compile(r"\b(before|first|prior|until|unless|only after|cannot|must|should|always|need|required)\b", re.I)
_CONFIRM = re.compile(r"\b(explicit|express|written|verbal)\s+(confirmation|consent|approval|agreement)\b"
                      r"|\bconfirm\w*\b[^.]{0,60}\b(before|prior|first)\b|\b(before|prior to)\b[^.]{0,80}\bconfirm\w*\b"
                      r"|\b(ask|get|obtain|receive|have)\w*\b[^.]{0,40}\b(to confirm|confirmation|consent|agree\w*|a yes)\b"
                      r"|\b(get|obtain|receive|wait for|hear)\b[^.]{0,30}\b(yes|go[- ]ahead|ok|okay)\b", re.I)
_TRANSFER = re.compile(r"\b(transfer\w*|escalat\w+|hand\s?(?:off|over)|route|connect)\b[^.]{0,40}\b(human|live|agent|"
                       r"representative|supervisor|specialist|manager|person)\b", re.I)
_TIMES = re.compile(r"\b(?:only|just)\s+once\b|\bonce only\b|\bmore than once\b|\bno more than " + NUM + r" times\b"
                    r"|\b(?:at most|up to|a maximum of|maximum of|max(?:imum)?)\s+(once|twice|thrice|" + NUM + r" times)\b"
                    r"|\b(once|twice|thrice|" + NUM + r" times?)\s+(?:at most|only|per|max)\b|\bonly (twice|thrice)\b"
                    r"|\bcannot be \w+ (?:again|a second time)\b"
                    r"|\b(?:no|not|never|cannot)\b[^.]{0,60}?\bmore than (once|twice|thrice|" + NUM + r" times)\b", re.I)
_UNIT = r"(hours?|hrs?|days?|calendar days|business days|weeks?|months?|years?)"
_WITHIN = re.compile(r"\bwithin\s+(?:the\s+)?(?:first\s+)?" + NUM + r"\s*" + _UNIT + r"\s+(?:of|after|from|since|following)"
                     r"\s+(?:the\s+|their\s+|its\s+|your\s+)?([a-z][\w\- ]{1,40})", re.I)
_AFTER = re.compile(r"\b(?:no|not|never|cannot)\b[^.]{0,40}\b(?:more than|later than|after)\s+" + NUM + r"\s*" + _UNIT
                    + r"\s+(?:after|from|of|since|following)\s+(?:the\s+|their\s+|its\s+|your\s+)?([a-z][\w\- ]{1,40})", re.I)
_BEFORE = re.compile(r"\b(?:at least|no later than|no less than|minimum of|a minimum of|up to)?\s*" + NUM + r"\s*" + _UNIT
                     + r"\s+(?:before|prior to|ahead of|in advance of)\s+(?:the\s+|their\s+|its\s+|your\s+)?([a-z][\w\- ]{1,40})"
                     r"|\b(?:only |must be \w+ |can be \w+ )?(?:before|prior to)\s+(?:the\s+|their\s+|its\s+)?"
                     r"([a-z][\w\-]*(?:[ -]in|[ -]out|[ -]off|[ -]up| date| time)?)\b", re.I)
_SOONER = re.compile(r"\b(?:no sooner than|not sooner than|not until|not before|no earlier than|at least|only)\s+" + NUM
                     + r"\s*" + _UNIT + r"\s+after\s+(?:the\s+|their\s+|its\s+)?([a-z][\w\-' ]{1,40})", re.I)
_ON_DAY = re.compile(r"\b(?:not|cannot|never|no)\b[^.]{0,50}?\bon the (?:same )?(?:day|date) of (?:the\s+|their\s+|its\s+)?"
                     r"([a-z][\w\-' ]{1,40})", re.I)
_PAST = re.compile(r"\b(?:not|cannot|never|no)\b[^.]{0,50}?\b(?:after|past|beyond|once)\s+(?:the\s+|their\s+|its\s+)"
                   r"([a-z][\w\-]*(?: date| time| deadline)?)(?:\s+has\s+passed)?", re.I)
_LIMIT = re.compile(r"\b(at most|no more than|up to|a maximum of|maximum of|max(?:imum)?|limited to|capped at|cannot exceed|"
                    r"may not exceed|must not exceed|not to exceed|not exceed|more than|over|at least|a minimum of|minimum of|"
                    r"min(?:imum)?|fewer than|less than|under)\s*:?\s*" + NUM + r"\s*([a-z$%][\w\- ]{0,40})?", re.I)
_PER = re.compile(r"\b(one|a single|" + NUM + r")\s+([a-z][\w\-]*(?: [a-z][\w\-]*)?)\s+(?:per|for each|each)\s+([a-z][\w\-]*)", re.I)
_EXCEED = re.compile(r"\b(cannot|may not|must not|can ?not|should not|never|can't|not)\s+(?:be\s+)?(exceed|be (?:more|greater|higher|"
                     r"larger) than|surpass|go over)\s+(?:the\s+|its\s+|their\s+)?([a-z][\w\-' ]{1,40})", re.I)
_COVER = re.compile(r"\b(must|should|needs? to|has to)\s+(cover|be at least|pay|match|equal)\s+(?:the\s+|its\s+)?([a-z][\w\- ]{1,40})",
                    re.I)
_OWNED = re.compile(r"\b(belongs?|belonging|registered|linked|attached)\s+to\s+(?:the\s+|that\s+|this\s+|same\s+)*([a-z]+)"
                    r"|\b(?:the\s+)?([a-z]+)(?:'s|s')\s+own\b|\bon (?:the\s+)?([a-z]+)(?:'s|s')\s+(?:account|profile|file)\b", re.I)
_MEMBER = re.compile(r"\b(?:must|should|can only|may only|only)?\s*(?:be|is|are)?\s*(?:part of|in|on|included in|listed (?:in|on)|"
                     r"from|one of the \w+ (?:in|of|on))\s+(?:the\s+|that\s+|this\s+|same\s+|original\s+)+([a-z]+)", re.I)
_UNCHANGED = re.compile(r"\b(?:cannot|can ?not|can't|may not|must not|never|not (?:be )?(?:allowed|permitted) to)\s+"
                        r"(?:be\s+)?(?:change|modif\w+|alter|update|edit|add|remove|reduc\w+|increas\w+)\w*\s+(?:the\s+|its\s+|their\s+)?"
                        r"(?:number of\s+|count of\s+)?([a-z][\w\- ]{1,40})"
                        r"|\b(?:the\s+)?(?:number of\s+|count of\s+)?([a-z][\w\- ]{1,30}?)\s+(?:cannot|can ?not|can't|may not|must not"
                        r"|is never|are never|will not)\s+(?:be\s+)?(?:changed|modified|altered|updated|edited|added|removed|reduced|"
                        r"increased)\b", re.I)
_NEGATION = re.compile(r"\b(not|cannot|can't|never|no|nor|neither|except|excluding|other than|isn't|aren't|won't)\b", re.I)


# --------------------------------------------------------------------------- the tool set as the reader sees it


@dataclass
class _Tool:
    name: str
    kind: str
    effect: str
    entity: str
    params: dict[str, dict]
    coll: CollectionSpec | None
    verbs: set[str] = field(default_factory=set)  # stems of the verb and its synonyms
    ents: set[str] = field(default_factory=set)  # stems of the entity words
    named: set[str] = field(default_factory=set)  # stems of the name's other words (request_refill: refill)


@dataclass
class _World:
    tools: list[_Tool]
    schema: StateSchema

    @property
    def writes(self) -> list[_Tool]:
        return [t for t in self.tools if t.effect == "write" and t.kind not in ("handoff", "scratchpad", "calculator")]

    def coll(self, word: str) -> CollectionSpec | None:
        s = stem(nm.singular(word.lower()))
        return next((c for c in self.schema.collections if stem(c.entity) == s or stem(nm.singular(c.name)) == s), None)


def _world(specs: list[ToolSpec], plans: dict, schema: StateSchema) -> _World:
    tools = []
    for s in specs:
        p = plans.get(s.name)
        if p is None:
            continue
        params = {k: (unwrap(v) if isinstance(v, dict) else {}) for k, v in props(s.parameters).items()}
        coll = next((c for c in schema.collections if c.entity == p.entity), None)
        verb_words = {p.verb} | set(nm.words(s.name)[:1])
        verbs = {stem(v) for v in verb_words}
        for g in VERB_GROUPS:
            if verb_words & g or any(stem(v) in {stem(x) for x in g} for v in verb_words):
                verbs |= {stem(x) for x in g}
        ents = {stem(w) for w in nm.words(p.entity)} | ({stem(nm.singular(coll.name))} if coll else set())
        named = {stem(w) for w in nm.words(s.name)[1:] if w not in STOP and len(w) > 2} - ents - verbs
        tools.append(_Tool(s.name, p.kind, p.effect, p.entity, params, coll, verbs, ents, named))
    return _World(tools, schema)


def _statuses(world: _World) -> set[str]:
    out: set[str] = set()
    for c in world.schema.collections:
        for f in c.fields:
            if f.name == "status" and f.enum:
                out |= {str(v).lower() for v in f.enum}
    return out


def _targets(st: Statement, world: _World, pool: list[_Tool] | None = None, exclude: list[str] | None = None) -> list[_Tool]:
    """The write tools a statement governs: the best match of its verbs and entities; none when no
    verb matches. A status word names a state, not an action, except right after "be" ("cannot be
    cancelled"); a collection's noun is no verb ("booking" is no "book"); ``exclude``: words of a
    date or quantity phrase ("before check-in" names no check-in)."""
    statuses = _statuses(world)
    raw = re.findall(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*", st.text)
    kept: list[str] = []
    for k, w in enumerate(raw):
        lw = w.lower().replace("-", "_")
        if lw in statuses and not (k and raw[k - 1].lower() in ("be", "been", "being", "get", "gets")):
            continue
        kept.append(w)
    skip = {stem(nm.singular(w)) for w in exclude or []}
    nouns = {stem(c.entity) for c in world.schema.collections} | {stem(nm.singular(c.name)) for c in world.schema.collections}
    stems = {stem(nm.singular(w)) for w in words_of(" ".join(kept))} - skip
    # a record's noun used as a verb ("can be refilled", "cancelling") names the tools on that record
    after_modal = lambda k: k > 0 and kept[k - 1].lower() in ("be", "to", "can", "cannot", "may", "must", "not", "never")  # noqa: E731
    verbish = {stem(w) for k, w in enumerate(kept) if after_modal(k) or w.lower().endswith("ed") or (
        w.lower().endswith("ing") and stem(w) not in nouns)} - skip
    ctx = {stem(nm.singular(w)) for w in words_of(st.context)}
    best, out = 0.0, []
    for t in pool if pool is not None else world.writes:
        verbs = t.verbs - nouns
        v, e = bool(verbs & stems) or bool((t.named | t.ents) & verbish), bool(t.ents & stems)
        vc, ec = bool(verbs & ctx), bool(t.ents & ctx)
        score = 2 * v + e + 0.5 * (vc and not v) + 0.25 * (ec and not e)
        if not v and not vc:
            continue
        if score > best:
            best, out = score, [t]
        elif score == best:
            out.append(t)
    return out


def _any_write(text: str) -> bool:
    return bool(re.search(r"\b(any|all|every|each)\b[^.]{0,30}\b(change|changes|action|actions|update|updates|write|"
                          r"modification|request|transaction|operation)s?\b|\baccount[- ]changing\b|\bconsequential\b", text, re.I))


def _param(world_tools: list[_Tool], phrase: list[str], *, types: tuple[str, ...] | None = None,
           min_score: float = 1.0) -> list[tuple[_Tool, str]]:
    """(tool, argument) pairs whose argument the phrase names best (an id argument never)."""
    best, out = min_score, []
    for t in world_tools:
        for p, s in t.params.items():
            if p.endswith("_id") or p.endswith("_ids"):
                continue
            if types and s.get("type") not in types and not (s.get("type") is None and "array" in types):
                continue
            sc = overlap(phrase, p)
            if sc > best + 1e-9:
                best, out = sc, [(t, p)]
            elif sc and abs(sc - best) < 1e-9:
                out.append((t, p))
    return out


def _field(coll: CollectionSpec | None, phrase: list[str], *, dates: bool = False, numbers: bool = False) -> str | None:
    """The field of ``coll`` the phrase names best (a date field / a number or list field)."""
    if coll is None:
        return None
    best, out = 0.0, None
    for f in coll.fields:
        if dates and not _is_date(f):
            continue
        if numbers and f.type not in ("integer", "number", "array", "object"):
            continue
        sc = overlap(phrase, f.name)
        if dates:  # "booking" names created_at / booked_at / booking_date; "delivery" delivered_at
            ws = {stem(nm.singular(w)) for w in phrase}
            if ws & {"book", "reserv", "creat", "plac", "purchas", "order", "sign", "open"} and re.search(
                    r"created|booked|placed|ordered|purchased|opened|signed", f.name):
                sc = max(sc, 1.5)
        if sc > best:
            best, out = sc, f.name
    if best < 1.0 and dates and {stem(nm.singular(w)) for w in phrase} & {stem(coll.entity), stem(nm.singular(coll.name))}:
        # "the day of the appointment": the record's own date
        own = [f.name for f in coll.fields if _is_date(f) and not re.search(r"created|updated|_at$", f.name)]
        return next((f for f in own if re.search(r"date|start|time|scheduled", f)), own[0] if own else None)
    return out if best >= 1.0 else None


def _holders(t: _Tool, world: _World) -> list[CollectionSpec]:
    """The records a call names by id: its own collection's first, then any other whose key it takes."""
    out = [t.coll] if t.coll is not None and t.coll.primary_key in t.params else []
    return out + [c for c in world.schema.collections if c is not t.coll and c.primary_key in t.params]


def _is_date(f: Any) -> bool:
    return f.format in ("date", "date-time") or bool(re.search(r"(_at|_date|_on|_time|^date|_day)$", f.name)) \
        or f.name in ("check_in", "check_out", "departure", "arrival", "deadline", "due", "expires")


def _phrase(text: str | None) -> list[str]:
    return [w for w in words_of(text or "") if w not in STOP]


def _rule(kind: str, text: str, check: dict | None, tools: list[_Tool], enforcement: str = "runtime",
          why: str | None = None, field_: str | None = None, values: list | None = None) -> ParsedRule:
    if check is None or not tools:
        enforcement = "not enforced"
        why = why or ("it names no tool of this tool set" if not tools else "not read into a check")
    return ParsedRule(kind, text, field_, list(values or []), enforcement, tools=[t.name for t in tools],
                      check=check if enforcement != "not enforced" else None, why=why)


def _by_tool(kind: str, text: str, pairs: list[tuple[_Tool, dict]], why: str, **kw) -> list[ParsedRule]:
    """One record per distinct check (the same check on several tools is one rule binding them all)."""
    if not pairs:
        return [_rule(kind, text, None, [], why=why, **kw)]
    groups: dict[str, tuple[dict, list[_Tool]]] = {}
    for t, check in pairs:
        key = repr(sorted(check.items()))
        groups.setdefault(key, (check, []))[1].append(t)
    return [_rule(kind, text, check, tools, **kw) for check, tools in groups.values()]


# --------------------------------------------------------------------------- the forms


def _conversation(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    targets = _targets(st, world) if not _any_write(text) else []
    writes = targets or world.writes
    names = [t.name for t in writes]
    if _TRANSFER.search(text):
        hand = [t for t in world.tools if t.kind == "handoff"]
        check = {"op": "transfer_when", "tools": [t.name for t in hand]}
        return [_rule("conversation", text, check if hand else None, hand, "judged",
                      why=None if hand else "the tool set has no hand-off tool to transfer with")]
    if ((_IDENT.search(text) and _IDENT_WHEN.search(text)) or _IDENT_BACK.search(text)) and not re.search(r"\bconfirm\w*\s+(?:the\s+)?(?:change|cancel|"
                                                                            r"action|details|request)", text, re.I):
        via = [t.name for t in world.tools if t.kind == "lookup" or re.search(
            r"authenticat|verify|identif|login|log_in|sign_in", t.name)]
        writes = [t for t in writes if t.name not in via]
        names = [t.name for t in writes]
        check = {"op": "identify_first", "tools": names, "via": via}
        return [_rule("conversation", text, check if writes else None, writes, "judged",
                      why=None if writes else "the tool set has no write to guard")]
    if _CONFIRM.search(text):
        check = {"op": "confirm_first", "tools": names}
        return [_rule("conversation", text, check if writes else None, writes, "judged",
                      why=None if writes else "the tool set has no write to guard")]
    return []


def _count_limit(st: Statement, world: _World) -> list[ParsedRule]:
    m = _TIMES.search(st.text)
    if not m:
        return []
    got = m.group(0).lower()
    n = 1.0
    if "twice" in got:
        n = 2.0
    elif "thrice" in got:
        n = 3.0
    else:
        nums = [number(x) for x in re.findall(NUM, got)]
        nums = [x for x in nums if x is not None]
        if nums:
            n = nums[0]
    if got.startswith("more than") and not re.search(r"\b(not|never|cannot|only|no)\b", st.text, re.I):
        return []
    pairs = []
    for t in _targets(st, world):
        holders = _holders(t, world)
        if not holders:
            continue
        c = holders[0]
        counter = f"{nm.words(t.name)[0]}_count"
        pairs.append((t, {"op": "count_limit", "collection": c.name, "id_arg": c.primary_key,
                          "counter": counter, "max": int(n)}))
    return _by_tool("count_limit", st.text, pairs, "no write on one record of this tool set does what it limits",
                    values=[int(n)])


def _span(n: float, unit: str) -> dict:
    unit = unit.lower()
    if unit.startswith("h"):
        return {"hours": n}
    if unit.startswith("w"):
        return {"days": n * 7}
    if unit.startswith("m"):
        return {"days": n * 30}
    if unit.startswith("y"):
        return {"days": n * 365}
    return {"days": n}


def _time_window(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    found: list[tuple[str, dict, list[str]]] = []  # (direction, span, date phrase)
    for m in _WITHIN.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("since", _span(n, m.group(2)), _phrase(m.group(3))[:3]))
    for m in _AFTER.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("since", _span(n, m.group(2)), _phrase(m.group(3))[:3]))
    for m in _SOONER.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("after", _span(n, m.group(2)), _phrase(m.group(3))[:3]))
    for m in ([] if found else _ON_DAY.finditer(text)):
        found.append(("until", {"days": 1}, _phrase(m.group(1))[:3]))
    for m in ([] if found else _PAST.finditer(text)):
        if not re.search(NUM + r"\s*" + _UNIT + r"\s*$", text[: m.start(1)], re.I):
            found.append(("until", {"days": 0}, _phrase(m.group(1))[:3]))
    if not found and not re.search(r"\b(fee|fees|charge[sd]?|penalty|penalties|free|surcharge)\b", text, re.I) \
            and re.search(r"\b(must|only|cannot|can ?not|can't|may not|no later than|at least|up to|not|never|no)\b", text, re.I):
        for m in _BEFORE.finditer(text):
            if m.group(1):
                n = number(m.group(1))
                if n is not None:
                    found.append(("until", _span(n, m.group(2)), _phrase(m.group(3))[:3]))
            elif m.group(4) and re.search(r"\b(only|must|cannot|no|not|never|can be|may be)\b", text, re.I):
                found.append(("until", {"days": 0}, _phrase(m.group(4))[:3]))
    out: list[ParsedRule] = []
    for direction, span, phrase in found[:2]:
        if not phrase:
            continue
        pairs, why = [], f"no record date that '{' '.join(phrase)}' names"
        targets = _targets(st, world, exclude=phrase)
        for t in targets:
            for c in _holders(t, world):
                fld = _field(c, phrase, dates=True)
                if fld is not None:
                    pairs.append((t, {"op": "window", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "direction": direction, **span}))
                    break
        if not targets:
            why = "it names no write of this tool set"
        out += _by_tool("time_window", text, pairs, why, values=[span])
    return out


def _money(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    for rx, side in ((_EXCEED, "max"), (_COVER, "min")):
        m = rx.search(text)
        if not m:
            continue
        phrase = _phrase(m.group(3))[:3]
        if not phrase or number(phrase[0]) is not None:
            continue
        subject = _phrase(text[: m.start()])[-3:]
        pairs = []
        for t in _targets(st, world) or world.writes:
            money_args = [p for p, s in t.params.items() if s.get("type") in ("number", "integer")
                          and not p.endswith("_id")]
            arg = max(money_args, key=lambda p: overlap(subject + ["amount", "refund", "payment"], p), default=None)
            for c in _holders(t, world):
                fld = _field(c, phrase, numbers=True)
                if fld and arg:
                    pairs.append((t, {"op": "covers", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "arg": arg, "side": side}))
                    break
        money = re.search(r"amount|price|total|balance|paid|fee|cost|credit|refund|payment|fund|charge|deposit|quote|owed|due|\$",
                          " ".join(phrase + subject) + " " + " ".join(str(c.get("arg")) for _, c in pairs), re.I)
        out += _by_tool("money" if money else "quantity_limit", text, pairs,
                        f"no write takes an amount to compare with a record's '{' '.join(phrase)}'")
    return out


def _quantity(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    for m in _LIMIT.finditer(text):
        word, n = m.group(1).lower(), number(m.group(2))
        if n is None:
            continue
        if _TIMES.search(text[m.start(): m.end() + 8]) or re.match(
                r"\s*" + _UNIT + r"\s+(?:before|after|of the|from|since|prior|ahead|in advance|following)\b", text[m.end(2):], re.I):
            continue  # "at most twice" is a count, "up to 30 days before" a window
        raw = re.sub(r"^\s*of\s+(?:any|each|the|a)?\s*(?:one|single)?\s*", "", m.group(3) or "", flags=re.I)
        unit = re.split(r"\b(?:at a time|at once|at any time|in total|in one|in a|per|each|on|for|of|in|to|when|if|that|which|and|or)\b",
                        raw.strip(), maxsplit=1, flags=re.I)[0].strip()
        phrase = _phrase(unit)[:4] or _phrase(text[: m.start()])[-3:]
        if m.group(2).startswith("$") or "%" in unit[:1]:
            phrase = phrase + ["amount", "price", "total"]
        lower = word in ("at least", "a minimum of", "minimum of", "min", "minimum")
        strict = word in ("more than", "over", "fewer than", "less than", "under")
        negated = bool(re.search(r"\b(not|no|never|cannot)\b", text[max(0, m.start() - 30): m.start()], re.I))
        if strict and not negated and word in ("more than", "over"):
            continue  # "more than 3 items" without a negation states no limit
        limit = n - 1 if (strict and word in ("fewer than", "less than", "under")) else n
        lower = lower or (negated and word in ("fewer than", "less than", "under"))
        key = "min" if lower else "max"
        targets = _targets(st, world)
        pairs = []
        for t, p in _param(targets or world.writes, phrase, types=("integer", "number", "array")):
            pairs.append((t, {"op": "arg_limit", "arg": p, key: limit}))
        if not pairs and not lower:  # a limit on what a record holds ("each member may have at most 3 holds")
            for t in targets or world.writes:
                if t.kind not in ("create", "link") and not overlap(phrase, t.name):
                    continue  # only a call that adds what the record holds can pass its limit
                for c in _holders(t, world):
                    fld = _field(c, phrase, numbers=True)
                    if fld and fld != c.primary_key:
                        pairs.append((t, {"op": "record_limit", "collection": c.name, "id_arg": c.primary_key,
                                          "field": fld, "max": limit}))
                        break
        out += _by_tool("quantity_limit", text, pairs, f"no argument or field holds '{' '.join(phrase) or word}'",
                        values=[limit])
    for m in _PER.finditer(text):
        n = number(m.group(1))
        noun, per = _phrase(m.group(3)), m.group(4)
        if n is None or not noun or any(r.kind == "quantity_limit" for r in out):
            continue
        pairs = []
        for t in _targets(st, world) or world.writes:
            if t.coll is None or t.coll.primary_key not in t.params or world.coll(per) is not t.coll:
                continue
            hit = _param([t], noun, types=("array", "integer", "number"))
            if hit:
                pairs.append((t, {"op": "arg_limit", "arg": hit[0][1], "max": n}))
                continue
            fld = _field(t.coll, noun, numbers=True)
            if fld:
                pairs.append((t, {"op": "record_limit", "collection": t.coll.name, "id_arg": t.coll.primary_key,
                                  "field": fld, "max": n}))
        out += _by_tool("quantity_limit", text, pairs, f"no argument or field holds '{' '.join(noun)}' per {per}",
                        values=[n])
    return out


def _cross_record(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    m = _OWNED.search(text)
    if m:
        owner = next(g for g in m.groups()[1:] if g)
        owner_coll = world.coll(owner)
        if owner_coll is None:
            return []  # "attached to the source": no record of this tool set owns anything here
        pairs = []
        for t in _targets(st, world) or world.writes:
            if owner_coll.primary_key not in t.params:
                continue
            for p in t.params:  # the thing owned: another id argument whose collection holds the owner's id
                c = world.coll(p[:-3]) if p.endswith("_id") else None
                if c is None or c is owner_coll or c.primary_key != p:
                    continue
                if any(f.name == owner_coll.primary_key for f in c.fields):
                    pairs.append((t, {"op": "owned", "collection": c.name, "id_arg": p,
                                      "owner_field": owner_coll.primary_key, "owner_arg": owner_coll.primary_key}))
        out += _by_tool("cross_record", text, pairs, f"no write names both a record and the {owner} it must belong to")
    m = _MEMBER.search(text) if not out else None
    if m and re.search(r"\b(must|only|cannot|not|should)\b", text, re.I):
        holder = world.coll(m.group(1))
        item_words = _phrase(text[: m.start()])[-2:]
        pairs = []
        for t in _targets(st, world) or world.writes:
            if holder is None or holder.primary_key not in t.params:
                continue
            for p in t.params:
                if p == holder.primary_key or not (p.endswith("_id") or p.endswith("_ids")):
                    continue
                if item_words and not overlap(item_words, p.rsplit("_", 1)[0]):
                    continue
                lists = [f.name for f in holder.fields if f.type == "array"
                         and overlap([p.rsplit("_", 1)[0], nm.plural(p.rsplit("_", 1)[0])], f.name)]
                if lists:
                    pairs.append((t, {"op": "member", "collection": holder.name, "id_arg": holder.primary_key,
                                      "list_field": lists[0], "item_arg": p}))
        if holder is not None:
            out += _by_tool("cross_record", text, pairs,
                            f"no write names both the {' '.join(item_words) or 'item'} and the {holder.entity} holding it")
    return out


def _prohibition(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    m = _UNCHANGED.search(text)
    if m:
        phrase = _phrase(m.group(1) or m.group(2))[:3]
        pairs = []
        for t in world.writes:
            if t.kind == "create" or t.coll is None or t.coll.primary_key not in t.params:
                continue
            fld = _field(t.coll, phrase)
            hit = _param([t], phrase)
            if fld and hit and fld != "status":
                pairs.append((t, {"op": "unchanged", "collection": t.coll.name, "id_arg": t.coll.primary_key,
                                  "field": fld, "arg": hit[0][1]}))
        known = any(_field(c, phrase) for c in world.schema.collections)
        if phrase and (pairs or known):  # a field no record has is no rule we know ("if the fee cannot be removed")
            out += _by_tool("prohibition", text, pairs, f"no write on a record takes '{' '.join(phrase)}'")
    if out:
        return out
    # an argument's documented values: "the access type cannot be Admin", "refunds go to X or Y only"
    low = " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "
    pairs = []
    for t in world.writes:
        for p, s in t.params.items():
            enum = [v for v in (s.get("enum") or []) if isinstance(v, str)]
            named = [v for v in enum if " " + re.sub(r"[^a-z0-9]+", " ", v.lower()).strip() + " " in low]
            if not named or len(named) == len(enum):
                continue
            if not (overlap(_phrase(text), p) or len(named) >= 2 and re.search(r"\b(only|must|either)\b", text, re.I)):
                continue
            if _NEGATION.search(text):
                pairs.append((t, {"op": "arg_not", "arg": p, "values": named}))
            elif re.search(r"\b(only|must|either|one of)\b", text, re.I):
                pairs.append((t, {"op": "arg_in", "arg": p, "values": named}))
    if pairs:
        out += _by_tool("prohibition", text, pairs, "")
    return out


def _status(st: Statement, world: _World) -> list[ParsedRule]:
    text = st.text
    pairs = []
    said = {stem(nm.singular(w)) for w in words_of(text)}
    for t, c in [(t, c) for t in _targets(st, world) for c in _holders(t, world)]:
        if c is not t.coll and not ({stem(c.entity), stem(nm.singular(c.name))} | {stem(w) for w in nm.words(c.entity)}) & said:
            continue  # another record's status only where the statement names that record
        enum = next((list(f.enum) for f in c.fields if f.name == "status" and f.enum), None)
        if not enum:
            continue
        clean = re.sub(r"\((?:not yet|i\.e\.|e\.g\.)[^)]*\)", " ", text)  # "pending (not yet shipped)": pending
        allowed, forbidden = status_rules(clean, [str(v) for v in enum], c.entity)
        # a prohibition whose condition is negated allows: "do not cancel ... unless it is pending",
        # "do not accept a return for an order that has not been delivered"
        cond = re.search(r"\b(unless|except (?:when|if)|only if)\b(.*)$|\b(?:that|which|whose \w+)\s+(?:is|has|have|are)\s+"
                         r"(?:not|never)\b(.*)$", clean, re.I)
        if cond and re.match(r"\s*(?:\W*\s*)?(do not|never|no\b|cannot|must not)", clean, re.I):
            tail = cond.group(2) or cond.group(3) or ""
            named = [v for v in enum if re.search(r"\b" + re.escape(str(v).replace("_", " ")) + r"\b", tail.replace("_", " "), re.I)]
            if named:
                allowed, forbidden = [str(v) for v in named], []
        if not allowed and not forbidden:
            continue
        check = {"op": "status", "collection": c.name, "id_arg": c.primary_key, "field": "status"}
        check.update({"allowed": allowed} if allowed else {"forbidden": forbidden})
        pairs.append((t, check))
    if not pairs:
        return []
    return _by_tool("source_status", text, pairs, "", field_="status")


_LIMIT_HEAD = re.compile(r"\b(max(?:imum)?|at most|up to|limit|cap|min(?:imum)?|at least)\b", re.I)


def _table_row(st: Statement, world: _World) -> list[ParsedRule]:
    """A row of a limits table ("| Plan | Max hours per reservation |" / "| flex | 10 |"): each limit
    cell is a quantity limit on the argument its header names, holding for records whose field has
    the row's first value (a ``when``: the flex plan's members)."""
    if not st.cells or len(st.cells) < 2:
        return []
    key_head, key_val = st.cells[0]
    norm = lambda v: re.sub(r"[^a-z0-9]+", "_", str(v).lower()).strip("_")  # noqa: E731
    conds = [(c, f) for c in world.schema.collections for f in c.fields
             if (f.enum and norm(key_val) in {norm(v) for v in f.enum}) or (overlap(_phrase(key_head), f.name) >= 3)]
    out: list[ParsedRule] = []
    for head, cell in st.cells[1:]:
        lim = _LIMIT_HEAD.search(head)
        m = re.match(r"\s*" + NUM + r"\s*(.*)$", cell, re.I)
        n = number(m.group(1)) if m else None
        if lim is None or n is None:
            continue
        if re.match(r"\s*" + _UNIT, m.group(2), re.I):
            continue  # "Book ahead at most: 7 days" is a window on an argument's date, not read here
        key = "min" if lim.group(1).lower().startswith("min") or lim.group(1).lower() == "at least" else "max"
        phrase = _phrase(_LIMIT_HEAD.sub(" ", re.split(r"\bper\b", head, maxsplit=1, flags=re.I)[0]))
        pairs = []
        for t, p in _param(world.writes, phrase, types=("integer", "number", "array")):
            when = next(({"collection": c.name, "id_arg": c.primary_key, "field": f.name, "values": [key_val]}
                         for c, f in conds if c.primary_key in t.params), None)
            if when is not None:
                pairs.append((t, {"op": "arg_limit", "arg": p, key: n, "when": when}))
        text = f"{key_head} {key_val}: {head} {cell}"
        out += _by_tool("quantity_limit", text, pairs,
                        f"no write takes '{' '.join(phrase)}' with the {key_head.lower()} it depends on", values=[n])
    return out


FORMS = (_table_row, _conversation, _count_limit, _time_window, _money, _quantity, _cross_record, _prohibition, _status)


def _plain(text: str) -> str:
    """Contractions spelled out ("Don't" -> "Do not", "can't" -> "cannot"), curly quotes straight."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = re.sub(r"\bcan't\b", "cannot", text, flags=re.I)
    text = re.sub(r"\bwon't\b", "will not", text, flags=re.I)
    return re.sub(r"n't\b", " not", text)


def read_statement(st: Statement, world: _World) -> list[ParsedRule]:
    """The rules one statement states: the first forms that read it (a statement may state several)."""
    st = Statement(_plain(st.text), st.offset, st.context, st.cells)
    out: list[ParsedRule] = []
    for form in FORMS:
        got = form(st, world)
        if got and form in (_conversation, _table_row):
            return got
        out += got
    # a form that bound beats one of the same statement that did not
    if any(r.enforcement != "not enforced" for r in out):
        out = [r for r in out if r.enforcement != "not enforced"]
    return out


# --------------------------------------------------------------------------- entry points


def read_policy(text: str, source: str, specs: list[ToolSpec], plans: dict, schema: StateSchema) -> list[ParsedRule]:
    """Every rule-like statement of one policy document, over the canonical tool names: enforced
    (``runtime`` / ``judged``) with its check, or ``not enforced`` with why."""
    world = _world(specs, plans, schema)
    out: list[ParsedRule] = []
    for st in statements(text):
        if not RULE_CUE.search(st.text):
            continue
        got = read_statement(st, world) or [ParsedRule(
            "unparsed", st.text, why="the sentence matches no rule form the offline reader knows (docs/policies.md)")]
        for r in got:
            r.text, r.source, r.offset = st.text[:2000], source, st.offset
            out.append(r)
    return out


PROSE_KINDS = ("count_limit", "time_window", "quantity_limit", "money", "cross_record", "prohibition")


def prose_policy_rules(spec: ToolSpec, plan: Any, schema: StateSchema, specs: list[ToolSpec],
                       plans: dict) -> list[ParsedRule]:
    """The limits a tool's own description states that its template code does not enforce (counts,
    windows, quantities, amounts, cross-record conditions), as guards on this tool alone. Status
    rules stay with the templates; a sentence read here replaces its ``constraint`` row."""
    from autoforge.domain.argument_rules import argument_rule
    from autoforge.domain.rules import rule_texts

    world = _world(specs, plans, schema)
    me = [t for t in world.tools if t.name == spec.name]
    if not me or me[0].effect != "write":
        return []
    world.tools = me + [t for t in world.tools if t.name != spec.name and t.effect != "write"]
    out: list[ParsedRule] = []
    seen: set[str] = set()
    for param, sentence in rule_texts(spec):
        if sentence in seen or not RULE_CUE.search(sentence):
            continue
        seen.add(sentence)
        if argument_rule(sentence, param, props(spec.parameters)) is not None:
            continue  # an argument constraint the tool's code checks already (autoforge.domain.argument_rules)
        st = Statement(sentence, 0, context=spec.name.replace("_", " "))
        for form in (_count_limit, _time_window, _money, _quantity, _cross_record, _prohibition):
            for r in form(st, world):
                if r.kind in PROSE_KINDS and r.enforcement == "runtime" and r.tools == [spec.name]:
                    if param and r.check and r.check.get("op") == "arg_limit" and r.check.get("arg") != param:
                        continue  # a parameter's own sentence limits that parameter
                    r.source, r.offset = "tool", None
                    out.append(r)
    return out
