"""Stage 1: tool documentation (OpenAI function calling, MCP tools/list, OpenAPI 3, Markdown) -> ToolSpecs.

Public API::

    ingest_paths(paths, *, run_id=None) -> IngestResult   # files/folders -> docs, specs, tool sets, errors
    ingest_bundled(*, run_id=None) -> IngestResult        # the corpus shipped in autoforge/data/tooldocs
    bundled_corpus_path() -> Path
    parse_document(text, path, *, format=None) -> ParsedDocument   # one document, no ids
    parse_file(path, *, format=None) -> ParsedDocument

Every parser raises only :class:`autoforge.errors.ToolDocError`.

Names are imported on first use (PEP 562): the sandbox worker reads ``tooldocs.schema`` and
``tooldocs.source`` only, and importing the whole package (parsers, ingest, pydantic records) made every
worker process start ~3x slower.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {  # public name -> the submodule that defines it
    "ParsedDocument": "base", "ParsedTool": "base",
    "infer_effect": "effects", "verb_effect": "effects",
    "IngestResult": "ingest", "bundled_corpus_path": "ingest", "ingest_bundled": "ingest", "ingest_paths": "ingest",
    "DOC_FORMATS": "formats", "doc_format": "formats",
    "detect_format": "parse", "parse_document": "parse", "parse_file": "parse",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'autoforge.tooldocs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"autoforge.tooldocs.{where}"), name)
    globals()[name] = value
    return value
