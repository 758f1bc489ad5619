"""Tool-call formats: Hermes ``<tool_call>`` blocks in generated text, and tool schemas.

Two ways an agent calls a tool (issue 5):

- **Hermes** (what Qwen-family chat templates emit, and what :mod:`autoforge.rl.chat` renders):
  ``<tool_call>{"name": "...", "arguments": {...}}</tool_call>`` inside the generated text.
  :func:`parse_hermes` extracts every such block. A block that is not valid JSON of that shape
  becomes a :class:`MalformedCall`, which the episode engine answers with an error observation
  (never a crash), so the policy sees its mistake and can learn from it.
- **Native** tool calls of OpenAI-compatible servers arrive already split
  (:class:`autoforge.llm.ChatReply` ``tool_calls`` / ``malformed_tool_calls``).

Blocks inside ``<think>...</think>`` are reasoning, not calls, and are ignored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from autoforge.types import ToolCall, ToolCode, ToolSpec

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_SPECIAL_TAIL = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>")


@dataclass
class MalformedCall:
    """A tool call that could not be parsed: the raw text, why, and the name if one was readable."""

    raw: str
    error: str
    name: str | None = None
    id: str | None = None

    def as_tool_call(self) -> ToolCall:
        """How it is kept in the transcript (``Message.tool_calls``)."""
        return ToolCall(name=self.name or "<malformed>", arguments={"__raw__": self.raw, "__error__": self.error},
                        id=self.id)


@dataclass
class ParsedTurn:
    content: str  # text outside tool-call blocks (thinking kept verbatim: interleaved thinking)
    calls: list[ToolCall] = field(default_factory=list)
    malformed: list[MalformedCall] = field(default_factory=list)


def _parse_body(body: str) -> tuple[ToolCall | None, MalformedCall | None]:
    text = body.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    if not text:
        return None, MalformedCall(raw=body, error="empty <tool_call> block")
    try:
        obj, end = json.JSONDecoder().raw_decode(text)
    except ValueError as exc:
        return None, MalformedCall(raw=body, error=f"not valid JSON: {exc}")
    if text[end:].strip():
        return None, MalformedCall(raw=body, error=f"unexpected text after the JSON object: {text[end:end + 40]!r}")
    if not isinstance(obj, dict):
        return None, MalformedCall(raw=body, error=f"expected a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, MalformedCall(raw=body, error='missing "name" (a non-empty string)')
    unknown = set(obj) - {"name", "arguments"}
    if unknown:
        return None, MalformedCall(raw=body, name=name,
                                   error=f"unexpected keys {sorted(unknown)}; a call is {{\"name\": ..., \"arguments\": {{...}}}}")
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return None, MalformedCall(raw=body, name=name, error=f'"arguments" is a string that is not JSON: {exc}')
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, MalformedCall(raw=body, name=name, error=f'"arguments" must be a JSON object, got {type(args).__name__}')
    return ToolCall(name=name.strip(), arguments=args), None


def _json_close(text: str, b: int) -> int:
    """Where ``</tool_call>`` follows a complete JSON object starting at ``b`` (-1 if it does not)."""
    j = b
    while j < len(text) and text[j].isspace():
        j += 1
    if j >= len(text) or text[j] != "{":
        return -1
    try:
        _, end = json.JSONDecoder().raw_decode(text, j)
    except ValueError:
        return -1
    while end < len(text) and text[end].isspace():
        end += 1
    return end if text.startswith(CLOSE, end) else -1


def parse_hermes(text: str) -> ParsedTurn:
    """Split generated assistant text into content, tool calls and malformed calls.

    Handles several calls in one turn, whitespace and ```json fences around the JSON,
    ``arguments`` given as a JSON string, and a final block whose ``</tool_call>`` is missing
    (generation stopped at the limit): parsed if it is complete JSON, else malformed.
    """
    for tail in _SPECIAL_TAIL:
        text = text.replace(tail, "")
    # Mask <think> blocks so a call written while thinking is not executed.
    masked = _THINK.sub(lambda m: " " * len(m.group(0)), text)
    calls: list[ToolCall] = []
    bad: list[MalformedCall] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        s = masked.find(OPEN, pos)
        if s < 0:
            break
        b = s + len(OPEN)
        e = _json_close(masked, b)  # a closing tag inside a JSON string does not end the block
        if e < 0:
            e = masked.find(CLOSE, b)
        nxt = masked.find(OPEN, b)
        if e < 0 or (0 <= nxt < e and _json_close(masked, b) < 0):  # unclosed block: runs to the next block or to the end
            end_body = nxt if nxt >= 0 else len(text)
            body, span_end = text[b:end_body], end_body
            call, err = _parse_body(body)
            if err is not None:
                err.error = "unclosed <tool_call> block; " + err.error
        else:
            body, span_end = text[b:e], e + len(CLOSE)
            call, err = _parse_body(body)
        if call is not None:
            calls.append(call)
        if err is not None:
            bad.append(err)
        spans.append((s, span_end))
        pos = span_end
    content, last = "", 0
    for s, e in spans:
        content += text[last:s]
        last = e
    content += text[last:]
    return ParsedTurn(content=re.sub(r"\n{3,}", "\n\n", content).strip(), calls=calls, malformed=bad)


def format_hermes(call: ToolCall) -> str:
    """A call as a Hermes block (what :func:`parse_hermes` reads back)."""
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{OPEN}\n{body}\n{CLOSE}"


# --------------------------------------------------------------------------- tool schemas


SCHEMA_STYLES = ("full", "compact")  # JSON Schemas: what exports and OpenAI-compatible agents get
PROMPT_STYLES = SCHEMA_STYLES + ("brief",)  # + a shorthand only a policy's prompt can use (brief_schema)
# JSON Schema keywords a compact schema keeps: the structure an agent needs to form a call.
_COMPACT_KEYS = ("type", "properties", "required", "items", "enum", "anyOf", "oneOf", "additionalProperties")


def compact_schema(schema: Any) -> Any:
    """A JSON Schema without prose: descriptions, patterns, examples, titles, formats and defaults dropped.

    Still a valid schema with the same properties, types, enums, nesting and required lists, so
    a call that satisfies it satisfies the same structure. For small policies the tool prompt is
    most of the context (~1,300 of ~1,500 tokens on a one-environment retail task) and mostly prose.
    """
    if isinstance(schema, list):
        return [compact_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key in _COMPACT_KEYS:
        if key not in schema:
            continue
        val = schema[key]
        if key == "properties" and isinstance(val, dict):
            out[key] = {name: compact_schema(sub) for name, sub in val.items()}
        elif key in ("items", "anyOf", "oneOf") or (key == "additionalProperties" and isinstance(val, dict)):
            out[key] = compact_schema(val)
        else:
            out[key] = val
    return out


def brief_schema(schema: Any) -> Any:
    """A JSON Schema as a shorthand of names and types, for the prompt of a small policy.

    ``{"type": "object", "properties": {"email": {"type": "string"}, "status": {"enum": ["a", "b"]}},
    "required": ["email"]}`` becomes ``{"email": "string", "status?": ["a", "b"]}``: an object is
    its properties (an optional one's name ends in ``?``), an enum the list of its values, an
    array ``[items]``, ``oneOf``/``anyOf`` ``{"one of": [...]}``, anything else its type name.
    On the demo's retail prompt the part before the first agent turn falls from 1,562 tokens
    (compact) to 875, and attention cost grows with the square of the length. Not a JSON Schema:
    an OpenAI-compatible agent needs ``full`` or ``compact``.
    """
    if not isinstance(schema, dict):
        return schema
    if "enum" in schema:
        return list(schema["enum"])
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            return {"one of": [brief_schema(s) for s in schema[key]]}
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if not props:
            return "object"
        required = set(schema.get("required") or ())
        return {(k if k in required else k + "?"): brief_schema(v) for k, v in props.items()}
    if kind == "array":
        return [brief_schema(schema["items"])] if isinstance(schema.get("items"), dict) else "array"
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    return kind or "any"


def tool_schemas(tools: Iterable[ToolCode], specs: Iterable[ToolSpec] = (), style: str = "full") -> list[dict[str, Any]]:
    """OpenAI function-calling schemas for an environment's accepted tools (sorted by name).

    The description comes from the tool's :class:`ToolSpec` when given (the documentation the
    agent would read); parameters from the accepted code's JSON Schema. ``style="compact"``
    keeps only the first sentence of the description and the parameters' structure
    (:func:`compact_schema`); ``style="brief"`` renders each tool as ``{"name", "arguments"}`` in
    :func:`brief_schema`'s shorthand (plus the first sentence of its description when there is one),
    for a small policy's prompt only.
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"tool schema style must be one of {PROMPT_STYLES}, got {style!r}")
    desc = {s.tool_id: s.description for s in specs}
    out = []
    for t in sorted((t for t in tools if t.status == "accepted"), key=lambda t: t.name):
        params = t.parameters or {"type": "object", "properties": {}}
        text = desc.get(t.tool_id, "")
        if style in ("compact", "brief"):
            text = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0] if text else ""
        if style == "brief":
            out.append({"name": t.name, **({"description": text} if text else {}), "arguments": brief_schema(params)})
            continue
        if style == "compact":
            params = compact_schema(params)
        out.append({"type": "function", "function": {"name": t.name, "description": text, "parameters": params}})
    return out


def parse_observation(text: str) -> tuple[Any, str | None]:
    """(output, error) from an observation's text (``Observation.to_text``): JSON output, or ``{"error": ...}``."""
    try:
        obj = json.loads(text)
    except ValueError:
        low = text.strip().lower()
        if low.startswith("error"):
            return None, text.strip()
        return text, None
    if isinstance(obj, dict) and "error" in obj and len(obj) <= 2 and set(obj) <= {"error", "kind", "ok"}:
        return obj, str(obj["error"])
    if isinstance(obj, dict) and obj.get("ok") is False:
        return obj, str(obj.get("error") or "tool call failed")
    if isinstance(obj, dict) and set(obj) >= {"ok", "output"} and obj.get("ok") is True:
        return obj["output"], None
    return obj, None
