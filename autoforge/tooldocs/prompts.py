"""Prompt template of the ingest step (``tool_docs``): prose tool documentation -> tool schemas.

See :mod:`autoforge.llm.prompting` for what a template is and how it is registered.
"""

from __future__ import annotations

from autoforge.llm.prompting import msgs, register


@register("tool_docs")
def tool_docs(text: str, *, path: str = "") -> list[dict]:
    """Markdown/prose tool documentation -> tool schemas (OpenAI function-calling style)."""
    system = (
        "You convert prose tool documentation into tool definitions. For every tool the text "
        "describes, give its snake_case name, a one-sentence description, and its parameters as a "
        "JSON Schema object (types, required, enums). Invent nothing the text does not support."
    )
    return msgs(system, {"path": path, "documentation": text})
