"""Grading on demand and evaluation regeneration at the original's paths (reflexio-ai 0.2.32's
eval_overview_schema: GradeOnDemand*, Regenerate*)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from serving.models.fields import MAX_ID, MAX_INT64, CleanModel
from serving.models.sessions import SessionId


class GradeOnDemandRequest(CleanModel):
    """POST /api/evaluations/grade_on_demand. `evaluation_name` is accepted and ignored, as in the original (its
    deprecated compatibility field): every configured evaluator grades the session."""

    session_id: SessionId
    agent_version: str = Field(min_length=1, max_length=MAX_ID)
    evaluation_name: str | None = Field(None, min_length=1, max_length=MAX_ID)


class GradeOnDemandResponse(BaseModel):
    """`result_id` of the session's evaluation row (its integer form); `cached` when it had been graded before;
    `skipped_reason` NO_REQUESTS for a session without turns of that agent version, NO_EVALUATOR when evaluation is
    switched off (no agent_success_configs)."""

    session_id: str
    result_id: int | None = None
    cached: bool = False
    skipped_reason: str | None = None
    retrieved_learning_status: str | None = None


class RegenerateRequest(CleanModel):
    """POST /api/evaluations/regenerate: grade every session with a turn in [from_ts, to_ts] (unix seconds)."""

    evaluation_name: str | None = Field(None, min_length=1, max_length=MAX_ID)
    from_ts: int = Field(ge=0, le=MAX_INT64)
    to_ts: int = Field(ge=0, le=MAX_INT64)

    @model_validator(mode="after")
    def _window(self) -> RegenerateRequest:
        if self.from_ts >= self.to_ts:
            raise ValueError("from_ts must be strictly before to_ts")
        return self


class RegenerateStartResponse(BaseModel):
    job_id: str
    total: int


class RegenerateFailure(BaseModel):
    session_id: str
    reason: str


class RegenerateStatusResponse(BaseModel):
    """GET /api/evaluations/regenerate/{job_id}. No sampling here: `sampled_count` equals `total_candidates`, and
    the job is one run (`concurrency_limit` 1)."""

    job_id: str
    status: Literal["running", "completed", "cancelled", "error"]
    total: int
    completed: int
    failed: int
    failures: list[RegenerateFailure]
    started_at: float
    finished_at: float | None = None
    total_candidates: int
    sampled_count: int
    concurrency_limit: int = 1


class RegenerateCancelResponse(BaseModel):
    """DELETE /api/evaluations/regenerate/{job_id}: the original answers {"status": "cancelled"}; `job_id` added."""

    status: str
    job_id: str
