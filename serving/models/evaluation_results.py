"""The original's retrieved-learning evaluation results (reflexio-client 0.2.16
`GetRetrievedLearningEvaluationResults*`, `RetrievedLearningEvaluationResult`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from serving.models.fields import MAX_ID, TimeRange


class GetRetrievedLearningEvaluationResultsRequest(TimeRange):
    """POST /api/get_retrieved_learning_evaluation_results; the time range is on the serve's time."""

    user_id: str | None = Field(None, max_length=MAX_ID)
    session_id: str | None = Field(None, max_length=MAX_ID)
    limit: int = Field(100, ge=1, le=1_000)


class RetrievedLearningEvaluationResult(BaseModel):
    result_id: int = 0
    user_id: str
    session_id: str
    agent_version: str = ""
    interaction_id: int | None = None
    interaction_created_at: int | None = None
    kind: Literal["profile", "user_playbook", "agent_playbook"]
    learning_id: str
    is_relevant: bool | None = None
    relevance_reason: str = ""
    impact: Literal["positive", "negative", "neutral"] | None = None
    impact_reason: str = ""
    created_at: int


class GetRetrievedLearningEvaluationResultsResponse(BaseModel):
    success: bool
    results: list[RetrievedLearningEvaluationResult] = Field(default_factory=list)
    msg: str | None = None
