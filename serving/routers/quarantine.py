"""GET /api/quarantine: landing and table files the organisation's readers could not decode and moved aside (kept
under `quarantine/` until an erasure deletes them; reflexio_pipelines/lake/quarantine.py). The dashboard lists them."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from reflexio_pipelines.lake.quarantine import quarantined
from serving.deps import ServiceDep
from serving.models.quarantine import QuarantineResponse

router = APIRouter()


@router.get("/api/quarantine", response_model=QuarantineResponse)
async def list_quarantine(state: ServiceDep) -> dict:
    """Every quarantined file, newest first: where it was, where it is kept, its size, sha256 and the decoder's
    error, and whether an erasure has deleted it since (`status: erased`)."""
    return {"success": True, "files": await run_in_threadpool(quarantined, state.lake)}
