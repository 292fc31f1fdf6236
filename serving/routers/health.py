"""Liveness and identity endpoints."""

from __future__ import annotations

import os
import time

from fastapi import APIRouter, Request

from serving.deps import state_of
from serving.models.health import HealthResponse, LiveResponse, ProcessResponse, RootResponse

router = APIRouter()
_STARTED_AT = time.monotonic()


@router.get("/", response_model=RootResponse)
def root() -> dict:
    """Where to look next: the API docs and the health check."""
    return {"service": "reflexio-lake", "docs": "/docs", "health": "/health"}


@router.get("/health/ready", response_model=HealthResponse, response_model_exclude_unset=True)
@router.get("/health", response_model=HealthResponse, response_model_exclude_unset=True)
def health(request: Request) -> dict:
    """Liveness plus the index version being served (None before the first publish of an index). With API keys
    there is no one index to report (each organisation has its own), and no organisation is named."""
    if request.app.state.tenants.keyed:
        return {"status": "healthy"}
    return {"status": "healthy", "index_version": state_of(request).index.version}


@router.get("/health/live", response_model=LiveResponse)
async def live() -> dict:
    """Liveness without touching the lake (the original's `/health/live`; `/health` and `/health/ready` are the
    readiness answer, which names the served index)."""
    return {"status": "alive"}


@router.get("/healthz", response_model=ProcessResponse, response_model_exclude_none=True)
async def process() -> dict:
    """The original's per-worker metrics alias: pid, uptime, resident memory (MiB; None off Linux)."""
    return {"pid": os.getpid(), "uptime_sec": time.monotonic() - _STARTED_AT, "rss_mb": _rss_mb()}


def _rss_mb() -> float | None:
    try:  # procfs: the second field of statm is resident pages
        resident = int(open("/proc/self/statm").read().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE") / 1024.0 / 1024.0
