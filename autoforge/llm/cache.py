"""The response cache: an identical repeat of an LLM request is answered without a call.

The key is :func:`prompt_hash` over everything that shapes the reply — model, pipeline step,
messages, response schema, tools, temperature, seed and token limit — so a re-run of a stage
costs nothing and gives the same records (DESIGN.md "The LLM, offline and online": "a response
cache in the warehouse (reproducible re-runs, token and latency accounting)").

The warehouse copy of the cache is the ``llm_calls`` table itself: every successful call is
recorded there with its ``prompt_hash`` and parsed ``response``; :class:`WarehouseCache` loads
those rows back. Nothing here writes to the warehouse (the flows' single writer does).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from autoforge.errors import WarehouseError
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
    records through the recorder and the flow's writer, and the next run loads them.
    """

    SQL = (
        "SELECT prompt_hash, response, outcome, created_at FROM llm_calls "
        "WHERE outcome = 'ok' AND response IS NOT NULL"
    )

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

    @classmethod
    def load(cls, warehouse: Any, *, model: str | None = None, step: str | None = None) -> "WarehouseCache":
        """Read the cache from a warehouse through ``autoforge.warehouse.query`` (read-only).

        Optionally only one model's or one step's calls. A missing warehouse file raises the
        warehouse's own error (it says how to create one)."""
        try:
            from autoforge.warehouse import query, table_exists  # type: ignore[attr-defined]
        except ImportError as exc:  # pragma: no cover - depends on the warehouse package
            raise WarehouseError(
                "autoforge.warehouse.query is not available, so the LLM response cache cannot be "
                "loaded from the warehouse; build the cache with WarehouseCache.from_rows(rows)"
            ) from exc
        if not table_exists(warehouse, "llm_calls"):  # a warehouse from before sql/017: nothing cached yet
            return cls()
        sql, params = cls.SQL, {}
        if model is not None:
            sql += " AND model = :model"
            params["model"] = model
        if step is not None:
            sql += " AND step = :step"
            params["step"] = step
        # A fixed SELECT built here: the read-only check (which cannot parse :named params) is not needed.
        return cls.from_rows(query(warehouse, sql, params, read_only_check=False))
