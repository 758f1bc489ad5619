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
                "transfer / escalate to a human agent only when ..."         (read, not judged yet)
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
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.policy_identity import identity_of
from autoforge.domain.policy_args import arg_count, arg_needed, args_filled, listed_values
from autoforge.domain.policy_order import call_order, condition_rules, drop_conflicts, procedure_rules, read_decides
from autoforge.domain.policy_protocol import drop_protocol_conflicts, protocol_rule
from autoforge.domain.policy_text import NUM, Statement, number, overlap, statements, stem, verb_span_free, words_of
from autoforge.domain.policy_world import (PolicyWorld, any_write, by_tool, field_named, records_named,
                                           params_named, phrase_of, policy_world, make_rule, governed_tools, outside_why,
                                           tool_mentions)
from autoforge.domain.rule_kinds import OUTSIDE, ParsedRule
from autoforge.domain.statuses import status_rules
from autoforge.tooldocs.schema import props
from autoforge.types import StateSchema, ToolSpec

RULE_CUE = re.compile(
    r"\b(must|only|cannot|can ?not|can't|may not|never|requires?|required|at most|at least|no more than|not allowed"
    r"|unless|should|need to|needs to|has to|have to|eligible|allowed|permitted|limit(?:ed|s)?|maximum|minimum|max"
    r"|within|prior to|no later than|up to|exceed\w*|always|do not|don't|once|twice|before|no sooner than|no earlier than"
    r"|not until|prohibited|forbidden|restricted|no longer|at a time|left(?![\s-]+(?:hand|side|corner|column|panel|of))|remaining)\b"
    r"|\b(?:for|from|between)\s+\d+\s+(?:to|and)\s+\d+\b|\bfirst\b[^.]*\bthen\b|\b(?:less|fewer) than\b"
    r"|\bcan be [\w-]+(?:ed|en)\b[^.]*\bif\b|\bif\b[^.]*\bcan be [\w-]+(?:ed|en)\b", re.I)
PEOPLE = {"customer", "user", "caller", "guest", "member", "patient", "client", "employee", "account", "holder",
          "passenger", "traveler", "traveller", "subscriber", "borrower", "student", "owner", "renter", "driver"}
_IDENT = re.compile(r"\bauthenticat\w*|\b(verif\w+|identif\w+|validat\w+|confirm\w*)\b[^.]{0,40}?"
                    r"\b(identity|identities|who (?:they|he|she) (?:are|is)|user[ _]?id|customer[ _]?id|account holder|"
                    + "|".join(sorted(PEOPLE - {"account", "holder", "owner"})) + r")s?\b(?!\s*(?:'s)?\s*(?:request|choice|answer))", re.I)
_IDENT_BACK = re.compile(r"\b(" + "|".join(sorted(PEOPLE - {"account", "holder", "owner"})) + r")s?\b[^.]{0,30}?"
                         r"\b(?:not|never|un)\s*(?:been\s+|be\s+)?(identif\w+|verif\w+|authenticat\w+)", re.I)
_IDENTIFIES = re.compile(r"authenticat|verify|identif|login|log_in|sign_in")  # a tool that identifies the caller, by its name
_IDENT_WHEN = re.compile(r"\b(before|first|prior|until|unless|only after|cannot|must|should|always|need|required)\b", re.I)
_CONFIRM = re.compile(r"\b(explicit|express|written|verbal)\s+(confirmation|consent|approval|agreement)\b"
                      r"|\bconfirm\w*\b[^.]{0,60}\b(before|prior|first)\b|\b(before|prior to)\b[^.]{0,80}\bconfirm\w*\b"
                      r"|\b(ask|get|obtain|receive|have)\w*\b[^.]{0,40}\b(to confirm|confirmation|consent|agree\w*|a yes)\b"
                      r"|\b(get|obtain|receive|wait for|hear)\b[^.]{0,30}\b(yes|go[- ]ahead|ok|okay)\b"
                      r"|\b(?:once|after|when)\s+(?:it is\s+|they are\s+|the user has\s+|the customer has\s+)?confirmed\b[^.]{0,20}"
                      r"\b(?:call|run|use|invoke)\b", re.I)
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
_RANGE = re.compile(r"\b(?:for|from|between)\s+" + NUM + r"\s+(?:to|and|-|\u2013)\s+" + NUM + r"\s+([a-z][\w\- ]{0,30})", re.I)
_NONE_LEFT = re.compile(r"\bwith no ([a-z][\w ]{1,30}?)\s*(?:remaining|left)?\b[^.]*?\b(?:cannot|can not|may not|must not|never)\b", re.I)
_HAS_LEFT = re.compile(r"\bonly (?:while|if|when)\b[^.]{0,40}?\bha(?:s|ve) (?:any |some )?([a-z][\w ]{1,30}?)\s+"
                       r"(?:left|remaining|available)\b", re.I)
_THRESHOLD = re.compile(r"\bwith\s+(?:(more than)\s+)?" + NUM + r"\s*(?:[A-Z]{3}\b|dollars|euros)?\s*(or more|or above|or over)?\s*"
                        r"(?:of\s+|in\s+)?([a-z][\w ]{1,30}?)\s+(?:cannot|can not|may not|must not|is not allowed to|are not allowed to)\b", re.I)
_LIMIT = re.compile(r"\b(at most|no more than|up to|a maximum of|maximum of|max(?:imum)?|limited to|capped at|cannot exceed|"
                    r"may not exceed|must not exceed|not to exceed|not exceed|more than|over|at least|a minimum of|minimum of|"
                    r"min(?:imum)?|fewer than|less than|under)\s*:?\s*" + NUM + r"\s*([a-z$%][\w\- ]{0,40})?", re.I)
_PER = re.compile(r"\b(one|a single|" + NUM + r")\s+([a-z][\w\-]*(?: [a-z][\w\-]*)?)\s+(?:per|for each|each)\s+([a-z][\w\-]*)", re.I)
_EXCEED = re.compile(r"\b(cannot|may not|must not|can ?not|should not|never|can't|not)\s+(?:be\s+)?(exceed|[a-z]+ more than|be (?:more|greater|higher|"
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
_MONOTONE = re.compile(r"\b(?:can only (?:go up|increase|be increased|grow|rise)|cannot (?:be )?(?:decrease|reduce|lower|go down)\w*"
                       r"|(?:is|are) never (?:decreased|reduced|lowered))\b", re.I)
_CHANGE_ACTIVE = re.compile(r"\b(?:the\s+)?(?:number of\s+)?([a-z][\w\- ]{1,30}?)\s+(?:cannot|can ?not|may not|must not|never)\s+"
                            r"(?:change|changes)\b", re.I)
_NEGATION = re.compile(r"\b(not|cannot|can't|never|no|nor|neither|except|excluding|other than|isn't|aren't|won't)\b", re.I)


# --------------------------------------------------------------------------- the forms


def _conversation(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    named = [t for _, _, t in tool_mentions(text, world) if t.effect == "write"]  # "call the 'save_address' tool"
    targets = named or (governed_tools(st, world) if not any_write(text) else [])
    writes = targets or world.writes
    names = [t.name for t in writes]
    if _TRANSFER.search(text):
        hand = [t for t in world.tools if t.kind == "handoff"]
        # read, but not judged yet: listed not enforced, so no count calls it enforced
        return [make_rule("conversation", text, None, hand, "not enforced",
                          why="the judge does not check when to transfer yet (transfer_when)" if hand
                          else "the tool set has no hand-off tool to transfer with")]
    about_lookup = bool(named) and all(_IDENTIFIES.search(t.name) for t in named)  # the sentence is about the lookup itself
    if not about_lookup and ((_IDENT.search(text) and _IDENT_WHEN.search(text)) or _IDENT_BACK.search(text)) and not re.search(r"\bconfirm\w*\s+(?:the\s+)?(?:change|cancel|"
                                                                            r"action|details|request)", text, re.I):
        via = [t.name for t in world.tools if t.kind == "lookup" or _IDENTIFIES.search(t.name)]
        writes = [t for t in writes if t.name not in via]
        names = [t.name for t in writes]
        check = {"op": "identify_first", "tools": names, "via": via, **identity_of(
            text, {t.name: t.params for t in writes}, {t.name: t.params for v in via for t in world.tools if t.name == v})}
        return [make_rule("conversation", text, check if writes else None, writes, "judged",
                      why=None if writes else "the tool set has no write to guard")]
    if _CONFIRM.search(text):
        check = {"op": "confirm_first", "tools": names}
        return [make_rule("conversation", text, check if writes else None, writes, "judged",
                      why=None if writes else "the tool set has no write to guard")]
    return []


def _count_limit(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
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
    for t in governed_tools(st, world):
        holders = records_named(t, world)
        if not holders:
            continue
        c = holders[0]
        counter = f"{nm.words(t.name)[0]}_count"
        pairs.append((t, {"op": "count_limit", "collection": c.name, "id_arg": c.primary_key,
                          "counter": counter, "max": int(n)}))
    return by_tool("count_limit", st.text, pairs, "no write on one record of this tool set does what it limits",
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


def _time_window(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    found: list[tuple[str, dict, list[str]]] = []  # (direction, span, date phrase)
    for m in _WITHIN.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("since", _span(n, m.group(2)), phrase_of(m.group(3))[:3]))
    for m in _AFTER.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("since", _span(n, m.group(2)), phrase_of(m.group(3))[:3]))
    for m in _SOONER.finditer(text):
        n = number(m.group(1))
        if n is not None:
            found.append(("after", _span(n, m.group(2)), phrase_of(m.group(3))[:3]))
    for m in ([] if found else _ON_DAY.finditer(text)):
        found.append(("until", {"days": 1}, phrase_of(m.group(1))[:3]))
    for m in ([] if found else _PAST.finditer(text)):
        if not re.search(NUM + r"\s*" + _UNIT + r"\s*$", text[: m.start(1)], re.I):
            found.append(("until", {"days": 0}, phrase_of(m.group(1))[:3]))
    if not found and not re.search(r"\b(fee|fees|charge[sd]?|penalty|penalties|free|surcharge)\b", text, re.I) \
            and re.search(r"\b(must|only|cannot|can ?not|can't|may not|no later than|at least|up to|not|never|no)\b", text, re.I):
        for m in _BEFORE.finditer(text):
            if m.group(1):
                n = number(m.group(1))
                if n is not None:
                    found.append(("until", _span(n, m.group(2)), phrase_of(m.group(3))[:3]))
            elif m.group(4) and re.search(r"\b(only|must|cannot|no|not|never|can be|may be)\b", text, re.I):
                found.append(("until", {"days": 0}, phrase_of(m.group(4))[:3]))
    out: list[ParsedRule] = []
    for direction, span, phrase in found[:2]:
        if not phrase:
            continue
        pairs, why = [], f"no record date that '{' '.join(phrase)}' names"
        targets = governed_tools(st, world, exclude=phrase)
        for t in targets:
            for c in records_named(t, world):
                fld = field_named(c, phrase, dates=True)
                if fld is not None:
                    pairs.append((t, {"op": "window", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "direction": direction, **span}))
                    break
        if not targets:
            why = "it names no write of this tool set"
        out += by_tool("time_window", text, pairs, why, values=[span])
    return out


def _money(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    for rx, side in ((_EXCEED, "max"), (_COVER, "min")):
        m = rx.search(text)
        if not m:
            continue
        phrase = [w for w in words_of(m.group(3)) if w not in ("the", "a", "an", "its", "their", "of", "s")][:3]
        if not phrase or number(phrase[0]) is not None:
            continue
        subject = phrase_of(text[: m.start()])[-3:] + ([m.group(2).split()[0]] if " more than" in m.group(2) else [])
        pairs = []
        for t in governed_tools(st, world) or world.writes:
            money_args = [p for p, s in t.params.items() if s.get("type") in ("number", "integer")
                          and not p.endswith("_id")]
            arg = max(money_args, key=lambda p: overlap(subject + ["amount", "refund", "payment"], p), default=None)
            for c in records_named(t, world):
                fld = field_named(c, phrase, numbers=True)
                if fld and arg:
                    pairs.append((t, {"op": "covers", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "arg": arg, "side": side}))
                    break
        money = re.search(r"amount|price|total|balance|paid|fee|cost|credit|refund|payment|fund|charge|deposit|quote|owed|due|\$",
                          " ".join(phrase + subject) + " " + " ".join(str(c.get("arg")) for _, c in pairs), re.I)
        out += by_tool("money" if money else "quantity_limit", text, pairs,
                        f"no write takes an amount to compare with a record's '{' '.join(phrase)}'")
    return out


def _quantity(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    for m in _RANGE.finditer(text):  # "frozen for 1 to 8 weeks", "between 1 and 10 items"
        lo, hi = number(m.group(1)), number(m.group(2))
        phrase = phrase_of(re.split(r"\b(?:at a time|at once|per|each|in|on|of|for|to)\b", m.group(3), maxsplit=1)[0])[:3]
        if lo is None or hi is None or not phrase or re.match(r"\s*(?:before|after|of the|from|prior)\b", text[m.end():]):
            continue
        pairs = [(t, {"op": "arg_limit", "arg": p, "min": lo, "max": hi})
                 for t, p in params_named(governed_tools(st, world) or world.writes, phrase, types=("integer", "number", "array"))]
        out += by_tool("quantity_limit", text, pairs, f"no argument holds '{' '.join(phrase)}'", values=[lo, hi])
    m = _THRESHOLD.search(text)  # "a member with 10.00 USD or more in unpaid fines cannot borrow"
    n = number(m.group(2)) if m else None
    if m and n is not None and (m.group(1) or m.group(3)):
        phrase = phrase_of(m.group(4))[:3]
        pairs = []
        for t in governed_tools(st, world):
            for c in records_named(t, world):
                fld = field_named(c, phrase, numbers=True)
                if fld:  # refused when the record holds the threshold: have + 0 > max
                    top = n if m.group(1) else n - (0.01 if not float(n).is_integer() or "." in m.group(2) else 1)
                    pairs.append((t, {"op": "record_limit", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "max": round(top, 2), "add": 0}))
                    break
        out += by_tool("quantity_limit", text, pairs, f"no record the call names holds '{' '.join(phrase)}'", values=[n])
    for rx in (_NONE_LEFT, _HAS_LEFT):  # "with no refills remaining", "only while it has passes left"
        m = rx.search(text)
        if not m:
            continue
        phrase = phrase_of(m.group(1))[:3]
        pairs = []
        for t in governed_tools(st, world):
            for c in records_named(t, world):
                fld = field_named(c, phrase, numbers=True)
                if fld:
                    pairs.append((t, {"op": "record_min", "collection": c.name, "id_arg": c.primary_key, "field": fld,
                                      "min": 1}))
                    break
        out += by_tool("count_limit", text, pairs, f"no record the call names holds '{' '.join(phrase)}'", values=[1])
    if out:
        return out
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
        phrase = phrase_of(unit)[:4] or phrase_of(text[: m.start()])[-3:]
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
        targets = governed_tools(st, world)
        pairs = []
        for t, p in params_named(targets or world.writes, phrase, types=("integer", "number", "array")):
            pairs.append((t, {"op": "arg_limit", "arg": p, key: limit}))
        if not pairs and not lower:  # a limit on what a record holds ("each member may have at most 3 holds")
            for t in targets or world.writes:
                if t.kind not in ("create", "link") and not overlap(phrase, t.name):
                    continue  # only a call that adds what the record holds can pass its limit
                for c in records_named(t, world):
                    fld = field_named(c, phrase, numbers=True)
                    if fld and fld != c.primary_key:
                        pairs.append((t, {"op": "record_limit", "collection": c.name, "id_arg": c.primary_key,
                                          "field": fld, "max": limit}))
                        break
        out += by_tool("quantity_limit", text, pairs, f"no argument or field holds '{' '.join(phrase) or word}'",
                        values=[limit])
    for m in _PER.finditer(text):
        n = number(m.group(1))
        noun, per = phrase_of(m.group(3)), m.group(4)
        if n is None or not noun or any(r.kind == "quantity_limit" for r in out):
            continue
        pairs = []
        for t in governed_tools(st, world) or world.writes:
            if t.coll is None or t.coll.primary_key not in t.params or world.coll(per) is not t.coll:
                continue
            hit = params_named([t], noun, types=("array", "integer", "number"))
            if hit:
                pairs.append((t, {"op": "arg_limit", "arg": hit[0][1], "max": n}))
                continue
            fld = field_named(t.coll, noun, numbers=True)
            if fld:
                pairs.append((t, {"op": "record_limit", "collection": t.coll.name, "id_arg": t.coll.primary_key,
                                  "field": fld, "max": n}))
        out += by_tool("quantity_limit", text, pairs, f"no argument or field holds '{' '.join(noun)}' per {per}",
                        values=[n])
    return out


def _cross_record(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    m = _OWNED.search(text)
    if m:
        owner = next(g for g in m.groups()[1:] if g)
        owner_coll = world.coll(owner)
        if owner_coll is None:
            return []  # "attached to the source": no record of this tool set owns anything here
        pairs = []
        for t in governed_tools(st, world) or world.writes:
            if owner_coll.primary_key not in t.params:
                continue
            for p in t.params:  # the thing owned: another id argument whose collection holds the owner's id
                c = world.coll(p[:-3]) if p.endswith("_id") else None
                if c is None or c is owner_coll or c.primary_key != p:
                    continue
                if any(f.name == owner_coll.primary_key for f in c.fields):
                    pairs.append((t, {"op": "owned", "collection": c.name, "id_arg": p,
                                      "owner_field": owner_coll.primary_key, "owner_arg": owner_coll.primary_key}))
        out += by_tool("cross_record", text, pairs, f"no write names both a record and the {owner} it must belong to")
    m = _MEMBER.search(text) if not out else None
    if m and re.search(r"\b(must|only|cannot|not|should)\b", text, re.I):
        holder = world.coll(m.group(1))
        item_words = phrase_of(text[: m.start()])
        pairs = []
        for t in governed_tools(st, world) or world.writes:
            if holder is None or holder.primary_key not in t.params:
                continue
            for p in t.params:
                if p == holder.primary_key or not (p.endswith("_id") or p.endswith("_ids")):
                    continue
                base = p[:-4] if p.endswith("_ids") else p[:-3]
                # the holder's list of these ids: named like them (item_ids), or a list of objects that
                # carry them (items: [{product_id ...}])
                lists = [f.name for f in holder.fields if f.type == "array" and (
                    overlap([base, nm.plural(base)], f.name) or base + "_id" in ((f.items or {}).get("properties") or {}))]
                if item_words and lists and not (overlap(item_words, base) or overlap(item_words, lists[0])):
                    continue
                if lists:
                    pairs.append((t, {"op": "member", "collection": holder.name, "id_arg": holder.primary_key,
                                      "list_field": lists[0], "item_arg": p}))
        if holder is not None:
            out += by_tool("cross_record", text, pairs,
                            f"no write names both the {' '.join(item_words) or 'item'} and the {holder.entity} holding it")
    return out


def _prohibition(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    out: list[ParsedRule] = []
    up = _MONOTONE.search(text)
    if up:  # "the number can only go up": a new value below the record's is refused
        phrase = phrase_of(re.sub(r"\b(?:the )?number\b", " ", text[: up.start()] + " " + text[up.end():]))[:4]
        pairs = []
        for t in world.writes:
            if t.kind == "create" or t.coll is None or t.coll.primary_key not in t.params:
                continue
            hit = params_named([t], phrase, types=("integer", "number", "array")) if phrase else []
            nums = [p for p, sc in t.params.items() if sc.get("type") in ("integer", "number") and not p.endswith("_id")]
            if not phrase and len(nums) == 1:  # "The number can only go up": the tool's one number
                hit = [(t, nums[0])]
            fld = field_named(t.coll, [hit[0][1]], numbers=True) if hit else None
            if hit and fld:
                pairs.append((t, {"op": "covers", "collection": t.coll.name, "id_arg": t.coll.primary_key, "field": fld,
                                  "arg": hit[0][1], "side": "min"}))
        if pairs:
            return by_tool("prohibition", text, pairs, "")
    m = _UNCHANGED.search(text) or _CHANGE_ACTIVE.search(text)
    if m:
        phrase = phrase_of(next(g for g in m.groups() if g))[:3]
        pairs = []
        for t in world.writes:
            if t.kind == "create" or t.coll is None or t.coll.primary_key not in t.params:
                continue
            fld = field_named(t.coll, phrase)
            hit = params_named([t], phrase)
            if fld and hit and fld != "status":
                pairs.append((t, {"op": "unchanged", "collection": t.coll.name, "id_arg": t.coll.primary_key,
                                  "field": fld, "arg": hit[0][1]}))
        known = any(field_named(c, phrase) for c in world.schema.collections)
        if phrase and (pairs or known):  # a field no record has is no rule we know ("if the fee cannot be removed")
            out += by_tool("prohibition", text, pairs, f"no write on a record takes '{' '.join(phrase)}'")
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
            if not overlap(phrase_of(text), p):
                continue  # the sentence must name the argument, not only some of its values
            if _NEGATION.search(text):
                pairs.append((t, {"op": "arg_not", "arg": p, "values": named}))
            elif re.search(r"\b(only|must|either|one of)\b", text, re.I):
                pairs.append((t, {"op": "arg_in", "arg": p, "values": named}))
    if pairs:
        out += by_tool("prohibition", text, pairs, "")
    return out or listed_values(text, world)



def _status(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    text = st.text
    pairs = []
    said = {stem(nm.singular(w)) for w in words_of(text)}
    for t, c in [(t, c) for t in governed_tools(st, world) for c in records_named(t, world)]:
        if c is not t.coll and not ({stem(c.entity), stem(nm.singular(c.name))} | {stem(w) for w in nm.words(c.entity)}) & said:
            continue  # another record's status only where the statement names that record
        # the status first, then any other field with documented values ("basic economy flights
        # cannot be modified": the cabin) whose values the statement names
        fields = sorted((f for f in c.fields if f.enum and all(isinstance(v, str) for v in f.enum)),
                        key=lambda f: f.name != "status")
        for f in fields:
            got = _status_check(text, c, f)
            if got is not None:
                pairs.append((t, got))
                break
    if not pairs:
        return []
    return by_tool("source_status", text, pairs, "", field_="status")


def _status_check(text: str, c: Any, f: Any) -> dict | None:
    """The status guard ``text`` states on field ``f`` of collection ``c`` (its documented values), or None."""
    enum = list(f.enum)
    if f.name != "status":  # another field's value names the records it is about: "basic economy reservations"
        nouns = "|".join(re.escape(w) for w in {c.entity, nm.plural(c.entity), c.name} | set(nm.words(c.entity))
                         | set(nm.words(f.name)))
        flat = text.replace("_", " ")
        if not any(re.search(r"\b" + re.escape(str(v).replace("_", " ")) + r"\s+(?:" + nouns + r")\b", flat, re.I)
                   or re.search(r"\bwhose\s+[a-z]+(?:\s+[a-z]+)?\s+(?:is|are)\s+(?:not\s+)?" + re.escape(str(v).replace("_", " "))
                                + r"\b", flat, re.I) for v in enum):
            return None
    if re.search(r"\b(?:can|may|could) still\b|\b(?:is|are) still (?:allowed|able|permitted)\b", text, re.I) or not re.search(
            r"\b(only|must|cannot|not|never|unless|except|no|prohibited|forbidden|required)\b", text, re.I):
        return None  # a permission ("a suspended member can still pay fines") restricts nothing
    text = verb_span_free(text)
    if f.name != "status" and not any(re.search(r"\b" + re.escape(str(v).replace("_", " ")) + r"\b",
                                                text.replace("_", " "), re.I) for v in enum):
        return None
    clean = re.sub(r"\((?:not yet|i\.e\.|e\.g\.)[^)]*\)", " ", text)  # "pending (not yet shipped)": pending
    allowed, forbidden = status_rules(clean, [str(v) for v in enum], c.entity)
    if f.name != "status" and len(allowed) == len(enum):
        return None
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
        return None
    check = {"op": "status", "collection": c.name, "id_arg": c.primary_key, "field": f.name}
    check.update({"allowed": allowed} if allowed else {"forbidden": forbidden})
    return check


_LIMIT_HEAD = re.compile(r"\b(max(?:imum)?|at most|up to|limit|cap|min(?:imum)?|at least)\b", re.I)


def _table_row(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """A row of a limits table ("| Plan | Max hours per reservation |" / "| flex | 10 |"): each limit
    cell is a quantity limit on the argument its header names, holding for records whose field has
    the row's first value (a ``when``: the flex plan's members)."""
    if not st.cells or len(st.cells) < 2:
        return []
    key_head, key_val = st.cells[0]
    norm = lambda v: re.sub(r"[^a-z0-9]+", "_", str(v).lower()).strip("_")  # noqa: E731
    conds = [(c, f) for c in world.schema.collections for f in c.fields
             if (f.enum and norm(key_val) in {norm(v) for v in f.enum}) or (overlap(phrase_of(key_head), f.name) >= 3)]
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
        phrase = phrase_of(_LIMIT_HEAD.sub(" ", re.split(r"\bper\b", head, maxsplit=1, flags=re.I)[0]))
        pairs = []
        for t, p in params_named(world.writes, phrase, types=("integer", "number", "array")):
            when = next(({"collection": c.name, "id_arg": c.primary_key, "field": f.name, "values": [key_val]}
                         for c, f in conds if c.primary_key in t.params), None)
            if when is not None:
                pairs.append((t, {"op": "arg_limit", "arg": p, key: n, "when": when}))
        text = f"{key_head} {key_val}: {head} {cell}"
        out += by_tool("quantity_limit", text, pairs,
                        f"no write takes '{' '.join(phrase)}' with the {key_head.lower()} it depends on", values=[n])
    return out


FORMS = (_table_row, call_order, args_filled, arg_count, arg_needed, protocol_rule, _conversation, _count_limit, _time_window, _money, _quantity, _cross_record, _prohibition, _status)


def _plain(text: str) -> str:
    """Contractions spelled out ("Don't" -> "Do not", "can't" -> "cannot"), curly quotes straight."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    text = re.sub(r"\bcan't\b", "cannot", text, flags=re.I)
    text = re.sub(r"\bwon't\b", "will not", text, flags=re.I)
    return re.sub(r"n't\b", " not", text)


def read_statement(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """The rules one statement states: the first forms that read it (a statement may state several)."""
    st = Statement(_plain(st.text), st.offset, st.context, st.cells)
    out: list[ParsedRule] = []
    for form in FORMS:
        got = form(st, world)
        if got and form in (_conversation, _table_row, call_order, args_filled, arg_count, arg_needed, protocol_rule):
            return got
        out += got
    # a form that bound beats one of the same statement that did not
    if any(r.enforcement != "not enforced" for r in out):
        out = [r for r in out if r.enforcement != "not enforced"]
    return out or read_decides(st, world)


# --------------------------------------------------------------------------- entry points


def read_policy(text: str, source: str, specs: list[ToolSpec], plans: dict, schema: StateSchema) -> list[ParsedRule]:
    """Every rule-like statement of one policy document, over the canonical tool names: enforced
    (``runtime`` / ``judged``) with its check, or ``not enforced`` with why."""
    world = policy_world(specs, plans, schema)
    out: list[ParsedRule] = []
    leads = condition_rules(text, world)
    for st in statements(text):
        if not RULE_CUE.search(st.text):
            continue
        lead = leads.pop(" ".join(st.text.split()), None)
        got = (lead or read_statement(st, world)) or [ParsedRule(
            "unparsed", st.text, why="the sentence matches no rule form the offline reader knows (docs/policies.md)")]
        for r in got:
            if r.offset is None:  # a lead-in's conditions come with their own sentence and offset
                r.text, r.offset = st.text[:2000], st.offset
            r.source = source
            out.append(r)
    for offset, r in procedure_rules(text, world):
        r.source, r.offset = source, offset
        out.append(r)
    drop_conflicts(out)
    drop_protocol_conflicts(out)
    for r in out:
        if r.enforcement == "not enforced" and (why := outside_why(r, world)):
            r.why = OUTSIDE + f"{why}; {r.why or ''}"[:900]
    return out  # in document order, the procedures last (a rule order that changed would change environment ids)



PROSE_KINDS = ("count_limit", "time_window", "quantity_limit", "money", "cross_record", "prohibition")


def prose_policy_rules(spec: ToolSpec, plan: Any, schema: StateSchema, specs: list[ToolSpec],
                       plans: dict) -> list[ParsedRule]:
    """The limits a tool's own description states that its template code does not enforce (counts,
    windows, quantities, amounts, cross-record conditions), as guards on this tool alone. Status
    rules stay with the templates; a sentence read here replaces its ``constraint`` row."""
    from autoforge.domain.argument_rules import argument_rule
    from autoforge.domain.rules import rule_texts

    world = policy_world(specs, plans, schema)
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
        # a parameter's own sentence is about that parameter ("The number can only go up")
        said = _plain(sentence) + (f" ({param.replace('_', ' ')})" if param else "")
        st = Statement(said, 0, context=spec.name.replace("_", " "))
        for form in (_count_limit, _time_window, _money, _quantity, _cross_record, _prohibition, _status):
            for r in form(st, world):
                if r.kind == "source_status" and (r.check or {}).get("field") == "status":
                    continue  # the record's status: the templates' rule (autoforge.domain.rules)
                r.text = sentence
                if (r.kind in PROSE_KINDS or r.kind == "source_status") and r.enforcement == "runtime" \
                        and r.tools == [spec.name]:
                    if param and r.check and r.check.get("op") == "arg_limit" and r.check.get("arg") != param:
                        continue  # a parameter's own sentence limits that parameter
                    r.source, r.offset = "tool", None
                    out.append(r)
    return out
