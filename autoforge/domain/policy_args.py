"""Policy rules about a call's own arguments (:mod:`autoforge.domain.policy` tries these forms too):

* "NEVER call a tool with missing, empty or placeholder values", "Only call a tool when you have all
  required parameters": ``arg_filled`` on the free-text required arguments of every tool;
* "They must provide 3 out of 7 of the items below, which you enter into [Verify Identity]": ``arg_count``
  (at least N of the named tool's arguments given);
* "Do not discuss prohibited topics (politics, religion, ...)": ``arg_not`` with the listed values, on
  every tool whose argument the noun names (``topic``);
* "[Make Purchase] To add an item to the order you will need to enter its name": ``arg_filled`` on the
  named tool's argument the noun names, or its only argument.
"""

from __future__ import annotations

import re

from autoforge.domain import words as nm
from autoforge.domain.policy_text import NUM, Statement, number, stem
from autoforge.domain.policy_world import PolicyWorld, by_tool, make_rule, tool_mentions
from autoforge.domain.rule_kinds import ParsedRule

_FILLED = re.compile(r"\b(?:never|not|only|must not|should not|cannot)\b[^.]{0,60}?\b(?:call|use|invoke|run)\w*\b[^.]{0,50}?"
                     r"(?:\b(?:missing|empty|blank|placeholder|null|made[- ]up|invented|guessed|assumed|dummy|fake)\b"
                     r"[^.]{0,40}?\b(?:values?|arguments?|parameters?|inputs?|data)\b"
                     r"|\b(?:all|every)\s+(?:the\s+|of\s+the\s+)?required\s+(?:values?|arguments?|parameters?|inputs?|information|fields?))",
                     re.I)


def args_filled(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """"Never call a tool with missing, empty or placeholder values", "Only call a tool when you have all
    required parameters": an ``arg_filled`` guard on the free-text required arguments of every tool
    (:func:`autoforge.envs.policy_guards.free_text_required` picks them per tool when the rule is bound)."""
    if not _FILLED.search(st.text):
        return []
    tools = [t for t in world.tools if t.kind not in ("handoff", "scratchpad", "calculator")]
    return [make_rule("prohibition", st.text, {"op": "arg_filled", "args": "required"}, tools)]


_OUT_OF = re.compile(r"\b(?:at least\s+)?" + NUM + r"\s+(?:out\s+of\s+(?:the\s+)?" + NUM.replace("(", "(?:", 1)
                     + r"\b|of\s+(?:the\s+)?(?:following|items?|details?|pieces?|fields?|identifiers?)\b)", re.I)


def arg_count(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """"They must provide 3 out of 7 of the items below, which you enter into [Verify Identity]": at least
    N of the named tool's arguments given (``arg_count``)."""
    m = _OUT_OF.search(st.text)
    named = [t for _, _, t in tool_mentions(st.text, world)]
    n = number(m.group(1)) if m else None
    if not m or not named or not n or n < 1 or not re.search(r"\b(must|need|required?|at least|should)\b", st.text, re.I):
        return []
    return [make_rule("quantity_limit", st.text, {"op": "arg_count", "args": "all", "min": int(n)}, named[:1],
                      values=[int(n)])]


_LISTED = re.compile(r"\b(?:not|never|no|cannot|prohibited|forbidden|avoid)\b[^.(]{0,60}?\b([a-z][\w\-]{2,30})\s*"
                     r"\((?:e\.g\.,?\s*|such as\s+|like\s+)?([^()]{3,200})\)", re.I)


def listed_values(text: str, world: PolicyWorld) -> list[ParsedRule]:
    """"Do not discuss prohibited topics (politics, religion, ...)": the listed values of an argument the noun
    names (``topic``), refused on every tool that takes it (``arg_not``)."""
    m = _LISTED.search(text)
    if not m:
        return []
    values = [v.strip(" .;:'\"") for v in re.split(r",|;|\bor\b|\band\b|/", m.group(2))]
    values = [v for v in values if v and len(v.split()) <= 4 and v.lower() not in ("etc", "other")]
    noun = stem(nm.singular(m.group(1).lower()))
    text_type = lambda sc: sc.get("type") == "string" or (isinstance(sc.get("type"), list) and "string" in sc["type"])  # noqa: E731
    # what the values are, in the sentence's words ("prohibited topics"): the reason a refusal states
    label = " ".join(re.sub(r"^.*?\b(?:not|never|no|cannot|avoid)\b", "", text[:m.start(2)].rstrip(" (:"),
                            flags=re.I).split()[-2:])
    pairs = [(t, {"op": "arg_not", "arg": p, "values": values, "label": label}) for t in world.tools
             for p, sc in t.params.items() if text_type(sc) and not sc.get("enum")
             and noun in (stem(nm.singular(p.lower())), stem(nm.singular(p.lower().split("_")[-1])))]
    return by_tool("prohibition", text, pairs, f"no argument takes a {m.group(1)}") if len(values) >= 2 else []


_NEEDED = re.compile(r"\b(?:need(?:s)? to|must|have to|has to|required to)\s+(?:enter|provide|type|input|give|fill in|supply)\s+"
                     r"(?:in\s+)?(?:its|the|their|his|her|a|an|your)\s+([a-z][\w\-]*(?:\s+[a-z][\w\-]*)?)", re.I)


def arg_needed(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """"[Make Purchase] To add an item to the order you will need to enter its name": the named tool's
    argument the noun names (by its words), or its only argument, must be given (``arg_filled``)."""
    m = _NEEDED.search(st.text)
    named = {t.name: t for _, _, t in tool_mentions(st.text, world)}
    if not m or len(named) != 1:
        return []
    tool = next(iter(named.values()))
    said = {stem(nm.singular(w.lower())) for w in m.group(1).split()}
    args = [p for p in tool.params if {stem(nm.singular(w)) for w in nm.words(p)} & said] or (
        list(tool.params) if len(tool.params) == 1 else [])
    if len(args) != 1:
        return []
    return [make_rule("prohibition", st.text, {"op": "arg_filled", "args": args}, [tool])]
