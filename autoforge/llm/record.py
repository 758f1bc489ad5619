"""Recorders: where the LLM client sends one :class:`~autoforge.types.LLMCall` per request.

A recorder is any callable ``(LLMCall) -> None``. The client calls it once per HTTP request
it sends (outcome ``ok``, ``invalid`` or ``error``) and once per cache hit (``cached``), so
the ``llm_calls`` table accounts for every token and every second spent on the model.
Library code never writes the warehouse: flows drain a :class:`MemoryRecorder` and persist
its records through the single writer.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable

from autoforge.types import LLMCall

Recorder = Callable[[LLMCall], None]


class MemoryRecorder:
    """Collects records in a list (thread-safe: episodes may run concurrently)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[LLMCall] = []

    def __call__(self, call: LLMCall) -> None:
        with self._lock:
            self._calls.append(call)

    @property
    def calls(self) -> list[LLMCall]:
        with self._lock:
            return list(self._calls)

    def drain(self) -> list[LLMCall]:
        """Return the records collected so far and forget them (persist, then drain again)."""
        with self._lock:
            out, self._calls = self._calls, []
        return out

    def __len__(self) -> int:
        with self._lock:
            return len(self._calls)

    def summary(self) -> dict[str, Any]:
        """Counts by outcome and totals of tokens and latency, e.g. for a flow artifact."""
        calls = self.calls
        return {
            "n_calls": len(calls),
            "by_outcome": dict(Counter(c.outcome for c in calls)),
            "tokens_in": sum(c.tokens_in or 0 for c in calls),
            "tokens_out": sum(c.tokens_out or 0 for c in calls),
            "latency_ms": round(sum(c.latency_ms or 0.0 for c in calls), 3),
        }


def drain_calls(client: Any, run_id: str | None) -> list[LLMCall]:
    """The LLM calls ``client``'s recorder holds since the last drain, stamped with the run (a stage
    returns them with its records, so they are written in the stage's one transaction). ``client``
    None (the offline backend) or without a draining recorder: none."""
    drain = getattr(getattr(client, "recorder", None), "drain", None)
    if drain is None:
        return []
    return stamped(drain(), run_id)


def stamped(calls: list[LLMCall], run_id: str | None) -> list[LLMCall]:
    """``calls`` with ``run_id`` where they have none."""
    return [c if c.run_id or not run_id else c.model_copy(update={"run_id": run_id}) for c in calls]
