"""Answers of the original's features that are not enabled here (serving/routers/not_enabled.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class PendingToolCallResponse(BaseModel):
    """The original's PendingToolCallResponse: what a by-id route would answer (never here: those are 404)."""

    id: str
    org_id: str
    scope: dict[str, Any]
    scope_hash: str
    tool_name: str
    dedup_key: str
    status: str
    question_text: str
    args: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    user_id: str | None = None
    answer_format: str | None = None
    result: dict[str, Any] | None = None
    superseded_by: str | None = None
    created_at: datetime | None = None
    resolved_at: datetime | None = None
    expires_at: datetime | None = None
    cache_until: datetime | None = None
    valid_until: datetime | None = None


class PendingToolCallListResponse(BaseModel):
    """GET /api/pending_tool_calls (the original's shape; its items are never present here)."""

    pending_tool_calls: list[dict[str, Any]]


class BraintrustStatusResponse(BaseModel):
    """GET /api/braintrust/status."""

    connected: bool
    workspace_id: str = ""
    workspace_name: str = ""
    project_count: int = 0
    last_sync_ts: int | None = None
    last_error: str | None = None
