"""Liveness and identity endpoints."""

from __future__ import annotations

from fastapi import APIRouter, Request

from serving.deps import service
from serving.models.health import HealthResponse, RootResponse

router = APIRouter()


@router.get("/", response_model=RootResponse)
def root() -> dict:
    """Where to look next: the API docs and the health check."""
    return {"service": "reflexio-lake", "docs": "/docs", "health": "/health"}


@router.get("/health", response_model=HealthResponse, response_model_exclude_unset=True)
def health(request: Request) -> dict:
    """Liveness plus the index version being served (None before the first publish of an index). With API keys
    there is no one index to report (each organisation has its own), and no organisation is named."""
    if request.app.state.tenants.keyed:
        return {"status": "healthy"}
    return {"status": "healthy", "index_version": service(request).index.version}
