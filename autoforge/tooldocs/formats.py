"""The registry of tool-documentation formats: how each is recognised and what parses it.

Stage 1 reads formats from here only: :func:`autoforge.tooldocs.parse.detect_format` tries the
structured formats in the order below, :func:`~autoforge.tooldocs.parse.parse_document`
dispatches on the entry, and ingest stores a prose format's documents as ``needs_llm``.
``ToolDoc.format`` (autoforge/types.py) refuses a name that is not here, and the warehouse keeps
it as a plain string (sql/082 dropped the CHECK list), so adding a format is an entry here (its
parser in a module of its own) plus its tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument
from autoforge.tooldocs.mcp import looks_like_mcp, parse_mcp
from autoforge.tooldocs.openai_format import looks_like_openai, parse_openai
from autoforge.tooldocs.openapi import looks_like_openapi, parse_openapi
from autoforge.tooldocs.source import MARKDOWN_SUFFIXES


@dataclass(frozen=True)
class DocFormatSpec:
    """One format: a structured one has ``looks_like`` and ``parse`` over the parsed JSON/YAML value;
    a prose one is recognised by its file suffixes and has no offline parser (``needs_llm`` says why)."""

    name: str
    shape: str  # what a document of this format looks like, for the error of an unrecognised one
    looks_like: Callable[[Any], bool] | None = None
    parse: Callable[[Any, str], ParsedDocument] | None = None
    suffixes: frozenset[str] = frozenset()
    needs_llm: str | None = None  # prose: the reason stored with its ToolDoc (status needs_llm)


DOC_FORMATS: dict[str, DocFormatSpec] = {f.name: f for f in (  # detection order: OpenAPI > MCP > OpenAI
    DocFormatSpec("openapi", "an OpenAPI 3 document ({'openapi': '3.x', 'paths': ...})", looks_like_openapi,
                  parse_openapi),
    DocFormatSpec("mcp", "an MCP tools/list result ({'tools': [{'name', 'inputSchema'}]})", looks_like_mcp, parse_mcp),
    DocFormatSpec("openai", "OpenAI function-calling JSON (a function, a list, or {'type': 'function', "
                            "'function': ...})", looks_like_openai, parse_openai),
    DocFormatSpec("markdown", "a Markdown tool description", suffixes=frozenset(MARKDOWN_SUFFIXES), needs_llm=(
        "Markdown tool descriptions are prose: the offline backend cannot parse them into tool schemas. "
        "Ingest them with an LLM backend (AUTOFORGE_BACKEND=openai), or convert the document to OpenAI "
        "function-calling JSON, an MCP tools/list result or OpenAPI.")),
)}
STRUCTURED = tuple(f for f in DOC_FORMATS.values() if f.looks_like is not None)


def doc_format(name: str, path: str | None = None) -> DocFormatSpec:
    """The registered format ``name``; an unknown name raises with the list of valid ones."""
    try:
        return DOC_FORMATS[name]
    except KeyError:
        raise ToolDocError(f"unknown format {name!r}; valid formats: {', '.join(DOC_FORMATS)}", path=path) from None


def by_suffix(path: str) -> DocFormatSpec | None:
    """The format a file name alone decides (Markdown's ``.md``), else None (the content decides)."""
    suffix = Path(path).suffix.lower()
    return next((f for f in DOC_FORMATS.values() if suffix in f.suffixes), None)
