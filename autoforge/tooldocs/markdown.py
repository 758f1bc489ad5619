"""Markdown (prose) tool descriptions.

The paper ingests tool documentation as text and lets the LLM read it. Prose has no
machine-readable schema, so the offline backend cannot turn it into ``ToolSpec``s: a
Markdown document is stored as a ``ToolDoc`` with status ``needs_llm`` and the message
below, and :func:`parse_markdown_with_llm` is the hook an LLM backend fills in.
"""

from __future__ import annotations

from typing import Any

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument

NEEDS_LLM_MESSAGE = (
    "Markdown tool descriptions are prose: the offline backend cannot parse them into tool schemas. "
    "Ingest them with an LLM backend (AUTOFORGE_BACKEND=openai), or convert the document to OpenAI "
    "function-calling JSON, an MCP tools/list result or OpenAPI."
)


def parse_markdown_with_llm(text: str, path: str, client: Any) -> ParsedDocument:
    """Ask an LLM ``client`` (``autoforge.llm``) to extract tools from prose. Not implemented yet.

    Contract for the implementation: return a ``ParsedDocument(format="markdown", tools=[...])``
    whose tools pass the same schema checks as the structured formats (resolved object
    ``parameters``), and raise :class:`ToolDocError` for anything it cannot extract.
    """
    raise ToolDocError(
        "parsing Markdown tool docs with an LLM is not implemented yet; " + NEEDS_LLM_MESSAGE, path=path
    )
