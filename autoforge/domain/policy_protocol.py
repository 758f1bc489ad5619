"""Tool-calling protocol rules: how the agent may call tools at all, whatever the tool (kind ``conversation``,
judged over the transcript by :mod:`autoforge.rollout.rule_judge`).

==================  ================================================================  ===========================
op                  sentence forms (examples)                                         broken when
==================  ================================================================  ===========================
one_call_per_turn   "Only make one tool call at a time." · "Never call several         an agent message carries
                    tools at once."                                                    two tool calls or more
silent_call         "If you make a tool call, do not respond to the user at the        an agent message carries a
                    same time."                                                        tool call and text
announce_call       "If you are going to call a function, ALWAYS let the user know     a tool call with no text
                    what you are about to do BEFORE calling it."                       from the agent since the
                                                                                       user's last message
cite_source         "Always include citations for any factual statements from          a read whose result has
                    retrieved policy documents." · "Cite the document you used."       ids, and no agent message
                                                                                       after it names one of them
==================  ================================================================  ===========================

They bind every tool of the set; ``cite_source`` the reads the sentence names (by their words: "policy
documents" names ``lookupPolicyDocument``), or every read where it names none. A citation is any id of
the read's result (``id``, ``*_id``, ``title``, ``name``, ``url``, ``source`` values: :func:`citations`)
in a later agent message. A policy that asks both to stay silent while calling and to announce a
call before it states two rules no agent keeps at once (the announcement would end the agent's turn):
the announcement is listed ``not enforced`` with why (:func:`drop_protocol_conflicts`). The oracle keeps
them: one call per message, no text with it, or a word before it where a call must be announced. The judge:
:func:`autoforge.rollout.rule_judge.protocol_breaks`.
"""

from __future__ import annotations

import re
from typing import Any

from autoforge.domain.policy_text import Statement
from autoforge.domain.policy_world import PolicyWorld, make_rule, tools_named
from autoforge.domain.rule_kinds import ParsedRule

PROTOCOL_OPS = ("one_call_per_turn", "silent_call", "announce_call", "cite_source")
_TOOL = r"(?:tools?|functions?|tool calls?|function calls?)"
_ONE = re.compile(r"\b(?:one|a single)\s+(?:tool|function)(?:\s+call)?\s+at a time\b"
                  r"|\b(?:never|not|no)\b[^.]{0,40}\b(?:several|multiple|more than one|many|two or more)\s+" + _TOOL
                  + r"[^.]{0,40}\b(?:at once|at the same time|in parallel|simultaneously|in one (?:turn|message|response))\b",
                  re.I)
_SILENT = re.compile(r"\b(?:if|when|while|whenever)\b[^.]{0,30}\b(?:make|making|call|calling|use|using)\b[^.]{0,20}"
                     + _TOOL + r"[^.]{0,40}\b(?:not|never)\b[^.]{0,20}\b(?:respond|reply|talk|speak|write|answer|message)\w*",
                     re.I)
_ANNOUNCE = re.compile(r"\b(?:let the user know|tell the user|inform the user|explain to the user)\b[^.]{0,80}?"
                       r"\b(?:before|prior to)\b[^.]{0,20}\b(?:call|calling|using|invoking|running)\b"
                       r"|\b(?:before|prior to)\s+(?:calling|using|invoking|running|making)\s+(?:a|any|the|each)\s+"
                       + _TOOL + r"[^.]{0,40}\b(?:let|tell|inform)\b[^.]{0,10}\buser\b", re.I)


_CITE = re.compile(r"\b(?:include|including|add|give|provide|with|show)\s+(?:a\s+|the\s+)?(?:citations?\b|(?:references?|"
                   r"sources?)\s+(?:for|to|of)\b)|\b(?:always|must|should)\s+cite\b|^\s*cite\s+(?:the|your|each|every|all)\b", re.I)
CITE_KEYS = ("id", "title", "name", "url", "uri", "source", "link")


def citations(result: Any) -> list[str]:
    """What an agent may cite a read's ``result`` by: the string or number values of its ``id`` / ``*_id`` /
    ``*Id`` / title / name / url / source keys, at the top or in its records (a list's items, a dict's values)."""
    out: list[str] = []

    def keys(d: dict) -> None:
        for k, v in d.items():
            low = str(k).lower()
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip() and (
                    low in CITE_KEYS or low.endswith("_id") or str(k).endswith("Id")):
                out.append(str(v).strip())

    items = result if isinstance(result, list) else [result]
    for it in items[:50]:
        if isinstance(it, dict):
            keys(it)
            for v in it.values():
                for sub in (v if isinstance(v, list) else [v])[:50]:
                    if isinstance(sub, dict):
                        keys(sub)
    return list(dict.fromkeys(x for x in out if len(x) >= 2))


def protocol_rule(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """The tool-calling protocol rule a statement states, bound to every tool (none: it states none)."""
    text = st.text
    if _CITE.search(text):
        reads = [t for t in tools_named(text, world) if t.effect == "read"] or [t for t in world.tools if t.effect == "read"]
        return [make_rule("conversation", text, {"op": "cite_source", "tools": [t.name for t in reads]}, reads, "judged",
                          why=None if reads else "the tool set has no read to cite")]
    op = ("one_call_per_turn" if _ONE.search(text) else "silent_call" if _SILENT.search(text)
          else "announce_call" if _ANNOUNCE.search(text) else None)
    if op is None:
        return []
    tools = list(world.tools)
    return [make_rule("conversation", text, {"op": op, "tools": [t.name for t in tools]}, tools, "judged",
                      why=None if tools else "the tool set has no tool")]


def drop_protocol_conflicts(rules: list[ParsedRule]) -> None:
    """An ``announce_call`` rule beside a ``silent_call`` one is not enforced: no agent keeps both."""
    ops = {r.check.get("op") for r in rules if r.check}
    if "silent_call" in ops:
        for r in rules:
            if r.check and r.check.get("op") == "announce_call":
                r.enforcement, r.check = "not enforced", None
                r.why = ("the policy also says not to write to the user while calling a tool, so the announcement "
                         "would end the agent's turn before the call")
