"""The session lifecycle of the original (reflexio-client 0.2.16, reflexio-ai 0.2.32): learning status of a
publish, finalize_session, and client-reported session outcomes."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from serving.models.fields import MAX_ID, MAX_INT64, CleanModel, UserId

OutcomeKind = Literal["success", "failure", "unknown"]
FailureReason = Literal[
    "conflicting_finalization",
    "unknown_session",
    "occurred_before_session",
    "occurred_in_future",
    "after_outcome_window",
    "subject_not_writable",
    "storage_error",
]
#: A session id: 1..MAX_ID characters, not only whitespace.
SessionId = Annotated[str, Field(min_length=1, max_length=MAX_ID, pattern=r"\S")]
MAX_METADATA_BYTES = 16 * 1024


class LearningStatusResponse(BaseModel):
    """GET /api/learning_status: `done` once a run has learned from every turn of the request."""

    status: Literal["pending", "processing", "done", "failed"]
    reason: str | None = None


class FinalizeSessionRequest(CleanModel):
    """POST /api/finalize_session."""

    user_id: UserId
    session_id: SessionId


class FinalizeSessionResponse(BaseModel):
    success: bool
    accepted: bool = False
    message: str = ""


class SetSessionOutcomeRequest(CleanModel):
    """POST /api/session_outcome (the original's SetSessionOutcomeRequest)."""

    session_id: SessionId
    outcome: OutcomeKind
    occurred_at: int = Field(ge=0, le=MAX_INT64)
    label: str | None = Field(None, max_length=128)
    value: float | None = Field(None, allow_inf_nan=False)
    metadata: dict[str, Any] | None = None

    @field_validator("label")
    @classmethod
    def _label(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value.strip() if value is not None else None

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                encoded = json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
            except (TypeError, ValueError):
                raise ValueError("metadata must contain only valid JSON values") from None
            if len(encoded) > MAX_METADATA_BYTES:
                raise ValueError(f"metadata must encode to at most {MAX_METADATA_BYTES} bytes")
        return value


class OutcomeIdentity(BaseModel):
    outcome_id: str | None = None
    outcome_revision: int | None = None
    outcome_contract_digest: str | None = None
    finalized_trajectory_digest: str | None = None


class SetSessionOutcomeResponse(OutcomeIdentity):
    success: bool
    recorded: bool = False
    reason: FailureReason | None = None
    message: str = ""
    user_id: str | None = None
    source: str | None = None


class GetSessionOutcomesRequest(CleanModel):
    """POST /api/get_session_outcomes: every filter given is applied."""

    session_ids: list[str] | None = Field(None, max_length=100)
    user_id: str | None = Field(None, max_length=MAX_ID)
    source: str | None = Field(None, max_length=128)
    outcome: OutcomeKind | None = None
    label: str | None = Field(None, max_length=128)
    start_time: int | None = Field(None, ge=0, le=MAX_INT64)
    end_time: int | None = Field(None, ge=0, le=MAX_INT64)
    top_k: int = Field(100, ge=1, le=1_000)
    offset: int = Field(0, ge=0, le=MAX_INT64)

    @model_validator(mode="after")
    def _range(self) -> "GetSessionOutcomesRequest":
        if self.start_time is not None and self.end_time is not None and self.start_time > self.end_time:
            raise ValueError("start_time must be less than or equal to end_time")
        return self


class SessionOutcomeRecord(OutcomeIdentity):
    user_id: str
    session_id: str
    outcome: OutcomeKind
    occurred_at: int
    source: str = ""
    label: str | None = None
    value: float | None = None
    metadata: dict[str, Any] | None = None
    created_at: int
    #: True for the judge's verdict (`session_evaluations`); False for a client's report, which replaces it.
    is_inferred: bool = False


class GetSessionOutcomesResponse(BaseModel):
    success: bool
    session_outcomes: list[SessionOutcomeRecord] = Field(default_factory=list)
    message: str = ""
