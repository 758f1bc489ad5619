"""The tool set as the policy reader sees it: each tool's verbs, nouns, arguments and the records it
names, and how a statement's words pick tools, arguments and fields (:mod:`autoforge.domain.policy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.policy_text import STOP, Statement, overlap, stem, verb_span_free, words_of
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import CollectionSpec, StateSchema, ToolSpec

# Verbs that say the same thing about a record (a policy says "changed", the tool is modify_booking)
VERB_GROUPS = [
    {"modify", "change", "update", "edit", "amend", "alter", "reschedule", "adjust", "move", "upgrade", "downgrade"},
    {"cancel", "void", "revoke", "terminate", "abort"},
    {"create", "book", "reserve", "place", "open", "submit", "register", "order", "purchase", "buy", "rent",
     "schedule", "new", "file", "enroll"},
    {"refund", "reimburse"}, {"return", "exchange"}, {"renew", "extend", "extension", "renewal"},
    {"delete", "remove", "close"}, {"issue", "grant", "give", "receive"}, {"top", "topup", "recharge", "reload", "add"}, {"transfer", "send", "pay", "payment"},
    {"redeem", "spend", "use", "apply"}, {"check_in", "checkin"}, {"check_out", "checkout", "borrow", "lend"},
]


# --------------------------------------------------------------------------- the tool set as the reader sees it


@dataclass
class PolicyTool:
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
class PolicyWorld:
    tools: list[PolicyTool]
    schema: StateSchema

    @property
    def writes(self) -> list[PolicyTool]:
        return [t for t in self.tools if t.effect == "write" and t.kind not in ("handoff", "scratchpad", "calculator")]

    def coll(self, word: str) -> CollectionSpec | None:
        s = stem(nm.singular(word.lower()))
        return next((c for c in self.schema.collections if stem(c.entity) == s or stem(nm.singular(c.name)) == s), None)


def policy_world(specs: list[ToolSpec], plans: dict, schema: StateSchema) -> PolicyWorld:
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
        tools.append(PolicyTool(s.name, p.kind, p.effect, p.entity, params, coll, verbs, ents, named))
    return PolicyWorld(tools, schema)


def statuses_of(world: PolicyWorld) -> set[str]:
    out: set[str] = set()
    for c in world.schema.collections:
        for f in c.fields:
            if f.name == "status" and f.enum:
                out |= {str(v).lower() for v in f.enum}
    return out


def governed_tools(st: Statement, world: PolicyWorld, pool: list[PolicyTool] | None = None,
                   exclude: list[str] | None = None) -> list[PolicyTool]:
    """The write tools a statement governs: the best match of its verbs and entities; none when no
    verb matches. A status word names a state, not an action, except right after "be" ("cannot be
    cancelled") or where no other word names an action ("a pass is issued only while ..."); a
    collection's noun is no verb ("booking" is no "book"); ``exclude``: words of a date or quantity
    phrase ("before check-in" names no check-in)."""
    return (_governed(st, world, pool, exclude, statuses_of(world))
            or _governed(st, world, pool, exclude, set()))


def _governed(st: Statement, world: PolicyWorld, pool: list[PolicyTool] | None, exclude: list[str] | None,
              statuses: set[str]) -> list[PolicyTool]:
    raw = re.findall(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*", st.text)
    kept: list[str] = []
    listed = set(re.findall(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*", st.text)) - set(
        re.findall(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*", verb_span_free(st.text)))
    for k, w in enumerate(raw):
        lw = w.lower().replace("-", "_")
        if lw in statuses and w not in listed and not (k and raw[k - 1].lower() in ("be", "been", "being", "get", "gets")):
            continue  # a status word names a state, unless the modal lists it as an action
        kept.append(w)
    skip = {stem(nm.singular(w)) for w in exclude or []}
    nouns = {stem(c.entity) for c in world.schema.collections} | {stem(nm.singular(c.name)) for c in world.schema.collections}
    stems = {stem(nm.singular(w)) for w in words_of(" ".join(kept))} - skip
    # a record's noun used as a verb ("can be refilled", "cancelling") names the tools on that record
    after_modal = lambda k: k > 0 and kept[k - 1].lower() in ("be", "to", "can", "cannot", "may", "must", "not", "never")  # noqa: E731
    verbish = {stem(w) for k, w in enumerate(kept) if after_modal(k) or w.lower().endswith("ed") or (
        w.lower().endswith("ing") and stem(w) not in nouns)} - skip
    ctx = {stem(nm.singular(w)) for w in words_of(st.context)}
    # per action word, the tools it names best ("may borrow, renew or place holds": three actions)
    best: dict[str, tuple[float, list[PolicyTool]]] = {}
    for t in pool if pool is not None else world.writes:
        verbs = t.verbs - nouns
        hits = (verbs & stems) | ((t.named | t.ents) & verbish)
        e = bool(t.ents & stems)
        vc, ec = bool(verbs & ctx), bool(t.ents & ctx)
        if not hits and not vc:
            continue
        score = 2 * bool(hits) + e + 0.5 * (vc and not hits) + 0.25 * (ec and not e)
        for key in sorted(hits) or ["(context)"]:
            top, tools = best.get(key, (0.0, []))
            if score > top:
                best[key] = (score, [t])
            elif score == top:
                tools.append(t)
    if not best:
        return []
    if any(k != "(context)" for k in best):
        best.pop("(context)", None)
    out: list[PolicyTool] = []
    for _, tools in best.values():
        out += [t for t in tools if t not in out]
    return out


def any_write(text: str) -> bool:
    return bool(re.search(r"\b(any|all|every|each)\b[^.]{0,30}\b(change|changes|action|actions|update|updates|write|"
                          r"modification|request|transaction|operation)s?\b|\baccount[- ]changing\b|\bconsequential\b", text, re.I))


def params_named(world_tools: list[PolicyTool], phrase: list[str], *, types: tuple[str, ...] | None = None,
           min_score: float = 1.0) -> list[tuple[PolicyTool, str]]:
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


def field_named(coll: CollectionSpec | None, phrase: list[str], *, dates: bool = False, numbers: bool = False) -> str | None:
    """The field of ``coll`` the phrase names best (a date field / a number or list field)."""
    if coll is None:
        return None
    best, out = 0.0, None
    for f in coll.fields:
        if dates and not is_date(f):
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
        own = [f.name for f in coll.fields if is_date(f) and not re.search(r"created|updated|_at$", f.name)]
        return next((f for f in own if re.search(r"date|start|time|scheduled", f)), own[0] if own else None)
    return out if best >= 1.0 else None


def records_named(t: PolicyTool, world: PolicyWorld) -> list[CollectionSpec]:
    """The records a call names by id: its own collection's first, then any other whose key it takes."""
    out = [t.coll] if t.coll is not None and t.coll.primary_key in t.params else []
    return out + [c for c in world.schema.collections if c is not t.coll and c.primary_key in t.params]


def is_date(f: Any) -> bool:
    return f.format in ("date", "date-time") or bool(re.search(r"(_at|_date|_on|_time|^date|_day)$", f.name)) \
        or f.name in ("check_in", "check_out", "departure", "arrival", "deadline", "due", "expires")


def phrase_of(text: str | None) -> list[str]:
    return [w for w in words_of(text or "") if w not in STOP]


def make_rule(kind: str, text: str, check: dict | None, tools: list[PolicyTool], enforcement: str = "runtime",
          why: str | None = None, field_: str | None = None, values: list | None = None) -> ParsedRule:
    if check is None or not tools:
        enforcement = "not enforced"
        why = why or ("it names no tool of this tool set" if not tools else "not read into a check")
    return ParsedRule(kind, text, field_, list(values or []), enforcement, tools=[t.name for t in tools],
                      check=check if enforcement != "not enforced" else None, why=why)


def by_tool(kind: str, text: str, pairs: list[tuple[PolicyTool, dict]], why: str, **kw) -> list[ParsedRule]:
    """One record per distinct check (the same check on several tools is one rule binding them all)."""
    if not pairs:
        return [make_rule(kind, text, None, [], why=why, **kw)]
    groups: dict[str, tuple[dict, list[PolicyTool]]] = {}
    for t, check in pairs:
        key = repr(sorted(check.items()))
        groups.setdefault(key, (check, []))[1].append(t)
    return [make_rule(kind, text, check, tools, **kw) for check, tools in groups.values()]


_TOOL_NAME = re.compile(r"\[([A-Za-z][\w \-/]{1,60})\]|`([A-Za-z][\w\-]*)(?:\(\))?`|\b([A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*)(?:\(\))?")


def name_key(name: str) -> str:
    return " ".join(nm.words(name))


def tool_mentions(text: str, world: PolicyWorld) -> list[tuple[int, int, PolicyTool]]:
    """Each place ``text`` names a tool of ``world`` exactly, as ``(start, end, tool)`` in order. A plain
    word names a tool only when the tool's name has two words or more (``search`` is an English word;
    ``searchFaq`` and ``pull-up-account`` are names)."""
    by_key = {name_key(t.name): t for t in world.tools}
    out = []
    for m in _TOOL_NAME.finditer(text):
        bracketed, ticked, plain = m.groups()
        word = bracketed or ticked or plain
        t = by_key.get(name_key(word))
        if t is None:
            continue
        if plain and len(nm.words(t.name)) < 2 and not m.group(0).endswith("()"):
            continue
        out.append((m.start(), m.end(), t))
    return out


def tools_named(text: str, world: PolicyWorld) -> list[PolicyTool]:
    """The tools ``text`` names: by exact name (:func:`tool_mentions`), then by every word of a name of two
    words or more, a read verb aside ("the ticket can be auto-resolved" names ``autoResolveTicket``, "the
    owner of the environment" ``getEnvironmentOwner``), each once."""
    seen = tool_mentions(text, world)
    out = {t.name: t for _, _, t in seen}
    for a, b, _ in reversed(seen):  # an exact name's words name no other tool
        text = text[:a] + " " + text[b:]
    stems = {stem(nm.singular(w)) for w in words_of(text.replace("-", " ")) if w not in _ADJECTIVAL}
    for t in world.tools:
        ws = [w for w in nm.words(t.name) if w not in STOP and w not in nm.READ_VERBS]
        if len(ws) >= 2 and all(_said(stem(nm.singular(w)), stems) for w in ws):
            out.setdefault(t.name, t)
    return list(out.values())


# participles that read as adjectives ("the given scenarios", "a set date"): they name no action
_ADJECTIVAL = {"given", "set", "fixed", "listed", "stated", "following", "above", "below"}


def _said(word: str, stems: set[str]) -> bool:
    """``word`` among ``stems``, an agent noun whose verb is there ("owner": "owned"), or a word of five
    letters or more one typo away ("acesss" is "access")."""
    if word in stems or (len(word) >= 5 and word.endswith("er") and word[:-2] in stems):
        return True  # an agent noun by its verb: "owned by" names the owner
    return len(word) >= 5 and any(abs(len(w) - len(word)) <= 1 and _one_edit(word, w) for w in stems)


def _one_edit(a: str, b: str) -> bool:
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k in range(len(a)) if a[k] != b[k]), len(a))
    return a[i + 1:] == b[i + 1:] if len(a) == len(b) else a[i:] == b[i + 1:]


# a parameter or field with one of these names says nothing about what a sentence is about
_GENERIC_NAMES = {"id", "name", "description", "details", "detail", "info", "data", "notes", "note", "text", "message",
                  "instructions", "content", "title", "type", "value", "values", "query", "input", "output", "body",
                  "question", "answer", "response", "request", "comment", "feedback", "summary",
                  "action", "status", "days", "day", "hours", "hour", "minutes", "weeks", "months", "years", "date", "time"}


def named_in(st: Statement, world: PolicyWorld) -> list[str]:
    """What a statement names of the tool set: its tools (by exact name, or by every word of a name of two
    words or more, a read verb aside: "auto-resolved ... ticket" names ``autoResolveTicket``), their
    arguments and the records' fields (by their words: ``access_type`` is "access type"; a one-word name that says little, such as
    ``name`` or ``type``, does not count) and status values (as ``tool x`` / ``field x`` / ``status x``).
    Empty: nothing a tool call carries or a record keeps, so no call or record could show whether the
    statement was kept: it is not mechanically checkable in this tool set."""
    out = [f"tool {t.name}" for t in tools_named(st.text, world)]
    stems = {stem(nm.singular(w)) for w in words_of(st.text.replace("-", " "))}
    said = " " + " ".join(words_of(st.text)) + " "
    names = {p for t in world.tools for p in t.params} | {f.name for c in world.schema.collections for f in c.fields}
    for n in sorted(names):
        ws = nm.words(n)
        if not ws or (len(ws) == 1 and (ws[0] in _GENERIC_NAMES or ws[0] in STOP or len(ws[0]) < 3)):
            continue
        if f" {' '.join(ws)} " in said or f" {' '.join(ws)}s " in said:
            out.append(f"field {n}")
    for c in world.schema.collections:  # a status value, with the record that has it ("vacation ... approved")
        if not ({stem(nm.singular(w)) for w in nm.words(c.entity) + nm.words(c.name)} & stems):
            continue
        for f in c.fields:
            if f.name == "status" and f.enum:
                out += [f"status {v}" for v in f.enum if f" {' '.join(str(v).lower().replace('_', ' ').split())} " in said]
    return list(dict.fromkeys(out))



_PERMISSION = re.compile(r"^(?:you|we|agents?|the agent|customers?|users?|members?|employees?|guests?)\s+(?:can|may|are able to"
                         r"|are allowed to|are welcome to)\b(?!.*\b(?:not|only|never|unless|must|cannot|no)\b)", re.I)
_QUOTED = re.compile(r"^\s*[\"\u201c'][^\"\u201d]*[\"\u201d']?\W*$")
_POSSIBILITY = re.compile(r"\b(?:may|might|could)\s+not\s+(?:remember|know|recall|have|be able|understand|want|need|see|receive"
                          r"|find|like|notice|realize|apply)\b", re.I)
# a dispensation: "you do not need to enter anything", "you only need the street address"
_DISPENSE = re.compile(r"\b(?:do|does) not need to\b|\bneed not\b|\bno need to\b|\b(?:you|they|we|customers?|users?)\s+only\s+"
                       r"needs?\b|\bis all (?:you|they) need\b", re.I)
_OBLIGATION = re.compile(r"\b(?:must|only|never|cannot|at most|at least|no more than|required?|always|do not|should)\b", re.I)
# an approval given by a person: "must be approved in advance by the employee's supervisor"
_APPROVED_BY = re.compile(r"\b(?:approv\w*|authori[sz]\w*|sign(?:ed)?[\s-]off)\b[^.]{0,40}?\bby\s+(?:the\s+|an?\s+|their\s+|his\s+"
                          r"|her\s+|your\s+)?(?:[\w]+'s\s+)?([a-z]+(?:\s+[a-z]+){0,2})\b", re.I)
_PHRASE_END = {"and", "or", "before", "after", "in", "for", "to", "with", "within", "by", "at", "on", "if", "when", "unless",
               "prior", "of", "who", "that", "which", "as", "than", "so", "but"}
# what an API is for, said as a noun phrase: "APIs for identifying claim status and sending reminders for
# claims data that still needs to be collected" (its rule word is in the clause that describes the data)
_DESCRIBES = re.compile(r"^\s*(?:an?\s+|the\s+)?(?:[\w\-]+\s+){0,3}?(?:apis?|endpoints?|operations?|action groups?|"
                        r"functions?|services?)\s+(?:for|to)\s+\w+", re.I)
_RELATIVE = re.compile(r"\b(?:that|which|who|whose)\b", re.I)
_UNHELD = ("no argument or field holds", "no argument holds", "it names no write of this tool set")


def outside_why(r: ParsedRule, world: PolicyWorld) -> str | None:
    """Why no call or record of the tool set could show rule ``r`` kept or broken (None: one could): its
    limit is on something no argument or field holds, it is a permission or a phrase to say, or it
    names nothing of the tool set."""
    if r.kind != "unparsed" and (r.why or "").startswith(_UNHELD):
        return "what it limits is in no argument, field or write of this tool set"
    if _PERMISSION.search(r.text):
        return "a permission, not a limit"
    if _QUOTED.match(r.text):
        return "a phrase to say, not a limit"
    if _DISPENSE.search(r.text) and not _OBLIGATION.search(_DISPENSE.sub(" ", r.text)):
        return "what is enough (\"you do not need to\", \"you only need\"), not a limit"
    if _POSSIBILITY.search(r.text) and not _OBLIGATION.search(r.text):
        return "a possibility (\"may not remember\"), not a limit"
    if (m := _DESCRIBES.match(r.text)) and not _OBLIGATION.search(_RELATIVE.split(r.text[m.end():])[0]):
        return "what an API is for, not a rule (its rule word describes a noun)"
    if (m := _APPROVED_BY.search(r.text)) and not _modelled(_head(m.group(1)), world):
        return f"an approval by someone no tool, argument or record of this tool set keeps (the {_head(m.group(1))})"
    if not named_in(Statement(r.text, r.offset or 0), world):
        return "it names no tool, argument, record field or status of this tool set"
    return None


def _head(phrase: str) -> str:
    """The head noun of the phrase after "approved by": its last word before a conjunction or preposition."""
    words = phrase.lower().split()
    cut = next((i for i, w in enumerate(words) if i and w in _PHRASE_END), len(words))
    return words[:cut][-1]


def _modelled(person: str, world: PolicyWorld) -> bool:
    """Whether a tool's name or argument, or a record's name or field, names ``person`` (a supervisor, a manager)."""
    s = stem(nm.singular(person.lower()))
    names = [t.name for t in world.tools] + [p for t in world.tools for p in t.params]
    names += [c.name for c in world.schema.collections] + [f.name for c in world.schema.collections for f in c.fields]
    return any(s == stem(nm.singular(w)) for n in names for w in nm.words(n))
