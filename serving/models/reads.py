"""The original's reads: profiles, user playbooks, interactions, requests by session, the profile change log and
statistics.

Served items are the rows' API payloads (`search/documents.py` views, with their outcome counters): their fields
differ per entity type and grow with the tables, so answers list them as open objects."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from serving.models.acks import rows_response
from serving.models.fields import MAX_ID, MAX_INT64, CleanModel, SearchModeName, Status, TimeRange, UserId


class SearchInteractionsRequest(TimeRange):
    """POST /api/search_interactions."""

    user_id: UserId
    request_id: str | None = Field(None, max_length=MAX_ID)
    query: str | None = Field(None, max_length=4096)
    top_k: int | None = Field(None, ge=1, le=1000)
    most_recent_k: int | None = Field(None, ge=1, le=1000)
    search_mode: SearchModeName = "hybrid"


class GetInteractionsRequest(TimeRange):
    """POST /api/get_interactions."""

    user_id: UserId
    top_k: int = Field(30, ge=1, le=10_000)


class GetRequestsRequest(TimeRange):
    """POST /api/get_requests."""

    user_id: str | None = Field(None, max_length=MAX_ID)
    request_id: str | None = Field(None, max_length=MAX_ID)
    session_id: str | None = Field(None, max_length=MAX_ID)
    source: str | None = Field(None, max_length=MAX_ID)
    top_k: int = Field(30, ge=1, le=10_000)
    offset: int = Field(0, ge=0, le=MAX_INT64)


class GetProfilesRequest(TimeRange):
    """POST /api/get_profiles."""

    user_id: UserId
    top_k: int = Field(30, ge=1, le=10_000)
    status_filter: list[Status | None] | None = None


class GetUserPlaybooksRequest(CleanModel):
    """POST /api/get_user_playbooks (no status filter = every status, as in the original)."""

    limit: int = Field(100, ge=1, le=10_000)
    user_id: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None


ProfilesResponse = rows_response(
    "ProfilesResponse",
    "user_profiles",
    "POST /api/get_profiles, GET /api/get_all_profiles and POST /api/search_profiles.",
)


UserPlaybooksResponse = rows_response(
    "UserPlaybooksResponse", "user_playbooks", "POST /api/get_user_playbooks and POST /api/search_user_playbooks."
)


InteractionsResponse = rows_response(
    "InteractionsResponse",
    "interactions",
    "POST /api/get_interactions, GET /api/get_all_interactions and POST /api/search_interactions.",
)


class ProfileStatisticsResponse(BaseModel):
    """GET /api/get_profile_statistics."""

    success: bool
    current_count: int
    pending_count: int
    archived_count: int
    expiring_soon_count: int
    msg: str


class RequestWithTurns(BaseModel):
    """One publish call and its turns."""

    request: dict[str, Any]
    interactions: list[dict[str, Any]]


class SessionRequests(BaseModel):
    """The publish calls of one session (`""` for calls without a session)."""

    session_id: str
    requests: list[RequestWithTurns]


class RequestsResponse(BaseModel):
    """POST /api/get_requests."""

    success: bool
    sessions: list[SessionRequests]
    has_more: bool
    msg: str


class ProfileChangeLog(BaseModel):
    """The original's ProfileChangeLog: what one (run, user, request) added or superseded."""

    id: int
    user_id: str | None
    request_id: str
    created_at: int
    added_profiles: list[dict[str, Any]]
    removed_profiles: list[dict[str, Any]]
    mentioned_profiles: list[dict[str, Any]]


class ProfileChangeLogResponse(BaseModel):
    """GET /api/profile_change_log."""

    success: bool
    profile_change_logs: list[ProfileChangeLog]
