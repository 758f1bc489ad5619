"""Rules stated in a tool's prose, read into :class:`~autoforge.domain.rule_kinds.ParsedRule` records.

Real documentation states business rules only in sentences: "Only 'pending' orders can be
cancelled", "requires the account to be Open", "the ticket is then marked 'escalated'",
"records frozen_at". This module reads them (pure functions over a :class:`ToolSpec`'s text and
the tool's state collection); the kinds are :mod:`autoforge.domain.rule_kinds`:

=============  =======================================================================
source_status  the statuses a record must be in before the call ("only for a draft
               invoice", "must be in 'pending' status", "can only be cancelled if
               pending", "Checked-in bookings cannot be cancelled")
result_status  the status the call leaves behind ("is marked X", "becomes X", "moves to X",
               "sets ... to X", "changes ... to X", "status is set to X", "transitions to X")
side_effect    a timestamp field set from the environment clock ("records the time",
               "records frozen_at", "stamps closed_at")
constraint     a recognised limit the code does not enforce ("at most 5", "min 1, max 100",
               "at least one of body or reaction is required", "one ... per ...")
unparsed       a sentence that reads like a rule ("must", "only", "cannot", "requires" ...)
               but matches none of the above: listed, never silently dropped
=============  =======================================================================

Argument rules (ranges, formats, "at least one of") are read by :mod:`autoforge.domain.argument_rules`.
The offline templates (:mod:`autoforge.envs.code`) use the parsed rules when they write the
code and mark each rule they enforce (``enforcement="code"``); the rule engine
(:mod:`autoforge.envs.rule_engine`) then probes every enforced rule in the sandbox.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoforge.domain import words as nm
from autoforge.domain.argument_rules import argument_rule
from autoforge.domain.rule_kinds import ENFORCED_KINDS, ParsedRule
from autoforge.domain.statuses import STATUS_WORDS
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import CollectionSpec, ToolSpec

CLOCK = "NOW"  # the sandbox's fixed clock (autoforge.envs.sandbox.NOW)


# --------------------------------------------------------------------------- sentences and tokens

RULE_LIKE = re.compile(r"\b(must|only|cannot|can ?not|may not|never|requires?|required|at most|at least|no more than"
                       r"|not allowed|unless|is marked|becomes|transitions?)\b|\bone\b.*\bper\b", re.I)
CONSTRAINT = re.compile(
    r"\bat (most|least)\b|\bno more than\b|\bup to \d|\b(min|max|minimum|maximum)\b\W*\d|\bbetween \d+ and \d+"
    r"|\bone\b.*\bper\b|\bcannot be combined\b|\brequired unless\b|\bmust (start|end|begin) with\b|\bmust match\b"
    r"|\bexactly one of\b|\bmust be (unique|positive|non-negative|greater|less|at)\b|\bcannot (exceed|be (negative|empty))\b",
    re.I)
QUOTES = "'\"`\u2018\u2019\u201c\u201d"
_TOKEN = re.compile(r"[" + QUOTES + r"]([A-Za-z][A-Za-z0-9 _-]{0,30}?)[" + QUOTES + r"]|([A-Za-z_][A-Za-z0-9_-]*)")
FILLER = {"the", "a", "an", "it", "its", "their", "them", "his", "her", "this", "that", "then", "now", "status", "state",
          "automatically", "immediately", "to", "into", "as", "of", "is", "be", "being", "in", "back", "finally"}
RESULT_VERBS = {"marked": "as", "mark": "as", "marks": "as", "becomes": None, "become": None, "moves": "to",
                "move": "to", "moved": "to", "sets": "to", "set": "to", "changes": "to", "change": "to",
                "changed": "to", "transitions": "to", "transition": "to", "transitioned": "to", "updates": "to",
                "updated": "to", "switches": "to", "switched": "to", "turns": "to", "goes": "to", "flips": "to"}
PASSIVE_CUES = {"becomes", "become", "marked", "transitions", "transitioned", "moves", "moved", "changes", "changed", "goes",
                "switches", "switched", "set", "updated", "turns", "flips"}
SUBJECT_SKIP = {"then", "now", "automatically", "immediately", "is", "are", "will", "be", "gets", "get", "also", "finally",
                "always", "then_"}
SUBJECT_OK = {"it", "its", "status", "state", "effect", "effects", "result", "and", "which", "this", "that", "so"}
SOURCE_CUES = {"only", "must", "requires", "require", "required", "requiring"}
NEGATIONS = {"cannot", "not", "never", "no", "nor"}
MODALS = {"can", "may", "will", "could", "should", "would", "to"}
STAMP_VERBS = {"records", "record", "recording", "recorded", "stamps", "stamp", "stamped", "stamping", "sets", "set",
               "fills", "saves", "stores", "logs", "captures", "writes", "updates"}
# -ed words that describe a call, not a record's status ("is allowed", "must be provided")
NOT_STATUS = {"allowed", "required", "permitted", "needed", "provided", "supported", "used", "specified", "given",
              "authenticated", "logged", "included", "applied", "accepted", "expected", "called", "combined", "ignored",
              "limited", "based", "related", "associated", "listed", "returned_by", "passed", "invoked", "enabled_for"}
TIME_WORDS = {"time", "timestamp", "date", "datetime", "moment", "when"}


@dataclass
class Tok:
    word: str  # lower case, snake_case for quoted phrases
    quoted: bool
    capital: bool
    start: int


def sentences(text: str) -> list[str]:
    """The sentences of a description (on ``. ; ! ?`` and line breaks; ``e.g.`` kept whole)."""
    text = re.sub(r"\b(e\.g|i\.e|etc|vs)\.", lambda m: m.group(1).replace(".", ""), text or "")
    parts = re.split(r"(?<=[.;!?])\s+|\n+|(?<=[a-z0-9'\"`)])\.(?=[A-Z])", text)
    return [p.strip(" .;!?") for p in parts if p and p.strip(" .;!?")]


def tokens(sentence: str) -> list[Tok]:
    s = re.sub(r"n['\u2019]t\b", " not", sentence)
    s = re.sub(r"(\w)['\u2019]s\b", r"\1", s)
    s = s.replace("can not", "cannot")
    out = []
    for m in _TOKEN.finditer(s):
        quoted = m.group(1) is not None
        raw = m.group(1) if quoted else m.group(2)
        word = re.sub(r"[\s-]+", "_", raw.strip()).lower()
        out.append(Tok(word, quoted, raw[:1].isupper() and m.start() > 0, m.start()))
    return out


def _status_like(t: Tok, enum: set[str], loose: bool) -> bool:
    if t.word in enum or t.quoted:
        return True
    if t.word in FILLER or t.word in NEGATIONS or t.word in NOT_STATUS:
        return False
    if t.word in STATUS_WORDS:
        return True
    return loose and (t.capital or (t.word.endswith("ed") and len(t.word) > 4))


def _value(t: Tok, enum_map: dict[str, str]) -> str:
    return enum_map.get(t.word, t.word)


# --------------------------------------------------------------------------- one sentence


def _subject_of_negation(words: list[str], j: int, ent_words: set[str]) -> bool:
    """The status at ``j`` is the subject of a refusal: "Checked-in bookings cannot be cancelled",
    "A completed project cannot be reopened" (entity words between, then the negation)."""
    k = j + 1
    seen_entity = False
    while k < len(words) and k <= j + 3:
        if words[k] in ("cannot", "never") or (words[k] in ("not",) and k > 0 and words[k - 1] in MODALS | {"are", "is", "must"}):
            return seen_entity or k == j + 1
        if words[k] in ent_words:
            seen_entity = True
        elif words[k] not in MODALS | {"may", "must", "are", "is"}:
            return False
        k += 1
    return False


def parse_sentence(sentence: str, enum: list[str] | None = None, entity: str | None = None,
                   verb: str | None = None, targets: list[str] | None = None) -> list[ParsedRule]:
    """The rules one sentence states (``[]`` when it states none we read).

    ``enum``: the statuses of the tool's collection (spelling wins: "Open" -> ``open``);
    ``entity``: its record word (skipped between a cue and the value); ``verb`` / ``targets``:
    the tool's own verb and target statuses ("can only be *cancelled* if pending": the action,
    not a precondition)."""
    enum_map = {str(e).lower().replace(" ", "_").replace("-", "_"): e for e in (enum or []) if isinstance(e, str)}
    known = set(enum_map)
    toks = tokens(sentence)
    words = [t.word for t in toks]
    ent_words = set()
    if entity:
        last = entity.split("_")[-1]
        ent_words = {entity, last, nm.plural(last), nm.plural(entity)}
    action = {t.lower() for t in (targets or [])}
    if verb:
        action |= {verb + "ed", verb + "d", verb + "led", verb.rstrip("e") + "ed"}
    out: list[ParsedRule] = []
    used: set[int] = set()
    # result status: <cue> [filler/entity ...] [to|as] X
    for i, w in enumerate(words):
        if w not in RESULT_VERBS:
            continue
        prep = RESULT_VERBS[w]
        if w in ("set", "sets", "change", "changes", "changed", "updates", "updated", "turns", "switches", "switched",
                 "flips", "goes", "move", "moves", "moved") and "to" not in words[i + 1:i + 7] and "into" not in words[i + 1:i + 7]:
            continue
        j = i + 1
        if prep == "to":
            while j < len(toks) and j < i + 7 and words[j] not in ("to", "into"):
                j += 1
            j += 1
        while j < len(toks) and (words[j] in FILLER or words[j] in ent_words) and not toks[j].quoted:
            j += 1
        k = i - 1
        while k >= 0 and words[k] in SUBJECT_SKIP:
            k -= 1
        if i > 0 and w in PASSIVE_CUES and not (k < 0 or words[k] in ent_words or words[k] in SUBJECT_OK or toks[k].quoted):
            continue  # "a suspended member ... becomes active": another record's status
        if j < len(toks) and words[j - 1] in ("a", "an") and not toks[j].quoted:
            continue  # "to a new status": no particular status
        if j < len(toks) and _status_like(toks[j], known, loose=True) and not re.match(r"\w+_(at|on|time|date)$", words[j]):
            val = _value(toks[j], enum_map)
            if w in ("set", "sets", "updates", "updated") and not (toks[j].quoted or toks[j].word in known
                                                                   or "status" in words[i:j] or "state" in words[i:j]
                                                                   or toks[j].word in STATUS_WORDS):
                continue
            out.append(ParsedRule("result_status", sentence, "status", [val]))
            used.add(j)
    # side effect: records / stamps <x>_at, or records the time
    for i, w in enumerate(words):
        if w not in STAMP_VERBS:
            continue
        window = words[i + 1:i + 6]
        fld = next((x for x in window if re.match(r"[a-z][a-z0-9_]*_(at|on|time|date|timestamp)$", x)), None)
        if fld is None and w in ("records", "record", "recording", "recorded", "stamps", "stamp", "stamped", "stamping",
                                 "logs", "captures") and any(x in TIME_WORDS for x in window):
            fld = ""  # the field is named by the result (frozen -> frozen_at) or updated_at
        if fld is not None and not any(r.kind == "side_effect" for r in out):
            out.append(ParsedRule("side_effect", sentence, fld or None, [CLOCK]))
    # source status: only / must / requires ... X; negations forbid X
    low = sentence.lower()
    negated = any(w in NEGATIONS for w in words)
    cue = any(w in SOURCE_CUES for w in words)
    if negated or cue:
        found: list[str] = []
        barred: list[str] = []
        for j, t in enumerate(toks):
            if j in used or j == 0 and not t.quoted and t.word not in known and t.word not in STATUS_WORDS:
                continue
            prev = words[j - 1] if j else ""
            prev2 = words[j - 2] if j > 1 else ""
            if not _status_like(t, known, loose=prev in ("be", "is", "are", "in") and cue):
                continue
            if t.word in action and not t.quoted:
                continue  # the tool's own action ("can only be cancelled")
            if prev == "be" and (prev2 in MODALS or (prev2 == "only" and (words[j - 3] if j > 2 else "") in MODALS)
                                 or prev2 in NEGATIONS) and not (prev2 == "to" and ("require" in low or "must" in low)):
                continue  # "can (only) be completed": an action, not a status
            if prev in RESULT_VERBS or (prev in ("to", "as", "into") and any(x in RESULT_VERBS for x in words[max(0, j - 6):j])):
                continue
            if t.word in ("not", "only"):
                continue
            if _subject_of_negation(words, j, ent_words):
                barred.append(_value(t, enum_map))
            elif cue:
                found.append(_value(t, enum_map))
        found = [v for v in dict.fromkeys(found) if v not in barred]
        barred = list(dict.fromkeys(barred))
        if found:
            out.append(ParsedRule("source_status", sentence, "status", found))
        elif barred:
            out.append(ParsedRule("source_status", sentence, "status", [], forbidden=barred))
    if not out and CONSTRAINT.search(sentence):
        nums = [float(n) if "." in n else int(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", sentence)]
        out.append(ParsedRule("constraint", sentence, None, nums))
    if not out and RULE_LIKE.search(sentence):
        out.append(ParsedRule("unparsed", sentence, None, []))
    return out


# --------------------------------------------------------------------------- one tool


def rule_texts(spec: ToolSpec) -> list[tuple[str | None, str]]:
    """(parameter or None, sentence) for the tool's description and its parameters' descriptions."""
    out: list[tuple[str | None, str]] = [(None, s) for s in sentences(spec.description)]
    for p, ps in props(spec.parameters).items():
        ps = unwrap(ps) if isinstance(ps, dict) else {}
        desc = ps.get("description") if isinstance(ps.get("description"), str) else ""
        out += [(p, s) for s in sentences(desc)]
    return out


def parse_rules(spec: ToolSpec, coll: CollectionSpec | None = None, verb: str | None = None,
                targets: list[str] | None = None) -> list[ParsedRule]:
    """Every rule the tool's prose states, against its main collection ``coll``.

    A negated source rule ("X orders cannot be cancelled") becomes the allowed list: the
    collection's statuses less the forbidden ones and the targets. A side effect without a named
    field takes ``<result>_at`` when the prose states a result, else ``updated_at``. Parameter
    sentences only yield constraints and unparsed rules (a status rule is the tool's)."""
    sf = next((f for f in coll.fields if f.name == "status"), None) if coll is not None else None
    enum = [e for e in (sf.enum or []) if isinstance(e, str)] if sf is not None else []
    entity = coll.entity if coll is not None else None
    if verb is None:
        verb = nm.verb_of(spec.name)[0]
    out: list[ParsedRule] = []
    params = props(spec.parameters)
    for param, s in rule_texts(spec):
        arg = argument_rule(s, param, params)
        if arg is not None:
            out.append(arg)
            continue
        held = _id_of_status(s, param, coll, enum) if param is not None else None
        if held is not None:  # "Unique ID of the open insurance claim": the record must be open
            out.append(held)
            continue
        for r in parse_sentence(s, enum, entity, verb, targets):
            if param is not None and r.kind in ENFORCED_KINDS:
                r = ParsedRule("unparsed", s)
            if param is not None:
                r.field = r.field or param
            out.append(r)
    result = next((r.values[0] for r in out if r.kind == "result_status"), None)
    for r in out:
        if r.kind == "source_status" and r.forbidden and not r.values and enum:
            r.values = [e for e in enum if e not in r.forbidden and e != result and e not in (targets or [])]
        if r.kind == "side_effect" and not r.field:
            r.field = f"{nm.snake(str(result))}_at" if result else "updated_at"
    return out


def _id_of_status(sentence: str, param: str, coll: CollectionSpec | None, enum: list[str]) -> ParsedRule | None:
    """The status an id parameter's own description gives the record it names ("Unique ID of the open insurance
    claim" on ``claimId``: the claim must be ``Open``), as a source-status rule; None when it gives none."""
    if coll is None or not enum or nm.snake(param) not in (coll.primary_key, "id"):
        return None
    noun = "|".join(re.escape(w) for w in {coll.entity.replace("_", " "), nm.plural(coll.entity).replace("_", " ")})
    m = re.search(r"\b(?:id|identifier|key|number)\s+of\s+(?:the|an?|this|that)\s+([a-z][\w-]*)\s+(?:[a-z][\w-]*\s+)?"
                  rf"(?:{noun})\b", sentence, re.I)
    value = next((e for e in enum if m and e.lower() == m.group(1).lower()), None)
    return ParsedRule("source_status", sentence, "status", [value]) if value else None


def status_mentions(spec: ToolSpec, entity: str | None = None) -> tuple[list[str], list[str], list[str]]:
    """(source statuses, result statuses, timestamp fields) the tool's prose states, before any
    schema exists (the schema builder adds them to the collection: a status field, its values, the
    timestamp fields)."""
    verb = nm.verb_of(spec.name)[0]
    src: list[str] = []
    res: list[str] = []
    stamps: list[str] = []
    rules = []
    for s in sentences(spec.description):
        rules += parse_sentence(s, [], entity, verb, nm.STATUS_VERBS.get(verb, []))
    result = next((r.values[0] for r in rules if r.kind == "result_status"), None)
    for r in rules:
        if r.kind == "source_status":
            src += [nm.snake(str(v)) for v in r.values + r.forbidden]
        elif r.kind == "result_status":
            res += [nm.snake(str(v)) for v in r.values]
        elif r.kind == "side_effect":
            stamps.append(r.field or (f"{nm.snake(str(result))}_at" if result else "updated_at"))
    return list(dict.fromkeys(src)), list(dict.fromkeys(res)), list(dict.fromkeys(stamps))
