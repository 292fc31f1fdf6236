"""The base of the service's plain ASGI middlewares (plain rather than Starlette's `@app.middleware("http")`, which
runs the rest of the stack in a task of its own: see serving/guard.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class HttpMiddleware(ABC):
    """An ASGI middleware that acts on HTTP requests only: lifespan and websocket scopes go straight to `app`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    @abstractmethod
    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        """The middleware's work on one HTTP request; it passes the request on by awaiting `self.app`."""
