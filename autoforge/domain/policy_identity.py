"""What an identify-first rule says identifies the user (issue 33): its ``label`` and, where the sentence
names one, the write's argument that carries it (``arg``).

An ``identify_first`` rule without lookups ("NEVER provide account balances or book appointments without
first confirming the customer's user_id", "Your valid driver's license is required to confirm your
identity") is kept by asking the user who they are before the write. What it asks for is the rule's
``label``; a user who does not have it cannot be served, which is the rule's boundary task
(:mod:`autoforge.tasks.identity`). Forms read:

- an argument of a bound write named in the sentence ("confirming the customer's user_id", "verify the
  customer id"): ``arg`` is that argument, ``label`` its words ("user id");
- "<thing> is required to confirm / verify (your) identity", "confirm (your) identity with / using / by
  (your) <thing>": ``label`` is the thing ("driver's license"), no ``arg``;
- a rule with lookups (``via``: "identify the caller by the email address on the account" with
  ``find_customer_id_by_email(email)``): what the user gives a lookup (the parameter the sentence names, or
  the first lookup's), no ``arg``.

Neither: no label (the rule is judged as before; it makes no boundary task).
"""

from __future__ import annotations

import re
from typing import Any

from autoforge.dialogue import fact_words

_THING = r"((?:[a-z][\w'-]*\s+){0,3}?[a-z][\w'-]*)"
_REQUIRED = re.compile(_THING + r"\s+(?:is|are)\s+(?:required|needed|necessary)\s+(?:in order\s+)?to\s+(?:confirm|verify|"
                       r"establish|prove|validate)\s+(?:your\s+|the\s+\w+'s\s+|their\s+|his\s+|her\s+)?identit", re.I)
_STOP = r"(?:before|after|when|and|or|to|for|if|unless|prior|in|on|at|so|then|first)\b"
_AFTER = r"([a-z][\w'-]*(?:\s+(?!" + _STOP + r")[a-z][\w'-]*){0,3})"
_WITH = re.compile(r"\b(?:confirm|verify|establish|prove|validate)\w*\s+(?:[\w']+\s+){0,2}?identit\w*\s+"
                   r"(?:with|using|by|via|through)\s+(?:your\s+|their\s+|the\s+|a\s+|an\s+)?" + _AFTER, re.I)
_DROP = {"valid", "your", "the", "a", "an", "their", "his", "her", "current", "own", "original", "copy", "of"}


def _thing(words: str) -> str:
    """``valid driver's license`` -> ``driver's license``."""
    out = [w for w in words.split()]
    while out and out[0].lower() in _DROP:
        out.pop(0)
    return " ".join(out).lower()


def _named_arg(text: str, params: dict[str, Any]) -> str | None:
    """The parameter the sentence names by its own name or its words (``user_id``, "user id", "userId")."""
    low = " " + re.sub(r"[^a-z0-9]+", " ", text.lower()) + " "
    for p in sorted(params, key=len, reverse=True):
        words = fact_words(p)
        if len(words) >= 4 and (re.search(rf"(?<![\w]){re.escape(p)}(?![\w])", text) or f" {words} " in low):
            return p
    return None


def identity_of(text: str, params_of: dict[str, dict[str, Any]], lookups: dict[str, dict[str, Any]] | None = None
                ) -> dict[str, str]:
    """``{"label": ..., "arg": ...}`` (either may be absent) of an identify-first sentence over the bound
    writes' parameters (``params_of``: tool name -> parameters); ``arg`` only where every bound write takes it.
    With ``lookups`` (the rule's lookups, name -> parameters, in the rule's order) the label is what the user
    gives a lookup: the parameter the sentence names ("the email address on your account"), else the sentence's
    own words, else the first lookup's first parameter; there is no ``arg`` (the write takes what the lookup
    found)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    if lookups:
        said = next((p for params in lookups.values() if (p := _named_arg(text, params))), None)
        if said:
            return {"label": fact_words(said)}
        own = _own_words(text) or next((fact_words(next(iter(params))) for params in lookups.values() if params), None)
        return {"label": own} if own else {}
    named = {t: _named_arg(text, params) for t, params in params_of.items()}
    args = set(named.values())
    if params_of and len(args) == 1 and None not in args:
        arg = args.pop()
        return {"label": fact_words(arg), "arg": arg}
    own = _own_words(text)
    return {"label": own} if own else {}


def _own_words(text: str) -> str | None:
    """What the sentence itself says identifies the user ("<thing> is required to confirm your identity")."""
    for form in (_REQUIRED, _WITH):
        m = form.search(text)
        if m:
            thing = _thing(m.group(1))
            if thing and thing not in ("it", "this", "that", "which", "what"):
                return thing
    return None
