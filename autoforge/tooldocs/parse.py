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
from autoforge.tooldocs.formats import STRUCTURED, by_suffix, doc_format
from autoforge.tooldocs.source import load_structured, read_text
from autoforge.types import DocFormat

_KINDS = {str: "a string", int: "a number", float: "a number", bool: "a boolean", type(None): "null"}


def detect_format(data: Any, path: str) -> DocFormat:
    """Which structured format a parsed JSON/YAML value is in: the first of
    :data:`~autoforge.tooldocs.formats.DOC_FORMATS` that recognises it (OpenAPI > MCP > OpenAI)."""
    for fmt in STRUCTURED:
        if fmt.looks_like(data):
            return fmt.name
    top = "" if isinstance(data, (dict, list)) else (
        f"its top level is {_KINDS.get(type(data), type(data).__name__)}, not an object or a list; ")
    shapes = [f.shape for f in reversed(STRUCTURED)]
    raise ToolDocError(f"unrecognised tool document: {top}expected {', '.join(shapes[:-1])} or {shapes[-1]}",
                       path=path, location="/")


def parse_document(text: str, path: str, *, format: DocFormat | None = None) -> ParsedDocument:
    """Parse one document. A prose format (Markdown) comes back with no tools (it needs an LLM backend)."""
    path = str(path)
    spec = doc_format(format, path) if format is not None else by_suffix(path)
    if spec is not None and spec.parse is None:
        if not text.strip():
            raise ToolDocError(f"empty file; expected {spec.shape}", path=path)
        return ParsedDocument(format=spec.name, tools=[])
    data = load_structured(text, path)
    spec = spec or doc_format(detect_format(data, path))
    try:
        return spec.parse(data, path)
    except RecursionError:
        raise ToolDocError("document is nested too deeply to parse", path=path) from None


def parse_file(path: str | Path, *, format: DocFormat | None = None) -> ParsedDocument:
    return parse_document(read_text(path), str(path), format=format)
