"""Prompt templates of the tool graph, merging and reasoning nodes (arXiv 2512.22857, Sec. 3.2).

``edges`` (tools -> dependency edges with bindings), ``merge`` (two tool sequences -> one
multi-requirement sequence) and ``reasoning`` (a tool sequence -> a DAG with reasoning nodes).
See :mod:`autoforge.llm.prompting` for what a template is and how it is registered.
"""

from __future__ import annotations

from typing import Any

from autoforge.llm.prompting import msgs, register, tool_brief


@register("edges")
def edges(tools: list[Any], candidates: list[dict] | None = None) -> list[dict]:
    """Tools -> edges A->B where an output of A is likely a valid input of B, with bindings."""
    system = (
        "You build a tool dependency graph. An edge src -> dst means a value in src's output is a "
        "likely valid argument of dst; give each binding as output_path (dotted path in src's output, "
        "`*` for list items, e.g. orders.*.order_id) -> param of dst. Only bind values of the same "
        "entity and type. If `candidates` are given, judge only those."
    )
    payload: dict[str, Any] = {"tools": [tool_brief(t) for t in tools]}
    if candidates is not None:
        payload["candidates"] = candidates
    return msgs(system, payload)


@register("merge")
def merge(first: list[str], second: list[str], tools: list[Any]) -> list[dict]:
    """Two tool sequences -> one multi-requirement sequence with redundant calls removed."""
    system = (
        "You merge two tool-call sequences, each serving one user requirement, into one sequence a "
        "single user request could need. Keep each sequence's order, drop a call that repeats an "
        "earlier identical lookup, and say for every kept call which requirement (0 or 1) it serves."
    )
    return msgs(system, {"first": first, "second": second, "tools": [tool_brief(t) for t in tools]})


@register("reasoning")
def reasoning(sequence: list[str], tools: list[Any], ops: dict[str, Any]) -> list[dict]:
    """A tool sequence -> reasoning nodes (ops over earlier outputs) and reasoning edges: a DAG."""
    system = (
        "You turn a tool sequence into a task blueprint (a DAG). Insert reasoning nodes where a later "
        "argument must be computed from earlier outputs (pick the cheapest, add days to a date, "
        "compare totals) using only the listed operations, and say for every argument where its "
        "value comes from: a user fact, an earlier node's output path, or a constant."
    )
    return msgs(system, {"sequence": sequence, "tools": [tool_brief(t) for t in tools], "operations": ops})
