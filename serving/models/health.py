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


class LiveResponse(BaseModel):
    """GET /health/live: the process is up and serving."""

    status: str


class ProcessResponse(BaseModel):
    """GET /healthz (the original's deprecated liveness alias): this worker's pid, uptime and resident memory.
    The original also counts requests per worker; this service does not, so `request_count` is absent."""

    pid: int
    uptime_sec: float
    rss_mb: float | None = None
