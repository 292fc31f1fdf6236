"""A local stand-in for the mem0 platform API, serving the endpoints the real `mem0.MemoryClient` (mem0ai 2.x) calls.

Routes and shapes come from the installed client (`mem0/client/main.py`): the construction-time key check
`GET /v1/ping/`, `POST /v3/memories/add/`, `POST /v3/memories/` (get_all), `POST /v3/memories/search/`,
`GET` / `DELETE /v1/memories/{id}/`. The stand-in stores every non-system message of an add as one memory (as the
platform does with `infer=False`) and searches by word overlap; that is enough to check that calls really reach it
and that the client's return values and exceptions pass through a wrapper unchanged. Every request is recorded on
`app.state.requests` as (method, path, JSON body or None, Authorization header).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timezone
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

API_KEY = "m0-test-key"
ORG_ID = "org-test"
PROJECT_ID = "proj-test"
USER_EMAIL = "tester@example.invalid"


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.casefold()))


def _entity_filters(body: dict[str, Any]) -> dict[str, Any]:
    """Entity ids of a request: v3 puts them under `filters`; `add` still accepts them at the top level too."""
    filters = dict(body.get("filters") or {})
    for key in ("user_id", "agent_id", "app_id", "run_id"):
        if body.get(key) is not None:
            filters.setdefault(key, body[key])
    return filters


def _matches(memory: dict[str, Any], filters: dict[str, Any]) -> bool:
    return all(memory.get(key) == value for key, value in filters.items() if key in memory)


def make_mem0_platform() -> FastAPI:
    """The stand-in app. `app.state.memories` maps memory id -> memory; `app.state.requests` records requests."""
    app = FastAPI()
    app.state.memories = {}
    app.state.requests = []

    @app.middleware("http")
    async def authenticate_and_record(request: Request, call_next):
        body = await request.body()
        app.state.requests.append(
            (
                request.method,
                request.url.path,
                await request.json() if body else None,
                request.headers.get("authorization"),
            )
        )
        if request.headers.get("authorization") != f"Token {API_KEY}":
            return JSONResponse(status_code=401, content={"detail": "Invalid API key"})
        return await call_next(request)

    @app.get("/v1/ping/")
    async def ping() -> dict[str, Any]:
        return {"status": "ok", "org_id": ORG_ID, "project_id": PROJECT_ID, "user_email": USER_EMAIL}

    @app.post("/v3/memories/add/")
    async def add(request: Request) -> dict[str, Any]:
        body = await request.json()
        filters = _entity_filters(body)
        now = datetime.now(timezone.utc).isoformat()
        results = []
        for message in body["messages"]:
            if message.get("role") == "system":
                continue
            memory = {
                "id": str(uuid.uuid4()),
                "memory": message["content"],
                "role": message.get("role"),
                "metadata": body.get("metadata"),
                "created_at": now,
                **filters,
            }
            app.state.memories[memory["id"]] = memory
            results.append({"id": memory["id"], "memory": memory["memory"], "event": "ADD"})
        return {"results": results}

    @app.post("/v3/memories/")
    async def get_all(request: Request) -> dict[str, Any]:
        filters = _entity_filters(await request.json())
        found = [m for m in app.state.memories.values() if _matches(m, filters)]
        return {"count": len(found), "next": None, "previous": None, "results": found}

    @app.post("/v3/memories/search/")
    async def search(request: Request) -> dict[str, Any]:
        body = await request.json()
        query = _words(body["query"])
        scored = []
        for memory in app.state.memories.values():
            if not _matches(memory, _entity_filters(body)):
                continue
            overlap = len(query & _words(memory["memory"])) / max(len(query), 1)
            if overlap > 0:
                scored.append({**memory, "score": overlap})
        scored.sort(key=lambda m: -m["score"])
        return {"results": scored[: int(body.get("top_k") or 10)]}

    @app.get("/v1/memories/{memory_id}/")
    async def get(memory_id: str) -> JSONResponse:
        memory = app.state.memories.get(memory_id)
        if memory is None:
            return JSONResponse(status_code=404, content={"detail": "Memory not found"})
        return JSONResponse(memory)

    @app.delete("/v1/memories/{memory_id}/")
    async def delete(memory_id: str) -> JSONResponse:
        if app.state.memories.pop(memory_id, None) is None:
            return JSONResponse(status_code=404, content={"detail": "Memory not found"})
        return JSONResponse({"message": "Memory deleted successfully!"})

    return app
