"""The Host header check: the API answers only requests that name a host it serves.

Reads need no token, so without it a web page could read every study through DNS rebinding: its own name,
re-resolved to 127.0.0.1, reaches the API with `Host: evil.example` (and a POST's Location would echo that
name). The hosts served are the loopback names, `api_host` when it is a specific address, the host of
`api_url` (what the CLI calls) and `allowed_hosts` (NORMLAB_ALLOWED_HOSTS); any port. Any other Host, or
none, is a 400 in the service's error format (`{"detail": ...}`), which Starlette's TrustedHostMiddleware
(plain text) does not give.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from service.settings import Settings

__all__ = ["ANY_HOST", "LOOPBACK_HOSTS", "AllowedHosts", "HostCheckMiddleware", "host_name"]

ANY_HOST = "*"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# Addresses that bind every interface: no client names them in a URL it chose, so they add nothing.
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
# How much of a refused Host the error repeats (it is the client's own text; a long one is cut).
_ECHO_CHARS = 100


def host_name(host: str) -> str:
    """The name in a Host header or an allowed-hosts entry, without its port: lower case, no trailing dot,
    an IPv6 address without brackets (`[::1]:8000` -> `::1`; `::1` alone has no port to drop)."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


@dataclass(frozen=True)
class AllowedHosts:
    """Host names a request may name: exact `names`, subdomains of `suffixes` (from `*.example.org`
    entries), or, with `any_host`, every host."""

    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    any_host: bool = False

    @classmethod
    def of(cls, entries: Iterable[str]) -> AllowedHosts:
        names, suffixes, any_host = set(), [], False
        for entry in entries:
            entry = entry.strip().lower()
            if entry == ANY_HOST:
                any_host = True
            elif entry.startswith("*."):
                suffixes.append("." + host_name(entry[2:]))
            elif host_name(entry):
                names.add(host_name(entry))
        return cls(names=frozenset(names), suffixes=tuple(suffixes), any_host=any_host)

    @classmethod
    def for_settings(cls, settings: Settings) -> AllowedHosts:
        """The hosts the API configured by `settings` serves."""
        own = [*LOOPBACK_HOSTS, urlsplit(str(settings.api_url)).hostname or ""]
        if host_name(settings.api_host) not in _WILDCARD_BINDS:
            own.append(settings.api_host)
        return cls.of([*own, *settings.allowed_hosts])

    def admits(self, host: str) -> bool:
        """Whether a request with this Host header (port or not) is answered."""
        if self.any_host:
            return True
        name = host_name(host)
        return bool(name) and (name in self.names or name.endswith(self.suffixes))


class HostCheckMiddleware:
    """Refuses (400) every request whose Host header `allowed` does not admit, before any route runs."""

    def __init__(self, app: ASGIApp, *, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)  # lifespan
            return
        host = Headers(scope=scope).get("host", "")
        if self.allowed.admits(host):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)  # policy violation
        else:
            await _refusal(host)(scope, receive, send)


def _refusal(host: str) -> JSONResponse:
    shown = repr(host[:_ECHO_CHARS]) if host else "(none)"
    return JSONResponse(
        {
            "detail": f"Host header {shown} names no host this API serves: call it by one of its own names "
            "(e.g. 127.0.0.1 or localhost), or have its operator add the name to NORMLAB_ALLOWED_HOSTS"
        },
        status_code=400,
    )
