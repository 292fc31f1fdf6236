"""Answers of the original's features that are not enabled here (serving/routers/not_enabled.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


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
