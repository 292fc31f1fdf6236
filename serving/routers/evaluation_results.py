"""`POST /api/get_retrieved_learning_evaluation_results`: the original's per-learning verdicts, here the outcome
counters' per-serve events (`item_outcome_events`, written by the evaluation run's heuristic matching rules,
learning/outcomes.py): each learned item served in a closed session with what the session showed about it.

Mapping: `helpful` → relevant, impact positive; `harmful` → relevant, negative; `missed` (the session repeated the
correction the item states) → relevant, neutral; no signal → relevance and impact unknown (null), as the original
reports a verdict it could not reach. The reasons name the rule that decided (turn ids, never text)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from reflexio_pipelines.learning.types import stable_int_id
from serving.deps import ServiceDep
from serving.models.evaluation_results import (
    GetRetrievedLearningEvaluationResultsRequest,
    GetRetrievedLearningEvaluationResultsResponse,
)

router = APIRouter()
IMPACT = {"helpful": "positive", "harmful": "negative", "missed": "neutral"}


def _result(event: dict[str, Any]) -> dict[str, Any]:
    served = (event["served_at_us"] or 0) // 1_000_000
    outcome = event["outcome"]
    reason = event["reason"] or ("no signal in the session" if outcome is None else outcome)
    return {
        "result_id": stable_int_id(f"{event['session_id']}\x1f{event['entity']}\x1f{event['item_id']}"),
        "user_id": event["user_id"],
        "session_id": event["session_id"],
        "agent_version": event["agent_version"] or "",
        "interaction_id": None,
        "interaction_created_at": served or None,
        "kind": event["entity"],
        "learning_id": event["item_id"],
        "is_relevant": None if outcome is None else True,
        "relevance_reason": "" if outcome is None else reason,
        "impact": IMPACT.get(outcome),
        "impact_reason": "" if outcome is None else reason,
        "created_at": served,
    }


@router.post(
    "/api/get_retrieved_learning_evaluation_results", response_model=GetRetrievedLearningEvaluationResultsResponse
)
def get_retrieved_learning_evaluation_results(
    body: GetRetrievedLearningEvaluationResultsRequest, state: ServiceDep
) -> dict[str, Any]:
    """Newest serves first, filtered by user, session and serve time; at most `limit`."""
    filters = [
        (name, "=", value) for name, value in (("user_id", body.user_id), ("session_id", body.session_id)) if value
    ]
    events = state.lake.read_table("item_outcome_events", filters=filters or None).to_pylist()
    rows = [
        _result(e)
        for e in sorted(events, key=lambda e: -(e["served_at_us"] or 0))
        if (body.start_unix is None or (e["served_at_us"] or 0) // 1_000_000 >= body.start_unix)
        and (body.end_unix is None or (e["served_at_us"] or 0) // 1_000_000 <= body.end_unix)
    ]
    return {"success": True, "results": rows[: body.limit], "msg": None}
