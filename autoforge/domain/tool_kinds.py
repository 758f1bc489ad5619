"""The registry of tool kinds: what each kind of tool does to the state and whether a task may ask for it.

Every tool the offline backend reads gets one kind (:class:`~autoforge.domain.tools.ToolPlan`,
``ToolCode.kind``); the stages read a kind's properties, never its name: synthesis writes the
kind's code (:mod:`autoforge.envs.code`), the tool graph leaves out the kinds no task calls
(:func:`autoforge.dags.graph.build_graph`), the linkage check counts only the writes a task may
ask for, and verification refuses a task whose gold run calls a kind no task may call or whose
only change is not a goal (``writes_observable``, :mod:`autoforge.tasks.quality`).

Three kinds are not about records at all and are read from the docs first (:func:`special_kind`):

==========  =======  ==========  ==============================================================
kind        effect   in tasks    what the code does
==========  =======  ==========  ==============================================================
scratchpad  read     no          nothing: a place to think ("Use this tool to think ..."); returns
calculator  read     no          evaluates an arithmetic expression (numbers, + - * / % **, parentheses)
handoff     write    no          records a transfer to a human agent; a terminal action, never a goal
==========  =======  ==========  ==============================================================

They stay in the environment (an agent may call them: a calculator helps, a needless hand-off
changes the state and fails the reward) but no task's gold run calls them, so no task's goal or
only write is a thought or a transfer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from autoforge.domain import words as nm
from autoforge.errors import ConfigError
from autoforge.tooldocs.schema import props, unwrap


@dataclass(frozen=True)
class ToolKind:
    """One kind of tool."""

    name: str
    description: str
    effect: Literal["read", "write", "either"]  # what its code does to the state ("either": read from the docs)
    in_tasks: bool  # a task's gold run may call it (walks pass through it, a write of it may be the goal)
    stores: bool = True  # its code reads or writes a collection of the state (False: a function of its arguments)


TOOL_KINDS: dict[str, ToolKind] = {k.name: k for k in (
    ToolKind("lookup", "find a record by fields a user can say (email, name) and return it or its id", "read", True),
    ToolKind("get", "return one record by its id, with the records it links", "read", True),
    ToolKind("list", "list records, filtered by the parameters (count_*: how many)", "read", True),
    ToolKind("create", "add a record", "write", True),
    ToolKind("update", "change fields of one record", "write", True),
    ToolKind("delete", "remove one record", "write", True),
    ToolKind("status", "move one record to another status", "write", True),
    ToolKind("link", "add a reference between two records", "write", True),
    ToolKind("unlink", "remove a reference between two records", "write", True),
    ToolKind("amount", "move an amount between balances, or add to / take from one", "write", True),
    ToolKind("generic", "a tool no other kind fits: read or write a record as its effect says", "either", True),
    ToolKind("compute", "a computation of a stateless tool set (add, mean, square_root): a function of its arguments",
             "read", True, stores=False),
    ToolKind("llm", "code the LLM backend wrote: its reply says the effect", "either", True),
    ToolKind("scratchpad", "a place to think or note reasoning: changes nothing, returns at once", "read", False, stores=False),
    ToolKind("calculator", "evaluates an arithmetic expression safely (no code is run)", "read", False, stores=False),
    ToolKind("handoff", "transfers the user to a human agent: records the transfer and ends nothing else; a terminal "
             "action, never a task's goal", "write", False),
)}
SPECIAL_KINDS = ("scratchpad", "calculator", "handoff")  # read from the docs before any record kind


def tool_kind(name: str) -> ToolKind:
    """The registered kind ``name``; an unknown name raises with the list of valid ones."""
    try:
        return TOOL_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown tool kind {name!r}; valid kinds: {', '.join(TOOL_KINDS)}") from None


def in_tasks(kind: str) -> bool:
    """May a task's gold run call a tool of this kind? Only the registered kinds that say no are
    kept out of tasks: a kind not registered here (hand-written tool code, such as a test's
    ``cancel``) is read as a tool about records."""
    known = TOOL_KINDS.get(kind)
    return known is None or known.in_tasks


# --------------------------------------------------------------------------- reading the docs

_THINK_WORDS = {"think", "thinking", "thought", "thoughts", "reason", "reasoning", "reflect", "reflection", "ponder",
                "brainstorm", "scratchpad", "scratch", "deliberate", "contemplate", "muse"}
_THINK_NAME_HEADS = {"think", "reflect", "ponder", "brainstorm", "scratchpad", "deliberate", "contemplate", "muse",
                     "reason", "thought", "thoughts", "scratch"}
_THINK_DESC = re.compile(
    r"\b(?:use|call|invoke)\s+(?:this|the)\s+(?:tool|function)\s+(?:to|when\s+you\s+(?:need|want)\s+to)\s+"
    r"(?:think|reason|reflect|brainstorm|ponder|deliberate|jot\s+down|write\s+down|note\s+down)\b"
    r"|\bscratch\s*-?\s*pad\b"
    r"|\b(?:record|log|write|jot|note)s?\s+(?:down\s+)?(?:your|a|the|its|an?\s+intermediate)\s+"
    r"(?:thoughts?|reasoning|chain\s+of\s+thought|plan)\b(?!\s+(?:of|for)\s+(?:the\s+)?(?:user|customer|record))"
    r"|\b(?:a\s+)?(?:thought|thinking|reasoning)\s+(?:tool|step|space)\b",
    re.I,
)
_CALC_NAME = {"calculate", "calculator", "calc", "compute", "evaluate", "eval", "math", "arithmetic", "solve"}
_EXPR_PARAMS = {"expression", "expr", "formula", "equation", "calculation", "math", "arithmetic", "input", "query"}
_EXPR_DESC = re.compile(r"\b(?:math(?:ematical)?|arithmetic|numeric(?:al)?)\s+(?:expression|formula|equation)s?\b"
                        r"|\bexpressions?\s+(?:like|such\s+as|e\.g\.)\s*['\"`]?\(?\d", re.I)
_HANDOFF_VERBS = {"transfer", "handoff", "hand", "escalate", "connect", "route", "forward", "handover", "pass", "redirect"}
_HUMAN_WORDS = {"human", "humans", "live", "person", "representative", "operator", "supervisor"}
_HANDOFF_DESC = re.compile(
    r"\b(?:transfer|hand|escalat|connect|rout|forward|pass|redirect)\w*(?:-off)?\s+"
    r"(?:(?:the|this|a|an|your)\s+)?(?:user|customer|caller|client|conversation|chat|call|case|issue|them|him|her|it)?\s*"
    r"(?:off\s+|over\s+)?(?:to|with)\s+(?:a\s+|an\s+|the\s+)?(?:human|live|real)\b",
    re.I,
)


def _param_schemas(spec: Any) -> dict[str, dict]:
    return {k: (unwrap(v) if isinstance(v, dict) else {}) for k, v in props(getattr(spec, "parameters", None)).items()}


def _has_identifier(params: dict[str, dict]) -> bool:
    """Does the tool name a stored thing (an ``*_id`` / ``id`` / ``*_ids`` parameter)?"""
    return any(nm.snake(p) == "id" or nm.snake(p).endswith(("_id", "_ids")) for p in params)


def _all_text(params: dict[str, dict]) -> bool:
    """Every parameter is free text (a string without enum, or a list of strings)."""
    for s in params.values():
        t = s.get("type")
        if t == "array" and isinstance(s.get("items"), dict) and s["items"].get("type") in ("string", None):
            continue
        if t not in ("string", None) or s.get("enum"):
            return False
    return True


def is_scratchpad(spec: Any) -> bool:
    """A place to think: ``think(thought)``, "Use this tool to think about something ...", a tool to
    "record your reasoning" or a "scratchpad". It names no state (no identifier parameter) and takes
    only free text."""
    params = _param_schemas(spec)
    if _has_identifier(params) or not _all_text(params):
        return False
    ws = nm.words(spec.name)
    by_name = bool(ws) and (ws[0] in _THINK_NAME_HEADS or (len(ws) <= 3 and set(ws) <= _THINK_WORDS | {"tool", "step", "pad", "log", "a", "out", "loud"}))
    return by_name or bool(_THINK_DESC.search(spec.description or ""))


def is_calculator(spec: Any) -> bool:
    """An expression calculator: ``calculate(expression)``, "Evaluate a math expression",
    ``compute(formula)``: one free-text parameter that holds the expression (by its name, or the
    description speaks of a mathematical expression), no identifier."""
    params = _param_schemas(spec)
    text = [p for p, s in params.items() if s.get("type") in ("string", None) and not s.get("enum")]
    if _has_identifier(params) or len(text) != 1:
        return False
    others = [s for p, s in params.items() if p not in text]
    if any(s.get("type") not in ("integer", "number") for s in others):  # only a precision may come with it
        return False
    (p,) = text
    desc = f"{spec.description or ''} {params[p].get('description') or ''}"
    expr_param = nm.snake(p) in _EXPR_PARAMS or any(w in _EXPR_PARAMS - {"input", "query"} for w in nm.words(p))
    calc_name = bool(set(nm.words(spec.name)) & _CALC_NAME)
    return (calc_name and (expr_param or bool(_EXPR_DESC.search(desc)))) or (expr_param and bool(_EXPR_DESC.search(desc)))


def is_handoff(spec: Any) -> bool:
    """A hand-off to a person: ``transfer_to_human_agents``, ``escalate_to_human``, "Transfer the
    user to a human agent", "Hand the conversation off to a live representative"."""
    ws = set(nm.words(spec.name))
    if ws & _HANDOFF_VERBS and ws & _HUMAN_WORDS:
        return True
    # by the description only where the name's verb is a hand-off verb or no known verb, and no
    # record is named (``escalate_ticket(ticket_id)`` "to a human agent" changes the ticket)
    if (ws & _HANDOFF_VERBS or not ws & (nm.ALL_VERBS | nm.READ_VERBS)) and not _has_identifier(_param_schemas(spec)):
        return bool(_HANDOFF_DESC.search(spec.description or ""))
    return False


def special_kind(spec: Any) -> str | None:
    """``scratchpad`` / ``calculator`` / ``handoff`` when the docs describe such a tool, else None
    (a tool about records: :func:`autoforge.domain.tools.analyze_tool` reads its kind)."""
    if is_handoff(spec):
        return "handoff"
    if is_calculator(spec):
        return "calculator"
    if is_scratchpad(spec):
        return "scratchpad"
    return None
