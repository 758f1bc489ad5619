"""JSON Schema handling for tool documents: resolve local ``$ref``, check shape, normalise.

Stage 1 (docs/design.md#stage-1-ingest): a ``ToolSpec.parameters`` must be self-contained (every ``$ref``
inlined, ``$defs``/``definitions`` dropped) and an object schema, so later stages (state
synthesis, name/type binding for the tool graph) never chase references. Recursive schemas
cannot be inlined and are rejected with the cycle spelled out.

Inlining is bounded: at most ``MAX_NODES`` nodes per document (a ``$ref`` fan-out bomb) and
``MAX_SCHEMA_DEPTH`` levels of objects/arrays per schema (:mod:`autoforge.tooldocs.source`), each
rejected with the JSON pointer where it is crossed.

Only local references (``#/...``) are supported; a reference is looked up first in the
schema's own root (where ``$defs`` usually live, e.g. pydantic output) and then in the whole
document (OpenAPI ``components``, a file-level ``$defs``).

The helpers at the end read a resolved schema (:func:`props`, :func:`unwrap`, :func:`json_type`);
every stage that looks at tool parameters or outputs uses these. :func:`documented_pattern` is
the one way those stages compile a schema's ``pattern`` (None: a pattern that cannot be used).
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import unquote

from autoforge.errors import ToolDocError
from autoforge.patterns import MAX_PATTERN_CHARS, PatternError, SafePattern, compile_pattern, expanded_size, repeat_product
from autoforge.tooldocs.source import MAX_NODES, MAX_SCHEMA_DEPTH, pointer_token, unescape_pointer

JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_SINGLE = ("not", "if", "then", "else", "contains", "propertyNames", "additionalItems", "unevaluatedItems",
                     "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_DEF_KEYS = ("$defs", "definitions")
_DATA_KEYS = ("default", "enum", "const", "example", "examples")


def lookup_pointer(doc: Any, ref: str) -> Any:
    """Follow a local JSON pointer (``#/a/b``) in ``doc``. Raises KeyError when it does not resolve."""
    frag = unquote(ref[1:])
    if frag == "":
        return doc
    if not frag.startswith("/"):
        raise KeyError(ref)
    node = doc
    for raw in frag[1:].split("/"):
        token = unescape_pointer(raw)
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise KeyError(ref)
    return node


class RefResolver:
    """Inline every local ``$ref`` of a schema. One resolver per document (it counts nodes)."""

    def __init__(self, document: Any, path: str):
        self.document = document
        self.path = path
        self.nodes = 0

    def resolve(self, schema: Any, pointer: str, *, local_root: Any = None) -> Any:
        """A copy of ``schema`` with every ``$ref`` replaced by its target (siblings of ``$ref`` win)."""
        roots = [r for r in (local_root, self.document) if r is not None]
        return self._walk(schema, pointer, roots, (), 1)

    def _walk(self, node: Any, pointer: str, roots: list[Any], stack: tuple[str, ...], depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ToolDocError(
                f"schema expands to more than {MAX_NODES} nodes after resolving $ref; simplify the references",
                path=self.path, location=pointer,
            )
        if not isinstance(node, (dict, list)):
            return node
        if depth > MAX_SCHEMA_DEPTH:  # inlining $ref can nest deeper than the document itself
            raise ToolDocError(
                f"schema nests more than {MAX_SCHEMA_DEPTH} levels of objects/arrays once its $ref are inlined "
                "(tool schemas are rarely deeper than 15); flatten it", path=self.path, location=pointer or "/",
            )
        if isinstance(node, list):
            return [self._walk(v, f"{pointer}/{i}", roots, stack, depth + 1) for i, v in enumerate(node)]
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str):
                raise ToolDocError("$ref must be a string", path=self.path, location=f"{pointer}/$ref")
            if not ref.startswith("#"):
                raise ToolDocError(
                    f"external $ref {ref!r} is not supported; inline it or move it under $defs/components",
                    path=self.path, location=f"{pointer}/$ref",
                )
            if ref in stack:
                chain = " -> ".join(stack[stack.index(ref):] + (ref,))
                raise ToolDocError(
                    f"cyclic $ref ({chain}); recursive schemas cannot be inlined, bound the depth explicitly",
                    path=self.path, location=f"{pointer}/$ref",
                )
            target = None
            for root in roots:
                try:
                    target = lookup_pointer(root, ref)
                    break
                except KeyError:
                    continue
            else:
                raise ToolDocError(
                    f"unresolvable $ref {ref!r}: no such definition in the document",
                    path=self.path, location=f"{pointer}/$ref",
                )
            resolved = self._walk(target, pointer, roots, stack + (ref,), depth)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if not siblings:
                return resolved
            if not isinstance(resolved, dict):
                raise ToolDocError(f"$ref {ref!r} points to a non-schema value", path=self.path, location=pointer)
            merged = dict(resolved)
            merged.update(self._walk(siblings, pointer, roots, stack, depth))
            return merged
        out = {}
        for key, value in node.items():
            sub = f"{pointer}/{pointer_token(key)}"
            if key in _DEF_KEYS:
                continue  # everything they hold is inlined where used
            if key in _DATA_KEYS:
                out[key] = value  # literal data, not a schema: a "$ref" key in there is just data
            elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                # a map of names -> schemas: a property may be called "definitions" or "$ref"
                out[key] = {n: self._walk(v, f"{sub}/{pointer_token(n)}", roots, stack, depth + 2)
                            for n, v in value.items()}
            else:
                out[key] = self._walk(value, sub, roots, stack, depth + 1)
        return out


def check_schema(schema: Any, path: str, pointer: str) -> None:
    """Reject values that are not JSON Schemas (wrong keyword types), naming the JSON pointer."""
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ToolDocError(f"expected a JSON Schema object, got {_kind(schema)}", path=path, location=pointer or "/")

    def bad(key: str, what: str) -> ToolDocError:
        return ToolDocError(f"'{key}' must be {what}", path=path, location=f"{pointer}/{pointer_token(key)}")

    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not types or not all(isinstance(x, str) and x in JSON_TYPES for x in types):
            raise bad("type", f"one of {sorted(JSON_TYPES)} or a list of them (got {t!r})")
    for key in _SUBSCHEMA_MAPS:
        if key in schema:
            props = schema[key]
            if not isinstance(props, dict):
                raise bad(key, "an object mapping names to schemas")
            for name, sub in props.items():
                check_schema(sub, path, f"{pointer}/{key}/{pointer_token(name)}")
    if "required" in schema:
        req = schema["required"]
        if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
            raise bad("required", "a list of property names")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise bad("enum", "a list of allowed values")
    for key in _SUBSCHEMA_LISTS:
        if key in schema:
            subs = schema[key]
            if not isinstance(subs, list) or not subs:
                raise bad(key, "a non-empty list of schemas")
            for i, sub in enumerate(subs):
                check_schema(sub, path, f"{pointer}/{key}/{i}")
    if "items" in schema:
        items = schema["items"]
        if isinstance(items, list):  # draft 4-7 tuple form
            for i, sub in enumerate(items):
                check_schema(items[i], path, f"{pointer}/items/{i}")
        else:
            check_schema(items, path, f"{pointer}/items")
    for key in _SUBSCHEMA_SINGLE + ("additionalProperties",):
        if key in schema:
            check_schema(schema[key], path, f"{pointer}/{key}")
    for key in ("description", "title", "format", "pattern"):
        if key in schema and not isinstance(schema[key], str):
            raise bad(key, "a string")


def resolved_output(schema: Any, path: str, pointer: str, *, what: str = "output_schema") -> dict[str, Any] | None:
    """A resolved output schema as a tool keeps it: an object schema, or None for the boolean schema
    ``true`` (any output). ``false`` (no output is valid, e.g. a ``$ref`` to a ``false`` definition)
    is refused, naming the pointer."""
    check_schema(schema, path, pointer)
    if schema is True:
        return None
    if schema is False:
        raise ToolDocError(f"'{what}' resolves to the boolean schema false, which no output satisfies; give the "
                           "tool's output as an object schema, or leave it out", path=path, location=pointer or "/")
    return schema


def object_schema(schema: Any, path: str, pointer: str, *, what: str = "parameters") -> dict[str, Any]:
    """Normalise a resolved top-level schema to ``{"type": "object", "properties": {...}, "required": [...]}``.

    Missing ``type`` with ``properties`` present means object; ``None`` means no arguments.
    Every name in ``required`` must be a declared property.
    """
    if schema is None:
        return {"type": "object", "properties": {}, "required": []}
    check_schema(schema, path, pointer)
    if not isinstance(schema, dict):
        raise ToolDocError(f"{what} must be an object schema, got {schema!r}", path=path, location=pointer or "/")
    out = dict(schema)
    t = out.get("type")
    if t is None:
        out["type"] = "object"
    elif t != "object":
        raise ToolDocError(
            f"{what} must be a JSON Schema of type 'object' (the tool's keyword arguments), got type {t!r}",
            path=path, location=f"{pointer}/type",
        )
    out.setdefault("properties", {})
    required = out.get("required", [])
    missing = [r for r in required if r not in out["properties"]]
    if missing:
        raise ToolDocError(
            f"required lists {missing} but {what} has no such properties; declare them or drop them from 'required'",
            path=path, location=f"{pointer}/required",
        )
    out["required"] = list(dict.fromkeys(required))
    return out


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list"}.get(
        type(value), type(value).__name__
    )


# --------------------------------------------------------------------------- reading a resolved schema
# Small helpers over a self-contained (resolved) JSON Schema, shared by the stages that read tool
# parameters and outputs (state synthesis, sample data, templates, canonical names).


def props(schema: dict | None) -> dict[str, Any]:
    """The ``properties`` of an object schema (``{}`` when there are none)."""
    return (schema or {}).get("properties") or {}


def json_type(schema: dict) -> str:
    """The one JSON type a schema stands for (``null`` dropped from a list; guessed from
    ``anyOf``/``oneOf``, ``properties``, ``items`` or ``enum`` when ``type`` is missing; else string)."""
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    if t is None:
        for alt in schema.get("anyOf") or schema.get("oneOf") or []:
            if isinstance(alt, dict) and alt.get("type") not in (None, "null"):
                return json_type(alt)
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        if "enum" in schema and schema["enum"]:
            v = schema["enum"][0]
            return "boolean" if isinstance(v, bool) else "integer" if isinstance(v, int) else "number" if isinstance(v, float) else "string"
    return t if t in ("string", "integer", "number", "boolean", "array", "object") else "string"


def unwrap(schema: dict | None) -> dict:
    """Follow anyOf/oneOf (first non-null alternative) and allOf (merged) to one plain schema."""
    schema = schema or {}
    if not isinstance(schema, dict):
        return {}
    for key in ("anyOf", "oneOf", "allOf"):
        alts = [a for a in schema.get(key) or [] if isinstance(a, dict) and a.get("type") != "null"]
        if not alts or "properties" in schema or "type" in schema:
            continue
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}
        if key == "allOf":
            merged: dict[str, Any] = {}
            merged_props: dict[str, Any] = {}
            for a in alts:
                a = unwrap(a)
                merged_props.update(props(a))
                merged.update({k: v for k, v in a.items() if k != "properties"})
            if merged_props:
                merged["properties"] = merged_props
            return {**merged, **rest}
        return {**unwrap(alts[0]), **{k: v for k, v in rest.items() if k != "description"}}
    return schema


# --------------------------------------------------------------------------- documented patterns
# A ``pattern`` is someone else's regular expression: every stage that generates or checks values
# against one compiles it here, so that one that cannot be used is simply no pattern.

MAX_PATTERN_UNITS = 2_000  # a pattern's size with its counted repeats multiplied out (RE2 allows 1,000 per repeat)


def documented_pattern(pattern: Any) -> SafePattern | None:
    """``pattern`` compiled by :mod:`autoforge.patterns` (RE2, linear time; the backtracking fallback
    with a timeout), or None when it cannot be used: not a string, invalid, too long, or too large
    once counted repeats are multiplied out (``((\\d{1000}){1000}){1000}``: RE2 refuses it, and the
    fallback engine allocates memory per repetition, gigabytes). Callers ignore a None pattern."""
    return _documented(pattern) if isinstance(pattern, str) and len(pattern) <= MAX_PATTERN_CHARS else None


@functools.lru_cache(maxsize=4096)
def _documented(pattern: str) -> SafePattern | None:
    try:
        units = expanded_size(pattern, MAX_PATTERN_UNITS)
    except PatternError:  # syntax only RE2 or the fallback knows (\p{L}): bound it by its counts
        units = repeat_product(pattern, MAX_PATTERN_UNITS)
    if units > MAX_PATTERN_UNITS:
        return None
    try:
        return compile_pattern(pattern)
    except PatternError:
        return None
