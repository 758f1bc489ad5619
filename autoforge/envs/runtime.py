"""The environment runtime: reset to a state, call tools, hash the state (paper Sec. 3.1, E = (S, F)).

An :class:`Environment` runs an environment's accepted tool code in a sandbox worker process
(:mod:`autoforge.envs._worker`) that holds the compiled tools *and* the state, so a call moves
only its name and arguments one way and its observation the other. Layers of containment:

1. :func:`autoforge.envs.static_checks.check_source` on every tool before it is loaded (again,
   even for stored "accepted" code);
2. a restricted namespace (safe builtins, proxies of a few modules);
3. the worker process: address-space and CPU rlimits, no new files/sockets/processes, no
   environment variables, dropped root; the parent kills it on the wall-clock timeout.

Every failure is an :class:`Observation`, never an exception out of :meth:`Environment.call`:
unknown tool, arguments that are not JSON or fail the tool's JSON Schema (checked here, before
any code runs by :mod:`autoforge.envs.validation`; schema patterns on RE2 via
:mod:`autoforge.patterns`, and the check counts against the call's time limit), a returned ``{"error": ...}``, an exception in the tool, a
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
import time
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from autoforge import patterns
from autoforge.envs import sandbox
from autoforge.envs._worker_client import WorkerDied, WorkerProcess, check_worker, give_worker, take_worker
from autoforge.envs.static_checks import check_source, compile_tool
from autoforge.envs.validation import ArgValidator
from autoforge.envs.wire import NotJSON, dumps, encode, loads, state_bytes
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
    ``rolled_back`` says the tool had written before it failed (the runtime undid it); ``rule_id``
    names the rule a refused call broke (the rule engine, :mod:`autoforge.envs.guards`, refused it
    before the tool's code ran).
    """

    model_config = ConfigDict(extra="forbid")

    ok: bool
    output: Any = None
    error: str | None = None
    kind: ObservationKind = "ok"
    state_hash: str | None = None  # filled by smoke_check only (hash of the state after the call)
    rolled_back: bool = False
    rule_id: str | None = None

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
    if fname == tool.name and not tool.arg_map and not tool.guards:
        return tool.source
    return [tool.source, fname, dict(tool.arg_map), list(tool.guards)] if tool.guards else [tool.source, fname, dict(tool.arg_map)]


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
            check_source(tool.source, tool_function(tool))  # stored code is checked again before it runs
            self._tools[tool.name] = tool
        for name in self._tools:  # an earlier, rejected attempt at an accepted tool
            self.rejected.pop(name, None)
        self._validators = {name: ArgValidator.for_tool(t) for name, t in self._tools.items()}
        self._call_heads = {name: b'["call",' + dumps(name) + b"," for name in self._tools}
        self._worker: WorkerProcess | None = None
        self._load_frame = dumps(["load", {n: _load_entry(t) for n, t in self._tools.items()}])
        self._reset_frame: tuple[str, bytes] | None = None  # (key, JSON) of the state of the last reset
        self._known: list[tuple[bytes, str]] = []  # recent states' JSON and key (a repeated reset hashes nothing)
        self._log: list[bytes] | None = None  # successful calls since reset; None: too many to replay
        self._lost = False  # the state could not be rebuilt after a kill: reset() needed
        self._seen: dict[str, bytes] = {}  # "state" / "hash" -> the worker's reply since the last call or reset
        # A caller that reads the state after each call (a gold run, a replay) gets it with the call's reply:
        # set when get_state follows a call, cleared when a state sent that way went unread.
        self._state_with_calls = False
        self._after_call = False  # a call ran since the last reset or get_state
        self._unread = False  # the state that came with the last call has not been read
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
        self._seen.clear()
        self._after_call = self._unread = False
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
        deadline = time.monotonic() + self.timeout_s  # for patterns (the regex engine's timeout is wall-clock)
        cpu0 = time.thread_time()
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
        self._seen.clear()  # the call may change the state
        if self._unread:  # the state sent with the last call went unread: stop asking for it
            self._state_with_calls = self._unread = False
        self._after_call = True
        then_state = self._state_with_calls
        # What the argument check left of the call's time, in this thread's CPU seconds: on a busy
        # machine (or beside other episode threads) the wall clock runs on while the check waits
        # for a core, and that wait must not shorten the tool's budget (rewards would depend on load).
        left = self.timeout_s - (time.thread_time() - cpu0)
        if left <= 0:
            return _fail("timeout", f"{name}: checking the arguments used up the call's {self.timeout_s:g} s "
                                    "limit; the tool did not run")
        try:
            w = self._live_worker()  # (restarting a stopped worker does not count against the call)
            reply = w.request(frame[:-1] + b",true]" if then_state else frame, left, then_state=then_state)
            if then_state and w.state_frame is not None and w.state_frame.startswith(b'["ok",'):
                self._seen["state"], self._unread = w.state_frame, True
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
        rule_id = reply[4] if len(reply) >= 5 and isinstance(reply[4], str) else None
        return Observation(ok=False, kind=kind, output=output, error=error, rolled_back=bool(rolled_back), rule_id=rule_id)

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
        """A copy of the current state (asked again of the worker only after a call or reset: a gold
        run asks for it before each of its choices, ~10 times per call)."""
        return self._seen_or_ask("state")

    def state_hash(self) -> str:
        """``autoforge.types.state_hash`` of the current state: kept up to date in the worker as
        calls change records (no encoding, whatever the size of the state)."""
        return self._seen_or_ask("hash")

    def _seen_or_ask(self, what: str) -> Any:
        """The worker's answer to ``what``, decoded afresh from its reply when nothing changed since it
        was given (each caller gets its own copy), else asked for."""
        frame = self._seen.get(what)
        if what == "state":
            if frame is None and self._after_call:
                self._state_with_calls = True  # read after a call: the next calls send it with their reply
            self._after_call = self._unread = False
        if frame is not None and not self._lost:
            return loads(frame)[1]
        out = self._ask([what])
        if self._worker is not None and self._worker.last_frame is not None:
            self._seen[what] = self._worker.last_frame
        return out

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
    :func:`~autoforge.envs.static_checks.check_source` (raises
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


# --------------------------------------------------------------------------- direct execution

_DIRECT: dict[tuple[str, str], Callable[..., Any]] = {}


def direct_function(source: str, name: str) -> Callable[..., Any]:
    """The checked tool function ``name`` (the *Python* name) loaded in *this* process (cached).
    Benchmarks and tests only."""
    key = (source, name)
    fn = _DIRECT.get(key)
    if fn is None:
        check_source(source, name)
        fn = _DIRECT[key] = sandbox.load_tool(compile_tool(source, name), name)
    return fn


def run_direct(source: str, name: str, state: dict, arguments: dict, *, arg_map: dict[str, str] | None = None) -> Any:
    """Call a tool in-process WITHOUT the sandbox: no limits, ``state`` is mutated in place.

    ``name`` is the Python function name (``ToolCode.function_name``); ``arguments`` use the
    public names, renamed by ``arg_map`` (``ToolCode.arg_map``). The baseline of
    ``benchmarks/env_throughput.py`` and a test helper. Never use it on code you have not also
    run through the sandbox: a ``while True`` here hangs the caller.
    """
    fn = direct_function(source, name)
    if arg_map:
        arguments = sandbox.ArgBinder(fn, arg_map).bind(arguments)
    return fn(state, **arguments)


def run_tool_direct(tool: ToolCode, state: dict, arguments: dict) -> Any:
    """:func:`run_direct` for a ToolCode: its Python function, arguments renamed by its ``arg_map``."""
    return run_direct(tool.source, tool_function(tool), state, arguments, arg_map=tool.arg_map)
