"""Read a tool document's text and turn JSON or YAML into plain JSON values.

Stage 1, ingest (docs/design.md#stage-1-ingest). Every failure becomes a :class:`ToolDocError` that names
the file, the place inside it (``line:col`` for syntax errors) and the reason. YAML is
loaded with the safe loader; values JSON cannot hold (dates, binary, sets) are turned into
strings or rejected, so what comes out is always a JSON value.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

import yaml

from autoforge.errors import ToolDocError

JSON_SUFFIXES = {".json"}
YAML_SUFFIXES = {".yaml", ".yml"}
MARKDOWN_SUFFIXES = {".md", ".markdown"}
SUPPORTED_SUFFIXES = JSON_SUFFIXES | YAML_SUFFIXES | MARKDOWN_SUFFIXES

# A schema expanded past this many nodes is treated as an error (guards against "billion laughs").
MAX_NODES = 200_000


def read_text(path: str | Path) -> str:
    """The file's text (UTF-8, a BOM is allowed). Unreadable or non-UTF-8 files raise ToolDocError."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ToolDocError(f"cannot read file ({exc.strerror or exc}); check the path and permissions", path=str(path)) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ToolDocError(
            f"file is not UTF-8 text (byte {exc.start}); save it as UTF-8", path=str(path), location=f"byte {exc.start}"
        ) from None


def load_structured(text: str, path: str, *, syntax: str | None = None) -> Any:
    """Parse ``text`` as JSON or YAML (``syntax`` = "json" | "yaml" | None: guess from the suffix/text)."""
    if not text.strip():
        raise ToolDocError("empty file; expected a JSON or YAML tool document", path=path)
    if syntax is None:
        suffix = Path(path).suffix.lower()
        if suffix in JSON_SUFFIXES:
            syntax = "json"
        elif suffix in YAML_SUFFIXES:
            syntax = "yaml"
        else:
            syntax = "json" if text.lstrip()[:1] in "{[" else "yaml"
    try:
        if syntax == "json":
            data = _load_json(text, path)
        else:
            data = _load_yaml(text, path)
        return _jsonify(data, path, "", set())
    except RecursionError:
        raise ToolDocError("document is nested too deeply to parse", path=path) from None


def _load_json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolDocError(f"invalid JSON: {exc.msg}", path=path, location=f"{exc.lineno}:{exc.colno}") from None


def _load_yaml(text: str, path: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        location = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ToolDocError(f"invalid YAML: {problem}", path=path, location=location) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. an out-of-range timestamp
        raise ToolDocError(f"invalid YAML value: {exc}", path=path) from None


def _jsonify(value: Any, path: str, pointer: str, seen: set[int]) -> Any:
    """Copy ``value`` into plain JSON types; YAML aliases that loop back on themselves are an error."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        if id(value) in seen:
            raise ToolDocError("recursive YAML alias (a node contains itself)", path=path, location=pointer or "/")
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                out = {}
                for k, v in value.items():
                    if isinstance(k, (dict, list, tuple, set, frozenset, bytes)):
                        raise ToolDocError("mapping key is not a scalar", path=path, location=pointer or "/")
                    key = "null" if k is None else (str(k).lower() if isinstance(k, bool) else str(k))
                    out[key] = _jsonify(v, path, f"{pointer}/{escape_pointer(key)}", seen)
                return out
            return [_jsonify(v, path, f"{pointer}/{i}", seen) for i, v in enumerate(value)]
        finally:
            seen.discard(id(value))
    raise ToolDocError(
        f"value of type {type(value).__name__} cannot be represented in JSON", path=path, location=pointer or "/"
    )


def escape_pointer(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_pointer(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")
