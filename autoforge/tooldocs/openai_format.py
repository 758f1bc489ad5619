"""OpenAI function-calling tool documents.

Accepted shapes (docs/design.md#stage-1-ingest):

* a single function ``{"name", "description", "parameters"}``;
* the chat-completions wrapper ``{"type": "function", "function": {...}}`` and the flat
  Responses-API form ``{"type": "function", "name": ..., "parameters": ...}``;
* a list of any of these, or a container ``{"tools": [...]}`` / ``{"functions": [...]}``
  that may carry a ``description`` and shared ``$defs``/``definitions``.

``parameters`` is full JSON Schema; every local ``$ref`` is inlined. Outputs are not part of
the OpenAI format; this project reads an optional ``output_schema`` (or ``outputSchema``)
key on the function, which the tool-graph stage uses for name/type binding. An ``x-effect``
("read"/"write") or ``readOnly`` key on the function overrides the heuristics of
:mod:`autoforge.tooldocs.effects` (name, description, arguments).
"""

from __future__ import annotations

from typing import Any

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument, ParsedTool, check_name, check_text, check_unique, with_returns
from autoforge.tooldocs.effects import explicit_effect, tool_effect
from autoforge.tooldocs.schema import RefResolver, object_schema, resolved_output

CONTAINER_KEYS = ("tools", "functions")


def looks_like_openai(data: Any) -> bool:
    """Cheap format sniffing used by :func:`autoforge.tooldocs.parse.detect_format`."""
    if isinstance(data, dict):
        if isinstance(data.get("type"), str) or "parameters" in data:
            return True  # an OpenAI tool entry (a non-function type is rejected with its name)
        if any(isinstance(data.get(k), list) for k in CONTAINER_KEYS):
            return True
        return "name" in data and "inputSchema" not in data
    if isinstance(data, list):
        return bool(data) and all(isinstance(x, dict) and "inputSchema" not in x for x in data)
    return False


def parse_openai(data: Any, path: str) -> ParsedDocument:
    resolver = RefResolver(data, path)
    description = ""
    if isinstance(data, list):
        items, base = data, ""
    elif isinstance(data, dict) and any(k in data for k in CONTAINER_KEYS) and "name" not in data and "function" not in data:
        key = next(k for k in CONTAINER_KEYS if k in data)
        items, base = data[key], f"/{key}"
        if not isinstance(items, list):
            raise ToolDocError(f"'{key}' must be a list of tools", path=path, location=base)
        description = check_text(data.get("description"), path, "")
    elif isinstance(data, dict):
        items, base = None, ""
    else:
        raise ToolDocError("expected an OpenAI function object or a list of them", path=path, location="/")

    if items is None:
        tools = [_parse_item(data, "", path, resolver)]
    else:
        if not items:
            raise ToolDocError("the document lists no tools", path=path, location=base or "/")
        tools = [_parse_item(item, f"{base}/{i}", path, resolver) for i, item in enumerate(items)]
    check_unique(tools, path)
    return ParsedDocument(format="openai", tools=tools, description=description)


def _parse_item(item: Any, pointer: str, path: str, resolver: RefResolver) -> ParsedTool:
    if not isinstance(item, dict):
        raise ToolDocError("a tool must be a JSON object", path=path, location=pointer or "/")
    fn, fn_ptr = item, pointer
    if "type" in item:
        if item["type"] != "function":
            raise ToolDocError(
                f"unsupported tool type {item['type']!r}; only 'function' tools can be ingested",
                path=path, location=f"{pointer}/type",
            )
        if "function" in item:
            fn, fn_ptr = item["function"], f"{pointer}/function"
            if not isinstance(fn, dict):
                raise ToolDocError("'function' must be an object", path=path, location=fn_ptr)
    name = check_name(fn.get("name"), path, fn_ptr)
    description = check_text(fn.get("description"), path, fn_ptr)
    raw_params = fn.get("parameters")
    params_ptr = f"{fn_ptr}/parameters"
    if raw_params is not None and not isinstance(raw_params, dict):
        raise ToolDocError("'parameters' must be a JSON Schema object", path=path, location=params_ptr)
    params = resolver.resolve(raw_params, params_ptr, local_root=raw_params)
    parameters = object_schema(params, path, params_ptr)

    output_schema = None
    for key in ("output_schema", "outputSchema"):
        if key in fn and fn[key] is not None:
            out_ptr = f"{fn_ptr}/{key}"
            raw_out = fn[key]
            if not isinstance(raw_out, dict):
                raise ToolDocError(f"'{key}' must be a JSON Schema object", path=path, location=out_ptr)
            output_schema = resolved_output(resolver.resolve(raw_out, out_ptr, local_root=raw_out), path, out_ptr,
                                            what=key)
            break

    if output_schema is None and isinstance(fn.get("returns"), str):
        description = with_returns(description, fn["returns"], path, fn_ptr)  # "returns": "a list of ..."
    effect = explicit_effect(fn, path, fn_ptr) or tool_effect(name, description, parameters)
    return ParsedTool(
        name=name, description=description, parameters=parameters, output_schema=output_schema,
        effect=effect, location=fn_ptr,
    )
