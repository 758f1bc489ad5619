"""How facts and intentions are phrased and recognised in a dialogue.

The offline simulated user, the scripted oracle agent and the rule-based user-error judge
all read and write the same small conventions, kept here so they cannot drift apart:

- A hidden fact ``customer_email`` is *named* in text as ``customer email`` (underscores to
  spaces, camelCase split: ``fuelAmount`` is ``fuel amount``, case-insensitive, the raw key too);
  a numbered fact ``order_type_2`` is also named ``second order type`` (:func:`fact_label`, how
  requests name it). A message *asks* for a fact when it names it and reads as a request.
- The offline user reveals facts one per line as ``- customer email: alice@example.com``.
  A string value is written bare unless it would read back as another JSON value or spans
  lines (then it is JSON-quoted), so :func:`parse_value` gives back exactly the fact value.
- The episode ends when the user's reply contains :data:`STOP` (tau-bench's ``###STOP###``).
- An agent message *claims completion* when it reports work done (tau-bench's user stop rule:
  "do not end while a requested change is pending" — pending means not reported done).

These are heuristics over text (paper Sec. 3.4 gives the user and judge to an LLM; this is
the offline default) and are documented as such; an LLM user/judge replaces them online.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Iterable

STOP = "###STOP###"

_FACT_LINE = re.compile(r"^\s*[-*]\s*([^:\n]{1,80}?)\s*:\s*(.*?)\s*$", re.MULTILINE)
_REQUEST_CUES = re.compile(
    r"\?|\b(please (provide|share|give|tell|send|confirm)|could you|can you|would you|tell me|let me know|"
    r"i need|i'll need|i will need|need your|need the|what is|what's|which)\b",
    re.IGNORECASE,
)
_CONFIRM_CUES = re.compile(
    r"\b(shall i|should i|do you want me|would you like me|may i|ok to|okay to|confirm|proceed|go ahead|"
    r"is that (ok|okay|correct|right))\b",
    re.IGNORECASE,
)
_DONE_CUES = re.compile(
    r"\b(done|completed?|finished|all set|has been|have been|successfully|i(?:'ve| have) (?:now )?\w+ed|"
    r"is now|are now|was (?:updated|created|cancel+ed|deleted|changed|added|removed)|"
    r"the (?:answer|result|total|value) (?:is|comes to)|here (?:is|are) the|"  # an answer reported
    r"(?:unable|not able) to|cannot|can't|could not|couldn't)\b",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"(is there )?anything else[^.?!]*[?.!]?|(can|may) i help[^.?!]*[?.!]?|how else[^.?!]*[?.!]?",
    re.IGNORECASE,
)


@lru_cache(maxsize=16384)
def fact_words(key: str) -> str:
    """``customer_email`` -> ``customer email``, ``fuelAmount`` -> ``fuel amount``, ``address1`` ->
    ``address 1`` (how a fact is named in text)."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)  # camelCase
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", s)  # HTTPCode -> HTTP Code
    s = re.sub(r"(?<=[A-Za-z])(\d+)(?![A-Za-z])", r" \1", s)  # address1 -> address 1
    return re.sub(r"\s+", " ", s.replace("_", " ").replace("-", " ")).strip().lower()


_ORDINALS = {2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth", 9: "ninth",
             10: "tenth"}


def fact_label(key: str) -> str:
    """How a request names fact ``key``: its words, a trailing number as an ordinal
    (``order_type_2`` -> ``second order type``); :func:`names_fact` recognises both."""
    words = fact_words(key).split(" ")
    if len(words) > 1 and words[-1].isdigit() and int(words[-1]) in _ORDINALS and "_" in key:
        return " ".join([_ORDINALS[int(words[-1])], *words[:-1]])
    return " ".join(words)


def _mention_re(key: str) -> re.Pattern:
    sep = r"[\s_-]*"  # fuel amount, fuel_amount, fuelAmount, fuelamount
    alt = [sep.join(re.escape(w) for w in fact_words(key).split(" "))]
    label = fact_label(key)
    if label != fact_words(key):
        alt.append(sep.join(re.escape(w) for w in label.split(" ")))
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(alt) + r")(?![a-z0-9])", re.IGNORECASE)


def names_fact(text: str, key: str) -> bool:
    """Does ``text`` name fact ``key`` (as words or as the raw key)?"""
    return bool(_mention_re(key).search(text or ""))


def mentions(text: str, value: str) -> bool:
    """``value`` appears in ``text`` as a whole token (``U0001`` is not found in ``U00012``):
    the leak rule of task generation and verification (a hidden value must not be in the request)."""
    return bool(value) and re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text or "") is not None


def mentioned_facts(text: str, keys: Iterable[str]) -> list[str]:
    """Facts named in ``text``; a fact whose name is part of a longer named fact is dropped
    (``name`` inside ``project name``) unless it is also named on its own."""
    text = text or ""
    hits = [k for k in keys if names_fact(text, k)]
    out = []
    for k in hits:
        longer = [h for h in hits if h != k and fact_words(k) in fact_words(h) and fact_words(k) != fact_words(h)
                  and names_fact(text, h)]  # two facts named alike are one detail to the user (phoneNumber, phone_number)
        if longer:
            stripped = text
            for h in longer:
                stripped = _mention_re(h).sub(" ", stripped)
            if not names_fact(stripped, k):
                continue
        out.append(k)
    return out


def is_request(text: str) -> bool:
    """Does the message read as a question or a request for something?"""
    return bool(_REQUEST_CUES.search(_PLEASANTRY.sub(" ", text or "")))


def asks_for_facts(text: str, keys: Iterable[str]) -> list[str]:
    """The facts an agent message asks the user for (named and phrased as a request)."""
    return mentioned_facts(text, keys) if is_request(text) else []


def asks_confirmation(text: str) -> bool:
    return bool(_CONFIRM_CUES.search(text or ""))


_AGREE_CUES = re.compile(r"\b(yes|yeah|yep|sure|ok|okay|go ahead|please do|do it|confirm(?:ed)?|correct|that's right|"
                         r"proceed|absolutely|of course)\b", re.IGNORECASE)
_REFUSE_CUES = re.compile(r"\b(no|nope|not|don't|do not|never mind|hold on|wait|stop)\b", re.IGNORECASE)


def agrees(text: str) -> bool:
    """A user reply that agrees to what the agent asked to confirm ("Yes, please go ahead."): an
    agreement cue and no refusal or hedge ("no", "not", "don't", "wait"). The judged confirm-first
    rule reads it (:mod:`autoforge.rollout.rule_judge`)."""
    text = text or ""
    return bool(_AGREE_CUES.search(text)) and not _REFUSE_CUES.search(text)


def claims_completion(text: str) -> bool:
    """The agent reports its work as done (or as impossible): the user may end the episode.

    A trailing pleasantry ("anything else I can help with?") does not make it a question.
    A message that still asks for something (a question left after removing pleasantries)
    does not claim completion.
    """
    text = text or ""
    if not _DONE_CUES.search(text):
        return False
    rest = _PLEASANTRY.sub(" ", text)
    return "?" not in rest


# --------------------------------------------------------------------------- values


def value_text(value: Any) -> str:
    """A fact value as the user writes it; :func:`parse_value` inverts it exactly."""
    if isinstance(value, str):
        if "\n" in value or value != value.strip() or value == "":
            return json.dumps(value, ensure_ascii=False)
        try:
            json.loads(value)
        except ValueError:
            return value
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def parse_value(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text


def fact_line(key: str, value: Any) -> str:
    return f"- {fact_words(key)}: {value_text(value)}"


def parse_fact_lines(text: str, keys: Iterable[str]) -> dict[str, Any]:
    """Facts stated as ``- words: value`` lines, mapped back to their keys (unknown names ignored; a line fills
    every key named alike: ``phoneNumber`` and ``phone_number`` are the user's one phone number)."""
    by_words: dict[str, list[str]] = {}
    for k in keys:
        by_words.setdefault(fact_words(k), []).append(k)
    out: dict[str, Any] = {}
    for words, raw in _FACT_LINE.findall(text or ""):
        for key in by_words.get(fact_words(words), ()):
            out[key] = parse_value(raw)
    return out


def value_forms(value: Any) -> list[str]:
    """Lower-case text forms under which ``value`` may appear in a free-text message."""
    forms = {value_text(value).lower(), json.dumps(value, ensure_ascii=False, sort_keys=True).lower()}
    if isinstance(value, str):
        forms.add(value.lower())
    elif isinstance(value, bool):
        forms |= {"yes", "true"} if value else {"no", "false"}
    elif isinstance(value, (int, float)):
        forms.add(f"{value:g}" if isinstance(value, float) else str(value))
        if isinstance(value, float) and value.is_integer():
            forms.add(str(int(value)))
        if isinstance(value, float):
            forms.add(f"{value:.2f}")
    elif isinstance(value, list):
        forms.add(", ".join(value_text(v).lower() for v in value))
    return sorted(f for f in forms if f)


def states_value(text: str, value: Any) -> bool:
    """Does the free text contain ``value`` (any of its forms, not inside a longer token)?"""
    low = (text or "").lower()
    for form in value_forms(value):
        for m in re.finditer(re.escape(form), low):
            before = low[m.start() - 1] if m.start() > 0 else " "
            after = low[m.end()] if m.end() < len(low) else " "
            if not (before.isalnum() or (form[:1].isalnum() and before in "@_")) and not (
                after.isalnum() or after in "@_" and form[-1:].isalnum()
            ):
                return True
    return False


_STATED = re.compile(r"\s*(?:is|was|=|:|would be|should be)\s*[\"'`]?([^\n\"'`]+?)[\"'`]?\s*(?:[,;!]|\.(?:\s|$)|\n|$)",
                     re.IGNORECASE)


def stated_value(text: str, key: str) -> str | None:
    """The value free text gives for fact ``key`` (``my email is x@y.z.`` -> ``x@y.z``), if any."""
    lines = parse_fact_lines(text, [key])
    if key in lines:
        return value_text(lines[key])
    for m in _mention_re(key).finditer(text or ""):
        s = _STATED.match(text, m.end())
        if s:
            return s.group(1).strip()
    return None
