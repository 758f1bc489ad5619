"""Who gets a session slot of an ``autoforge mcp --http`` server: :class:`Admission` (the rules, as plain
bookkeeping) and :func:`session_manager` (the SDK's streamable-HTTP session manager, admitting by them).

Sessions cannot be hoarded (:class:`Admission`): a session that has made no tool call ends after
``--unused-timeout`` (30 s) without a request; when every slot is taken, an idle session gives
way to the newcomer (one with no tool call first, then those of addresses over their share,
then the least recently active; a session that has made calls only after ``--unused-timeout``
idle), and an address that holds its share (``--max-sessions-per-client``, default
``max(4, max_sessions // 4)``) can only push out its own sessions, and waits behind addresses
below their share. A newcomer that finds no idle session waits up to :data:`ADMIT_WAIT_S` for
one (a session ending, or one going idle long enough), then gets 503; so does one that finds
``MAX_WAITING_PER_SLOT * max_sessions`` others waiting.

The server itself: :mod:`autoforge.integrations.mcp`; who may connect at all:
:mod:`autoforge.integrations.mcp_access`.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass

from autoforge.errors import ConfigError
from autoforge.integrations.mcp_access import host_name

SESSION_IDLE_S = 30 * 60  # an HTTP session with no request for this long is closed (the SDK's default; ours)
MAX_SESSIONS = 64  # HTTP sessions at once (--max-sessions): each holds a sandbox worker once it calls a tool (ours;
# the SDK's default, 10,000, would be as many worker processes)
UNUSED_SESSION_S = 30.0  # --unused-timeout: a session with no tool call yet ends after this long without a request
# (an SDK client calls within milliseconds of its handshake; an LLM agent within one model turn)
FRESH_GRACE_S = 5.0  # a session active this recently never gives way: the gap between a client's initialize and
# its first call is milliseconds when idle, but measured over 1 s with 200 clients and 64 new sandbox workers on 2
# cores, and a flood of handshakes must not push those clients out (a hoarder delays a newcomer this long at most)
ADMIT_WAIT_S = 120.0  # a new session that finds every slot busy waits this long for one, then gets 503: a
# saturated server queues rather than refuses (the SDK client waits 300 s for a response; 200 clients, each with a
# new sandbox worker, took 40-80 s to pass through 64 slots on 2 busy cores)
MAX_WAITING_PER_SLOT = 4  # at most this many new sessions per slot wait at once; more get 503 at once (a bound on
# the queue, not on the clients served)


@dataclass
class Slot:
    """One open HTTP session as admission sees it: whose it is and how recently it was used."""

    session_id: str
    client: str  # the client's address (IPv6: its /64): the unit of the per-client share
    last_seen: float = 0.0  # monotonic seconds: the end of its last POST (or its opening)
    in_flight: int = 0  # POSTs being served now (a GET stream is not use: it would hold a slot forever)
    tool_calls: int = 0


def client_key(address: str | None) -> str:
    """The share a client address counts against: the address, or for IPv6 its /64 (one host often holds
    a whole /64, so counting single addresses would let it take every slot)."""
    name = host_name(address or "") or "unknown"
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return name
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # an IPv4 client of a dual-stack (::) socket
            return str(ip.ipv4_mapped)
        if not ip.is_loopback:
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Admission:
    """Who gets an HTTP session slot: the rules of the module docstring, as plain bookkeeping (the
    SDK adaptor, :func:`session_manager`, calls it; tests call it directly with their own clock).

    ``room(client, now)`` says which sessions must end for ``client`` to open one ([]: a slot is free;
    None: none can be had now); ``expired(now)`` the unused sessions past ``unused_s``."""

    def __init__(self, max_sessions: int, per_client: int | None = None, unused_s: float = UNUSED_SESSION_S,
                 grace_s: float = FRESH_GRACE_S):
        self.max_sessions = max_sessions
        self.per_client = min(max_sessions, per_client or max(4, max_sessions // 4))
        self.unused_s, self.grace_s = unused_s, grace_s
        self.slots: dict[str, Slot] = {}
        self.held: dict[str, int] = {}  # client -> sessions open

    def open(self, session_id: str, client: str, now: float) -> Slot:
        slot = self.slots[session_id] = Slot(session_id=session_id, client=client, last_seen=now, in_flight=1)
        self.held[client] = self.held.get(client, 0) + 1
        return slot

    def discard(self, session_id: str) -> bool:
        slot = self.slots.pop(session_id, None)
        if slot is None:
            return False
        self.held[slot.client] -= 1
        if not self.held[slot.client]:
            del self.held[slot.client]
        return True

    def at_share(self, client: str) -> bool:
        return self.held.get(client, 0) >= self.per_client

    def _may_go(self, slot: Slot, now: float) -> bool:
        if slot.in_flight:
            return False
        idle = now - slot.last_seen
        return idle >= (self.unused_s if slot.tool_calls else self.grace_s)

    def room(self, client: str, now: float) -> list[str] | None:
        """The sessions to end so that ``client`` gets a slot now: [] when one is free, one session id
        when an idle one gives way, None when every slot is busy (or, for a client at its share, when
        none of its own is idle). A free slot goes to whoever asks (a single heavy client, such as a
        trainer running many episodes, may use them all); the share decides who gives way when full."""
        if len(self.slots) < self.max_sessions:  # a free slot is taken, whoever asks: the share counts when full
            return []
        if self.at_share(client):
            candidates = [s for s in self.slots.values() if s.client == client]
        else:
            candidates = list(self.slots.values())
        ready = [s for s in candidates if self._may_go(s, now)]
        if not ready:
            return None
        victim = min(ready, key=lambda s: (s.tool_calls > 0, not self.at_share(s.client), s.last_seen))
        return [victim.session_id]

    def next_change(self, now: float) -> float:
        """Seconds until an idle session may give way (at most 1: a busy one may go idle meanwhile)."""
        times = [s.last_seen + (self.unused_s if s.tool_calls else self.grace_s) - now
                 for s in self.slots.values() if not s.in_flight]
        return min([1.0, *(t for t in times if t > 0)])

    def expired(self, now: float) -> list[str]:
        """Sessions that have made no tool call and no request for ``unused_s``: they end now."""
        return [s.session_id for s in self.slots.values()
                if not s.tool_calls and not s.in_flight and now - s.last_seen >= self.unused_s]


def session_manager(server, admission: Admission, *, idle_timeout_s: float = SESSION_IDLE_S):
    """The SDK's streamable-HTTP session manager (JSON responses; its own Host checks off: :func:`guarded`
    does them with the full allow-list), with admission by ``admission`` instead of the SDK's
    first-come cap (which answered 503 to everyone once idle handshakes filled the slots).

    It overrides private methods of ``mcp.server.streamable_http_manager`` (2.x, as pinned); a
    release that renames them is refused with what to install, not half-served."""
    from contextlib import asynccontextmanager

    import anyio
    from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager, _error_response
    from mcp.server.transport_security import TransportSecuritySettings

    needed = ("_handle_stateful_request", "_admit_session", "_serve_opening_request", "_discard_session")
    missing = [n for n in needed if not hasattr(StreamableHTTPSessionManager, n)]
    if missing:
        raise ConfigError(f"this mcp SDK's session manager lacks {', '.join(missing)}; install mcp>=2,<3 as pinned in "
                          "pyproject.toml (the `mcp` extra)")
    header = MCP_SESSION_ID_HEADER.lower().encode("latin-1")

    class FairSessions(StreamableHTTPSessionManager):
        def __init__(self) -> None:
            super().__init__(app=server, json_response=True, session_idle_timeout=idle_timeout_s, max_sessions=None,
                             security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
            self.admission = admission
            self._changed = anyio.Event()  # set (and replaced) whenever a slot may have come free
            self._waiting: dict[str, int] = {}  # client -> its requests waiting for a slot

        def _signal(self) -> None:
            self._changed.set()
            self._changed = anyio.Event()

        def tool_called(self, session_id: str | None) -> None:
            slot = self.admission.slots.get(session_id or "")
            if slot is not None:
                slot.tool_calls += 1

        def _end(self, session_id: str) -> None:
            """End a session now (it gave way, or sat unused): forgotten at once, its transport closed soon."""
            transport = self._server_instances.pop(session_id, None)
            self._session_owners.pop(session_id, None)
            self.admission.discard(session_id)
            if transport is not None and self._task_group is not None:
                self._task_group.start_soon(self._discard_session, session_id, transport)
            self._signal()

        async def _discard_session(self, session_id, transport) -> None:
            await super()._discard_session(session_id, transport)
            if self.admission.discard(session_id):
                self._signal()

        @asynccontextmanager
        async def run(self):
            async with super().run(), anyio.create_task_group() as tg:
                tg.start_soon(self._reap)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()

        async def _reap(self) -> None:
            step = max(0.05, min(1.0, self.admission.unused_s / 4))
            while True:
                await anyio.sleep(step)
                for sid in self.admission.expired(time.monotonic()):
                    self._end(sid)

        async def _handle_stateful_request(self, scope, receive, send) -> None:
            sid = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
            if sid is not None:
                slot = self.admission.slots.get(sid)
                counted = slot is not None and scope.get("method") == "POST"
                if counted:
                    slot.in_flight += 1
                try:
                    await super()._handle_stateful_request(scope, receive, send)
                finally:
                    if counted:
                        slot.in_flight -= 1
                        slot.last_seen = time.monotonic()
                return
            client = client_key((scope.get("client") or (None,))[0])
            transport = await self._admit(client)
            if transport is None:
                message = (f"all {self.admission.max_sessions} sessions are busy (none came free within "
                           f"{ADMIT_WAIT_S:g} s, or {MAX_WAITING_PER_SLOT} clients a slot wait already): retry later"
                           if not self.admission.at_share(client) else
                           f"this address holds its share of {self.admission.per_client} sessions and all are busy: "
                           "end one (DELETE) or retry later")
                await _error_response(message, 503, -32603)(scope, receive, send)
                return
            slot = self.admission.open(transport.mcp_session_id, client, time.monotonic())
            try:
                await self._serve_opening_request(transport, scope, receive, send)
            finally:
                slot.in_flight -= 1
                slot.last_seen = time.monotonic()

        async def _admit(self, client: str):
            """A transport for a new session of ``client``, once admission gives it a slot (None after ADMIT_WAIT_S)."""
            deadline = time.monotonic() + ADMIT_WAIT_S
            if sum(self._waiting.values()) >= MAX_WAITING_PER_SLOT * self.admission.max_sessions:
                return None
            self._waiting[client] = self._waiting.get(client, 0) + 1
            try:
                while True:
                    now = time.monotonic()
                    # an address at its share waits while one below its share is waiting
                    full = len(self.admission.slots) >= self.admission.max_sessions
                    yields = full and self.admission.at_share(client) and any(
                        not self.admission.at_share(c) for c in self._waiting if c != client)
                    evict = None if yields else self.admission.room(client, now)
                    if evict is not None:
                        for sid in evict:
                            self._end(sid)
                        return self._admit_session(None)
                    if now >= deadline:
                        return None
                    with anyio.move_on_after(max(0.02, min(deadline - now, self.admission.next_change(now)))):
                        await self._changed.wait()  # a session ended, or one may give way by now
            finally:
                self._waiting[client] -= 1
                if not self._waiting[client]:
                    del self._waiting[client]

    return FairSessions()
