"""Read a tool document's text and turn JSON or YAML into plain JSON values.

Stage 1, ingest (docs/design.md#stage-1-ingest). Every failure becomes a :class:`ToolDocError` that names
the file, the place inside it (``line:col`` for syntax errors, the JSON pointer for values) and the
reason. YAML is loaded with the safe loader; values JSON cannot hold (dates, binary, sets) are turned
into strings or rejected, so what comes out is always a JSON value.

Documents are untrusted input, so every dimension that could exhaust time or memory is bounded, and
going over a bound rejects that one document (the rest of the batch goes on):

* size: :data:`MAX_DOC_BYTES`, checked from the file's size before it is read, and read no further;
* nesting: :data:`MAX_DEPTH` levels of objects/arrays (tool schemas in real docs are under 15;
  deeper values also break serialisation downstream), reported at the JSON pointer where it is crossed,
  and :data:`MAX_SCHEMA_DEPTH` for a schema once its ``$ref`` are inlined (:mod:`autoforge.tooldocs.schema`);
* YAML: at most :data:`MAX_YAML_BYTES` and :data:`MAX_YAML_NODES` values as written (the parser is pure
  Python; bigger documents should be converted to JSON), at most :data:`MAX_ALIASES` alias uses, and the
  document expanded (each alias copied out) at most ``EXPANSION_BASE`` + twice the values written:
  a "billion laughs" bomb is rejected, not expanded;
* integers: at most :data:`MAX_INT_DIGITS` digits (Python's int/str conversion limit);
* numbers must be finite: ``NaN``, ``Infinity`` and literals too large for a float (``1e999``) are rejected;
* duplicate keys in one object are rejected (which of the two values is meant is ambiguous);
* strings must be valid Unicode: a lone surrogate (``"\\ud800"``) is rejected.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import stat
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
MAX_DOC_BYTES = 8 * 1024 * 1024  # one tool document; real OpenAPI docs of a service are well under
MAX_DEPTH = 64  # levels of objects/arrays in a document
MAX_SCHEMA_DEPTH = 2 * MAX_DEPTH  # ... and in a schema once its $ref are inlined (pydantic serialises at most 255)
MAX_INT_DIGITS = 4300  # sys.get_int_max_str_digits(): longer literals cannot even be converted
MAX_ALIASES = 10_000  # YAML alias uses in one document
EXPANSION_BASE = 100_000  # values a YAML document may expand to beyond twice the values it spells out
# YAML is parsed in pure Python (about 20 us and 700 bytes per value): bounded tighter than JSON.
MAX_YAML_BYTES = 2 * 1024 * 1024
MAX_YAML_NODES = 150_000

_SURROGATE = re.compile("[\ud800-\udfff]")


def read_text(path: str | Path) -> str:
    """The file's text (UTF-8, a BOM is allowed). Unreadable, oversized or non-UTF-8 files raise ToolDocError."""
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ToolDocError(
            f"file is not UTF-8 text (byte {exc.start}); save it as UTF-8", path=str(path), location=f"byte {exc.start}"
        ) from None


def read_bytes(path: str | Path, limit: int | None = None) -> bytes:
    """At most ``limit`` (default :data:`MAX_DOC_BYTES`) bytes of a regular file, else ToolDocError.

    The size is checked before anything is read, and reading stops one byte past the limit (a file
    that grows, or lies about its size, is still refused). Pipes, sockets and devices are refused
    without being opened (opening a pipe would block)."""
    limit = MAX_DOC_BYTES if limit is None else limit
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ToolDocError("not a regular file (a pipe, socket or device); give a file of tool documentation",
                               path=str(path))
        if st.st_size > limit:
            raise _too_large(path, st.st_size, limit)
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ToolDocError(f"cannot read file ({exc.strerror or exc}); check the path and permissions", path=str(path)) from None
    if len(raw) > limit:
        raise _too_large(path, None, limit)
    return raw


def _too_large(path: str | Path, size: int | None, limit: int) -> ToolDocError:
    what = f"{size:,} bytes" if size is not None else f"over {limit:,} bytes"
    return ToolDocError(
        f"file too large: {what}, the limit for one tool document is {limit:,} bytes ({limit // (1024 * 1024)} MiB); "
        "split it into several documents (one per service or tag)",
        path=str(path), location=f"byte {limit:,}",
    )


def load_structured(text: str, path: str, *, syntax: str | None = None) -> Any:
    """Parse ``text`` as JSON or YAML (``syntax`` = "json" | "yaml" | None: guess from the suffix/text)."""
    if not text.strip():
        raise ToolDocError("empty file; expected a JSON or YAML tool document", path=path)
    if len(text) > MAX_DOC_BYTES:  # text handed in directly (parse_document), not read from a file
        raise _too_large(path, len(text.encode("utf-8", "surrogatepass")), MAX_DOC_BYTES)
    if syntax is None:
        suffix = Path(path).suffix.lower()
        if suffix in JSON_SUFFIXES:
            syntax = "json"
        elif suffix in YAML_SUFFIXES:
            syntax = "yaml"
        else:
            syntax = "json" if text.lstrip()[:1] in "{[" else "yaml"
    if syntax == "json":  # JSON has no aliases: it cannot spell out fewer values than it holds
        return _Jsonify(path, len(text) + 1).value(_load_json(text, path), None, 1)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise ToolDocError(
            f"YAML document too large: {size:,} bytes, the limit for YAML is {MAX_YAML_BYTES:,} bytes "
            f"({MAX_YAML_BYTES // (1024 * 1024)} MiB; YAML is parsed in pure Python); convert it to JSON "
            "(e.g. yq -o=json) or split it", path=path, location=f"byte {MAX_YAML_BYTES:,}")
    data, written = _load_yaml(text, path)
    return _Jsonify(path, EXPANSION_BASE + 2 * written).value(data, None, 1)


# --------------------------------------------------------------------------- JSON


class _BigInt(str):
    """An integer literal with more than MAX_INT_DIGITS digits, kept as text until its place is known."""


class _DuplicateKeys(dict):
    """An object that named ``duplicate`` twice (reported with its JSON pointer)."""

    duplicate: str = ""


def _json_int(literal: str) -> Any:
    if len(literal) - literal.startswith("-") > MAX_INT_DIGITS:
        return _BigInt(literal)
    return int(literal)


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    dup = _DuplicateKeys(out)
    dup.duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
    return dup


def _load_json(text: str, path: str) -> Any:
    try:
        return json.loads(text, parse_int=_json_int, object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        raise ToolDocError(f"invalid JSON: {exc.msg}", path=path, location=f"{exc.lineno}:{exc.colno}") from None
    except RecursionError:  # thousands of levels: the parser itself gives up
        raise _too_deep(path, _json_depth_location(text)) from None


_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _json_depth_location(text: str) -> str | None:
    """``line:col`` where JSON text first nests deeper than MAX_DEPTH (strings skipped)."""
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return _line_col(text, m.start())
        elif c in "]}":
            depth -= 1
    return None


def _line_col(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"{line}:{offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"


def _too_deep(path: str, location: str | None) -> ToolDocError:
    return ToolDocError(
        f"nested too deeply: more than {MAX_DEPTH} levels of objects/arrays (tool schemas are rarely deeper than 15); "
        "flatten the schema", path=path, location=location,
    )


# --------------------------------------------------------------------------- YAML


def _mark(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


class _YamlLoader(yaml.SafeLoader):
    """The safe loader, composing with bounds: alias uses, nesting depth, duplicate keys, integer digits.
    Each violation names the JSON pointer and the line where it happens."""

    def __init__(self, text: str, path: str):
        super().__init__(text)
        self._af_path = path
        self._af_aliases = 0
        self._af_nodes = 0
        self._af_depth = 0
        self._af_tokens: list[str] = []

    def where(self, mark: Any, extra: str | None = None) -> str:
        tokens = self._af_tokens + ([extra] if extra is not None else [])
        pointer = "".join(f"/{pointer_token(t)}" for t in tokens) or "/"
        return f"{pointer} ({_mark(mark)})"

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self._af_aliases += 1
            if self._af_aliases > MAX_ALIASES:
                raise ToolDocError(
                    f"more than {MAX_ALIASES} YAML aliases (*name); write the shared parts out or use $ref",
                    path=self._af_path, location=self.where(self.peek_event().start_mark),
                )
            return super().compose_node(parent, index)
        self._af_nodes += 1
        token = None
        if parent is not None:
            token = str(index) if isinstance(index, int) else (
                index.value if isinstance(index, yaml.ScalarNode) else "?" if index is not None else "(key)")
        container = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if token is not None:
            self._af_tokens.append(token)
        self._af_depth += container
        try:
            if self._af_nodes > MAX_YAML_NODES:
                raise ToolDocError(
                    f"YAML document too large: more than {MAX_YAML_NODES:,} values (YAML is parsed in pure Python); "
                    "convert it to JSON (e.g. yq -o=json) or split it",
                    path=self._af_path, location=self.where(self.peek_event().start_mark))
            if self._af_depth > MAX_DEPTH:
                raise _too_deep(self._af_path, self.where(self.peek_event().start_mark))
            return super().compose_node(parent, index)
        finally:
            self._af_depth -= container
            if token is not None:
                self._af_tokens.pop()

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], Any] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue  # merge keys (<<) may repeat keys on purpose: the mapping's own keys win
            first = seen.setdefault((key.tag, key.value), key.start_mark)
            if first is not key.start_mark:
                raise ToolDocError(
                    f"duplicate key {_short(key.value)!r} (first at {_mark(first)}); which value is meant is ambiguous, "
                    "keep one", path=self._af_path, location=self.where(key.start_mark, key.value),
                )
        return node

    def construct_yaml_int(self, node):
        digits = len(str(node.value).replace("_", "").lstrip("+-"))
        if digits > MAX_INT_DIGITS:
            raise ToolDocError(
                f"integer literal of {digits:,} digits (at most {MAX_INT_DIGITS}); write it as a string",
                path=self._af_path, location=_mark(node.start_mark),
            )
        return super().construct_yaml_int(node)


_YamlLoader.add_constructor("tag:yaml.org,2002:int", _YamlLoader.construct_yaml_int)


def _load_yaml(text: str, path: str) -> tuple[Any, int]:
    """The value of a YAML document and how many values it spells out (aliases not expanded)."""
    loader = None
    try:
        loader = _YamlLoader(text, path)  # the reader checks the characters here already
        return loader.get_single_data(), loader._af_nodes
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        location = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ToolDocError(f"invalid YAML: {problem}", path=path, location=location) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. an out-of-range timestamp
        raise ToolDocError(f"invalid YAML value: {exc}", path=path) from None
    except RecursionError:
        raise _too_deep(path, None) from None
    finally:
        if loader is not None:
            loader.dispose()


# --------------------------------------------------------------------------- plain JSON values


class _Jsonify:
    """Copy a parsed value into plain JSON types, enforcing depth, expansion and value checks.

    The JSON pointer of each value is kept as a chain ``(parent, token)`` and spelled out only for
    an error: building it as a string per value would copy a long key once per value beneath it."""

    def __init__(self, path: str, max_values: int):
        self.path = path
        self.left = max_values
        self.max_values = max_values
        self.seen: set[int] = set()

    def error(self, reason: str, ptr: tuple | None) -> ToolDocError:
        tokens: list[str] = []
        while ptr is not None:
            ptr, token = ptr
            tokens.append(pointer_token(token))
        return ToolDocError(reason, path=self.path, location="".join(f"/{t}" for t in reversed(tokens)) or "/")

    def value(self, value: Any, ptr: tuple | None, depth: int) -> Any:
        self.left -= 1
        if self.left < 0:
            raise self.error(
                f"the document expands to more than {self.max_values:,} values (YAML aliases copy what they point "
                "at: an alias bomb?); write shared parts once, or use $ref", ptr)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, _BigInt):
            raise self.error(f"integer literal of {len(value.lstrip('-')):,} digits (at most {MAX_INT_DIGITS}); "
                             "write it as a string", ptr)
        if isinstance(value, str):
            self.check_text(value, ptr)
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise self.error(
                    f"number {value} is not allowed (NaN, Infinity, or a literal too large for a float such as "
                    "1e999; JSON has no such numbers); write a finite number or null", ptr)
            return value
        if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
            return value.isoformat()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise _too_deep(self.path, self.error("", ptr).location)
            if id(value) in self.seen:
                raise self.error("recursive YAML alias (a node contains itself)", ptr)
            self.seen.add(id(value))
            try:
                if isinstance(value, list):
                    return [self.value(v, (ptr, str(i)), depth + 1) for i, v in enumerate(value)]
                if isinstance(value, _DuplicateKeys):
                    raise self.error(f"duplicate key {_short(value.duplicate)!r} in one object; which value is meant "
                                     "is ambiguous, keep one", (ptr, value.duplicate))
                out = {}
                for k, v in value.items():
                    if isinstance(k, (dict, list, tuple, set, frozenset, bytes)):
                        raise self.error("mapping key is not a scalar", ptr)
                    key = "null" if k is None else (str(k).lower() if isinstance(k, bool) else str(k))
                    sub = (ptr, key)
                    self.check_text(key, sub)
                    out[key] = self.value(v, sub, depth + 1)
                return out
            finally:
                self.seen.discard(id(value))
        raise self.error(f"value of type {type(value).__name__} cannot be represented in JSON", ptr)

    def check_text(self, text: str, ptr: tuple | None) -> None:
        m = _SURROGATE.search(text)
        if m:
            raise self.error(f"text contains a lone surrogate \\u{ord(m.group()):04x} (not valid Unicode); "
                             "remove the escape or write the character itself", ptr)


MAX_TOKEN_CHARS = 80  # a longer key is cut short where a location names it


def _short(text: str, n: int = MAX_TOKEN_CHARS) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def pointer_token(token: str) -> str:
    """One JSON Pointer token for a location in a message: escaped (RFC 6901), a long key cut short."""
    return escape_pointer(_short(token))


def escape_pointer(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def unescape_pointer(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")
