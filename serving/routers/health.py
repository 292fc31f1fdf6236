"""Liveness and identity endpoints."""

from __future__ import annotations

from fastapi import APIRouter, Request

from serving.deps import service

router = APIRouter()


@router.get("/")
def root() -> dict:
    return {"service": "reflexio-lake", "docs": "/docs", "health": "/health"}


@router.get("/health")
def health(request: Request) -> dict:
    """Liveness plus the index version being served (None before the first publish of an index). With API keys
    there is no one index to report (each organisation has its own), and no organisation is named."""
    if request.app.state.tenants.keyed:
        return {"status": "healthy"}
    return {"status": "healthy", "index_version": service(request).index.version}
