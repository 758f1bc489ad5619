"""Message plumbing shared by the LLM backends: conversion to the chat-completions wire
format, lenient JSON extraction from a reply, and the repair note for a reply that did not
validate."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from autoforge.types import Message, ToolCall


def to_openai_messages(messages: list[dict | Message]) -> list[dict]:
    """Accept plain chat-completions dicts or :class:`autoforge.types.Message` records.

    A ``Message`` with ``tool_calls`` becomes an assistant message whose calls carry JSON-text
    arguments (the wire format); a ``tool`` message keeps its ``tool_call_id``.
    """
    out: list[dict] = []
    for m in messages:
        if isinstance(m, dict):
            out.append(m)
            continue
        if not isinstance(m, Message):
            raise TypeError(f"messages must be dicts or autoforge.types.Message, got {type(m).__name__}")
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [tool_call_to_openai(tc, i) for i, tc in enumerate(m.tool_calls)]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None and m.role != "tool":
            d["name"] = m.name
        out.append(d)
    return out


def tool_call_to_openai(tc: ToolCall, index: int = 0) -> dict:
    return {
        "id": tc.id or f"call_{index}",
        "type": "function",
        "function": {"name": tc.name, "arguments": json.dumps(tc.arguments, ensure_ascii=False)},
    }


_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```\s*$", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S)


# What a structured reply may be: longer or deeper replies are invalid (sent back for repair), so
# a runaway model cannot make the parser, the checks or the warehouse recurse or swell without end.
MAX_REPLY_CHARS = 1_000_000
MAX_JSON_DEPTH = 64


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests (a scalar 0, ``[]`` 1, ``{"a": [1]}`` 2); iterative, so any depth is safe."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, (list, tuple)):
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in v)
    return deepest


def parse_json_content(text: str | None) -> Any:
    """Parse the JSON object in a model's reply.

    Tolerates what servers without enforced structured output commonly add: a
    ``<think>...</think>`` block, a Markdown code fence, prose around one ``{...}`` object.
    Raises ``ValueError`` with a short reason when there is no JSON to be found, and when the
    reply is longer than :data:`MAX_REPLY_CHARS` or nests deeper than :data:`MAX_JSON_DEPTH`.
    """
    if text is None or not text.strip():
        raise ValueError("the reply is empty; expected a JSON object")
    if len(text) > MAX_REPLY_CHARS:
        raise ValueError(f"the reply is {len(text):,} characters long, over the limit of {MAX_REPLY_CHARS:,}; "
                         "reply with a much shorter JSON object")
    s = _THINK.sub("", text).strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    try:
        data = _loads(s)
    except ValueError as first:
        start, end = s.find("{"), s.rfind("}")
        data = None
        if 0 <= start < end:
            try:
                data = _loads(s[start : end + 1])
            except ValueError:
                pass
        if data is None:
            raise ValueError(f"the reply is not valid JSON ({_why(first)})") from None
    depth = json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"the reply nests {depth} levels deep, over the limit of {MAX_JSON_DEPTH}; "
                         "reply with a flatter JSON object")
    return data


def _loads(text: str) -> Any:
    """``json.loads`` whose recursion on absurdly deep input is a ``ValueError`` like any other bad JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"it nests deeper than the JSON parser can follow; the limit is {MAX_JSON_DEPTH} levels, "
                         "reply with a flatter JSON object") from None


def _why(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos}"
    return str(exc)


def clip(text: str | None, limit: int = 20_000) -> str | None:
    """``text`` cut to ``limit`` characters, saying how much was cut (stored and echoed replies)."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit:,} more characters cut]"


def format_validation_error(exc: ValidationError | ValueError, limit: int = 12) -> str:
    """One line per problem, ``path: message``, without pydantic's documentation URLs."""
    if not isinstance(exc, ValidationError):
        return str(exc)
    lines = []
    for err in exc.errors(include_url=False)[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "<root>"
        lines.append(f"- {loc}: {err.get('msg')}")
    more = exc.error_count() - limit
    if more > 0:
        lines.append(f"- ... and {more} more")
    return "\n".join(lines)


def repair_message(response_model: type[BaseModel], problem: str) -> dict:
    """The user message that sends an invalid reply back for another try."""
    return {
        "role": "user",
        "content": (
            f"Your previous reply is not a valid {response_model.__name__}:\n{problem}\n"
            "Reply again with one JSON object that matches the schema, and nothing else."
        ),
    }


def with_schema_instruction(messages: list[dict], response_model: type[BaseModel], schema: dict) -> list[dict]:
    """Put the JSON schema into the system prompt, for servers that reject ``json_schema``
    response formats (the fallback path)."""
    note = (
        f"Answer with one JSON object, and nothing else, that validates against this JSON schema "
        f"({response_model.__name__}):\n{json.dumps(schema, ensure_ascii=False)}"
    )
    msgs = [dict(m) for m in messages]
    if msgs and msgs[0].get("role") == "system" and isinstance(msgs[0].get("content"), str):
        msgs[0]["content"] = msgs[0]["content"].rstrip() + "\n\n" + note
    else:
        msgs.insert(0, {"role": "system", "content": note})
    return msgs
