"""The environment runtime: reset to a state, call tools, hash the state (paper Sec. 3.1, E = (S, F)).

An :class:`Environment` runs an environment's accepted tool code in a sandbox worker process
(:mod:`autoforge.envs._worker`) that holds the compiled tools *and* the state, so a call moves
only its name and arguments one way and its observation the other. Layers of containment:

1. :func:`autoforge.envs.sandbox.check_source` on every tool before it is loaded (again,
   even for stored "accepted" code);
2. a restricted namespace (safe builtins, proxies of a few modules);
3. the worker process: address-space and CPU rlimits, no new files/sockets/processes, no
   environment variables, dropped root; the parent kills it on the wall-clock timeout.

Every failure is an :class:`Observation`, never an exception out of :meth:`Environment.call`:
unknown tool, arguments that are not JSON or fail the tool's JSON Schema (checked here, before
any code runs; schema patterns on RE2 via :mod:`autoforge.patterns`, and the check counts
against the call's time limit), a returned ``{"error": ...}``, an exception in the tool, a
non-JSON output or state, a timeout, the memory limit.

A call is all or nothing: every failure leaves the state exactly as it was. The worker undoes
a returned error, an exception or a non-JSON value itself (it keeps the committed state as
JSON bytes per record); after a worker is killed a fresh one is started and the state is rebuilt by
replaying the successful calls since the last reset (tools are deterministic, and each call
runs in fresh module globals), so the episode can go on.

Not thread-safe: one Environment per rollout thread (each has its own worker). Workers are
pooled: :meth:`Environment.close` hands its worker back and the next Environment with the same
limits loads its own tools into it (the state is replaced on every load and reset, module
globals on every call), so opening an Environment per task costs about a millisecond, not a
process start. The worker keeps the initial states it was sent (:meth:`Environment.reset`), so
an episode's reset, calls and hash cost what the episode changes, not the size of the state
(``benchmarks/episode_overhead.py``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any, Literal

import jsonschema
from jsonschema.exceptions import ValidationError, best_match
from pydantic import BaseModel, ConfigDict

from autoforge import patterns
from autoforge.envs import sandbox
from autoforge.envs.wire import NotJSON, dumps, encode, loads, state_bytes
from autoforge.envs._worker_client import WorkerDied, WorkerProcess, check_worker, give_worker, take_worker
from autoforge.errors import ConfigError, SandboxError
from autoforge.settings import get_settings
from autoforge.types import EnvironmentRecord, ToolCode, canonical_json

ObservationKind = Literal["ok", "tool_error", "invalid_arguments", "unknown_tool", "timeout",
                          "memory_limit", "crashed"]

MAX_ARGUMENT_BYTES = 8 * 1024 * 1024  # one call's arguments as JSON: more is no tool call, and the worker must decode it
MAX_REPLAY_LOG = 10_000  # calls replayed to rebuild the state after a kill; then the state is checkpointed


class Observation(BaseModel):
    """What a tool call gives back. ``kind`` says which way it went:

    ok · tool_error (the tool returned ``{"error": ...}``) · invalid_arguments (schema or
    signature) · unknown_tool · timeout · memory_limit · crashed (the tool raised, returned or
    stored a non-JSON value, or its worker died). A failed call never changes the state;
    ``rolled_back`` says the tool had written before it failed (the runtime undid it).
    """

    model_config = ConfigDict(extra="forbid")

    ok: bool
    output: Any = None
    error: str | None = None
    kind: ObservationKind = "ok"
    state_hash: str | None = None  # filled by smoke_check only (hash of the state after the call)
    rolled_back: bool = False

    def to_text(self) -> str:
        """The observation as the agent sees it: JSON of the output, or ``{"error": ...}``."""
        if self.ok or (self.kind == "tool_error" and isinstance(self.output, dict)):
            return canonical_json(self.output) if not isinstance(self.output, str) else self.output
        return canonical_json({"error": self.error})


def _fail(kind: str, error: str) -> Observation:
    return Observation(ok=False, kind=kind, error=error)


def tool_function(tool: ToolCode) -> str:
    """The Python function that implements ``tool``: ``function_name``, or the public name (older rows)."""
    return tool.function_name or tool.name


def _load_entry(tool: ToolCode) -> str | list:
    """What the worker's "load" request carries for one tool (public name -> this)."""
    fname = tool_function(tool)
    if fname == tool.name and not tool.arg_map:
        return tool.source
    return [tool.source, fname, dict(tool.arg_map)]


# --------------------------------------------------------------------------- argument validation
#
# Arguments are validated on every call, so this is on the hot path. ``jsonschema`` takes
# ~10 us for a small schema (as long as the whole sandbox round trip); most tool schemas use a
# small subset of JSON Schema, which :func:`_fast_validator` turns into a ~1 us predicate. It
# only decides *valid*; any failure, and any schema using other keywords, goes to
# ``jsonschema`` (which also writes the message), so the verdict is always jsonschema's.
#
# A schema's ``pattern`` is someone else's text (``^(a+)+$`` backtracks for minutes in ``re``):
# both paths match patterns with :mod:`autoforge.patterns` (RE2, linear time; lookarounds on
# ``regex`` with a timeout), the jsonschema one through its pattern keywords replaced by
# :func:`safe_validator_class` (which also checks ``uniqueItems`` by hashing, not by comparing
# every pair). The time the check may take is the call's: ``_BUDGET.deadline``.

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


def _fast_validator(schema: Any):
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
            preds = [_fast_validator(x) for x in subs]
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
        item = _fast_validator(schema["items"])
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
        pred = _fast_validator(sub)
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


class _ArgValidator:
    """Validates arguments against a tool's JSON Schema: a fast path, then ``jsonschema``."""

    __slots__ = ("fast", "full", "refused")

    def __init__(self, tool: ToolCode):
        schema = tool.parameters or {"type": "object"}
        try:
            cls = safe_validator_class(schema)
            cls.check_schema(schema)
            self.fast = _fast_validator(schema) if "$schema" not in schema else None
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

    _cache: dict[str, "_ArgValidator"] = {}

    @classmethod
    def for_tool(cls, tool: ToolCode) -> "_ArgValidator":
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


class ResidentState:
    """A state encoded once, to reset to it many times: ``env.reset(ResidentState(state))`` costs
    the same at 100 records as at 10,000 (a dict is encoded again on every reset, ~0.1 ms per
    1,000 records, to recognise it). It keeps the state's JSON, not the dict: changing the dict
    afterwards does not change it. ``key``: sha256 of the JSON, the name the worker keeps it by."""

    __slots__ = ("key", "data")

    def __init__(self, state: dict):
        if not isinstance(state, dict):
            raise ConfigError(f"state must be a dict of collections, got {type(state).__name__}")
        try:
            self.data = encode(state, "state")
        except NotJSON as e:
            raise ConfigError(f"state is not JSON-serialisable: {e}") from None
        self.key = hashlib.sha256(self.data).hexdigest()

    def state(self) -> dict:
        """A fresh copy of the state."""
        return loads(self.data)

    def __repr__(self) -> str:
        return f"ResidentState({self.key[:12]}, {len(self.data):,} bytes)"


class Environment:
    """One executable environment: accepted tool code + a sandboxed state.

    ``Environment(tools, timeout_s=2.0, memory_mb=512)`` (defaults from settings:
    ``AUTOFORGE_TOOL_TIMEOUT``, ``AUTOFORGE_TOOL_MEMORY_MB``). Only tools with status
    "accepted" are callable. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, tools: list[ToolCode], *, timeout_s: float | None = None,
                 memory_mb: int | None = None, env_id: str | None = None, _any_status: bool = False,
                 _fresh_seed: int | None = None):
        settings = get_settings()
        self.timeout_s = float(settings.tool_timeout_s if timeout_s is None else timeout_s)
        self.memory_mb = int(settings.tool_memory_mb if memory_mb is None else memory_mb)
        if self.timeout_s <= 0 or self.memory_mb <= 0:
            raise ConfigError(f"timeout_s and memory_mb must be positive (got {self.timeout_s}, {self.memory_mb})")
        self.env_id = env_id
        self.sample_state: dict = {}
        self.rejected: dict[str, str | None] = {}
        self._tools: dict[str, ToolCode] = {}
        for tool in tools:
            if tool.status != "accepted" and not _any_status:
                self.rejected[tool.name] = tool.reason
                continue
            if tool.name in self._tools:
                raise ConfigError(f"environment {env_id or ''}: two accepted tools are named {tool.name!r}")
            sandbox.check_source(tool.source, tool_function(tool))  # stored code is checked again before it runs
            self._tools[tool.name] = tool
        for name in self._tools:  # an earlier, rejected attempt at an accepted tool
            self.rejected.pop(name, None)
        self._validators = {name: _ArgValidator.for_tool(t) for name, t in self._tools.items()}
        self._call_heads = {name: b'["call",' + dumps(name) + b"," for name in self._tools}
        self._worker: WorkerProcess | None = None
        self._load_frame = dumps(["load", {n: _load_entry(t) for n, t in self._tools.items()}])
        self._reset_frame: tuple[str, bytes] | None = None  # (key, JSON) of the state of the last reset
        self._known: list[tuple[bytes, str]] = []  # recent states' JSON and key (a repeated reset hashes nothing)
        self._log: list[bytes] | None = None  # successful calls since reset; None: too many to replay
        self._lost = False  # the state could not be rebuilt after a kill: reset() needed
        self._fresh_seed = _fresh_seed  # smoke_check: the first worker is a check worker with this hash seed

    @classmethod
    def from_records(cls, env: EnvironmentRecord, tools: list[ToolCode], **kw) -> "Environment":
        """An environment from its warehouse rows; tools of other environments are ignored."""
        mine = [t for t in tools if t.env_id == env.env_id]
        if tools and not mine:
            raise ConfigError(f"none of the {len(tools)} tools given belong to environment {env.env_id} "
                              f"({env.name}); pass the tool_code rows with env_id={env.env_id}")
        out = cls(mine, env_id=env.env_id, **kw)
        out.sample_state = env.sample_state
        return out

    # ------------------------------------------------------------------ accessors
    @property
    def tool_names(self) -> list[str]:
        return list(self._tools)

    @property
    def tool_effects(self) -> dict[str, str]:
        return {name: t.effect for name, t in self._tools.items()}

    @property
    def tools(self) -> dict[str, ToolCode]:
        return dict(self._tools)

    # ------------------------------------------------------------------ worker management
    def _live_worker(self) -> WorkerProcess:
        """The worker, started (and its state rebuilt) if the last one was stopped."""
        w = self._worker
        if w is not None and not w.dead:
            return w
        if self._reset_frame is not None and self._log is None:
            self._lost = True  # too many calls since reset to replay
            raise SandboxError(f"environment {self.env_id or ''}: the state was lost when a call hit a "
                               f"limit (more than {MAX_REPLAY_LOG} calls since reset to replay); call reset() first")
        if self._fresh_seed is not None:
            w = check_worker(memory_mb=self.memory_mb, timeout_s=self.timeout_s, hash_seed=self._fresh_seed)
            self._fresh_seed = None  # a replacement after a kill comes from the pool
        else:
            w = take_worker(memory_mb=self.memory_mb, timeout_s=self.timeout_s)
        self._worker = w
        try:
            self._admin(w, self._load_frame)
            if self._reset_frame is not None:
                self._send_reset(w)
                for frame in self._log or ():
                    w.request(frame)
                if w.dead:  # a replayed call hit the memory limit this time
                    raise WorkerDied("memory_limit", "a replayed call hit the memory limit")
        except WorkerDied as e:
            self._lost = True
            raise WorkerDied(e.kind, f"environment {self.env_id or ''}: could not load the tools or rebuild "
                                     f"the state in a new sandbox worker ({e}); call reset() first") from None
        return w

    def _admin(self, w: WorkerProcess, frame: bytes) -> list:
        reply = w.request(frame, w.timeout_s + 30.0)
        if reply[0] == "error":
            raise SandboxError(f"environment {self.env_id or ''}: sandbox worker: {reply[1]}")
        if reply[0] == "memory_limit":
            raise WorkerDied("memory_limit", reply[2])
        return reply

    def _ask(self, obj: list) -> Any:
        if self._reset_frame is None:
            raise SandboxError("call reset(state) before using the environment")
        if self._lost:
            raise SandboxError("the state was lost when a call hit a limit; call reset() first")
        try:
            return self._admin(self._live_worker(), dumps(obj))[1]
        except WorkerDied as e:
            raise SandboxError(f"environment {self.env_id or ''}: {e}") from None

    # ------------------------------------------------------------------ the API
    def reset(self, state: "dict | ResidentState") -> None:
        """Start an episode from a copy of ``state`` (the caller's dict is never touched).

        The worker keeps the states it was sent (a few, :data:`~autoforge.envs.worker_state.RESIDENT_STATES`),
        keyed by the sha256 of their JSON: a state it holds is not sent again, and the reset puts
        back only what the last episode changed. A dict is encoded on every reset (a C call,
        ~0.1 ms per 1,000 records) to recognise it, and hashed only when new; a
        :class:`ResidentState` is neither."""
        if isinstance(state, ResidentState):
            frame = (state.key, state.data)
        elif isinstance(state, dict):
            frame = self._state_key(state)
        else:
            raise ConfigError(f"state must be a dict of collections, got {type(state).__name__}")
        self._reset_frame, self._log, self._lost = frame, [], False
        w = self._worker
        if w is None or w.dead:
            self._live_worker()  # loads the tools and applies the reset
            return
        try:
            self._send_reset(w)
        except WorkerDied:
            self._live_worker()

    def _state_key(self, state: dict) -> tuple[str, bytes]:
        """(key, JSON) of ``state``; a ConfigError when it is not JSON."""
        data = state_bytes(state)
        if data is not None:
            for known, key in self._known:
                if known == data:
                    return key, known
        try:
            data = encode(state, "state")
        except NotJSON as e:
            raise ConfigError(f"state is not JSON-serialisable: {e}") from None
        key = hashlib.sha256(data).hexdigest()
        self._known = [(data, key), *self._known[:3]]
        return key, data

    def _send_reset(self, w: WorkerProcess) -> None:
        """Reset the worker to ``_reset_frame``: by key when it holds that state, else with its JSON."""
        key, data = self._reset_frame
        head = b'["reset",' + dumps(key)
        if key in w.resident:
            reply = self._admin(w, head + b"]")
            if reply[0] != "missing":
                return
        w.resident.discard(key)
        self._admin(w, head + b"," + data + b"]")
        if len(w.resident) >= 64:
            w.resident.clear()
        w.resident.add(key)

    def call(self, name: str, arguments: dict | None = None) -> Observation:
        """Run one tool call and return its observation (never raises for a bad call).

        The call's time limit (``timeout_s``) covers checking its arguments and running it."""
        if self._reset_frame is None:
            raise SandboxError("call reset(state) before calling tools")
        deadline = time.monotonic() + self.timeout_s
        validator = self._validators.get(name) if isinstance(name, str) else None
        if validator is None:
            known = ", ".join(self._tools) or "none"
            rejected = isinstance(name, str) and name in self.rejected
            extra = f" (it was rejected at synthesis: {self.rejected[name]})" if rejected else ""
            return _fail("unknown_tool", f"unknown tool {name!r}{extra}; available tools: {known}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _fail("invalid_arguments", f"arguments of {name} must be a JSON object, "
                                              f"got {type(arguments).__name__}")
        try:
            frame = self._call_heads[name] + encode(arguments, "arguments") + b"]"
        except NotJSON as e:
            return _fail("invalid_arguments", f"arguments of {name} are not JSON: {e}")
        if len(frame) > MAX_ARGUMENT_BYTES:
            return _fail("invalid_arguments", f"arguments of {name} are {len(frame):,} bytes of JSON; at most "
                                              f"{MAX_ARGUMENT_BYTES:,}: pass an id or a smaller value")
        try:
            problem = validator.problem(arguments, deadline)
        except patterns.PatternTimeout as e:
            return _fail("timeout", f"{name}: checking the arguments against the tool's JSON Schema did not "
                                    f"finish within the call's {self.timeout_s:g} s limit: {e}")
        if problem is not None:
            return _fail("invalid_arguments", f"invalid arguments for {name}: {problem}")
        if self._lost:
            return _fail("crashed", "the environment state was lost after a limit breach; call reset() first")
        left = deadline - time.monotonic()  # what the argument check left of the call's time
        if left <= 0:
            return _fail("timeout", f"{name}: checking the arguments used up the call's {self.timeout_s:g} s "
                                    "limit; the tool did not run")
        try:
            w = self._live_worker()  # (restarting a stopped worker does not count against the call)
            reply = w.request(frame, left)
        except WorkerDied as e:  # timeout or a dead worker: the next call gets a fresh one
            return _fail(e.kind, f"{name}: {e}")
        except SandboxError as e:  # the state could not be rebuilt
            return _fail("crashed", f"{e}")
        kind = reply[0]
        output, error, rolled_back = (reply[1], reply[2], reply[3]) if len(reply) >= 4 else (None, reply[-1], False)
        if kind == "memory_limit":
            return _fail("memory_limit", f"{name}: {error} ({self.memory_mb} MB)")
        if kind == "ok":
            if self._log is not None:  # only successful calls change the state: replay them after a kill
                self._log.append(frame)
                if len(self._log) >= MAX_REPLAY_LOG:
                    self._checkpoint()
            return Observation(ok=True, output=output)
        if kind not in ("tool_error", "invalid_arguments", "crashed"):
            return _fail("crashed", f"{name}: the sandbox worker answered {str(reply)[:300]}")
        error = str(error)
        if kind == "crashed" and not error.startswith("tool "):  # "tool 'x' failed to load: ..." says it all
            error = f"{name}: {error}" if error.startswith(("output ", "the ")) else f"{name} raised {error}"
        return Observation(ok=False, kind=kind, output=output, error=error, rolled_back=bool(rolled_back))

    def _checkpoint(self) -> None:
        """The current state becomes the point a killed worker is rebuilt from, and the replay log
        starts again: a call that hits a limit after any number of calls still changes nothing."""
        try:
            data = encode(self.get_state(), "state")
            self._reset_frame = (hashlib.sha256(data).hexdigest(), data)
            self._log = []
        except (SandboxError, NotJSON):  # the worker died while asked: keep replaying what we have
            self._log = None

    def get_state(self) -> dict:
        """A copy of the current state."""
        return self._ask(["state"])

    def state_hash(self) -> str:
        """``autoforge.types.state_hash`` of the current state: kept up to date in the worker as
        calls change records (no encoding, whatever the size of the state)."""
        return self._ask(["hash"])

    def close(self) -> None:
        """Hand the worker back to the pool (a later Environment reuses it: no process start)."""
        if self._worker is not None:
            give_worker(self._worker)
            self._worker = None

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Environment({self.env_id or '-'}, tools={self.tool_names})"


# --------------------------------------------------------------------------- synthesis helpers


DETERMINISM_SEEDS = (0, 1)  # string-hash seeds of smoke_check's two workers (episodes run with 0)


def smoke_check(tool: ToolCode, state: dict, arguments: dict, *, timeout_s: float | None = None,
                memory_mb: int | None = None) -> tuple[Observation, Observation]:
    """Run ``tool`` twice, each time on a fresh copy of ``state`` with the same arguments, in two
    separate worker processes with different string hash seeds (:data:`DETERMINISM_SEEDS`).
    Both are check workers (:func:`~autoforge.envs._worker_client.check_worker`): they never run
    episodes, load the tool afresh and call it in a fresh namespace.

    Returns both observations with ``state_hash`` set (the state after the call). The tool
    passes when neither is ``crashed``/``timeout``/``memory_limit`` and the two agree on
    ``output`` and ``state_hash``: output that depends on memory addresses (``repr`` of an
    object) or on the iteration order of a set of strings differs between the two processes.
    Runs whatever the tool's status (this is how code gets accepted), but only after
    :func:`~autoforge.envs.sandbox.check_source` (raises
    :class:`~autoforge.errors.UnsafeCodeError`). A call that returns or leaves a non-JSON value
    is ``crashed``. Check workers are reused for up to ``CHECKS_PER_WORKER`` checks, then
    replaced by never-used ones, so most checks start no process.
    """
    settings = get_settings()
    t = float(settings.tool_timeout_s if timeout_s is None else timeout_s)
    m = int(settings.tool_memory_mb if memory_mb is None else memory_mb)
    results: list[Observation] = []
    for seed in DETERMINISM_SEEDS:
        with Environment([tool], timeout_s=t, memory_mb=m, env_id=tool.env_id, _any_status=True,
                         _fresh_seed=seed) as env:
            try:
                env.reset(state)
            except WorkerDied as e:  # the module code itself hit a limit while loading
                failed = _fail(e.kind, str(e))
                return failed, failed
            obs = env.call(tool.name, arguments)
            try:
                obs.state_hash = env.state_hash()
            except SandboxError as e:
                obs = _fail("crashed", f"after the call: {e}")
            results.append(obs)
    return results[0], results[1]


def run_direct(source: str, name: str, state: dict, arguments: dict, *, arg_map: dict[str, str] | None = None) -> Any:
    """In-process execution WITHOUT the sandbox (benchmark baseline, tests). See sandbox.run_direct."""
    return sandbox.run_direct(source, name, state, arguments, arg_map=arg_map)


def run_tool_direct(tool: ToolCode, state: dict, arguments: dict) -> Any:
    """:func:`run_direct` for a ToolCode: its Python function, arguments renamed by its ``arg_map``."""
    return sandbox.run_direct(tool.source, tool_function(tool), state, arguments, arg_map=tool.arg_map)

