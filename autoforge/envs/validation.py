"""Argument validation: a call's arguments against the tool's JSON Schema, on the hot path.

Arguments are validated on every call, so this is on the hot path. ``jsonschema`` takes
~10 us for a small schema (as long as the whole sandbox round trip); most tool schemas use a
small subset of JSON Schema, which :func:`fast_validator` turns into a ~1 us predicate. It
only decides *valid*; any failure, and any schema using other keywords, goes to
``jsonschema`` (which also writes the message), so the verdict is always jsonschema's.

A schema's ``pattern`` is someone else's text (``^(a+)+$`` backtracks for minutes in ``re``):
both paths match patterns with :mod:`autoforge.patterns` (RE2, linear time; lookarounds on
``regex`` with a timeout), the jsonschema one through its pattern keywords replaced by
:func:`safe_validator_class` (which also checks ``uniqueItems`` by hashing, not by comparing
every pair). The time the check may take is the call's: ``_BUDGET.deadline``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError, best_match

from autoforge import patterns
from autoforge.errors import ConfigError
from autoforge.types import ToolCode, canonical_json

_BUDGET = threading.local()  # .deadline: time.monotonic() by which the current check must end


def _matches(rx: patterns.SafePattern, text: str) -> bool:
    """``rx.search(text)`` within the current budget (PatternTimeout past it)."""
    return rx.search(text, timeout_s=patterns.remaining(getattr(_BUDGET, "deadline", None))) is not None


def _short(text: str, n: int = 200) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _kw_pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _matches(patterns.compile_pattern(pattern), instance):
        yield ValidationError(f"{_short(repr(instance))} does not match {_short(repr(pattern))}")


def _kw_pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        rx = patterns.compile_pattern(pattern)
        for key, value in instance.items():
            if _matches(rx, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _kw_additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    rxs = [patterns.compile_pattern(p) for p in schema.get("patternProperties", {})]
    extras = sorted((k for k in instance if k not in known and not any(_matches(rx, k) for rx in rxs)), key=str)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
            yield ValidationError(f"{_short(', '.join(_short(repr(e), 60) for e in extras))} {verb} not match any of "
                                  f"the regexes: {_short(regexes)}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed "
                                  f"({_short(', '.join(_short(repr(e), 60) for e in extras))} {verb} unexpected)")


def _uniq_key(value: Any) -> Any:
    """A hashable form of a JSON value under jsonschema's equality (1 == 1.0, True != 1, key order free)."""
    if isinstance(value, bool) or value is None:
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, dict):
        return ("d", frozenset((k, _uniq_key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return ("l", tuple(_uniq_key(v) for v in value))
    return ("o", repr(value))


def _kw_unique_items(validator, unique, instance, schema):
    """jsonschema compares every pair of unsortable items (minutes for 10 000 objects); this hashes."""
    if unique and validator.is_type(instance, "array") and len({_uniq_key(v) for v in instance}) != len(instance):
        yield ValidationError(f"{_short(repr(instance))} has non-unique elements")


_SAFE_KEYWORDS = {"pattern": _kw_pattern, "patternProperties": _kw_pattern_properties,
                  "additionalProperties": _kw_additional_properties, "uniqueItems": _kw_unique_items}
_SAFE_CLASSES: dict[type, type] = {}


def safe_validator_class(schema: Any) -> type:
    """The jsonschema validator class for ``schema`` (by its ``$schema``), with ``pattern``,
    ``patternProperties`` and ``additionalProperties`` matching through :mod:`autoforge.patterns`,
    and ``uniqueItems`` in linear time."""
    cls = jsonschema.validators.validator_for(schema)
    safe = _SAFE_CLASSES.get(cls)
    if safe is None:
        keywords = {k: _timed(_SAFE_KEYWORDS.get(k, f)) for k, f in cls.VALIDATORS.items()}
        safe = _SAFE_CLASSES[cls] = jsonschema.validators.extend(cls, keywords)
    return safe


MAX_SCHEMA_NODES = 200_000  # a parameters schema written out (what ingestion allows after inlining $ref)


def _node_count(value: Any, limit: int) -> int:
    """Nodes of a JSON value as written out, counting a shared sub-object at every place it is
    used (iterative; stops past ``limit``)."""
    stack, n = [value], 0
    while stack and n <= limit:
        node = stack.pop()
        n += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return n


def _timed(keyword: Any) -> Any:
    """A jsonschema keyword that first checks the call's deadline (``_BUDGET``): a schema whose
    checking cost explodes (``anyOf`` over ``$ref`` chains, ``allOf`` x ``uniqueItems`` on a large
    array) stops at the call's time limit instead of running on."""
    def check(validator, value, instance, schema):
        deadline = getattr(_BUDGET, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise patterns.PatternTimeout("the JSON Schema check ran past the call's time limit")
        return keyword(validator, value, instance, schema)

    return check


def _schema_keys(schema: Any, limit: int = 100_000) -> set[str]:
    """Every key used anywhere in a JSON value (iterative; stops after ``limit`` nodes)."""
    keys: set[str] = set()
    stack, seen = [schema], 0
    while stack and seen < limit:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            keys.update(k for k in node if isinstance(k, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return keys


def schema_error(validator: Any, instance: Any, *, deadline: float | None = None) -> ValidationError | str | None:
    """jsonschema's best error for ``instance`` (None when it fits), or a text saying why the
    schema itself cannot be used (a dangling ``$ref``, a ``$ref`` loop, an unusable pattern):
    never an exception, except :class:`autoforge.patterns.PatternTimeout` past ``deadline``."""
    _BUDGET.deadline = deadline
    try:
        return best_match(validator.iter_errors(instance))
    except patterns.PatternTimeout:
        raise
    except patterns.PatternError as e:
        return f"schema has a pattern that cannot be used: {e}"
    except RecursionError:
        return "schema refers to itself without end (a $ref loop) or is nested too deeply"
    except Exception as e:  # noqa: BLE001 - referencing.exceptions.Unresolvable (a dangling $ref) and the like
        return f"schema cannot be used: {type(e).__name__}: {_short(str(e))}"
    finally:
        _BUDGET.deadline = None


_ANNOTATIONS = {"description", "title", "default", "examples", "example", "format", "$comment",
                "deprecated", "readOnly", "writeOnly"}  # jsonschema checks none of these by default
_FAST_KEYWORDS = {"type", "enum", "const", "properties", "required", "additionalProperties", "items",
                  "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
                  "minItems", "maxItems", "pattern", "anyOf", "oneOf"}
_SCALARS = (str, int, float, type(None))  # enum/const members the fast path compares (not bool)


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


_TYPES = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int or (type(v) is float and v.is_integer()),
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
}


def fast_validator(schema: Any):
    """A predicate equivalent to ``jsonschema`` (2020-12) for a common subset, or None."""
    if schema is True or schema == {}:
        return lambda v: True
    if not isinstance(schema, dict) or not set(schema) - _ANNOTATIONS <= _FAST_KEYWORDS:
        return None
    checks = []
    t = schema.get("type")
    if t is not None:
        names = [t] if isinstance(t, str) else t
        if not isinstance(names, list) or not all(n in _TYPES for n in names):
            return None
        preds = [_TYPES[n] for n in names]
        checks.append(preds[0] if len(preds) == 1 else (lambda v: any(p(v) for p in preds)))
    for key in ("enum", "const"):
        if key in schema:
            values = schema[key] if key == "enum" else [schema[key]]
            if not (isinstance(values, list) and values and all(type(x) in _SCALARS for x in values)):
                return None
            allowed = frozenset(values)
            checks.append(lambda v, allowed=allowed: type(v) in _SCALARS and v in allowed)
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            b = schema[key]
            if not _is_number(b):
                return None
            checks.append({"minimum": lambda v, b=b: not _is_number(v) or v >= b,
                           "maximum": lambda v, b=b: not _is_number(v) or v <= b,
                           "exclusiveMinimum": lambda v, b=b: not _is_number(v) or v > b,
                           "exclusiveMaximum": lambda v, b=b: not _is_number(v) or v < b}[key])
    if "pattern" in schema:  # search, as jsonschema does; on RE2 (see above)
        try:
            rx = patterns.compile_pattern(schema["pattern"])
        except patterns.PatternError:
            return None  # jsonschema's path says what is wrong with it
        checks.append(lambda v: type(v) is not str or _matches(rx, v))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            subs = schema[key]
            if not (isinstance(subs, list) and subs):
                return None
            preds = [fast_validator(x) for x in subs]
            if any(p is None for p in preds):
                return None
            if key == "anyOf":
                checks.append(lambda v, preds=preds: any(p(v) for p in preds))
            else:
                checks.append(lambda v, preds=preds: sum(1 for p in preds if p(v)) == 1)
    for key, kind in (("minLength", str), ("maxLength", str), ("minItems", list), ("maxItems", list)):
        if key in schema:
            n = schema[key]
            if type(n) is not int:
                return None
            if key.startswith("min"):
                checks.append(lambda v, n=n, k=kind: type(v) is not k or len(v) >= n)
            else:
                checks.append(lambda v, n=n, k=kind: type(v) is not k or len(v) <= n)
    if "items" in schema:
        item = fast_validator(schema["items"])
        if item is None:
            return None
        checks.append(lambda v: type(v) is not list or all(item(x) for x in v))
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not (isinstance(props, dict) and isinstance(required, list) and isinstance(extra, bool)):
        return None
    prop_checks = {}
    for name, sub in props.items():
        pred = fast_validator(sub)
        if pred is None:
            return None
        prop_checks[name] = pred
    if prop_checks or required or not extra:
        req, known = tuple(required), frozenset(props)

        def check_object(v: Any) -> bool:
            if type(v) is not dict:
                return True
            for r in req:
                if r not in v:
                    return False
            if not extra and not known.issuperset(v):
                return False
            for k, x in v.items():
                p = prop_checks.get(k)
                if p is not None and not p(x):
                    return False
            return True

        checks.append(check_object)
    if not checks:
        return lambda v: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)

    def check_all(v: Any) -> bool:
        for c in checks:
            if not c(v):
                return False
        return True

    return check_all


class ArgValidator:
    """Validates arguments against a tool's JSON Schema: a fast path, then ``jsonschema``."""

    __slots__ = ("fast", "full", "refused")

    def __init__(self, tool: ToolCode):
        schema = tool.parameters or {"type": "object"}
        try:
            cls = safe_validator_class(schema)
            cls.check_schema(schema)
            self.fast = fast_validator(schema) if "$schema" not in schema else None
        except jsonschema.SchemaError as e:
            raise ConfigError(f"tool {tool.name!r}: its parameters are not a valid JSON Schema: "
                              f"{e.message}") from None
        except RecursionError:
            raise ConfigError(f"tool {tool.name!r}: its parameters schema (or a pattern in it) is nested too "
                              "deeply to check; flatten it (use $defs for repeated parts)") from None
        self.full = cls(schema)
        self.refused = None
        keys = _schema_keys(schema)
        if "unevaluatedProperties" in keys and "patternProperties" in keys:  # jsonschema would use ``re`` there
            self.fast, self.refused = None, ("its parameter schema combines unevaluatedProperties with "
                                             "patternProperties, which cannot be checked in bounded time; "
                                             "fix the tool's parameters (use additionalProperties)")

    _cache: dict[str, "ArgValidator"] = {}

    @classmethod
    def for_tool(cls, tool: ToolCode) -> "ArgValidator":
        """Compiled once per distinct schema (opening an Environment per task stays cheap)."""
        if _node_count(tool.parameters, MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES:  # shared sub-objects count each time
            raise ConfigError(f"tool {tool.name!r}: its parameters schema has over {MAX_SCHEMA_NODES:,} nodes once "
                              "written out; simplify it (documents are bounded the same way at ingest)")
        try:
            key = canonical_json(tool.parameters)
        except (RecursionError, ValueError) as e:
            raise ConfigError(f"tool {tool.name!r}: its parameters schema cannot be read: {type(e).__name__}: "
                              f"{e}") from None
        found = cls._cache.get(key)
        if found is None:
            if len(cls._cache) >= 4096:
                cls._cache.clear()
            found = cls._cache[key] = cls(tool)
        return found

    def problem(self, arguments: dict, deadline: float | None = None) -> str | None:
        """None when valid, else jsonschema's best message with the path (or what is wrong with the
        schema). Patterns must finish by ``deadline`` (raises PatternTimeout)."""
        if self.fast is not None:
            _BUDGET.deadline = deadline
            try:
                if self.fast(arguments):
                    return None
            finally:
                _BUDGET.deadline = None
        if self.refused:
            return self.refused
        err = schema_error(self.full, arguments, deadline=deadline)
        if err is None:
            return None
        if isinstance(err, str):
            return f"its parameter {err}; fix the tool's parameters"
        where = "/".join(str(p) for p in err.absolute_path)
        return _short(err.message, 1000) + (f" (at '{_short(where)}')" if where else "")
