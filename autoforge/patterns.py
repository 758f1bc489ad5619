r"""Regular expressions that come from documents or an LLM, matched without catastrophic backtracking.

A ``pattern`` in a parameter schema is someone else's text. Python's ``re`` backtracks, so
``^(a+)+$`` against ``"aaaa…b"`` or ``^(.|.|.)*Z$`` against a long string runs for minutes. Every
pattern that did not come from this code base goes through here instead:

* Patterns RE2 accepts (almost every pattern in real docs: classes, repeats, alternation,
  anchors) run on RE2 (``google-re2``), whose matching time is linear in the text.
* Patterns RE2 refuses (lookarounds, back-references) run on the ``regex`` module with a
  timeout; running out of it raises :class:`PatternTimeout`, never blocks.
* A pattern neither accepts, one longer than :data:`MAX_PATTERN_CHARS`, or one the fallback would
  have to write out to more than :data:`MAX_EXPANDED` positions (``\d{999999999}``), raises
  :class:`PatternError` with the reason, so the caller rejects it with a message instead of
  crashing.

Callers: argument validation (:mod:`autoforge.envs.runtime`), value sampling and documented id
shapes in offline synthesis, and task instantiation.
"""

from __future__ import annotations

import functools
import re
import time
import warnings
from typing import Any

import re2
import regex

try:  # Python's own regex parser, used only to measure a pattern before the fallback compiles it
    import re._parser as _sre_parser  # 3.11+
except ImportError:  # pragma: no cover - 3.10
    import sre_parse as _sre_parser  # type: ignore[no-redef]

from autoforge.errors import AutoforgeError

MAX_PATTERN_CHARS = 2_000  # longer "patterns" in docs are prose or attacks
# Positions a pattern for the backtracking fallback may expand to (``\d{999999999}`` would take
# gigabytes to compile there; RE2 refuses repeats over 1000 itself). The longest real pattern seen is 14.
MAX_EXPANDED = 20_000
RE2_MAX_REPEAT = 1000  # RE2's own bound on a counted repeat
_COUNT = re.compile(r"(?<!\\)\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
DEFAULT_TIMEOUT_S = 0.5  # for the backtracking fallback only; RE2 needs none

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is our fallback's business, not stderr's
_RE2_OPTIONS.max_mem = 8 << 20  # bytes of compiled program; bigger programs are refused


class PatternError(AutoforgeError):
    """A documented or generated regular expression cannot be used (syntax, size)."""


class PatternTimeout(PatternError):
    """Matching a pattern the linear-time engine cannot run took longer than its budget."""


class SafePattern:
    """One compiled pattern: :meth:`search` and :meth:`fullmatch` return a match object or None."""

    def __init__(self, pattern: str, engine: str, compiled: Any):
        self.pattern = pattern
        self.engine = engine  # "re2" (linear time) or "regex" (backtracking, with a timeout)
        self._rx = compiled

    def _run(self, how: str, text: str, timeout_s: float | None):
        if self.engine == "re2":
            return getattr(self._rx, how)(text)
        budget = DEFAULT_TIMEOUT_S if timeout_s is None else max(0.001, timeout_s)
        try:
            return getattr(self._rx, how)(text, timeout=budget)
        except TimeoutError as exc:
            raise PatternTimeout(
                f"matching pattern {_short(self.pattern)!r} took over {budget:.2g}s (it backtracks: "
                "lookarounds or back-references). Simplify the pattern in the tool's docs."
            ) from exc

    def search(self, text: str, *, timeout_s: float | None = None):
        return self._run("search", text, timeout_s)

    def fullmatch(self, text: str, *, timeout_s: float | None = None):
        return self._run("fullmatch", text, timeout_s)

    def __repr__(self) -> str:
        return f"SafePattern({self.pattern!r}, engine={self.engine!r})"


def _short(text: str, n: int = 60) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> SafePattern:
    """Compile ``pattern`` (JSON Schema / ECMA-262 dialect, as Python spells it) or raise PatternError."""
    if not isinstance(pattern, str):
        raise PatternError(f"a pattern must be a string, not {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"pattern is {len(pattern)} characters long (at most {MAX_PATTERN_CHARS})")
    if largest_count(pattern) <= RE2_MAX_REPEAT:  # RE2 refuses larger counts, and from 10**9 reads them as text
        try:
            return SafePattern(pattern, "re2", re2.compile(pattern, options=_RE2_OPTIONS))
        except Exception:  # noqa: BLE001 - re2 raises its own error type for anything it does not support
            pass
    if expanded_size(pattern) > MAX_EXPANDED:  # the backtracking engine compiles every repeat out
        raise PatternError(f"pattern {_short(pattern)!r} repeats out to over {MAX_EXPANDED:,} positions; "
                           "state long lengths with minLength/maxLength instead")
    try:
        return SafePattern(pattern, "regex", regex.compile(pattern, regex.V0))
    except (regex.error, re.error, OverflowError, RecursionError, ValueError, TypeError, MemoryError) as exc:
        raise PatternError(f"invalid pattern {_short(pattern)!r}: {exc}") from exc


def largest_count(pattern: str) -> int:
    """The largest number in a counted repeat (``{n}``, ``{n,}``, ``{n,m}``) of ``pattern``; 0 if none."""
    return max((int(n) for m in _COUNT.finditer(pattern) for n in m.groups() if n), default=0)


def expanded_size(pattern: str, limit: int = MAX_EXPANDED) -> int:
    """Positions the pattern has once bounded repeats are written out (``a{3}`` is 3; ``(ab){2,5}``
    is 10), at most ``limit + 1``. PatternError when Python's parser cannot read it."""
    try:
        with warnings.catch_warnings():  # "possible nested set" and the like: about Python's dialect, not ours
            warnings.simplefilter("ignore")
            tree = _sre_parser.parse(pattern)
    except (re.error, OverflowError, RecursionError, ValueError, TypeError) as exc:
        raise PatternError(f"invalid pattern {_short(pattern)!r}: {exc}") from exc
    return _size(tree, 0, limit)


def repeat_product(pattern: str, limit: int = MAX_EXPANDED) -> int:
    """The product of every counted repeat's largest number (at most ``limit + 1``): an
    over-estimate of :func:`expanded_size` for patterns Python's parser cannot read (``\\p{L}{5}``)."""
    total = 1
    for m in _COUNT.finditer(pattern):
        total *= max(1, *(int(n) for n in m.groups() if n))
        if total > limit:
            return limit + 1
    return total


def _size(items, depth: int, limit: int) -> int:
    if depth > 100:
        return limit + 1
    total = 0
    for op, av in items:
        name = str(op)
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            lo, hi, sub = av
            times = lo if hi == _sre_parser.MAXREPEAT else hi
            total += max(1, times) * _size(sub, depth + 1, limit)
        elif name == "BRANCH":
            total += sum(_size(b, depth + 1, limit) for b in av[1])
        elif name == "SUBPATTERN":
            total += _size(av[-1], depth + 1, limit)
        elif name in ("ASSERT", "ASSERT_NOT"):
            total += _size(av[1], depth + 1, limit)
        elif name == "ATOMIC_GROUP":
            total += _size(av, depth + 1, limit)
        elif name == "GROUPREF_EXISTS":
            total += sum(_size(b, depth + 1, limit) for b in av[1:] if b is not None)
        else:
            total += 1
        if total > limit:
            return limit + 1
    return total


def search(pattern: str, text: str, *, timeout_s: float | None = None):
    """``re.search`` for untrusted patterns (match object or None; PatternError if unusable)."""
    return compile_pattern(pattern).search(text, timeout_s=timeout_s)


@functools.lru_cache(maxsize=1 << 16)
def found(pattern: str, text: str) -> bool:
    """``search(pattern, text) is not None``, remembered: the world checks judge the same documented pattern against
    the same values over and over (a pooled world's records recur in many tasks), and a call into the RE2
    binding costs ~20 us. Raises as :func:`search` does (an error is not remembered)."""
    return search(pattern, text) is not None


def fullmatch(pattern: str, text: str, *, timeout_s: float | None = None):
    return compile_pattern(pattern).fullmatch(text, timeout_s=timeout_s)


def usable(pattern: Any) -> bool:
    """True when ``pattern`` compiles here (a cheap guard before using a documented pattern)."""
    try:
        compile_pattern(pattern)
    except PatternError:
        return False
    return True


def remaining(deadline: float | None) -> float | None:
    """Seconds left before a ``time.monotonic()`` deadline (None: no deadline)."""
    return None if deadline is None else deadline - time.monotonic()
