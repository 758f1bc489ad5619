"""Who may talk to an ``autoforge mcp --http`` server (:func:`http_access`, enforced by :func:`guarded`
before the SDK sees a request), because any write tool is one POST away:

- Host and Origin: every request's ``Host`` must name this server (421 otherwise) and an ``Origin``,
  when sent, must be a page of it (403 otherwise): a DNS-rebinding page (``Host: evil.example``)
  is refused on every binding, loopback aliases (127.0.0.2) and wildcards (0.0.0.0, ::) included.
  The names answered: the bound name and what it resolves to; on loopback also localhost,
  127.0.0.1 and ::1; on a wildcard the machine's own names and interface addresses
  (:func:`machine_names`); plus ``--allow-host NAME`` / ``AUTOFORGE_MCP_ALLOW_HOSTS`` (a reverse
  proxy's public name, a DNS alias).
- A bearer token: a binding beyond loopback refuses to start without one (``--token-file``,
  ``--token`` or ``AUTOFORGE_MCP_TOKEN``; ConfigError, exit 2); with one, every request must send
  ``Authorization: Bearer TOKEN`` (compared in constant time) or gets 401. Loopback binds may set
  one too. Plain HTTP carries the token in the clear: beyond loopback, use a trusted network or a
  TLS proxy in front.

:func:`exposure` is what the announce line says about it. The server itself:
:mod:`autoforge.integrations.mcp`; who gets a session slot: :mod:`autoforge.integrations.mcp_sessions`.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from dataclasses import dataclass, field
from typing import Iterable
from urllib.parse import urlsplit

from autoforge.errors import ConfigError


@dataclass(frozen=True)
class Access:
    """What an HTTP server checks on every request before the SDK sees it: the ``Host`` names it
    answers to (an ``Origin`` must name one of them too) and the bearer token it demands (None: none)."""

    hosts: frozenset[str]
    loopback: bool  # bound to this machine only (127.0.0.0/8, ::1, localhost)
    token: str | None = field(default=None, repr=False)  # never in a repr or a log line

    def refusal(self, host: str | None, origin: str | None, authorization: str | None) -> tuple[int, str] | None:
        """``(HTTP status, message)`` for a request that may not be served, else None."""
        name = host_of_header(host) if host else None
        if name is None or name not in self.hosts:
            return 421, (f"Host {host!r} is not a name this server answers to (a DNS-rebinding page, or a name it was "
                         "not told): connect by the address it listens on, or start it with --allow-host NAME "
                         "(AUTOFORGE_MCP_ALLOW_HOSTS)")
        if origin is not None:
            parts = _split_url(origin)
            origin_host = host_name(parts.hostname or "") if parts is not None and parts.scheme in ("http", "https") else None
            if origin_host is None or origin_host not in self.hosts:
                return 403, (f"Origin {origin!r} is not a page of this server: a web page may not call its tools "
                             "(start it with --allow-host NAME for a page served under another name)")
        if self.token is not None:
            scheme, _, presented = (authorization or "").strip().partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self.token.encode()):
                return 401, ("missing or wrong bearer token: send the header `Authorization: Bearer TOKEN` with the "
                             "token this server was started with (--token-file, --token or AUTOFORGE_MCP_TOKEN)")
        return None


def _split_url(text: str):
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
        return parts
    except ValueError:
        return None


def host_name(text: str) -> str | None:
    """A host name or address as compared: lower case, no brackets or trailing dot, an IP address in
    its canonical form (``0:0::1`` -> ``::1``, an IPv6 zone dropped); None for text that is neither."""
    from autoforge.settings import host_name as checked

    return checked(text)


def host_of_header(value: str) -> str | None:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``) as :func:`host_name` gives it."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1:] if end > 0 else "x"
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return host_name(value[1:end])
    name, sep, port = value.rpartition(":")
    if not sep:
        return host_name(value)
    if not port.isdigit() or ":" in name:
        return None
    return host_name(name)


def _addresses(host: str) -> set[str]:
    """The IP addresses ``host`` resolves to (empty when it does not)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return set()
    return {a for a in (host_name(str(info[4][0])) for info in infos) if a}


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` listens on this machine only: a loopback address, or a name (localhost)
    that resolves to loopback addresses only. A name that does not resolve counts as beyond loopback."""
    name = host_name(host)
    if name is None:
        return False
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    if name == "localhost":
        return True
    found = _addresses(name)
    return bool(found) and all(ipaddress.ip_address(a).is_loopback for a in found)


def machine_names() -> set[str]:
    """The names and addresses a client may reach this machine by, for a wildcard bind: its host name
    and what that resolves to, and every interface address (psutil when installed, which it usually is
    as a dependency of Prefect; without it, the host name's addresses only). No reverse DNS: a lookup
    that waits for an unreachable resolver would hold up the start. Other names: --allow-host."""
    names = set(LOOPBACK_NAMES)
    hostname = host_name(socket.gethostname())
    if hostname:
        names |= {hostname, *_addresses(hostname)}
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            names |= {a for a in (host_name(str(x.address)) for x in addrs
                                  if x.family in (socket.AF_INET, socket.AF_INET6)) if a}
    except Exception:  # noqa: BLE001 - not installed, or no permission to list interfaces: the host name's addresses
        pass
    return names


def http_access(host: str, *, token: str | None = None, allow_hosts: Iterable[str] = ()) -> Access:
    """The checks for serving on ``host``; ConfigError (exit 2, before anything listens) for a binding
    beyond loopback without a token, saying how to give one or to bind loopback instead."""
    name = host_name(host)
    if name is None:
        raise ConfigError(f"--http host {host!r} is no host name or IP address; e.g. --http 127.0.0.1:8765")
    loopback = is_loopback(name)
    if not loopback and token is None:
        raise ConfigError(f"--http {host}: refusing to serve beyond this machine without a bearer token (any host that "
                          "reaches the port could call the write tools): pass --token-file FILE or set "
                          "AUTOFORGE_MCP_TOKEN (e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`), "
                          "or bind 127.0.0.1")
    hosts = {name, *_addresses(name)} if not _is_ip(name) else {name}
    if loopback:
        hosts |= LOOPBACK_NAMES
    try:
        wildcard = ipaddress.ip_address(name).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        hosts |= machine_names()
    for extra in allow_hosts:
        checked = host_name(extra)
        if checked is None:
            raise ConfigError(f"--allow-host {extra!r} is no host name or IP address; e.g. --allow-host mcp.example.org")
        hosts.add(checked)
    return Access(hosts=frozenset(hosts), loopback=loopback, token=token)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def resolve_token(flag: str | None, file: str | None, env: str | None) -> str | None:
    """The bearer token from ``--token``, ``--token-file`` or ``AUTOFORGE_MCP_TOKEN`` (in that order;
    the flag and the file together are refused); ConfigError naming the source of a bad one."""
    from autoforge.settings import token_problem

    if flag is not None and file is not None:
        raise ConfigError("pass --token or --token-file, not both (--token-file keeps the token out of `ps`)")
    if file is not None:
        try:
            with open(file, encoding="utf-8") as f:
                text, source = f.read().strip(" \t\r\n"), f"--token-file {file}"
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"--token-file {file}: cannot read it ({getattr(e, 'strerror', None) or e}); write the "
                              "token (one line) to a file only you can read") from None
    elif flag is not None:
        text, source = flag.strip(" \t\r\n"), "--token"
    else:
        return env
    why = token_problem(text)
    if why:
        raise ConfigError(f"{source}: the token is {why}; e.g. `python -c \"import secrets; "
                          "print(secrets.token_urlsafe(32))\"`")
    return text


def guarded(app, access: Access):
    """``app`` behind :class:`Access`: a request with a foreign Host (421), a foreign Origin (403) or
    without the token (401) is answered here, with a JSON-RPC error saying why, and never reaches
    the SDK (no session opened, no body read)."""
    import json

    async def gate(scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan
            await app(scope, receive, send)
            return
        headers = {}
        for key, value in scope.get("headers") or ():
            k = key.decode("latin-1").lower()
            if k in ("host", "origin", "authorization"):
                if k in headers:  # two Host (or Origin, Authorization) headers: which one a proxy read is unknown
                    headers[k] = ""
                else:
                    headers[k] = value.decode("latin-1")
        refused = access.refusal(headers.get("host"), headers.get("origin"), headers.get("authorization"))
        if refused is None:
            await app(scope, receive, send)
            return
        status, message = refused
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
        extra = [(b"www-authenticate", b'Bearer realm="autoforge-mcp"')] if status == 401 else []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *extra]})
        await send({"type": "http.response.body", "body": body})

    return gate


def exposure(access: Access) -> str:
    """What the announce line says about who may connect (never the token)."""
    names = sorted(access.hosts)
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    auth = "bearer token required" if access.token is not None else "no token (loopback only)"
    clear = "; plain HTTP carries the token in the clear: use a trusted network or a TLS proxy" \
        if access.token is not None and not access.loopback else ""
    return f"Host names answered: {shown}; {auth}{clear}"
