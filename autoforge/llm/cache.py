"""The response cache: an identical repeat of an LLM request is answered without a call.

The key is :func:`prompt_hash` over everything that shapes the reply — model, pipeline step,
messages, response schema, tools, temperature, seed and token limit — so a re-run of a stage
costs nothing and gives the same records (docs/design.md#llm-offline-and-online: the cache lives
in the warehouse, so re-runs are reproducible and tokens and latency are accounted for).

The warehouse copy of the cache is the ``llm_calls`` table itself: every successful call is
recorded there with its ``prompt_hash`` and parsed ``response``; :class:`WarehouseCache` is built
from those rows (:meth:`WarehouseCache.from_rows`). This package never touches the warehouse: the
pipeline reads the rows (:func:`autoforge.pipeline.llm_cache.load_llm_cache`) and hands the cache
to :func:`autoforge.llm.get_client`; the flows' single writer stores new calls.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from autoforge.types import content_hash


def prompt_hash(
    model: str,
    step: str,
    messages: list[dict],
    *,
    schema: dict | None = None,
    tools: list[dict] | None = None,
    temperature: float | None = None,
    **extra: Any,
) -> str:
    """The cache key: a hash of the canonical JSON of every input that shapes the reply.

    ``extra`` holds the rest (kind of call, seed, max_tokens, tool_choice, extra_body); a
    ``None`` value is dropped so adding an optional knob later does not change old keys.
    """
    key = {
        "model": model,
        "step": step,
        "messages": messages,
        "schema": schema,
        "tools": tools,
        "temperature": temperature,
        **{k: v for k, v in sorted(extra.items()) if v is not None},
    }
    return content_hash(key, n=32)


@runtime_checkable
class ResponseCache(Protocol):
    """Maps a prompt hash to the recorded response (JSON: a dict, list or string)."""

    def get(self, key: str) -> Any | None: ...

    def put(self, key: str, response: Any) -> None: ...


class MemoryCache:
    """An in-process cache (thread-safe). Responses are stored as canonical JSON text, so a
    caller that mutates what it got back cannot change what the next hit returns."""

    def __init__(self, entries: Mapping[str, Any] | None = None):
        self._lock = threading.Lock()
        self._data: dict[str, str] = {}
        for k, v in (entries or {}).items():
            self.put(k, v)

    def get(self, key: str) -> Any | None:
        with self._lock:
            text = self._data.get(key)
        return None if text is None else json.loads(text)

    def put(self, key: str, response: Any) -> None:
        text = json.dumps(response, sort_keys=True, ensure_ascii=False, default=str)
        with self._lock:
            self._data[key] = text

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data


class WarehouseCache(MemoryCache):
    """A :class:`MemoryCache` pre-filled from ``llm_calls`` rows with ``outcome = 'ok'``.

    New answers of this run are added in memory; they reach the warehouse as ``LLMCall``
    records through the recorder and the flow's writer, and the next run loads them
    (:func:`autoforge.pipeline.llm_cache.load_llm_cache` reads the rows).
    """

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> "WarehouseCache":
        """Rows need ``prompt_hash``, ``response`` (JSON text or already decoded) and
        ``outcome``; other outcomes are ignored. With several ok rows for one hash the one
        with the latest ``created_at`` wins (rows without it keep input order)."""
        best: dict[str, tuple[Any, Any]] = {}
        for row in rows:
            if row.get("outcome") != "ok" or row.get("response") is None:
                continue
            resp = row["response"]
            if isinstance(resp, (bytes, bytearray)):
                resp = resp.decode()
            if isinstance(resp, str):
                try:
                    resp = json.loads(resp)
                except ValueError:
                    pass  # a plain-string response stored unquoted
            key = row["prompt_hash"]
            stamp = row.get("created_at")
            prev = best.get(key)
            if prev is None or prev[0] is None or stamp is None or stamp >= prev[0]:
                best[key] = (stamp, resp)
        return cls({k: v for k, (_, v) in best.items()})
