"""Per-user reads and the per-user wipe of the original (reflexio-client 0.2.16): storage_stats,
rerank_user_profiles, clear_user_data."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from serving.models.fields import MAX_TEXT, CleanModel, UserId


class StorageStatsResponse(BaseModel):
    """GET /api/storage_stats?user_id=: the user's profiles and user playbooks, every status."""

    profile_count: int = 0
    playbook_count: int = 0
    oldest_profile_modified: datetime | None = None
    newest_profile_modified: datetime | None = None
    success: bool
    msg: str | None = None


class RerankUserProfilesRequest(CleanModel):
    """POST /api/rerank_user_profiles."""

    user_id: UserId
    query: str = Field(min_length=1, max_length=MAX_TEXT, pattern=r"\S")
    profile_ids: list[str] = Field(max_length=1_000)
    top_k: int = Field(10, gt=0, le=1_000)


class RerankUserProfilesResponse(BaseModel):
    success: bool
    user_profiles: list[dict[str, Any]]
    msg: str | None = None


class ClearUserDataRequest(CleanModel):
    """POST /api/clear_user_data."""

    user_id: UserId


class ClearUserDataResponse(BaseModel):
    """Rows deleted per table (the erasure's counts)."""

    success: bool
    deleted_counts: dict[str, int] = Field(default_factory=dict)
    message: str | None = None
