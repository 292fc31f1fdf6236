"""The request guard: which organisation a request acts for, and (keyed mode, /api/ paths) the caller's key and
its rate limit, before any handler.

A plain ASGI middleware rather than Starlette's `@app.middleware("http")`: that wrapper runs the rest of the stack
in a task of its own and streams the response back through a queue, ~1 ms of a search's ~15 ms through HTTP at 100k
turns (benchmarks/interaction_search.py `ours_http`).
"""

from __future__ import annotations

from typing import Any

from serving.asgi import HttpMiddleware
from serving.errors import error
from serving.ratelimit import RateLimiter, route_class
from serving.tenancy import DEFAULT_ORG, Tenants


class KeyGuard(HttpMiddleware):
    """Sets `request.state.org_id` (the key's organisation; open mode's one organisation) or answers 401 / 429."""

    def __init__(self, app: Any, tenants: Tenants, limiter: RateLimiter) -> None:
        super().__init__(app)
        self.tenants = tenants
        self.limiter = limiter

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        state = scope.setdefault("state", {})  # what Starlette's `request.state` reads and writes
        state["org_id"] = DEFAULT_ORG
        if self.tenants.keyed and scope["path"].startswith("/api/"):
            refusal = self._refusal(scope, state)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: dict, state: dict) -> Any:
        """The 401 / 429 response for a request without a valid key or over its limit; None when it may pass (and
        then `state` names the key's organisation)."""
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        key = self.tenants.keys.verify(token.strip()) if scheme.lower() == "bearer" else None
        if key is None:
            return error(
                401,
                "missing or invalid API key: send 'Authorization: Bearer <key>'",
                "message",
                headers={"WWW-Authenticate": "Bearer"},
            )
        cls = route_class(scope["path"])
        wait = self.limiter.allow(f"{key.key_id}:{cls}", key.limit(cls))
        if wait is not None:
            return error(
                429,
                f"rate limit of {key.limit(cls)} {cls} requests per minute reached; retry in {wait:.1f} s",
                "message",
                headers={"Retry-After": str(max(1, round(wait)))},
            )
        state["org_id"] = key.org_id
        return None
