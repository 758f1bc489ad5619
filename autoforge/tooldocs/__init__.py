"""Stage 1: tool documentation (OpenAI function calling, MCP tools/list, OpenAPI 3, Markdown) -> ToolSpecs.

Public API::

    ingest_paths(paths, *, run_id=None) -> IngestResult   # files/folders -> docs, specs, tool sets, errors
    ingest_bundled(*, run_id=None) -> IngestResult        # the corpus shipped in autoforge/data/tooldocs
    bundled_corpus_path() -> Path
    parse_document(text, path, *, format=None) -> ParsedDocument   # one document, no ids
    parse_file(path, *, format=None) -> ParsedDocument

Every parser raises only :class:`autoforge.errors.ToolDocError`.
"""

from autoforge.tooldocs.base import ParsedDocument, ParsedTool
from autoforge.tooldocs.effects import infer_effect, verb_effect
from autoforge.tooldocs.ingest import IngestResult, bundled_corpus_path, ingest_bundled, ingest_paths
from autoforge.tooldocs.formats import DOC_FORMATS, doc_format
from autoforge.tooldocs.parse import detect_format, parse_document, parse_file

__all__ = [
    "IngestResult",
    "DOC_FORMATS",
    "ParsedDocument",
    "ParsedTool",
    "bundled_corpus_path",
    "detect_format",
    "doc_format",
    "infer_effect",
    "ingest_bundled",
    "ingest_paths",
    "parse_document",
    "parse_file",
    "verb_effect",
]
