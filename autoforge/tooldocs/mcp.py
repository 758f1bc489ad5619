"""MCP ``tools/list`` results.

Accepted shapes: the result object ``{"tools": [...], "nextCursor"?, "_meta"?}``, the full
JSON-RPC response ``{"jsonrpc": "2.0", "id": ..., "result": {"tools": [...]}}`` and a bare
list of MCP tools. An ``instructions`` string beside ``tools`` (a server's ``initialize``
result saved with its tool list) is kept as the document's policy text. Each tool has ``name``, optional ``title``/``description``, an
``inputSchema`` (an object schema), an optional ``outputSchema`` and optional
``annotations``; ``readOnlyHint``/``destructiveHint`` set the read/write effect (MCP spec,
2025-06-18, "Tool annotations"). A JSON-RPC error response is rejected with its message.
"""

from __future__ import annotations

from typing import Any

from autoforge.errors import ToolDocError
from autoforge.tooldocs.base import ParsedDocument, ParsedTool, check_name, check_text, check_unique, with_returns
from autoforge.tooldocs.effects import explicit_effect, mcp_effect, tool_effect
from autoforge.tooldocs.schema import RefResolver, object_schema, resolved_output


def looks_like_mcp(data: Any) -> bool:
    if isinstance(data, dict):
        if "jsonrpc" in data:
            return True
        data = data.get("tools")
    return isinstance(data, list) and bool(data) and all(isinstance(x, dict) for x in data) and any(
        "inputSchema" in x for x in data
    )


def parse_mcp(data: Any, path: str) -> ParsedDocument:
    base = ""
    result = data
    if isinstance(data, dict) and "jsonrpc" in data:
        if "error" in data:
            err = data["error"]
            msg = err.get("message") if isinstance(err, dict) else err
            raise ToolDocError(f"JSON-RPC error response, not a tools/list result: {msg!r}", path=path, location="/error")
        if "result" not in data:
            raise ToolDocError("JSON-RPC response has no 'result'", path=path, location="/")
        result, base = data["result"], "/result"
    description = ""
    policy: dict[str, str] = {}
    if isinstance(result, list):
        tools_raw, tools_ptr = result, base
    elif isinstance(result, dict) and "tools" in result:
        tools_raw, tools_ptr = result["tools"], f"{base}/tools"
        description = check_text(result.get("description"), path, base)
        # a server's initialize `instructions` saved beside its tools: how to use them, i.e. policy text
        instructions = check_text(result.get("instructions"), path, base, key="instructions")
        if instructions:
            policy["instructions"] = instructions
    else:
        raise ToolDocError("expected a tools/list result with a 'tools' list", path=path, location=base or "/")
    if not isinstance(tools_raw, list):
        raise ToolDocError("'tools' must be a list", path=path, location=tools_ptr)
    if not tools_raw:
        raise ToolDocError("the tools/list result has no tools", path=path, location=tools_ptr or "/")
    resolver = RefResolver(data, path)
    tools = [_parse_tool(t, f"{tools_ptr}/{i}", path, resolver) for i, t in enumerate(tools_raw)]
    check_unique(tools, path)
    return ParsedDocument(format="mcp", tools=tools, description=description, policy=policy)


def _parse_tool(tool: Any, pointer: str, path: str, resolver: RefResolver) -> ParsedTool:
    if not isinstance(tool, dict):
        raise ToolDocError("an MCP tool must be a JSON object", path=path, location=pointer)
    name = check_name(tool.get("name"), path, pointer)
    description = check_text(tool.get("description"), path, pointer)
    if not description:
        description = check_text(tool.get("title"), path, pointer, key="title")
    if "inputSchema" not in tool:
        raise ToolDocError(f"tool {name!r} has no 'inputSchema' (required by MCP)", path=path, location=pointer)
    raw_in = tool["inputSchema"]
    in_ptr = f"{pointer}/inputSchema"
    if not isinstance(raw_in, dict):
        raise ToolDocError("'inputSchema' must be a JSON Schema object", path=path, location=in_ptr)
    parameters = object_schema(resolver.resolve(raw_in, in_ptr, local_root=raw_in), path, in_ptr, what="inputSchema")

    output_schema = None
    if tool.get("outputSchema") is not None:
        raw_out = tool["outputSchema"]
        out_ptr = f"{pointer}/outputSchema"
        if not isinstance(raw_out, dict):
            raise ToolDocError("'outputSchema' must be a JSON Schema object", path=path, location=out_ptr)
        output_schema = resolved_output(resolver.resolve(raw_out, out_ptr, local_root=raw_out), path, out_ptr,
                                        what="outputSchema")

    if output_schema is None and isinstance(tool.get("returns"), str):
        description = with_returns(description, tool["returns"], path, pointer)
    effect = (
        mcp_effect(tool.get("annotations"), path, f"{pointer}/annotations")
        or explicit_effect(tool, path, pointer)
        or tool_effect(name, description, parameters)
    )
    return ParsedTool(
        name=name, description=description, parameters=parameters, output_schema=output_schema,
        effect=effect, location=pointer,
    )
