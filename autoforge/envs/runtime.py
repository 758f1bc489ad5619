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
unknown tool, arguments that fail the tool's JSON Schema (checked here, before any code runs),
a returned ``{"error": ...}``, an exception in the tool, a timeout, the memory limit. After
a worker is killed a fresh one is started and the state *before* the failed call is rebuilt
by replaying the calls since the last reset (tools are deterministic), so a call that hits a
limit has no effect and the episode can go on.

Not thread-safe: one Environment per rollout thread (each has its own worker). Workers are
pooled: :meth:`Environment.close` hands its worker back and the next Environment with the same
limits loads its own tools into it (module globals and state are rebuilt on every load and
reset), so opening an Environment per task costs about a millisecond, not a process start.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import jsonschema
from jsonschema.exceptions import best_match
from pydantic import BaseModel, ConfigDict

from autoforge.envs import sandbox
from autoforge.envs._worker import dumps
from autoforge.envs._worker_client import WorkerDied, WorkerProcess, give_worker, take_worker
from autoforge.errors import ConfigError, SandboxError
from autoforge.settings import get_settings
from autoforge.types import EnvironmentRecord, ToolCode, canonical_json

ObservationKind = Literal["ok", "tool_error", "invalid_arguments", "unknown_tool", "timeout",
                          "memory_limit", "crashed"]

MAX_REPLAY_LOG = 10_000  # calls remembered since the last reset, to rebuild state after a kill


class Observation(BaseModel):
    """What a tool call gives back. ``kind`` says which way it went:

    ok · tool_error (the tool returned ``{"error": ...}``) · invalid_arguments (schema or
    signature) · unknown_tool · timeout · memory_limit · crashed (the tool raised, returned a
    non-JSON value, or its worker died).
    """

    model_config = ConfigDict(extra="forbid")

    ok: bool
    output: Any = None
    error: str | None = None
    kind: ObservationKind = "ok"
    state_hash: str | None = None  # filled by smoke_check only (hash of the state after the call)

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
    if "pattern" in schema:  # jsonschema uses re.search too
        try:
            rx = re.compile(schema["pattern"])
        except (re.error, TypeError):
            return None
        checks.append(lambda v: type(v) is not str or rx.search(v) is not None)
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

    __slots__ = ("fast", "full")

    def __init__(self, tool: ToolCode):
        schema = tool.parameters or {"type": "object"}
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            raise ConfigError(f"tool {tool.name!r}: its parameters are not a valid JSON Schema: "
                              f"{e.message}") from None
        self.full = cls(schema)
        self.fast = _fast_validator(schema) if "$schema" not in schema else None

    _cache: dict[str, "_ArgValidator"] = {}

    @classmethod
    def for_tool(cls, tool: ToolCode) -> "_ArgValidator":
        """Compiled once per distinct schema (opening an Environment per task stays cheap)."""
        key = canonical_json(tool.parameters)
        found = cls._cache.get(key)
        if found is None:
            if len(cls._cache) >= 4096:
                cls._cache.clear()
            found = cls._cache[key] = cls(tool)
        return found

    def problem(self, arguments: dict) -> str | None:
        """None when valid, else jsonschema's best message with the path."""
        if self.fast is not None and self.fast(arguments):
            return None
        err = best_match(self.full.iter_errors(arguments))
        if err is None:
            return None
        where = "/".join(str(p) for p in err.absolute_path)
        return err.message + (f" (at '{where}')" if where else "")


class Environment:
    """One executable environment: accepted tool code + a sandboxed state.

    ``Environment(tools, timeout_s=2.0, memory_mb=512)`` (defaults from settings:
    ``AUTOFORGE_TOOL_TIMEOUT``, ``AUTOFORGE_TOOL_MEMORY_MB``). Only tools with status
    "accepted" are callable. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, tools: list[ToolCode], *, timeout_s: float | None = None,
                 memory_mb: int | None = None, env_id: str | None = None, _any_status: bool = False):
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
        self._worker: WorkerProcess | None = None
        self._load_frame = dumps(["load", {n: _load_entry(t) for n, t in self._tools.items()}])
        self._reset_frame: bytes | None = None
        self._log: list[bytes] | None = None  # calls since reset; None: too many to replay
        self._lost = False  # the state could not be rebuilt after a kill: reset() needed

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
        w = self._worker = take_worker(memory_mb=self.memory_mb, timeout_s=self.timeout_s)
        try:
            self._admin(w, self._load_frame)
            if self._reset_frame is not None:
                self._admin(w, self._reset_frame)
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
    def reset(self, state: dict) -> None:
        """Start an episode from a copy of ``state`` (the caller's dict is never touched)."""
        if not isinstance(state, dict):
            raise ConfigError(f"state must be a dict of collections, got {type(state).__name__}")
        try:
            frame = dumps(["reset", state])
        except (TypeError, ValueError) as e:
            raise ConfigError(f"state is not JSON-serialisable: {e}") from None
        self._reset_frame, self._log, self._lost = frame, [], False
        w = self._worker
        if w is None or w.dead:
            self._live_worker()  # loads the tools and applies the reset frame
            return
        try:
            self._admin(w, frame)
        except WorkerDied:
            self._live_worker()

    def call(self, name: str, arguments: dict | None = None) -> Observation:
        """Run one tool call and return its observation (never raises for a bad call)."""
        if self._reset_frame is None:
            raise SandboxError("call reset(state) before calling tools")
        validator = self._validators.get(name)
        if validator is None:
            known = ", ".join(self._tools) or "none"
            extra = f" (it was rejected at synthesis: {self.rejected[name]})" if name in self.rejected else ""
            return _fail("unknown_tool", f"unknown tool {name!r}{extra}; available tools: {known}")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _fail("invalid_arguments", f"arguments of {name} must be a JSON object, "
                                              f"got {type(arguments).__name__}")
        problem = validator.problem(arguments)
        if problem is not None:
            return _fail("invalid_arguments", f"invalid arguments for {name}: {problem}")
        if self._lost:
            return _fail("crashed", "the environment state was lost after a limit breach; call reset() first")
        try:
            frame = dumps(["call", name, arguments])
        except (TypeError, ValueError) as e:
            return _fail("invalid_arguments", f"arguments of {name} are not JSON: {e}")
        try:
            w = self._live_worker()
            kind, output, error = w.request(frame)
        except WorkerDied as e:  # timeout or a dead worker: the next call gets a fresh one
            return _fail(e.kind, f"{name}: {e}")
        except SandboxError as e:  # the state could not be rebuilt
            return _fail("crashed", f"{e}")
        if kind == "memory_limit":
            return _fail("memory_limit", f"{name}: {error} ({self.memory_mb} MB)")
        if kind != "invalid_arguments" and self._log is not None:  # it ran: replay it after a kill
            self._log.append(frame)
            if len(self._log) > MAX_REPLAY_LOG:
                self._log = None
        if kind == "ok":
            return Observation(ok=True, output=output)
        if kind == "crashed":
            error = f"{name} raised {error}" if not error.startswith("tool ") else error
        return Observation(ok=False, kind=kind, output=output, error=error)

    def get_state(self) -> dict:
        """A copy of the current state."""
        return self._ask(["state"])

    def state_hash(self) -> str:
        """``autoforge.types.state_hash`` of the current state (computed in the worker)."""
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


def smoke_check(tool: ToolCode, state: dict, arguments: dict, *, timeout_s: float | None = None,
                memory_mb: int | None = None) -> tuple[Observation, Observation]:
    """Run ``tool`` twice, each time on a fresh copy of ``state`` with the same arguments.

    Returns both observations with ``state_hash`` set (the state after the call). The tool
    passes when neither is ``crashed``/``timeout``/``memory_limit`` and the two agree on
    ``output`` and ``state_hash``. Runs whatever the tool's status (this is how code gets
    accepted), but only after :func:`~autoforge.envs.sandbox.check_source` (raises
    :class:`~autoforge.errors.UnsafeCodeError`). A state left holding a non-JSON value makes
    the observation ``crashed``. Workers come from a small pool, so a check costs ~1 ms.
    """
    settings = get_settings()
    t = float(settings.tool_timeout_s if timeout_s is None else timeout_s)
    m = int(settings.tool_memory_mb if memory_mb is None else memory_mb)
    results: list[Observation] = []
    with Environment([tool], timeout_s=t, memory_mb=m, env_id=tool.env_id, _any_status=True) as env:
        for _ in range(2):
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

