"""The Host header allow-list: against DNS rebinding, a page on another origin must not reach an open service.

A browser that loads `http://evil.example` can have that name re-resolved to 127.0.0.1 and then talk to a service
on the user's loopback with the page's own origin; what gives it away is the Host header, which still names the
attacker's domain. So requests whose Host is not loopback (`127.0.0.1`, `localhost`, `::1`, any port) or one of
the configured names (`allowed_hosts` / `REFLEXIO_ALLOWED_HOSTS`) are answered 400 before any handler runs.

Open (unkeyed) mode always checks. Keyed mode checks only when `allowed_hosts` is set: every `/api/` request there
needs a Bearer key, which a rebinding page does not have. `/health` is never checked: it holds no organisation's
data, and probes (kubelet, load balancers) address a replica by IP.

Starlette's TrustedHostMiddleware does the same matching, but answers in plain text and redirects to `www.`
names; this one answers in the service's one error shape (serving/errors.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from starlette.datastructures import Headers

from serving.asgi import HttpMiddleware
from serving.errors import error

#: Always allowed where the check applies (IPv6 as it appears in a Host header: bracketed).
LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")
#: Paths answered whatever the Host (liveness probes).
UNCHECKED_PATHS = frozenset({"/health"})

_HOST = re.compile(r"(?P<host>\[[0-9a-fA-F:.]+\]|[^\s\[\]:/@]+)(?::(?P<port>[0-9]{1,5}))?")


def host_of(header: str) -> str | None:
    """The host part of a Host header value, lowercased (IPv6 keeps its brackets); None if malformed."""
    match = _HOST.fullmatch(header.strip())
    return match["host"].lower().rstrip(".") if match else None


def normalise_pattern(pattern: str) -> str:
    """An allow-list entry as hosts are compared: lowercased, a bare IPv6 address bracketed."""
    pattern = pattern.strip().lower()
    if ":" in pattern and not pattern.startswith("["):
        pattern = f"[{pattern}]"
    if pattern != "*" and "*" in pattern and not (pattern.startswith("*.") and "*" not in pattern[1:]):
        raise ValueError(f"allowed host {pattern!r}: a wildcard must look like '*.example.com' (or be '*')")
    return pattern


def host_allowed(host: str, patterns: Sequence[str]) -> bool:
    """Whether `host` matches an entry: equal, or `*.example.com` for its subdomains, or `*`."""
    return any(p == "*" or host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in patterns)


class HostAllowList(HttpMiddleware):
    """ASGI middleware answering 400 (the documented error shape) for a Host outside `allowed_hosts`."""

    def __init__(self, app: Any, allowed_hosts: Sequence[str]) -> None:
        super().__init__(app)
        self.patterns = [normalise_pattern(p) for p in allowed_hosts]

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["path"] in UNCHECKED_PATHS or "*" in self.patterns:
            await self.app(scope, receive, send)
            return
        value = Headers(scope=scope).get("host", "")
        host = host_of(value)
        if host is None or not host_allowed(host, self.patterns):
            refused = error(
                400,
                f"Host header {value[:100]!r} is not allowed: this service answers loopback names and "
                "REFLEXIO_ALLOWED_HOSTS only (docs/configuration.md)",
                "message",
            )
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


def allowed_hosts_for(keyed: bool, configured: Sequence[str]) -> list[str] | None:
    """The allow-list the service enforces, or None for no check (keyed mode without configured hosts)."""
    if keyed and not configured:
        return None
    return [*LOOPBACK_HOSTS, *configured]
