"""Liveness and the service's landing answer."""

from __future__ import annotations

from pydantic import BaseModel


class RootResponse(BaseModel):
    """GET /: where to look next."""

    service: str
    docs: str
    health: str


class HealthResponse(BaseModel):
    """GET /health. `index_version` only in open mode (keyed mode has one index per organisation)."""

    status: str
    index_version: str | None = None
