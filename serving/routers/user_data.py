"""The original's per-user routes: `GET /api/storage_stats`, `POST /api/rerank_user_profiles` and
`POST /api/clear_user_data`.

- storage_stats counts the user's profiles and user playbooks in every lifecycle status (curation applied).
- rerank_user_profiles orders the given profiles of the user by the cosine between the query and each profile
  under the bundled embedder (the vectors search uses). The original scores with a cross-encoder; none is bundled
  here, so the order is the bi-encoder's.
- clear_user_data is the erasure (`serving/erasures.py`): the user's turns, profiles, playbooks, outcomes and
  every other row naming them, history purged, the index republished. Agent playbooks stay, without the user among
  their members and without the user's words — except one that only this user's playbooks supported or worded,
  which the erasure removes because it is the user's data (the original keeps every agent playbook).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES
from reflexio_pipelines.search.documents import profile_view
from reflexio_pipelines.search.text import normalize_text
from serving import erasures
from serving.deps import ServiceDep
from serving.errors import error
from serving.models.fields import MAX_ID
from serving.models.user_data import (
    ClearUserDataRequest,
    ClearUserDataResponse,
    RerankUserProfilesRequest,
    RerankUserProfilesResponse,
    StorageStatsResponse,
)

router = APIRouter()
log = logging.getLogger(__name__)


def _utc(seconds: int | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc)


@router.get("/api/storage_stats", response_model=StorageStatsResponse)
def storage_stats(
    state: ServiceDep, user_id: Annotated[str, Query(min_length=1, max_length=MAX_ID, pattern=r"\S")]
) -> StorageStatsResponse:
    """How many profiles and user playbooks the user has (every status) and the profiles' modification range."""
    mine = [("user_id", "=", user_id)]
    profiles = live_rows(state.lake, "profile", mine, statuses=LIFECYCLE_STATUSES)
    playbooks = live_rows(state.lake, "user_playbook", mine, statuses=LIFECYCLE_STATUSES)
    modified = [r["last_modified_timestamp"] for r in profiles if r["last_modified_timestamp"] is not None]
    return StorageStatsResponse(
        success=True,
        profile_count=len(profiles),
        playbook_count=len(playbooks),
        oldest_profile_modified=_utc(min(modified, default=None)),
        newest_profile_modified=_utc(max(modified, default=None)),
    )


@router.post("/api/rerank_user_profiles", response_model=RerankUserProfilesResponse)
def rerank_user_profiles(body: RerankUserProfilesRequest, state: ServiceDep) -> dict[str, Any]:
    """The user's current profiles among `profile_ids`, best match to `query` first (cosine under the bundled
    embedder), at most `top_k`; ids that are not the user's current profiles are dropped and counted in `msg`."""
    wanted = set(body.profile_ids)
    rows = [r for r in live_rows(state.lake, "profile", [("user_id", "=", body.user_id)]) if r["profile_id"] in wanted]
    dropped = len(wanted) - len(rows)
    if rows:
        vectors = state.embedder.embed([normalize_text(body.query), *(normalize_text(r["content"]) for r in rows)])
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]["profile_id"]))
        rows = [rows[i] for i in order][: body.top_k]
    views = state.outcomes.annotate("profile", [profile_view(r) for r in rows])
    note = f"{dropped} id(s) dropped: not a current profile of this user" if dropped else None
    return {"success": True, "user_profiles": views, "msg": note}


@router.post("/api/clear_user_data", response_model=ClearUserDataResponse)
async def clear_user_data(body: ClearUserDataRequest, state: ServiceDep) -> ClearUserDataResponse | JSONResponse:
    """Wipe the user's data (the erasure; the module doc says what happens to agent playbooks)."""
    try:
        result = await run_in_threadpool(erasures.erase, state, body.user_id)
    except Exception as exc:  # the erasure marker lets a retry (or the next start) finish it
        log.exception("clear_user_data failed")
        return error(503, f"clear interrupted ({type(exc).__name__}); retry the same request to complete it", "message")
    kept = sum(result.redacted.values())
    message = f"deleted {result.total} rows" + (
        f"; {kept} shared row(s) kept without this user's membership and words" if kept else ""
    )
    return ClearUserDataResponse(success=True, deleted_counts=dict(result.erased), message=message)
