"""Rules stated in a tool's prose: read, enforced by the offline code, probed at synthesis.

Real documentation states business rules only in sentences: "Only 'pending' orders can be
cancelled", "requires the account to be Open", "the ticket is then marked 'escalated'",
"records frozen_at". This module reads them (pure functions over a :class:`ToolSpec`'s text and
the tool's state collection):

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

The offline templates (:mod:`autoforge.envs.templates`) use the parsed rules when they write the
code and mark each rule they enforce (``enforcement="code"``); :func:`probe_rules` then checks
every enforced rule in the sandbox: a call that breaks it is refused with an error observation
and leaves the state unchanged, a call that keeps it succeeds and sets the stated result.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field as dc_field
from typing import Any

from autoforge.domain import words as nm
from autoforge.envs.schema_offline import STATUS_WORDS
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import CollectionSpec, ToolRule, ToolSpec, content_id

RULE_KINDS = ("source_status", "result_status", "side_effect", "constraint", "unparsed")
ENFORCED_KINDS = ("source_status", "result_status", "side_effect")
CLOCK = "NOW"  # the sandbox's fixed clock (autoforge.envs.sandbox.NOW)


@dataclass
class ParsedRule:
    """One rule read from a tool's prose (a :class:`ToolRule` before it has ids and a probe)."""

    kind: str
    text: str
    field: str | None = None
    values: list[Any] = dc_field(default_factory=list)
    enforcement: str = "not enforced"  # "code" once the template has written the check / effect
    forbidden: list[str] = dc_field(default_factory=list)  # source_status read from a negation


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


# --------------------------------------------------------------------------- argument rules
#
# Rules about a call's arguments, read from the tool's and the parameters' sentences. A parsed
# one is a ``constraint`` whose ``values`` start with its form, and the templates write it as a
# check at the top of the function (:func:`argument_checks`), before the state is touched:
#
#   ["range", lo, hi]            "min 1, max 100", "between 1 and 5", "at most 10", "from 0 to 100"
#   ["one_of", a, b]             "At least one of body or reaction is required", "Required unless reaction is provided"
#   ["excludes", a, b]           "Cannot be combined with body"
#   ["required_when", p, q, v]   "Required when state_reason is 'duplicate'"
#   ["only_when", p, q, v]       "Use with 'add' method only", "Only valid when mode is 'x'"
#   ["format", p, "snake_case"]  "must be snake_case"; ["format", p, "no_spaces"]: "cannot contain spaces"
#   ["starts_with", p, [..]]     "Must start with 'http://' or 'https://'"

_NUM = r"(-?\d+(?:\.\d+)?)"
_RANGES = [
    (re.compile(r"\bmin(?:imum)?\W{0,3}" + _NUM + r"\W{0,4}max(?:imum)?\W{0,3}" + _NUM, re.I), "lo_hi"),
    (re.compile(r"\bbetween\s+" + _NUM + r"\s+and\s+" + _NUM, re.I), "lo_hi"),
    (re.compile(r"\bfrom\s+" + _NUM + r"\s+to\s+" + _NUM + r"\b", re.I), "lo_hi"),
    (re.compile(r"\b(?:at most|no more than|up to|max(?:imum)?(?: of)?)\W{0,3}" + _NUM, re.I), "hi"),
    (re.compile(r"\b(?:at least|no less than|min(?:imum)?(?: of)?)\W{0,3}" + _NUM, re.I), "lo"),
]
_WORD = r"[`'\"]?([A-Za-z_][A-Za-z0-9_]*)[`'\"]?"
_VAL = r"[`'\"]([^`'\"]{1,40})[`'\"]"
_ONE_OF = re.compile(r"\b(?:at least one of|either)\s+" + _WORD + r"\s+or\s+" + _WORD, re.I)
_UNLESS = re.compile(r"\brequired unless\s+" + _WORD + r"\s+is\s+(?:provided|given|set|specified)", re.I)
_EXCLUDES = re.compile(r"\b(?:cannot|can ?not|may not|must not) be (?:combined|used|given|provided) (?:together )?with\s+" + _WORD
                       + r"|\bmutually exclusive with\s+" + _WORD, re.I)
_REQ_WHEN = re.compile(r"\brequired (?:when|if)\s+" + _WORD + r"\s+(?:is|=|==|equals)\s+" + _VAL, re.I)
_ONLY_WHEN = [re.compile(r"\buse (?:it )?(?:only )?with\s+" + _VAL + r"\s+" + _WORD + r"(?:\s+only)?\b", re.I),
              re.compile(r"\bonly (?:valid|used|allowed|applies|applicable) (?:when|if)\s+" + _WORD + r"\s+(?:is|=|==)\s+" + _VAL, re.I)]


def _param_named(word: str, params: dict[str, Any]) -> str | None:
    """The parameter a word of a sentence names (``issue number`` and ``issueNumber`` alike)."""
    w = nm.snake(word)
    for p in params:
        if nm.snake(p) == w or nm.snake(p) == nm.singular(w):
            return p
    return None


def _ptype(params: dict[str, Any], p: str) -> str:
    v = params.get(p)
    v = unwrap(v) if isinstance(v, dict) else {}
    t = v.get("type")
    return t if isinstance(t, str) else ""


def argument_rule(sentence: str, param: str | None, params: dict[str, Any]) -> ParsedRule | None:
    """The argument rule one sentence states about ``param`` (None: a sentence of the description)."""
    m = _ONE_OF.search(sentence)
    if m:
        a, b = _param_named(m.group(1), params), _param_named(m.group(2), params)
        if a and b and a != b:
            return ParsedRule("constraint", sentence, a, ["one_of", a, b])
    if param is None:
        return None
    m = _UNLESS.search(sentence)
    if m and (other := _param_named(m.group(1), params)) and other != param:
        return ParsedRule("constraint", sentence, param, ["one_of", param, other])
    m = _EXCLUDES.search(sentence)
    if m and (other := _param_named(m.group(1) or m.group(2), params)) and other != param:
        return ParsedRule("constraint", sentence, param, ["excludes", param, other])
    m = _REQ_WHEN.search(sentence)
    if m and (other := _param_named(m.group(1), params)) and other != param:
        return ParsedRule("constraint", sentence, param, ["required_when", param, other, m.group(2)])
    m = _ONLY_WHEN[0].search(sentence)
    if m and (other := _param_named(m.group(2), params)) and other != param:
        return ParsedRule("constraint", sentence, param, ["only_when", param, other, m.group(1)])
    m = _ONLY_WHEN[1].search(sentence)
    if m and (other := _param_named(m.group(1), params)) and other != param:
        return ParsedRule("constraint", sentence, param, ["only_when", param, other, m.group(2)])
    low = sentence.lower()
    m = re.search(r"\bmust (?:start|begin) with\s+((?:" + _VAL + r"(?:\s*,\s*|\s+or\s+)?)+)", sentence, re.I)
    if m and _ptype(params, param) in ("string", ""):
        prefixes = re.findall(_VAL, m.group(1))
        if prefixes:
            return ParsedRule("constraint", sentence, param, ["starts_with", param, prefixes])
    if "snake_case" in low or "snake case" in low:
        return ParsedRule("constraint", sentence, param, ["format", param, "snake_case"])
    if re.search(r"\b(?:cannot|can ?not|must not|may not) (?:contain|include|have) (?:any )?(?:spaces|whitespace)", low):
        return ParsedRule("constraint", sentence, param, ["format", param, "no_spaces"])
    if _ptype(params, param) in ("integer", "number", "array"):
        for rx, form in _RANGES:
            m = rx.search(sentence)
            if m:
                nums = [float(g) if "." in g else int(g) for g in m.groups()]
                lo, hi = (nums[0], nums[1]) if form == "lo_hi" else (None, nums[0]) if form == "hi" else (nums[0], None)
                if lo is not None and hi is not None and lo > hi:
                    continue
                return ParsedRule("constraint", sentence, param, ["range", lo, hi])
    return None


_EMPTY = "(None, '', [], {})"


def argument_checks(rules: list[ParsedRule], py: dict[str, str], public: dict[str, str] | None = None) -> list[str]:
    """Python lines (function-body level) that refuse a call breaking an argument rule; marks each
    rule it writes ``enforcement="code"``. ``py``: the rules' parameter names -> Python names;
    ``public``: -> the documented names the refusals say."""
    out: list[str] = []
    for r in rules:
        if not is_argument_rule(r):
            continue
        form, *rest = r.values
        names = [x for x in rest if isinstance(x, str) and x in py]
        say = {x: (public or {}).get(x, x) for x in [*names, r.field or ""]}
        if form == "range" and r.field in py:
            v, (lo, hi) = py[r.field], rest
            f = say[r.field]
            size = f"(len({v}) if isinstance({v}, list) else {v})"
            if lo is not None:
                out += [f"if {v} is not None and not isinstance({v}, bool) and {size} < {lo!r}:",
                        f"    return {{'error': {f + ' must be at least ' + str(lo) + ' (got '!r} + str({size}) + ')'}}"]
            if hi is not None:
                out += [f"if {v} is not None and not isinstance({v}, bool) and {size} > {hi!r}:",
                        f"    return {{'error': {f + ' must be at most ' + str(hi) + ' (got '!r} + str({size}) + ')'}}"]
        elif form == "one_of" and len(names) == 2:
            a, b = names
            msg = f"give {say[a]} or {say[b]}: at least one of them is required"
            out += [f"if {py[a]} in {_EMPTY} and {py[b]} in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "excludes" and len(names) == 2:
            a, b = names
            msg = f"{say[a]} cannot be combined with {say[b]}: give one of them"
            out += [f"if {py[a]} not in {_EMPTY} and {py[b]} not in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "required_when" and len(names) == 2:
            p, q, val = rest
            msg = f"{say[p]} is required when {say[q]} is {val}"
            out += [f"if str({py[q]}) == {str(val)!r} and {py[p]} in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "only_when" and len(names) == 2:
            p, q, val = rest
            msg = f"{say[p]} can only be used when {say[q]} is {val}"
            out += [f"if {py[p]} not in {_EMPTY} and {py[p]} is not False and str({py[q]}) != {str(val)!r}:",
                    f"    return {{'error': {msg!r}}}"]
        elif form == "starts_with" and names:
            v, prefixes = py[names[0]], tuple(rest[1])
            msg = f"{say[names[0]]} must start with " + " or ".join(prefixes)
            out += [f"if isinstance({v}, str) and not {v}.startswith({prefixes!r}):", f"    return {{'error': {msg!r}}}"]
        elif form == "format" and names:
            v = py[names[0]]
            if rest[1] == "snake_case":
                cond = f"(' ' in {v} or '-' in {v} or {v} != {v}.lower())"
                why = "snake_case (lower case words joined by _)"
            else:
                cond = f"(' ' in {v})"
                why = "without spaces"
            out += [f"if isinstance({v}, str) and {cond}:",
                    f"    return {{'error': {say[names[0]] + ' must be ' + why + ', got '!r} + repr({v})}}"]
        else:
            continue
        r.enforcement = "code"
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


def tool_rules(env_id: str, spec: ToolSpec, rules: list[ParsedRule], run_id: str | None = None) -> list[ToolRule]:
    """The records of one tool's rules (probe ``none`` until :func:`probe_rules` runs)."""
    out = []
    for k, r in enumerate(rules):
        out.append(ToolRule(rule_id=content_id("rule", env_id, spec.name, k, r.kind, r.text), env_id=env_id,
                            tool_id=spec.tool_id, tool=spec.name, kind=r.kind, text=r.text[:2000], field=r.field,
                            values=list(r.values), enforcement=r.enforcement, probe="none", run_id=run_id))
    return out


# --------------------------------------------------------------------------- probes


def _changed(before: dict, after: dict, coll: str) -> list[dict]:
    b, a = before.get(coll) or {}, after.get(coll) or {}
    return [rec for k, rec in a.items() if isinstance(rec, dict) and b.get(k) != rec]


def probe_rules(env: Any, tool: Any, spec: ToolSpec, rules: list[ToolRule], state: dict, schema: Any,
                collection: str | None, kind: str, args_for: Any, tries: int = 8) -> list[ToolRule]:
    """Check every enforced rule of ``tool`` in the sandbox ``env`` (an :class:`Environment` that
    holds the tool); returns the rules with ``probe`` passed / failed and ``probe_detail``.

    Break (source_status): every record of the collection in a status the rule does not allow ->
    the call returns an error observation and the state is unchanged. Keep: every record in an
    allowed status -> some sample call (``args_for(state, index)``) succeeds, and the changed
    record has the stated result status and timestamp."""
    enforced = [r for r in rules if r.enforcement == "code" and r.kind in ENFORCED_KINDS]
    if not enforced or not collection:
        return rules
    coll = next((c for c in schema.collections if c.name == collection), None)
    sf = next((f for f in coll.fields if f.name == "status"), None) if coll else None
    enum = [e for e in (sf.enum or []) if isinstance(e, str)] if sf else []
    src = next((r for r in enforced if r.kind == "source_status"), None)
    result = next((r.values[0] for r in enforced if r.kind == "result_status" and r.values), None)
    allowed = [v for v in (src.values if src else enum) if v != result] or (src.values if src else [])

    def with_status(value: Any) -> dict:
        st = copy.deepcopy(state)
        if value is not None and kind != "create":
            for rec in (st.get(collection) or {}).values():
                if isinstance(rec, dict):
                    rec["status"] = value
        return st

    def call(st: dict, idx: int):
        env.reset(st)
        obs = env.call(tool.name, args_for(st, idx))
        return obs, env.get_state()

    outcome: dict[str, tuple[str, str]] = {}
    if src is not None:
        bad = next((e for e in enum if e not in src.values and e != result), None) or next(
            (e for e in enum if e not in src.values), None) or "not_" + str(src.values[0] if src.values else "allowed")
        st = with_status(bad)
        obs, after = call(st, 0)
        if obs.ok or obs.kind != "tool_error":
            outcome["source_status"] = ("failed", f"a call on a {bad} record was not refused: {obs.to_text()[:200]}")
        elif after != st:
            outcome["source_status"] = ("failed", f"the refused call on a {bad} record changed the state")
        else:
            outcome["source_status"] = ("passed", f"refused on a {bad} record: {obs.to_text()[:160]}")
    st = with_status(allowed[0] if allowed else None)
    keep = None
    last = "no call"
    n = max(1, min(tries, len(st.get(collection) or {}) or 1))
    for idx in range(n):
        obs, after = call(st, idx)
        if obs.ok:
            keep = (obs, after)
            break
        last = obs.to_text()[:200]
    for r in enforced:
        if r.kind == "source_status":
            res, detail = outcome["source_status"]
            if res == "passed" and keep is None:
                res, detail = "failed", f"{detail}; but no call on a {allowed[0] if allowed else '?'} record succeeded: {last}"
            elif res == "passed":
                detail += f"; accepted on a {allowed[0] if allowed else '?'} record"
            outcome_r = (res, detail)
        elif keep is None:
            outcome_r = ("failed", f"no call that keeps the rule succeeded: {last}")
        else:
            changed = _changed(st, keep[1], collection)
            if r.kind == "result_status":
                ok = bool(changed) and all(c.get("status") == r.values[0] for c in changed)
                outcome_r = ("passed", f"status became {r.values[0]}") if ok else (
                    "failed", f"status after the call: {[c.get('status') for c in changed]}, stated {r.values[0]}")
            else:
                ok = bool(changed) and all(c.get(r.field) not in (None, "") for c in changed)
                outcome_r = ("passed", f"{r.field} recorded") if ok else ("failed", f"{r.field} not recorded")
        idx_r = rules.index(r)
        rules[idx_r] = r.model_copy(update={"probe": outcome_r[0], "probe_detail": outcome_r[1][:1000]})
    return rules


def is_argument_rule(r: ToolRule | ParsedRule) -> bool:
    """A constraint read into a form (``["range", ...]``, ``["one_of", ...]``): one the code can check."""
    return r.kind == "constraint" and bool(r.values) and isinstance(r.values[0], str)


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {}


def _sample(schema: dict, avoid: Any = None) -> Any:
    """A value of a parameter's type (an enum value other than ``avoid`` where there is one)."""
    s = unwrap(schema) if isinstance(schema, dict) else {}
    if s.get("enum"):
        return next((e for e in s["enum"] if e != avoid), s["enum"][0])
    t = s.get("type")
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(t if isinstance(t, str) else "", "sample")


def _keep(r: ToolRule, args: dict, params: dict) -> dict:
    """``args`` changed as little as needed to keep argument rule ``r``."""
    form, *rest = r.values
    a = dict(args)
    if form == "range" and r.field in a and isinstance(a[r.field], (int, float)) and not isinstance(a[r.field], bool):
        lo, hi = rest
        a[r.field] = max(lo, a[r.field]) if lo is not None else a[r.field]
        a[r.field] = min(hi, a[r.field]) if hi is not None else a[r.field]
    elif form == "one_of" and all(_empty(a.get(x)) for x in rest[:2]):
        a[rest[0]] = _sample(params.get(rest[0], {}))
    elif form == "excludes" and not any(_empty(a.get(x)) for x in rest[:2]):
        a.pop(rest[0], None)
    elif form == "required_when" and str(a.get(rest[1])) == str(rest[2]) and _empty(a.get(rest[0])):
        a[rest[0]] = _sample(params.get(rest[0], {}))
    elif form == "only_when" and not _empty(a.get(rest[0])) and str(a.get(rest[1])) != str(rest[2]):
        a.pop(rest[0], None)
    elif form == "format" and isinstance(a.get(rest[0]), str):
        a[rest[0]] = "_".join(a[rest[0]].lower().replace("-", " ").split()) or "key"
    elif form == "starts_with" and isinstance(a.get(rest[0]), str) and not a[rest[0]].startswith(tuple(rest[1])):
        a[rest[0]] = rest[1][-1] + a[rest[0]].split("://")[-1]
    return a


def _break(r: ToolRule, args: dict, params: dict) -> dict:
    """``args`` changed to break argument rule ``r``."""
    form, *rest = r.values
    a = dict(args)
    if form == "range":
        lo, hi = rest
        if (unwrap(params.get(r.field) or {}) or {}).get("type") == "array":
            item = (a.get(r.field) or ["x"])[0] if isinstance(a.get(r.field), list) and a.get(r.field) else "x"
            a[r.field] = [item] * (int(hi) + 1) if hi is not None else []
        else:
            a[r.field] = (lo - 1) if lo is not None else (hi + 1)
    elif form == "one_of":
        for x in rest[:2]:
            a.pop(x, None)
    elif form == "excludes":
        for x in rest[:2]:
            if _empty(a.get(x)):
                a[x] = _sample(params.get(x, {}))
    elif form == "required_when":
        a[rest[1]] = rest[2]
        a.pop(rest[0], None)
    elif form == "only_when":
        a[rest[0]] = a.get(rest[0]) if not _empty(a.get(rest[0])) else _sample(params.get(rest[0], {}))
        a[rest[1]] = _sample(params.get(rest[1], {}), avoid=rest[2])
        if str(a[rest[1]]) == str(rest[2]):
            a[rest[1]] = f"not_{rest[2]}"
    elif form == "format":
        a[rest[0]] = "Has Spaces"
    elif form == "starts_with":
        a[rest[0]] = "ftp://" + str(a.get(rest[0]) or "x").split("://")[-1]
    return a


def probe_argument_rules(env: Any, tool: Any, rules: list[ToolRule], state: dict, args_for: Any,
                         tries: int = 8) -> list[ToolRule]:
    """Probe every enforced argument rule of ``tool``: a call that keeps all of them succeeds, and
    the same call changed to break one is refused with an error observation, the state unchanged."""
    enforced = [r for r in rules if r.enforcement == "code" and is_argument_rule(r)]
    if not enforced:
        return rules
    params = props(tool.parameters)

    def call(args: dict):
        st = copy.deepcopy(state)
        env.reset(st)
        return env.call(tool.name, args), env.get_state(), st

    base, last = None, "no call"
    for idx in range(tries):
        args = args_for(state, idx)
        for r in enforced:
            args = _keep(r, args, params)
        obs, _, _ = call(args)
        if obs.ok:
            base = args
            break
        last = obs.to_text()[:200]
    for r in enforced:
        if base is None:
            res = ("failed", f"no call that keeps the rule succeeded: {last}")
        else:
            bad = _break(r, base, params)
            obs, after, before = call(bad)
            if obs.ok:
                res = ("failed", f"a call that breaks it was not refused: {json_args(bad)} -> {obs.to_text()[:160]}")
            elif after != before:
                res = ("failed", "the refused call changed the state")
            else:
                res = ("passed", f"refused {json_args(bad)}: {obs.to_text()[:160]}; kept: accepted")
        i = rules.index(r)
        rules[i] = r.model_copy(update={"probe": res[0], "probe_detail": res[1][:1000]})
    return rules


def json_args(args: dict) -> str:
    return json.dumps(args, sort_keys=True, default=str)[:200]


__all__ = ["ENFORCED_KINDS", "ParsedRule", "RULE_KINDS", "argument_checks", "argument_rule", "is_argument_rule", "parse_rules", "probe_argument_rules", "parse_sentence", "probe_rules", "rule_counts",
           "rule_texts", "sentences", "status_mentions", "tool_rules"]


def rule_counts(rules: list[ToolRule]) -> dict[str, Any]:
    """found / enforced / probe_passed / probe_failed / not_enforced, and the not-enforced ones by kind."""
    by_kind: dict[str, int] = {}
    for r in rules:
        if r.enforcement != "code":
            by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    return {"found": len(rules), "enforced": sum(r.enforcement == "code" for r in rules),
            "probe_passed": sum(r.probe == "passed" for r in rules),
            "probe_failed": sum(r.probe == "failed" for r in rules),
            "not_enforced": sum(r.enforcement != "code" for r in rules), "not_enforced_by_kind": by_kind}
