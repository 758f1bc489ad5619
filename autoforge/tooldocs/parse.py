"""Detect a tool document's format and dispatch to its parser.

The single entry point for one document: :func:`parse_document` (text in, a
:class:`ParsedDocument` out) and :func:`parse_file`. Whatever the input, the only exception
that leaves is :class:`autoforge.errors.ToolDocError` (the hypothesis test in
``tests/test_tooldocs_fuzz.py`` checks this).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument
from autoforge.tooldocs.mcp import looks_like_mcp, parse_mcp
from autoforge.tooldocs.openai_format import looks_like_openai, parse_openai
from autoforge.tooldocs.openapi import looks_like_openapi, parse_openapi
from autoforge.tooldocs.source import MARKDOWN_SUFFIXES, load_structured, read_text
from autoforge.types import DocFormat

PARSERS = {"openai": parse_openai, "mcp": parse_mcp, "openapi": parse_openapi}
_KINDS = {str: "a string", int: "a number", float: "a number", bool: "a boolean", type(None): "null"}


def detect_format(data: Any, path: str) -> DocFormat:
    """Which structured format a parsed JSON/YAML value is in (OpenAPI > MCP > OpenAI)."""
    if looks_like_openapi(data):
        return "openapi"
    if looks_like_mcp(data):
        return "mcp"
    if looks_like_openai(data):
        return "openai"
    top = "" if isinstance(data, (dict, list)) else (
        f"its top level is {_KINDS.get(type(data), type(data).__name__)}, not an object or a list; ")
    raise ToolDocError(
        f"unrecognised tool document: {top}expected OpenAI function-calling JSON (a function, a list, or "
        "{'type': 'function', 'function': ...}), an MCP tools/list result ({'tools': [{'name', 'inputSchema'}]}) "
        "or an OpenAPI 3 document ({'openapi': '3.x', 'paths': ...})",
        path=path, location="/",
    )


def parse_document(text: str, path: str, *, format: DocFormat | None = None) -> ParsedDocument:
    """Parse one document. Markdown comes back with no tools (it needs an LLM backend)."""
    path = str(path)
    if format == "markdown" or (format is None and Path(path).suffix.lower() in MARKDOWN_SUFFIXES):
        if not text.strip():
            raise ToolDocError("empty file; expected a Markdown tool description", path=path)
        return ParsedDocument(format="markdown", tools=[])
    if format is not None and format not in PARSERS:
        raise ToolDocError(f"unknown format {format!r}; valid formats: {sorted(PARSERS) + ['markdown']}", path=path)
    data = load_structured(text, path)
    fmt = format or detect_format(data, path)
    try:
        return PARSERS[fmt](data, path)
    except RecursionError:
        raise ToolDocError("document is nested too deeply to parse", path=path) from None


def parse_file(path: str | Path, *, format: DocFormat | None = None) -> ParsedDocument:
    return parse_document(read_text(path), str(path), format=format)
