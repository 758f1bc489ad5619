"""What a format parser returns before ids are assigned: tools and a document description.

The parsers (``openai_format``, ``mcp``, ``openapi``, ``markdown``) are pure functions from a
parsed document to a :class:`ParsedDocument`; :mod:`autoforge.tooldocs.ingest` turns them
into warehouse records (``ToolDoc``/``ToolSpec``/``ToolSet``) with content-hash ids.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ToolDocError
from autoforge.types import DocFormat, Effect

# OpenAI allows [a-zA-Z0-9_-]{1,64}; MCP also allows dots and up to 128 characters.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


class ParsedTool(BaseModel):
    """One tool as documented: parameters are a resolved object schema."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    effect: Effect = "unknown"
    location: str = ""  # JSON pointer of the tool inside its document


class ParsedDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: DocFormat
    tools: list[ParsedTool] = Field(default_factory=list)
    description: str = ""  # what the document says the tool set is for (OpenAPI info, a top-level description)
    policy: dict[str, str] = Field(default_factory=dict)  # location in the document -> policy text found there


def check_name(name: Any, path: str, pointer: str, key: str = "name") -> str:
    if name is None:
        raise ToolDocError("tool has no 'name'; every tool needs a unique name", path=path, location=pointer or "/")
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        shown = repr(name)
        raise ToolDocError(
            f"invalid tool name {shown if len(shown) <= 80 else shown[:77] + '...'}: use 1-128 letters, digits, "
            "'_', '-' or '.'",
            path=path, location=f"{pointer}/{key}",
        )
    return name


def check_text(value: Any, path: str, pointer: str, key: str = "description") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ToolDocError(f"'{key}' must be a string", path=path, location=f"{pointer}/{key}")
    return value.strip()


def check_unique(tools: list[ParsedTool], path: str) -> None:
    seen: dict[str, str] = {}
    for tool in tools:
        if tool.name in seen:
            raise ToolDocError(
                f"duplicate tool name {tool.name!r} (first defined at {seen[tool.name] or '/'}); tool names must be unique in a tool set",
                path=path, location=tool.location or "/",
            )
        seen[tool.name] = tool.location


def with_returns(description: str, returns: Any, path: str, pointer: str, key: str = "returns") -> str:
    """``description`` with a prose ``returns`` text appended as a "Returns ..." sentence, so the
    readers of the description (autoforge.domain.outputs) see what the tool says it gives back;
    a text that already starts with a returns verb is appended as it is."""
    text = check_text(returns, path, pointer, key=key).strip()
    if not text:
        return description
    if not re.match(r"(?i)(returns?|responds|gives back|yields|outputs?)\b", text):
        text = "Returns " + text[0].lower() + text[1:] if not text[:2].isupper() else "Returns " + text
    if not text.endswith((".", "!", "?")):
        text += "."
    return f"{description.rstrip()} {text}".strip() if description else text
