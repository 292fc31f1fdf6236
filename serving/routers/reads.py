"""The original's reads: profiles, user playbooks, interactions, requests grouped by session, the profile change
log and statistics. Served from the lake (curation applied), so they reflect a change the moment it is acked."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from fastapi import APIRouter, Query

from reflexio_pipelines.lake.interactions import interaction_view, request_view, turn_rows
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.session_turns import session_of, session_turn_rows
from reflexio_pipelines.learning.config_loading import resolve_extraction_config
from reflexio_pipelines.learning.config_shapes import singleton_alias
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES
from reflexio_pipelines.learning.types import stable_int_id
from reflexio_pipelines.search.documents import profile_view, user_playbook_view
from serving.deps import ServiceDep
from serving.interaction_search import search_turns
from serving.models.fields import Status
from serving.models.reads import (
    GetInteractionsRequest,
    GetProfilesRequest,
    GetRequestsRequest,
    GetUserPlaybooksRequest,
    InteractionsResponse,
    ProfileChangeLogResponse,
    ProfilesResponse,
    ProfileStatisticsResponse,
    RequestsResponse,
    SearchInteractionsRequest,
    UserPlaybooksResponse,
)
from serving.query_plan import statuses_of
from serving.state import ServiceState

router = APIRouter()

DAY = 86_400


def _profiles(
    state: ServiceState,
    user_id: str | None,
    statuses: tuple[str, ...],
    start: int | None = None,
    end: int | None = None,
) -> list[dict[str, Any]]:
    """Unexpired profiles in `statuses`, newest first, as views."""
    filters = [("user_id", "=", user_id)] if user_id else None
    now = int(time.time())
    rows = [
        r
        for r in live_rows(state.lake, "profile", filters=filters, statuses=statuses)
        if (r["expiration_timestamp"] is None or r["expiration_timestamp"] >= now)
        and (start is None or (r["last_modified_timestamp"] or 0) >= start)
        and (end is None or (r["last_modified_timestamp"] or 0) <= end)
    ]
    rows.sort(key=lambda r: (-(r["last_modified_timestamp"] or 0), r["profile_id"]))
    return state.outcomes.annotate("profile", [profile_view(r) for r in rows])  # + outcome counters


@router.post("/api/get_profiles", response_model=ProfilesResponse)
def get_profiles(body: GetProfilesRequest, state: ServiceDep) -> dict:
    """One user's profiles (current unless `status_filter` says otherwise), newest first."""
    rows = _profiles(state, body.user_id, statuses_of(body.status_filter), body.start_unix, body.end_unix)
    return {"success": True, "user_profiles": rows[: body.top_k], "msg": ""}


@router.get("/api/get_all_profiles", response_model=ProfilesResponse)
def get_all_profiles(
    state: ServiceDep, limit: int = Query(100, ge=1, le=10_000), status_filter: Status | None = Query(None)
) -> dict:
    """Every user's profiles in one status (default current), newest first."""
    rows = _profiles(state, None, (status_filter or "current",))
    return {"success": True, "user_profiles": rows[:limit], "msg": ""}


@router.get("/api/get_profile_statistics", response_model=ProfileStatisticsResponse)
def get_profile_statistics(state: ServiceDep) -> dict:
    """Counts per lifecycle status, and current profiles expiring within a week."""
    rows = live_rows(state.lake, "profile", statuses=LIFECYCLE_STATUSES)
    now = int(time.time())
    live = [r for r in rows if r["expiration_timestamp"] is None or r["expiration_timestamp"] >= now]
    count = {s: sum(1 for r in live if r["status"] == s) for s in LIFECYCLE_STATUSES}
    soon = sum(
        1
        for r in live
        if r["status"] == "current"
        and r["expiration_timestamp"] is not None
        and r["expiration_timestamp"] < now + 7 * DAY
    )
    return {
        "success": True,
        "current_count": count["current"],
        "pending_count": count["pending"],
        "archived_count": count["archived"],
        "expiring_soon_count": soon,
        "msg": "",
    }


@router.post("/api/get_user_playbooks", response_model=UserPlaybooksResponse)
def get_user_playbooks(body: GetUserPlaybooksRequest, state: ServiceDep) -> dict:
    """User playbooks, newest first; every lifecycle status unless `status_filter` narrows it (as the original)."""
    statuses = statuses_of(body.status_filter) if body.status_filter else LIFECYCLE_STATUSES
    filters = [
        (column, "=", value)
        for column, value in (
            ("user_id", body.user_id),
            ("agent_version", body.agent_version),
            ("playbook_name", _playbook_name(state, body.playbook_name)),
        )
        if value is not None
    ]
    rows = live_rows(state.lake, "user_playbook", filters=filters or None, statuses=statuses)
    rows.sort(key=lambda r: (-(r["created_at"] or 0), r["user_playbook_id"]))
    views = state.outcomes.annotate("user_playbook", [user_playbook_view(r) for r in rows[: body.limit]])
    return {"success": True, "user_playbooks": views, "msg": ""}


def _playbook_name(state: ServiceState, requested: str | None) -> str | None:
    """The extractor name a filter means (0.2.32's singleton name `playbook` is the first playbook extractor)."""
    if requested is None:
        return None
    config = resolve_extraction_config(state.lake.extraction_config(state.settings.extraction_config))
    names = [e.extractor_name for e in config.user_playbook_extractor_configs]
    return singleton_alias(requested, "user_playbook_extractor_configs", names)


def _turn_filters(user_id: str | None, start: int | None, end: int | None) -> list[tuple]:
    filters = [("user_id", "=", user_id)] if user_id else []
    if start is not None:
        filters.append(("created_at", ">=", start))
    if end is not None:
        filters.append(("created_at", "<=", end))
    return filters


@router.post("/api/get_interactions", response_model=InteractionsResponse)
def get_interactions(body: GetInteractionsRequest, state: ServiceDep) -> dict:
    """One user's turns, newest first (published ones are readable before any pipeline run)."""
    rows = turn_rows(state.lake, _turn_filters(body.user_id, body.start_unix, body.end_unix))
    return {"success": True, "interactions": [interaction_view(r) for r in rows[: body.top_k]], "msg": ""}


@router.get("/api/get_all_interactions", response_model=InteractionsResponse)
def get_all_interactions(state: ServiceDep, limit: int = Query(100, ge=1, le=10_000)) -> dict:
    """Every user's turns, newest first."""
    rows = turn_rows(state.lake)
    return {"success": True, "interactions": [interaction_view(r) for r in rows[:limit]], "msg": ""}


@router.post("/api/search_interactions", response_model=InteractionsResponse)
def search_interactions(body: SearchInteractionsRequest, state: ServiceDep) -> dict:
    """One user's turns ranked against `query` from the precomputed index (hybrid over each turn with its
    neighbours and session date) plus the turns published since (serving/interaction_search.py); each with its
    `neighbours`. Without a query: the newest turns, read from the lake."""
    limit = body.top_k or body.most_recent_k or 10
    if (body.query or "").strip():
        views, notes = search_turns(
            state, body.user_id, body.query, limit, body.search_mode, body.start_unix, body.end_unix, body.request_id
        )
        return {"success": True, "interactions": views, "msg": "; ".join(notes)}
    filters = _turn_filters(body.user_id, body.start_unix, body.end_unix)
    if body.request_id:
        filters.append(("request_id", "=", body.request_id))
    rows = turn_rows(state.lake, filters)
    return {"success": True, "interactions": [interaction_view(r) for r in rows[:limit]], "msg": ""}


@router.post("/api/get_requests", response_model=RequestsResponse)
def get_requests(body: GetRequestsRequest, state: ServiceDep) -> dict:
    """Publish calls grouped by session (newest request first), with their turns; paged by top_k / offset. A publish
    without a session id is a session of its own named by its request id (`session_of`), as the pipeline groups it."""
    filters = _turn_filters(body.user_id, body.start_unix, body.end_unix)
    for column, value in (("request_id", body.request_id), ("source", body.source)):
        if value is not None:
            filters.append((column, "=", value))
    lake = state.lake
    rows = turn_rows(lake, filters) if body.session_id is None else session_turn_rows(lake, body.session_id, filters)
    by_request: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_request[row["request_id"]].append(row)
    ordered = sorted(
        by_request.values(), key=lambda rows: (-max(r["ingested_at_us"] for r in rows), rows[0]["request_id"])
    )
    page = ordered[body.offset : body.offset + body.top_k]
    sessions: dict[str, list[dict[str, Any]]] = {}
    for rows in page:
        rows.sort(key=lambda r: r["turn_index"])
        session = session_of(rows[0])
        entry = {
            "request": {**request_view(rows), "session_id": session},
            "interactions": [dict(interaction_view(r)) for r in rows],
        }
        sessions.setdefault(session, []).append(entry)
    return {
        "success": True,
        "sessions": [{"session_id": s, "requests": reqs} for s, reqs in sessions.items()],
        "has_more": body.offset + len(page) < len(ordered),
        "msg": "",
    }


@router.get("/api/profile_change_log", response_model=ProfileChangeLogResponse)
def profile_change_log(state: ServiceDep) -> dict:
    """The original's ProfileChangeLog: one entry per (run, user, request) that added or superseded profiles,
    newest first, last 100."""
    lake = state.lake
    profiles = {r["profile_id"]: r for r in lake.read_table("user_profiles").to_pylist()}
    entries: dict[tuple, dict[str, Any]] = {}
    for row in lake.read_table("change_log", filters=[("entity", "=", "profile")]).to_pylist():
        key = (row["run_id"], row["user_id"], row["request_id"])
        # The original's ids are integers (its client refuses others): a stable one per (run, user, request).
        entry = entries.setdefault(
            key,
            {
                "id": stable_int_id(*(str(k) for k in key)),
                "user_id": row["user_id"],
                "request_id": row["request_id"] or "",
                "created_at": row["created_at"] or 0,
                "added_profiles": [],
                "removed_profiles": [],
                "mentioned_profiles": [],
            },
        )
        stored = profiles.get(row["item_id"])
        view = (
            profile_view(stored)
            if stored
            else {  # a profile the change log outlived: what the log holds
                "profile_id": row["item_id"],
                "user_id": row["user_id"],
                "content": row["content"] or "",
                "last_modified_timestamp": row["created_at"] or 0,
                "generated_from_request_id": row["request_id"] or "",
            }
        )
        entry["added_profiles" if row["change"] == "added" else "removed_profiles"].append(view)
        entry["created_at"] = max(entry["created_at"], row["created_at"] or 0)
    logs = sorted(entries.values(), key=lambda e: (-e["created_at"], e["id"]))
    return {"success": True, "profile_change_logs": logs[:100]}
