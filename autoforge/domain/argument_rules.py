"""Argument rules: limits a parameter's prose states, read into forms the code can check.

"min 1, max 100", "at least one of body or reaction is required", "cannot be combined with",
"required when state_reason is 'duplicate'", "use with 'add' method only", snake_case /
no-spaces / prefix formats. A rule read into a form is a ``constraint`` whose ``values`` start
with the form's name (:func:`is_argument_rule`); the checks the code runs for it are written by
:func:`autoforge.envs.rule_engine.argument_checks`.
"""

from __future__ import annotations

import re
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.tooldocs.schema import unwrap
from autoforge.types import ToolRule

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


def is_argument_rule(r: ToolRule | ParsedRule) -> bool:
    """A constraint read into a form (``["range", ...]``, ``["one_of", ...]``): one the code can check."""
    return r.kind == "constraint" and bool(r.values) and isinstance(r.values[0], str)
