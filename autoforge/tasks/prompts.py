"""Prompt template of task phrasing (arXiv 2512.22857, Sec. 3.3): a DAG -> the user's request.

See :mod:`autoforge.llm.prompting` for what a template is and how it is registered.
"""

from __future__ import annotations

from typing import Any

from autoforge.llm.prompting import msgs, register


@register("task_text")
def task_text(dag: Any, user_facts: dict, gold_calls: list[Any]) -> list[dict]:
    """A DAG with its gold calls -> the user's request, holding only the minimum information."""
    system = (
        "You write what a user would say to a support agent to get this work done. State the goal "
        "of every requirement in plain words, but do not mention tools, ids the user would not know, "
        "or the steps. Mention only the facts needed to start; the other facts in `user_facts` stay "
        "hidden (the user reveals them when asked). Write in the first person, 1-3 sentences."
    )
    return msgs(system, {"dag": dag, "user_facts": user_facts, "gold_calls": gold_calls})
