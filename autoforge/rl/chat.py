"""The chat format of the default policy: Hermes/Qwen-style turns and tool calls.

Layout (one growing sequence; interleaved thinking stays in the assistant text verbatim)::

    <|im_start|>system\n{system text}\n\n# Tools ... <tools>{json per line}</tools> ...<|im_end|>\n
    <|im_start|>user\n{request}<|im_end|>\n
    <|im_start|>assistant\n<think>...</think>\n<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call><|im_end|>\n
    <|im_start|>tool\n{json observation}<|im_end|>\n
    <|im_start|>assistant\n ...

Tool results use a ``tool`` role (Qwen's own template wraps them in a user turn with
``<tool_response>``; any model whose tokenizer carries its own template keeps using it through
``tokenizer.apply_chat_template``). The helpers below assume this layout; they are what the
episode engine uses to grow a trajectory token-in/token-out.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

IM_START, IM_END, EOS = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [EOS, IM_START, IM_END]
# Added (not "special") tokens: atomic, but kept when decoding with skip_special_tokens.
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tools>", "</tools>"]

TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
TOOLS_POSTAMBLE = (
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)

# Jinja template stored in the tokenizer (chat_template.jinja). Kept in step with render_messages() below.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- " + json.dumps(TOOLS_PREAMBLE) + " }}"
    "{%- for tool in tools %}{{- tool | tojson }}{{- '\\n' }}{%- endfor %}"
    "{{- " + json.dumps(TOOLS_POSTAMBLE) + " + '<|im_end|>\\n' }}"
    "{%- elif messages and messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for m in messages %}"
    "{%- if not (loop.first and m.role == 'system') %}"
    "{{- '<|im_start|>' + m.role + '\\n' + (m.content or '') }}"
    "{%- if m.role == 'assistant' and m.tool_calls %}"
    "{%- for tc in m.tool_calls %}"
    "{%- set fn = tc.function if tc.function is defined else tc %}"
    "{{- '\\n<tool_call>\\n{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' }}"
    "{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _as_dict(m: Any) -> dict:
    """Accept dicts or pydantic messages (autoforge.types.Message)."""
    if hasattr(m, "model_dump"):
        m = m.model_dump(exclude_none=True)
    return dict(m)


def _tool_call_text(tc: Any) -> str:
    tc = _as_dict(tc)
    fn = tc.get("function", tc)
    args = fn.get("arguments", {})
    args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return f'\n<tool_call>\n{{"name": {json.dumps(fn["name"], ensure_ascii=False)}, "arguments": {args_text}}}\n</tool_call>'


def render_message(m: Any) -> str:
    """One non-system turn, exactly as the template renders it (ends with ``<|im_end|>\\n``)."""
    m = _as_dict(m)
    text = f"{IM_START}{m['role']}\n{m.get('content') or ''}"
    if m["role"] == "assistant":
        for tc in m.get("tool_calls") or []:
            text += _tool_call_text(tc)
    return text + f"{IM_END}\n"


def render_messages(messages: Iterable[Any], tools: list[dict] | None = None, add_generation_prompt: bool = False) -> str:
    """Python twin of :data:`CHAT_TEMPLATE` (a test checks they agree)."""
    msgs = [_as_dict(m) for m in messages]
    out = ""
    if tools:
        out += f"{IM_START}system\n"
        if msgs and msgs[0]["role"] == "system":
            out += (msgs[0].get("content") or "") + "\n\n"
        out += TOOLS_PREAMBLE + "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tools) + TOOLS_POSTAMBLE
        out += f"{IM_END}\n"
    elif msgs and msgs[0]["role"] == "system":
        out += f"{IM_START}system\n{msgs[0].get('content') or ''}{IM_END}\n"
    for i, m in enumerate(msgs):
        if i == 0 and m["role"] == "system":
            continue
        out += render_message(m)
    if add_generation_prompt:
        out += f"{IM_START}assistant\n"
    return out


_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)


def parse_assistant(text: str) -> dict:
    """Split generated assistant text into content and tool calls.

    Returns ``{"content": str, "tool_calls": [{"name", "arguments"}], "errors": [str]}``. The
    content keeps any ``<think>`` block verbatim (interleaved thinking). A tool call whose body
    is not ``{"name": str, "arguments": object}`` JSON is reported in ``errors`` so the
    episode engine can return an error observation instead of crashing.
    """
    text = text.replace(IM_END, "").replace(EOS, "")
    calls, errors = [], []
    for body in _TOOL_CALL_RE.findall(text):
        try:
            obj = json.loads(body)
            if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
                raise ValueError("expected an object with a string 'name'")
            args = obj.get("arguments", {})
            if isinstance(args, str):
                args = json.loads(args)
            if not isinstance(args, dict):
                raise ValueError("'arguments' must be a JSON object")
            calls.append({"name": obj["name"], "arguments": args})
        except (ValueError, json.JSONDecodeError) as e:
            errors.append(f"unparseable tool call {body[:80]!r}: {e}")
    content = _TOOL_CALL_RE.sub("", text).rstrip()
    return {"content": content, "tool_calls": calls, "errors": errors}


def strip_thinking(text: str) -> str:
    """Text without ``<think>...</think>`` blocks (for the user simulator, which must not see them)."""
    return _THINK_RE.sub("", text).strip()


def assistant_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of assistant bodies: from after ``<|im_start|>assistant\\n`` through ``<|im_end|>``.

    These are the tokens the policy generates (including the end-of-turn token it must learn to
    emit); the role header is context the engine appends.
    """
    spans, head = [], f"{IM_START}assistant\n"
    pos = 0
    while True:
        s = text.find(head, pos)
        if s < 0:
            return spans
        b = s + len(head)
        e = text.find(IM_END, b)
        if e < 0:  # an unfinished final turn: everything to the end was generated
            spans.append((b, len(text)))
            return spans
        spans.append((b, e + len(IM_END)))
        pos = e + len(IM_END)
