"""The original's stall state and admin cache invalidation (reflexio-ai 0.2.32 stall_state_schema, entities)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.models.fields import MAX_ID


class StallStateResponse(BaseModel):
    """GET /stall_state: whether learning is paused (never, here: see serving/routers/admin.py)."""

    stalled: bool
    reason: Literal["billing_error", "auth_error"] | None = None
    stalled_at: datetime | None = None
    reset_estimate: datetime | None = None
    notified_in_cc: bool = False
    error_message: str | None = None


class MarkNotifiedResponse(BaseModel):
    notified_in_cc: bool


class InvalidateCacheRequest(BaseModel):
    """POST /api/admin/cache/invalidate. `org_id`, when given, must be the caller's own (403 otherwise)."""

    model_config = ConfigDict(extra="forbid")
    org_id: str | None = Field(None, max_length=MAX_ID)


class InvalidateCacheResponse(BaseModel):
    invalidated: bool
    org_id: str
