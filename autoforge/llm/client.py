"""One client interface for every step the paper gives to an LLM, with two backends.

docs/design.md#llm-offline-and-online: stage modules implement each LLM step twice — a
rule-based offline function and an online one that sends a prompt plus a pydantic response
model through this client. They branch on ``client.is_offline``.

- :class:`OpenAIClient` talks to any OpenAI-compatible server (vLLM, SGLang, Ollama, OpenAI,
  DashScope). ``structured()`` asks for JSON matching a pydantic model (``response_format``
  ``json_schema``; falls back to ``json_object`` and then to the schema in the prompt when
  the server rejects it) and validates the reply itself; an invalid reply (not JSON, not the
  model, longer than ``messages.MAX_REPLY_CHARS`` or nested deeper than ``messages.MAX_JSON_DEPTH``)
  goes back with the validation error, at most ``max_repairs`` times
  (``AUTOFORGE_LLM_MAX_REPAIRS``); what is stored and echoed of it is clipped. Transient
  failures are retried with bounded exponential backoff (:mod:`autoforge.llm.retry`,
  ``AUTOFORGE_LLM_MAX_RETRIES``). Every request and every cache hit is recorded as an
  :class:`~autoforge.types.LLMCall`; identical repeats are answered from the cache.
- :class:`OfflineClient` is the default: it has no model, and says so loudly if asked.

Caching and sampling: the cache key includes ``temperature`` and ``seed``; callers that want
several *different* samples of one prompt (rollout trials with an LLM user) pass a distinct
``seed`` per sample, or ``use_cache=False``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autoforge.errors import ConfigError, LLMError
from autoforge.llm.cache import ResponseCache, prompt_hash
from autoforge.llm.messages import (
    clip,
    format_validation_error,
    parse_json_content,
    repair_message,
    to_openai_messages,
    tool_call_to_openai,
    with_schema_instruction,
)
from autoforge.llm.record import Recorder
from autoforge.llm.retry import MalformedResponse, RetryPolicy, classify, retryable_types
from autoforge.settings import BACKENDS
from autoforge.types import LLMCall, Message, ToolCall

T = TypeVar("T", bound=BaseModel)

# Structured-output modes, tried in this order; a 400/422 moves to the next one.
FORMAT_MODES = ("json_schema", "json_object", "prompt")


class LLMRequestError(LLMError):
    """The server could not be reached or refused the request (after the retries)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.retryable = retryable


class LLMInvalidReply(LLMError):
    """The model's reply never validated against the response model (after the repairs)."""


class ChatReply(BaseModel):
    """One assistant turn from ``chat()``."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Calls whose arguments are not a JSON object: {"id", "name", "arguments" (raw text), "error"}.
    # The episode engine answers each with an error observation instead of crashing.
    malformed_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    reasoning: str | None = None  # reasoning_content of thinking models (vLLM, DashScope), if any
    finish_reason: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cached: bool = False

    def to_message(self) -> dict:
        """The assistant message to append to the conversation (chat-completions format)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        calls = [tool_call_to_openai(tc, i) for i, tc in enumerate(self.tool_calls)]
        calls += [
            {"id": m.get("id") or f"call_bad_{i}", "type": "function",
             "function": {"name": m.get("name") or "", "arguments": m.get("arguments") or ""}}
            for i, m in enumerate(self.malformed_tool_calls)
        ]
        if calls:
            msg["tool_calls"] = calls
        return msg


@runtime_checkable
class LLMClient(Protocol):
    """What stage modules program against."""

    name: str  # "offline" | "openai:<model>" — stored as EnvironmentRecord.backend etc.
    model: str
    is_offline: bool

    def structured(
        self, step: str, messages: list[dict | Message], response_model: type[T], *, temperature: float = 0.0
    ) -> T: ...

    def chat(
        self,
        step: str,
        messages: list[dict | Message],
        *,
        tools: list[dict] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> ChatReply: ...


# --------------------------------------------------------------------------- offline


class OfflineClient:
    """The default backend: deterministic rules, no language model.

    Each stage implements its steps with rules when ``client.is_offline``; calling
    ``structured()`` or ``chat()`` here is a bug in the caller and raises at once.
    """

    name = "offline"
    model = "offline"
    is_offline = True

    def __init__(self, recorder: Recorder | None = None, cache: ResponseCache | None = None):
        self.recorder = recorder  # accepted for a uniform get_client(); nothing is recorded
        self.cache = cache

    def _refuse(self, step: str, what: str) -> LLMError:
        return LLMError(
            f"LLM step {step!r}: {what}() was called on the offline backend, which has no language "
            "model — it implements each step with rules. Call the step's offline function when "
            "client.is_offline is true, or choose a model with --backend openai "
            "(AUTOFORGE_BACKEND=openai and AUTOFORGE_OPENAI_BASE_URL)."
        )

    def structured(self, step: str, messages, response_model, *, temperature: float = 0.0, **kw):
        raise self._refuse(step, "structured")

    def chat(self, step: str, messages, *, tools=None, temperature: float = 0.0, max_tokens=None, **kw):
        raise self._refuse(step, "chat")

    def __repr__(self) -> str:
        return "OfflineClient()"


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAIClient:
    """An OpenAI-compatible chat-completions backend (see the module docstring)."""

    is_offline = False

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        recorder: Recorder | None = None,
        cache: ResponseCache | None = None,
        *,
        max_repairs: int = 2,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        jitter: float = 0.5,
        format_mode: str = "json_schema",
        run_id: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if format_mode not in FORMAT_MODES:
            raise ConfigError(f"format_mode {format_mode!r} is unknown; valid: {', '.join(FORMAT_MODES)}")
        if max_repairs < 0 or max_retries < 0:
            raise ConfigError("max_repairs and max_retries must be >= 0 (AUTOFORGE_LLM_MAX_REPAIRS / _MAX_RETRIES)")
        self.base_url = base_url
        self.model = model
        self.name = f"openai:{model}"
        self.timeout_s = timeout_s
        self.max_repairs = max_repairs
        self.retry = RetryPolicy(max_retries=max_retries, base_s=backoff_base_s, max_s=backoff_max_s, jitter=jitter)
        self.recorder = recorder
        self.cache = cache
        self.run_id = run_id
        self.format_mode = format_mode  # downgraded (and kept) when the server rejects a mode
        self._sleep = sleep
        import openai  # here: importing the package costs ~0.5 s, which only an online client should pay

        # max_retries=0: the package's own retries are off, so RetryPolicy is the one in force.
        self._retryable, self._timeout = retryable_types(), openai.APITimeoutError
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0)

    def __repr__(self) -> str:
        return f"OpenAIClient(base_url={self.base_url!r}, model={self.model!r})"

    # ------------------------------------------------------------------ public

    def structured(
        self,
        step: str,
        messages: list[dict | Message],
        response_model: type[T],
        *,
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        use_cache: bool = True,
    ) -> T:
        """Ask for one JSON object matching ``response_model``; return it validated."""
        msgs = to_openai_messages(messages)
        schema = response_model.model_json_schema()
        key = prompt_hash(self.model, step, msgs, schema=schema, temperature=temperature,
                          kind="structured", seed=seed, max_tokens=max_tokens)
        t0 = time.perf_counter()
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    obj = response_model.model_validate(hit)
                except ValidationError:
                    obj = None  # stale entry: ask the model again
                if obj is not None:
                    self._record(step, key, msgs, "cached", response=hit, tokens=(0, 0), t0=t0)
                    return obj

        convo = list(msgs)
        problem = ""
        for _ in range(self.max_repairs + 1):
            completion, sent, t_req = self._structured_request(
                step, key, convo, response_model, schema, temperature=temperature, seed=seed, max_tokens=max_tokens
            )
            message = completion.choices[0].message
            content = message.content
            tokens = _usage(completion)
            try:
                if content is None and getattr(message, "refusal", None):
                    raise ValueError(f"the model refused: {message.refusal}")
                if content is not None and not isinstance(content, str):
                    raise ValueError(f"the reply content is a {type(content).__name__}, not text")
                data = parse_json_content(content)
                obj = response_model.model_validate(data)
            except (ValueError, RecursionError) as exc:  # ValueError includes pydantic.ValidationError
                problem = format_validation_error(exc) if isinstance(exc, ValueError) else (
                    f"the reply nests too deeply to validate ({exc}); reply with a flatter JSON object")
                # wrapped: a JSON column cannot hold arbitrary text; clipped: a runaway reply is not stored whole
                self._record(step, key, sent, "invalid", response={"raw": clip(content)}, tokens=tokens, t0=t_req,
                             error=problem)
                convo = convo + [{"role": "assistant", "content": clip(content) or ""},
                                 repair_message(response_model, problem)]
                continue
            self._record(step, key, sent, "ok", response=data, tokens=tokens, t0=t_req)
            if self.cache is not None:
                self.cache.put(key, data)
            return obj
        raise LLMInvalidReply(
            f"LLM step {step!r} ({self.name} at {self.base_url}): the reply did not validate as "
            f"{response_model.__name__} after {self.max_repairs + 1} attempts; last problem:\n{problem}\n"
            "Use a stronger model, simplify the response model, or raise AUTOFORGE_LLM_MAX_REPAIRS."
        )

    def chat(
        self,
        step: str,
        messages: list[dict | Message],
        *,
        tools: list[dict] | None = None,
        tool_choice: str | dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        extra_body: dict | None = None,
        use_cache: bool = True,
    ) -> ChatReply:
        """One assistant turn (text and/or native tool calls) for agents and simulated users."""
        msgs = to_openai_messages(messages)
        key = prompt_hash(self.model, step, msgs, tools=tools, temperature=temperature, kind="chat",
                          seed=seed, max_tokens=max_tokens, tool_choice=tool_choice, extra_body=extra_body)
        t0 = time.perf_counter()
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if isinstance(hit, dict):
                try:
                    reply = ChatReply.model_validate({**hit, "cached": True})
                except ValidationError:
                    reply = None
                if reply is not None:
                    self._record(step, key, msgs, "cached", response=hit, tokens=(0, 0), t0=t0)
                    return reply

        params: dict[str, Any] = {"temperature": temperature}
        if tools:
            params["tools"] = tools
        if tool_choice is not None:
            params["tool_choice"] = tool_choice
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if seed is not None:
            params["seed"] = seed
        if extra_body:
            params["extra_body"] = extra_body
        completion, t_req = self._request(step, key, msgs, params)
        reply = _chat_reply(completion)
        data = reply.model_dump(mode="json", exclude={"cached"})
        self._record(step, key, msgs, "ok", response=data, tokens=(reply.tokens_in, reply.tokens_out), t0=t_req)
        if self.cache is not None:
            self.cache.put(key, data)
        return reply

    def ping(self) -> list[str]:
        """The model ids the server lists (GET /models): a cheap check of URL and key."""
        import openai

        try:
            return [m.id for m in self._client.models.list().data]
        except openai.OpenAIError as exc:
            raise LLMRequestError(
                f"cannot list models at {self.base_url}: {exc}; check AUTOFORGE_OPENAI_BASE_URL and "
                "AUTOFORGE_OPENAI_API_KEY"
            ) from exc

    # ------------------------------------------------------------------ internals

    def _structured_request(self, step, key, convo, response_model, schema, *, temperature, seed, max_tokens):
        """Send with the current structured-output mode; on a 400/422 move to the next mode."""
        while True:
            mode = self.format_mode
            params: dict[str, Any] = {"temperature": temperature}
            if seed is not None:
                params["seed"] = seed
            if max_tokens is not None:
                params["max_tokens"] = max_tokens
            if mode == "json_schema":
                sent = convo
                params["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": response_model.__name__, "schema": schema, "strict": False},
                }
            else:
                sent = with_schema_instruction(convo, response_model, schema)
                if mode == "json_object":
                    params["response_format"] = {"type": "json_object"}
            try:
                completion, t_req = self._request(step, key, sent, params)
                return completion, sent, t_req
            except LLMRequestError as exc:
                if exc.status in (400, 422) and mode != "prompt":
                    nxt = FORMAT_MODES[FORMAT_MODES.index(mode) + 1]
                    if self.format_mode == mode:
                        self.format_mode = nxt
                    continue
                raise

    def _request(self, step: str, key: str, sent: list[dict], params: dict[str, Any]):
        """One logical request with the retry policy. Records each failed attempt as an
        ``error`` call; returns ``(completion, t_start)`` of the attempt that succeeded."""
        attempts = self.retry.max_retries + 1
        for attempt in range(attempts):
            t0 = time.perf_counter()
            try:
                completion = self._client.chat.completions.create(model=self.model, messages=sent, **params)
                if not getattr(completion, "choices", None) or completion.choices[0].message is None:
                    raise MalformedResponse("no choices in the completion")
                return completion, t0
            except self._retryable as exc:
                retryable, desc, retry_after = classify(exc)
                status = getattr(exc, "status_code", None)
                if isinstance(exc, self._timeout):
                    desc = f"timeout after {self.timeout_s:g}s"
                last = attempt + 1 == attempts or not retryable
                self._record(step, key, sent, "error", t0=t0,
                             error=f"attempt {attempt + 1}/{attempts}: {desc}")
                if last:
                    if retryable:
                        hint = ("the server kept failing; check it, or raise AUTOFORGE_LLM_MAX_RETRIES / "
                                "AUTOFORGE_LLM_TIMEOUT")
                        tried = f"after {attempt + 1} attempts"
                    else:
                        hint = ("the server rejected the request (not retried); check "
                                "AUTOFORGE_OPENAI_MODEL, AUTOFORGE_OPENAI_API_KEY and the request")
                        tried = "on attempt 1" if attempt == 0 else f"on attempt {attempt + 1}"
                    raise LLMRequestError(
                        f"LLM step {step!r} ({self.name} at {self.base_url}) failed {tried}: {desc}; {hint}",
                        status=status, attempts=attempt + 1, retryable=retryable,
                    ) from exc
                self._sleep(self.retry.delay(attempt, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def _record(self, step, key, prompt, outcome, *, t0, response=None, tokens=(None, None), error=None) -> None:
        if self.recorder is None:
            return
        self.recorder(
            LLMCall(
                call_id=f"llm_{uuid.uuid4().hex[:20]}",
                backend="openai",
                model=self.model,
                step=step,
                prompt_hash=key,
                prompt=prompt,
                response=response,
                tokens_in=tokens[0],
                tokens_out=tokens[1],
                latency_ms=round((time.perf_counter() - t0) * 1000.0, 3),
                outcome=outcome,
                error=error,
                run_id=self.run_id,
            )
        )


def _usage(completion) -> tuple[int | None, int | None]:
    u = getattr(completion, "usage", None)
    if u is None:
        return None, None
    return getattr(u, "prompt_tokens", None), getattr(u, "completion_tokens", None)


def _chat_reply(completion) -> ChatReply:
    choice = completion.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    bad: list[dict[str, Any]] = []
    for i, tc in enumerate(message.tool_calls or []):
        fn = getattr(tc, "function", None)
        name = getattr(fn, "name", None) or ""
        raw = getattr(fn, "arguments", None)
        tc_id = getattr(tc, "id", None) or f"call_{i}"
        try:
            args = json.loads(raw) if raw and raw.strip() else {}
            if not isinstance(args, dict):
                raise ValueError(f"arguments are a JSON {type(args).__name__}, not an object")
            if not name:
                raise ValueError("the call has no function name")
        except ValueError as exc:
            bad.append({"id": tc_id, "name": name, "arguments": raw, "error": str(exc)})
            continue
        calls.append(ToolCall(name=name, arguments=args, id=tc_id))
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning") or getattr(message, "reasoning_content", None)
    tin, tout = _usage(completion)
    return ChatReply(
        content=message.content or "",
        tool_calls=calls,
        malformed_tool_calls=bad,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        finish_reason=choice.finish_reason,
        tokens_in=tin,
        tokens_out=tout,
    )


# --------------------------------------------------------------------------- factory


def get_client(
    settings=None,
    *,
    backend: str | None = None,
    recorder: Recorder | None = None,
    cache: ResponseCache | None = None,
    **overrides: Any,
) -> OfflineClient | OpenAIClient:
    """The client for ``backend`` (default: ``settings.backend``, i.e. ``AUTOFORGE_BACKEND``).

    ``cache`` is the response store, handed in by the caller (a :class:`MemoryCache`, or the
    warehouse's: ``autoforge.pipeline.llm_cache.load_llm_cache(warehouse)``); none by default.
    ``overrides`` go to :class:`OpenAIClient` (e.g. ``backoff_base_s``, ``run_id``).
    """
    if settings is None:
        from autoforge.settings import get_settings

        settings = get_settings()
    name = (backend or settings.backend or "offline").strip().lower()
    if name == "offline":
        return OfflineClient(recorder=recorder, cache=cache)
    if name == "openai":
        if not settings.openai_base_url:
            raise ConfigError(
                "the openai backend needs a server URL: set AUTOFORGE_OPENAI_BASE_URL (e.g. "
                "http://127.0.0.1:8000/v1 for a local vLLM, https://api.openai.com/v1 for OpenAI)"
            )
        if not settings.openai_api_key:
            raise ConfigError(
                "the openai backend needs an API key: set AUTOFORGE_OPENAI_API_KEY "
                "(any non-empty value, e.g. EMPTY, for a local server without keys)"
            )
        if not settings.openai_model:
            raise ConfigError("the openai backend needs a model name: set AUTOFORGE_OPENAI_MODEL")
        return OpenAIClient(
            settings.openai_base_url,
            settings.openai_api_key,
            settings.openai_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            recorder=recorder,
            cache=cache,
            max_repairs=settings.llm_max_repairs,
            **overrides,
        )
    raise ConfigError(f"unknown LLM backend {name!r}; valid backends: {', '.join(BACKENDS)} (AUTOFORGE_BACKEND / --backend)")
