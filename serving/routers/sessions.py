"""The original's session lifecycle: a publish's learning status, finalize_session, client-reported outcomes.

- `GET /api/learning_status?request_id=` — whether a run has learned from the request's turns yet
  (`lake/coverage.py`): `pending` until then (with the reason), `done` once covered.
- `POST /api/finalize_session` — the session's held-back turns (a partial batch, a session not yet quiet) learned
  now: a real Dagster run of the windows holding them, in the background (the original answers at once too).
- `POST /api/session_outcome`, `POST /api/get_session_outcomes` — client-reported outcomes, replacing the judge's
  inferred verdict in every read (`lake/reported_outcomes.py`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake import reported_outcomes
from reflexio_pipelines.lake.coverage import request_coverage
from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.partitions import GRANULARITY
from serving.deps import ServiceDep
from serving.errors import not_found
from serving.models.fields import MAX_ID
from serving.models.sessions import (
    FinalizeSessionRequest,
    FinalizeSessionResponse,
    GetSessionOutcomesRequest,
    GetSessionOutcomesResponse,
    LearningStatusResponse,
    SessionOutcomeRecord,
    SetSessionOutcomeRequest,
    SetSessionOutcomeResponse,
)
from serving.session_learning import learn_now, session_turns, windows_of
from serving.state import ServiceState

router = APIRouter()


@router.get(
    "/api/learning_status",
    response_model=LearningStatusResponse,
    response_model_exclude_none=True,
    responses={404: {"description": "no published turn has this request id"}},
)
def learning_status(
    state: ServiceDep, request_id: Annotated[str, Query(min_length=1, max_length=MAX_ID)]
) -> LearningStatusResponse | JSONResponse:
    """`pending` (with why) until a learning run has taken in every turn of the request, then `done`; `processing`
    while a run that took them in has not committed; `failed` once its automatic retries are spent."""
    coverage = request_coverage(state.lake, request_id, state.policy.config.groups(), GRANULARITY)
    if coverage is None:
        return not_found(f"request_id {request_id!r}", "message")
    return LearningStatusResponse(status=coverage.status, reason=coverage.reason)


@router.post("/api/finalize_session", response_model=FinalizeSessionResponse)
async def finalize_session(
    body: FinalizeSessionRequest, state: ServiceDep, background: BackgroundTasks
) -> FinalizeSessionResponse:
    """Accept the hint and learn the session's windows now, in the background (poll `learning_status`). A session
    without published turns is a successful no-op (`accepted: false`), as in the original."""
    turns = await run_in_threadpool(session_turns, state, body.user_id, body.session_id)
    if not turns:
        return FinalizeSessionResponse(success=True, accepted=False, message="No saved session to finalize.")
    background.add_task(learn_now, state, windows_of(turns), body.user_id)
    return FinalizeSessionResponse(
        success=True, accepted=True, message="Completion hint accepted; learning is asynchronous."
    )


def _identity(row: dict[str, Any] | None) -> dict[str, Any]:
    keys = ("outcome_id", "outcome_revision", "outcome_contract_digest", "finalized_trajectory_digest")
    return {k: row[k] for k in keys} if row else {}


@router.post("/api/session_outcome", response_model=SetSessionOutcomeResponse, response_model_exclude_none=True)
def set_session_outcome(body: SetSessionOutcomeRequest, state: ServiceDep) -> SetSessionOutcomeResponse:
    """Record the client's outcome of a session; it replaces the judge's verdict (`is_inferred`) in every read."""
    report = reported_outcomes.Report(**body.model_dump())
    done = reported_outcomes.record(state.lake, report)
    return SetSessionOutcomeResponse(
        success=done.reason is None,
        recorded=done.recorded,
        reason=done.reason,
        message=done.message,
        user_id=done.user_id,
        source=done.source,
        **_identity(done.row),
    )


def _matches(row: dict[str, Any], body: GetSessionOutcomesRequest) -> bool:
    return (
        (body.user_id is None or row["user_id"] == body.user_id)
        and (body.outcome is None or row["outcome"] == body.outcome)
        and (body.label is None or row["label"] == body.label)
        and (body.source is None or row["source"] == body.source)
        and (body.start_time is None or row["occurred_at"] >= body.start_time)
        and (body.end_time is None or row["occurred_at"] <= body.end_time)
    )


def _sources(state: ServiceState, session_ids: list[str]) -> dict[str, str]:
    """Each session's publish source, read from its turns (the judge's verdicts do not record it)."""
    if not session_ids:
        return {}
    return {t["session_id"]: t["source"] or "" for t in turn_rows(state.lake, [("session_id", "in", session_ids)])}


@router.post("/api/get_session_outcomes", response_model=GetSessionOutcomesResponse)
def get_session_outcomes(body: GetSessionOutcomesRequest, state: ServiceDep) -> GetSessionOutcomesResponse:
    """Session outcomes newest first: the client's report where there is one, else the judge's inferred verdict."""
    rows = reported_outcomes.outcomes(state.lake, body.session_ids)
    sources = _sources(state, [r["session_id"] for r in rows])
    rows = [dict(r, source=r["source"] or sources.get(r["session_id"], "")) for r in rows]
    kept = [r for r in rows if _matches(r, body)][body.offset : body.offset + body.top_k]
    records = [
        SessionOutcomeRecord(
            **{k: v for k, v in row.items() if k != "metadata"},
            metadata=json.loads(row["metadata"]) if row["metadata"] else None,
        )
        for row in kept
    ]
    return GetSessionOutcomesResponse(success=True, session_outcomes=records)
