"""The original's stall state and admin cache invalidation.

Stall state. The original pauses learning when its LLM provider answers a billing or authentication error, and
keeps that stall in a row the Claude Code hook reports once (`notified_in_cc`). Learning here never pauses: a call
the provider refuses fails that call (recorded in `llm_calls`, outcome `refused`), the window's run fails and the
next run tries the window again, so there is no stall to report: `stalled` is false, and marking it notified is the
original's no-op answer for "no active stall" (`notified_in_cc` false).

Cache invalidation. What the original caches per organisation (its config and storage handle) this service
re-reads from the lake on every tick of its index poller (config, control and curation overlays, outcome counters,
erasure gate); invalidation re-reads them now. `invalidated` is true when the organisation's service state was
loaded (there was something to re-read), as the original answers true when it evicted an entry.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from serving.deps import ServiceDep
from serving.errors import error
from serving.models.admin import (
    InvalidateCacheRequest,
    InvalidateCacheResponse,
    MarkNotifiedResponse,
    StallStateResponse,
)

router = APIRouter()


@router.get("/stall_state", response_model=StallStateResponse)
def stall_state() -> dict[str, Any]:
    return {"stalled": False}


@router.post("/stall_state/notified", response_model=MarkNotifiedResponse)
def stall_notified() -> dict[str, Any]:
    return {"notified_in_cc": False}


@router.post("/api/admin/cache/invalidate", response_model=InvalidateCacheResponse)
def invalidate_cache(body: InvalidateCacheRequest, request: Request, state: ServiceDep) -> Any:
    """Re-read the organisation's lake-held settings and overlays now; 403 for another organisation's."""
    org_id = request.state.org_id
    if body.org_id is not None and body.org_id != org_id:
        return error(403, "org_id: cross-org cache invalidation is not supported; omit org_id or pass your own")
    state.refresh()
    return {"invalidated": True, "org_id": org_id}
