"""Retry policy for model-server requests: which failures are retried and how long to wait.

Retried: timeouts, connection errors, HTTP 429 and 5xx, and a 200 whose body is not a
chat completion (a server fault). Not retried: any other 4xx — the request itself is wrong
and sending it again cannot help. The ``openai`` package's own retries are switched off
(``max_retries=0``) so that this policy is the one in force and tests can see every request.

Backoff is exponential with jitter and bounded: attempt ``a`` (0-based) waits
``d = min(max_s, base_s * 2**a)`` scaled by a uniform factor in ``[1 - jitter, 1]``; a
``Retry-After`` header on a 429/503 raises the wait to that value (still at most ``max_s``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai


@dataclass
class RetryPolicy:
    max_retries: int = 4  # retries after the first attempt (settings.llm_max_retries)
    base_s: float = 0.5
    max_s: float = 20.0
    jitter: float = 0.5  # 0 = no jitter; 1 = "full jitter"
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        d = min(self.max_s, self.base_s * (2**attempt))
        d *= 1.0 - self.jitter * self.rng.random()
        if retry_after is not None and retry_after > 0:
            d = max(d, min(retry_after, self.max_s))
        return d


class MalformedResponse(Exception):
    """A 200 reply whose body is not a usable chat completion."""


def classify(exc: BaseException) -> tuple[bool, str, float | None]:
    """(retryable, short description, Retry-After seconds or None) for a failed request.

    Unknown exception types are not handled here: the caller lets them propagate (a bug,
    not a server fault).
    """
    import openai  # here, not at the top: the offline backend and the CLI's start never need the package

    if isinstance(exc, openai.APITimeoutError):
        return True, "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return True, f"connection error ({exc.__cause__ or exc})", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        msg = _error_message(exc)
        retry_after = _retry_after(exc)
        if status == 429 or status >= 500:
            return True, f"HTTP {status}: {msg}", retry_after
        return False, f"HTTP {status}: {msg}", None
    if isinstance(exc, (MalformedResponse, openai.APIResponseValidationError, ValueError)):
        return True, f"malformed response body ({exc})", None
    if isinstance(exc, openai.APIError):  # some other API failure the package may add: do not loop on it
        return False, f"{type(exc).__name__}: {exc}", None
    raise TypeError(f"not a model-server failure: {type(exc).__name__}")


def retryable_types() -> tuple[type[BaseException], ...]:
    """The failures :func:`classify` answers: a request raising anything else is a bug, not a server fault."""
    import openai

    return (
        openai.APIError,  # status, connection, timeout, response validation
        MalformedResponse,
        ValueError,  # json.JSONDecodeError from a body that is not JSON
    )


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(exc.message)[:300]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
