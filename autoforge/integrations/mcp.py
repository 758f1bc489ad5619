"""Serve one synthesized environment as an MCP server (``autoforge mcp``), with the official SDK.

``autoforge mcp --env NAME [--task TASK_ID] [--http HOST:PORT]`` loads the environment's rows
from the warehouse (:func:`load_served`: ``environments``, its accepted ``tool_code``, the tool
descriptions of ``tool_specs``, and the task with ``--task``) and serves them with the
low-level server of the ``mcp`` SDK (``mcp.server.lowlevel.Server``: the tools are data, given
JSON schemas, not Python functions):

- ``tools/list``: every accepted tool with its input schema (``tool_code.parameters``, exactly),
  its output schema (``tool_code.output_schema`` with null allowed wherever a value is typed: what
  the synthesis checks accept, see :func:`autoforge.envs.checks.output_fits`; a schema that is not
  an object is wrapped as ``{"result": ...}``, the SDK's convention for non-object results), the
  description from the tool docs and ``readOnlyHint`` from the tool's effect; plus ``reset``.
- ``tools/call``: :meth:`autoforge.envs.runtime.Environment.call` in the sandbox. The result's text
  is the observation as AutoForge's own agents see it (:meth:`Observation.to_text`), its structured
  content the JSON output. A failed observation (invalid arguments, unknown tool, the tool's own
  ``{"error": ...}``, a timeout, the memory limit, a crash) is an MCP tool error (``isError``) with
  the message, and the state is as before the call; the server goes on.
- State: every client session has its own :class:`Environment` (its own sandbox worker), reset to
  a copy of the task's initial state (``--task``) or of the environment's sample state
  (``environments.sample_state``, the state synthesis checked the tools on); ``reset`` restores
  it. Sessions never see each other's writes. The environment is closed (its worker goes back
  to the pool) when the session ends.

What a session is, per transport:

- stdio: the process serves one client, so the process is the session (either protocol era);
- streamable HTTP: one session per ``initialize`` handshake (``Mcp-Session-Id``), ended by the
  client's DELETE, after ``SESSION_IDLE_S`` without a request, or, for a session that has made no
  tool call, after ``--unused-timeout`` (:data:`UNUSED_SESSION_S`) without one; at most
  ``max_sessions`` at once (``--max-sessions``, :data:`MAX_SESSIONS`), admitted by
  :class:`~autoforge.integrations.mcp_sessions.Admission`; responses are JSON, not SSE. The
  2026-07-28 protocol has no sessions (every request stands alone), so this server advertises the
  handshake versions only in ``server/discover`` (an SDK client in ``mode="auto"`` falls back to
  the handshake) and refuses other 2026-07-28 requests with a message saying so.

Who may talk to an HTTP server (a Host/Origin allow-list and a bearer token, checked before the
SDK sees a request): :mod:`autoforge.integrations.mcp_access`. Who gets a session slot, so that
no client can hoard them: :mod:`autoforge.integrations.mcp_sessions`.

Sandbox limits are the runtime's: ``AUTOFORGE_TOOL_TIMEOUT`` (2 s) and ``AUTOFORGE_TOOL_MEMORY_MB``
(512) per call. Tool calls run in a thread, so one slow call does not hold up other sessions;
one session's calls run one at a time (an environment is one state).
"""

from __future__ import annotations

import socket
import sys
import threading
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from autoforge.envs.checks import _nullable, output_fits
from autoforge.envs.runtime import Environment, Observation
from autoforge.errors import AutoforgeError, ConfigError
from autoforge.integrations.mcp_access import Access, guarded, http_access
from autoforge.integrations.mcp_sessions import MAX_SESSIONS, UNUSED_SESSION_S, Admission, session_manager
from autoforge.pipeline.admin import warehouse_file
from autoforge.pipeline.corpus import (accepted_tools, env_tool_specs, environments, has_relation, tasks_by_id,
                                      verified_task_ids)
from autoforge.types import EnvironmentRecord, Task, ToolCode, canonical_json, state_hash

RESET_TOOL = "reset"  # the session's state back to its start; `reset_environment` if the environment has a `reset`
LISTEN_BACKLOG = 1024  # connections the kernel queues before accept: 200 clients connecting at once fit
MAX_TASK_IDS_SHOWN = 10  # task ids an unknown --task message lists
_SESSION_KEY = "autoforge.session"  # where an HTTP session's environment lives in the SDK's Connection.state


class ServedEnvironment(BaseModel):
    """What one ``autoforge mcp`` process serves: an environment's rows and the state sessions start from."""

    model_config = ConfigDict(extra="forbid")

    env: EnvironmentRecord
    tools: list[ToolCode] = Field(description="the accepted tool code, in name order")
    descriptions: dict[str, str] = Field(default_factory=dict, description="tool name -> description from the tool docs")
    task: Task | None = Field(None, description="--task: sessions start from its initial state; None: the sample state")

    @property
    def initial_state(self) -> dict[str, Any]:
        return self.task.initial_state if self.task is not None else self.env.sample_state

    @property
    def state_source(self) -> str:
        return f"task {self.task.task_id}" if self.task is not None else "the environment's sample state"

    @property
    def reset_name(self) -> str:
        names = {t.name for t in self.tools}
        return RESET_TOOL if RESET_TOOL not in names else "reset_environment"


# --------------------------------------------------------------------------- loading


def _fill_hint() -> str:
    return ("fill it with `autoforge factory` (the bundled tool docs; add --max-envs 2 for a quick run) or "
            "`autoforge ingest` + `autoforge synthesize` on your own tool docs, or point --warehouse / "
            "AUTOFORGE_WAREHOUSE at a filled one")


def load_served(warehouse: str | None, env: str, task: str | None = None) -> ServedEnvironment:
    """The environment named (or with id) ``env`` and, with ``task``, that task, from the warehouse.

    ConfigError, saying what to do, for a missing or empty warehouse, an unknown environment (with
    the valid names), one that failed synthesis, and an unknown task or one of another environment."""
    path = warehouse_file(warehouse)
    if path is not None and not path.exists():
        raise ConfigError(f"no warehouse at {path}: {_fill_hint()}")
    if not has_relation(warehouse, "environments"):
        raise ConfigError(f"the warehouse {path or warehouse} has no environments table: {_fill_hint()}")
    envs = environments(warehouse)
    if not envs:
        raise ConfigError(f"the warehouse {path or warehouse} has no environments yet: {_fill_hint()}")
    usable = [e for e in envs if e.status in ("ready", "partial")]
    found = [e for e in envs if env in (e.name, e.env_id)]
    if not found:
        names = sorted({e.name for e in usable})
        raise ConfigError(f"no environment named {env!r} in the warehouse; usable environments: "
                          f"{', '.join(names) or 'none'} (`autoforge sql \"SELECT name, status, n_tools_accepted "
                          "FROM environments\"` lists them all)")
    good = [e for e in found if e.status in ("ready", "partial")]
    if not good:
        raise ConfigError(f"environment {env!r} failed synthesis ({found[0].reason or 'no tool was accepted'}); "
                          f"serve another one: {', '.join(sorted({e.name for e in usable})) or 'none is usable'}")
    if len(good) > 1:
        raise ConfigError(f"{len(good)} environments are named {env!r} (ids {', '.join(e.env_id for e in good)}); "
                          "pass the env id to --env")
    record = good[0]
    tools = accepted_tools(warehouse, [record.env_id], order_by="name, code_id")
    if not tools:
        raise ConfigError(f"environment {record.name!r} has no accepted tool code; re-run `autoforge synthesize "
                          f"--env {record.name}`")
    specs = env_tool_specs(warehouse, record.env_id) if has_relation(warehouse, "tool_specs") else []
    by_id = {s.tool_id: s.description for s in specs}
    descriptions = {t.name: by_id.get(t.tool_id) or f"{t.name} ({t.effect} tool of {record.name})" for t in tools}
    chosen = None
    if task is not None:
        rows = list(tasks_by_id(warehouse, [task]).values())
        if not rows:
            ids = verified_task_ids(warehouse, record.env_id, MAX_TASK_IDS_SHOWN)
            raise ConfigError(f"no task {task!r} in the warehouse; curated tasks of {record.name}: "
                              f"{', '.join(ids) or 'none'}{' ...' if len(ids) == MAX_TASK_IDS_SHOWN else ''} "
                              f"(all: `autoforge sql \"SELECT task_id, request FROM v_curated_tasks WHERE env_id = "
                              f"'{record.env_id}'\"`)")
        if rows[0].env_id != record.env_id:
            other = next((e.name for e in envs if e.env_id == rows[0].env_id), rows[0].env_id)
            raise ConfigError(f"task {task!r} belongs to environment {other!r}, not {record.name!r}: pass --env {other}")
        chosen = rows[0]
    return ServedEnvironment(env=record, tools=tools, descriptions=descriptions, task=chosen)


# --------------------------------------------------------------------------- tools/list and tools/call


def output_schema(tool: ToolCode) -> tuple[dict[str, Any] | None, bool]:
    """``(MCP outputSchema, wrapped)``: the tool's output schema with null allowed wherever a value is
    typed (what the synthesis checks accept), wrapped as ``{"result": ...}`` when it is not an object."""
    if not tool.output_schema:
        return None, False
    schema = _nullable(tool.output_schema)
    if schema.get("type") in ("object", ["object", "null"]) or (schema.get("type") is None and "properties" in schema):
        return {**schema, "type": "object"}, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def mcp_tools(served: ServedEnvironment) -> list:
    """The ``tools/list`` entries: every accepted tool, then the reset tool."""
    import mcp_types as types

    out = []
    for tool in served.tools:
        schema, _ = output_schema(tool)
        out.append(types.Tool(
            name=tool.name, description=served.descriptions.get(tool.name) or None, input_schema=tool.parameters,
            output_schema=schema,
            annotations=types.ToolAnnotations(read_only_hint=tool.effect == "read",
                                               destructive_hint=False if tool.effect == "read" else None)))
    out.append(types.Tool(
        name=served.reset_name,
        description=f"Start over: this session's state goes back to {served.state_source} (every change made in this "
                    "session is undone). Other sessions are not affected.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema={"type": "object", "properties": {"reset": {"type": "boolean"}, "state": {"type": "string"},
                                                        "state_hash": {"type": "string"}},
                       "required": ["reset", "state", "state_hash"]},
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)))
    return out


def tool_result(obs: Observation, tool: ToolCode | None):
    """The ``CallToolResult`` of one observation: its text as agents see it, the output as structured
    content; a failed observation (or an output that does not fit the advertised schema) is a tool error."""
    import mcp_types as types

    if not obs.ok:
        structured = {"error": obs.error if obs.error is not None else obs.to_text(), "kind": obs.kind}
        if obs.kind == "tool_error" and isinstance(obs.output, dict):
            structured = {**obs.output, "kind": obs.kind}
        return types.CallToolResult(content=[types.TextContent(text=obs.to_text())], structured_content=structured,
                                    is_error=True)
    schema, wrapped = output_schema(tool) if tool is not None else (None, False)
    if schema is not None:
        mismatch = output_fits(obs.output, tool.output_schema)
        if not mismatch and not wrapped and not isinstance(obs.output, dict):
            mismatch = f"output is {canonical_json(obs.output)[:100]}, its output schema says an object"
        if mismatch:
            message = (f"{tool.name} returned an output that does not fit its output schema ({mismatch}); the call "
                       "did change the state")
            return types.CallToolResult(content=[types.TextContent(text=canonical_json({"error": message}))],
                                        structured_content={"error": message, "kind": "output_schema"}, is_error=True)
    structured = obs.output if isinstance(obs.output, dict) and not wrapped else {"result": obs.output}
    return types.CallToolResult(content=[types.TextContent(text=obs.to_text())], structured_content=structured)


class Session:
    """One client session: its own sandboxed Environment, started lazily and closed at the end.

    Thread-safe: calls come from worker threads (one at a time per session, by a lock)."""

    def __init__(self, served: ServedEnvironment, *, timeout_s: float | None = None, memory_mb: int | None = None):
        self.served = served
        self._kw = {"timeout_s": timeout_s, "memory_mb": memory_mb}
        self._env: Environment | None = None
        self._lock = threading.Lock()
        self._closed = False
        self.calls = 0

    def _environment(self) -> Environment:
        if self._closed:
            raise ConfigError("this MCP session has ended; open a new one")
        if self._env is None:
            env = Environment.from_records(self.served.env, self.served.tools, **self._kw)
            try:
                env.reset(self.served.initial_state)
            except BaseException:
                env.close()  # its worker goes back to the pool
                raise
            self._env = env
        return self._env

    def call(self, name: str, arguments: dict[str, Any] | None):
        """``tools/call``: the reset tool, or one tool call in the sandbox, as a CallToolResult."""
        import mcp_types as types

        with self._lock:
            self.calls += 1
            try:
                env = self._environment()
                if name == self.served.reset_name:
                    if arguments:
                        obs = Observation(ok=False, kind="invalid_arguments",
                                          error=f"{name} takes no arguments, got {', '.join(sorted(arguments))}")
                        return tool_result(obs, None)
                    env.reset(self.served.initial_state)
                    out = {"reset": True, "state": self.served.state_source, "state_hash": env.state_hash()}
                    return types.CallToolResult(content=[types.TextContent(text=canonical_json(out))],
                                                structured_content=out)
                return tool_result(env.call(name, arguments if arguments is not None else {}), env.tools.get(name))
            except AutoforgeError as e:  # the sandbox could not start or rebuild the state: say so, keep serving
                hint = "" if name == self.served.reset_name else f"; `{self.served.reset_name}` starts over"
                return tool_result(Observation(ok=False, kind="crashed", error=f"{e}{hint}"), None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._env is not None:
                self._env.close()
                self._env = None


# --------------------------------------------------------------------------- the server


def _instructions(served: ServedEnvironment) -> str:
    e = served.env
    return (f"AutoForge environment {e.name} ({e.env_id}): {len(served.tools)} tools over a simulated state "
            f"database ({', '.join(c.name for c in e.state_schema.collections) or 'no collections'}). Each session "
            f"starts from {served.state_source}; writes persist within the session only; `{served.reset_name}` "
            "starts over. A failed call (isError) changes nothing.")


class EnvironmentServer:
    """The SDK server for one :class:`ServedEnvironment` and its open sessions.

    ``transport="stdio"``: one session for the process; ``"http"``: one per handshake session (see
    the module docstring). ``.server`` is the ``mcp.server.lowlevel.Server``; ``.sessions`` the
    sessions open now; :meth:`close` ends them (the process is stopping)."""

    def __init__(self, served: ServedEnvironment, *, transport: Literal["stdio", "http"],
                 timeout_s: float | None = None, memory_mb: int | None = None):
        import mcp_types as types
        from mcp.server.lowlevel import Server

        if transport not in ("stdio", "http"):
            raise ConfigError(f"transport must be 'stdio' or 'http', got {transport!r}")
        self.served, self.transport = served, transport
        self._kw = {"timeout_s": timeout_s, "memory_mb": memory_mb}
        self.sessions: set[Session] = set()
        self.on_tool_call: Callable[[str | None], None] | None = None  # told the HTTP session id of every tools/call
        self._shared = self._open() if transport == "stdio" else None
        tools = mcp_tools(served)

        async def list_tools(ctx, params) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx, params) -> types.CallToolResult:
            import anyio

            session = self.session_of(ctx)
            if self.on_tool_call is not None:  # HTTP: the session is in use, not hoarded (Admission)
                self.on_tool_call(getattr(getattr(ctx.session, "_connection", None), "session_id", None))
            return await anyio.to_thread.run_sync(session.call, params.name, params.arguments)

        self.server = Server(f"autoforge-{served.env.name}", version=_version(), instructions=_instructions(served),
                             on_list_tools=list_tools, on_call_tool=call_tool)
        if transport == "http":
            self._sessions_only()

    def _open(self) -> Session:
        sess = Session(self.served, **self._kw)
        self.sessions.add(sess)
        return sess

    def session_of(self, ctx) -> Session:
        """The session of a request: the process's on stdio, the connection's on HTTP (made on first use)."""
        import anyio
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        if self._shared is not None:
            return self._shared
        connection = getattr(ctx.session, "_connection", None)  # the SDK's per-connection state (no public accessor in 2.x)
        state = getattr(connection, "state", None)
        if not isinstance(state, dict):
            raise MCPError(code=types.INTERNAL_ERROR, message="this mcp SDK version gives handlers no per-connection "
                           "state; install mcp>=2,<3 as pinned in pyproject.toml (the `mcp` extra)")
        sess = state.get(_SESSION_KEY)
        if sess is None:
            sess = state[_SESSION_KEY] = self._open()

            async def end() -> None:  # the connection closed: the client's DELETE, idle timeout, shutdown
                self.sessions.discard(sess)
                await anyio.to_thread.run_sync(sess.close)

            connection.exit_stack.push_async_callback(end)
        return sess

    def _sessions_only(self) -> None:
        """HTTP: ``server/discover`` advertises the handshake versions only, and other 2026-07-28 requests
        (no session to keep a state in) are refused with what to do instead."""
        import mcp_types as types
        from mcp.shared.exceptions import MCPError
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

        server = self.server

        async def discover(ctx, params) -> types.DiscoverResult:
            return types.DiscoverResult(supported_versions=list(HANDSHAKE_PROTOCOL_VERSIONS),
                                        capabilities=server.get_capabilities(), instructions=server.instructions)

        server.add_request_handler("server/discover", types.RequestParams, discover)

        async def sessions_only(ctx, call_next):
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.method != "server/discover":
                raise MCPError(code=types.INVALID_REQUEST, message=(
                    f"this server keeps an environment state per session, and protocol {ctx.protocol_version} "
                    f"has no sessions: connect with the initialize handshake (protocol "
                    f"{HANDSHAKE_PROTOCOL_VERSIONS[-1]}; the Python SDK's Client does with mode='auto' or "
                    "'legacy'), or serve over stdio (one process per client)"))
            return await call_next(ctx)

        server.middleware.append(sessions_only)

    def close(self) -> None:
        for sess in list(self.sessions):
            sess.close()
        self.sessions.clear()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("autoforge")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


def check_served(served: ServedEnvironment, *, timeout_s: float | None = None, memory_mb: int | None = None) -> None:
    """Load the tools into a sandbox and reset it to the starting state once, before serving: stored
    code that no longer passes the sandbox check, or a state that is not JSON, fails here (ConfigError,
    UnsafeCodeError, SandboxError), not in the first client's call."""
    with Environment.from_records(served.env, served.tools, timeout_s=timeout_s, memory_mb=memory_mb) as env:
        env.reset(served.initial_state)
        if env.state_hash() != state_hash(served.initial_state):
            raise ConfigError(f"environment {served.env.name}: the sandbox's copy of {served.state_source} hashes "
                              "differently from the stored one")


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; PORT 0 picks a free one) -> ``(host, port)``."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--http must be HOST:PORT, e.g. 127.0.0.1:8765 (port 0: any free port), got {text!r}")
    return host, int(port)


def serve_stdio(served: ServedEnvironment, *, timeout_s: float | None = None, memory_mb: int | None = None) -> None:
    """Serve ``served`` over this process's stdin/stdout until the client closes the pipe."""
    import anyio
    from mcp.server.stdio import stdio_server

    served_by = EnvironmentServer(served, transport="stdio", timeout_s=timeout_s, memory_mb=memory_mb)
    server = served_by.server

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        served_by.close()


def serve_http(served: ServedEnvironment, host: str, port: int, *, max_sessions: int = MAX_SESSIONS,
               access: Access | None = None, per_client: int | None = None, unused_s: float = UNUSED_SESSION_S,
               timeout_s: float | None = None, memory_mb: int | None = None,
               ready: Callable[[str], None] | None = None) -> None:
    """Serve ``served`` over streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted: every request
    checked by ``access`` (default: :func:`http_access` of ``host`` without a token, so a binding
    beyond loopback is refused), sessions admitted by :class:`Admission`. ``ready(url)`` is called
    once the socket listens (port 0: the port picked)."""
    from autoforge.settings import check_param

    check_param("max_sessions", max_sessions)
    check_param("unused_timeout_s", unused_s)
    if per_client is not None:
        check_param("max_sessions_per_client", per_client)
    access = access if access is not None else http_access(host)  # refused before anything listens
    import anyio
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from starlette.applications import Starlette
    from starlette.routing import Route

    served_by = EnvironmentServer(served, transport="http", timeout_s=timeout_s, memory_mb=memory_mb)
    # JSON responses, not an SSE stream per POST: nothing here streams, and the SDK client opened a new TCP
    # connection for each SSE response (~30 ms a call here, against ~6-10 ms)
    manager = session_manager(served_by.server, Admission(max_sessions, per_client, unused_s))
    served_by.on_tool_call = manager.tool_called
    app = guarded(Starlette(routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))],
                            lifespan=lambda _app: manager.run()), access)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it: without, Nagle +
    # delayed ACK held every response ~40 ms (uvicorn sets no option on a socket it is handed)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"--http {host}:{port}: cannot listen there ({e.strerror or e}); pick another port "
                          "(0: any free one) or host") from None
    sock.listen(LISTEN_BACKLOG)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)

    async def started() -> None:
        while not uv.started:
            await anyio.sleep(0.01)
        if ready is not None:
            ready(f"http://{shown}:{bound}/mcp")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(started)
            await uv.serve(sockets=[sock])
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        sock.close()
        served_by.close()


def announce(served: ServedEnvironment, where: str) -> None:
    """One line on stderr (stdout is the protocol on stdio): what is served, from which state, where."""
    print(f"autoforge mcp: environment {served.env.name} ({len(served.tools)} tools + {served.reset_name}), sessions "
          f"start from {served.state_source}; {where}", file=sys.stderr, flush=True)
