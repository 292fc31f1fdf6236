"""The request body size limit, enforced on the bytes actually received.

A `Content-Length` over the limit is refused before anything is read. A body without one (chunked transfer
encoding) is read up to the limit before the application sees any of it, so no handler ever buffers more than
`max_bytes` of one request.
"""

from __future__ import annotations

from typing import Any

from serving.asgi import HttpMiddleware
from serving.errors import error


class BodySizeLimit(HttpMiddleware):
    """ASGI middleware answering 413 for bodies over `max_bytes`."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: dict, receive: Any, send: Any) -> None:
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
            chunks.append(body)
            more = message.get("more_body", False)
        buffered, replayed = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": buffered, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: dict, receive: Any, send: Any) -> None:
        await error(413, f"request body larger than {self.max_bytes} bytes", "message")(scope, receive, send)
