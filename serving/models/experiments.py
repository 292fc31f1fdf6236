"""Retrieval experiments: the original's request and response shapes (reflexio-client 0.2.16 `retriever_schema`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from serving.models.fields import CleanModel


class StartRetrievalExperimentRequest(CleanModel):
    experiment_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    holdout_percentage: float = Field(gt=0, lt=100)


class StopRetrievalExperimentRequest(CleanModel):
    experiment_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")


class RetrievalExperimentRecord(BaseModel):
    experiment_id: str
    holdout_percentage: float
    started_at: int
    ended_at: int | None = None


class RetrievalExperimentListResponse(BaseModel):
    active_experiment: RetrievalExperimentRecord | None = None
    experiments: list[RetrievalExperimentRecord] = Field(default_factory=list)


class RetrievalExperimentArmMetrics(BaseModel):
    arm: Literal["treatment", "holdout"]
    assigned_user_count: int = 0
    published_session_count: int = 0
    evaluated_user_count: int = 0
    evaluated_session_count: int = 0
    success_rate: float | None = None
    average_corrections: float | None = None
    average_turns_to_resolution: float | None = None
    escalation_rate: float | None = None
    average_output_tokens: float | None = None
    output_token_session_count: int = 0


class RetrievalExperimentResultsResponse(BaseModel):
    experiment: RetrievalExperimentRecord
    treatment: RetrievalExperimentArmMetrics
    holdout: RetrievalExperimentArmMetrics
    success_rate_lift_percentage_points: float | None = None
    relative_success_lift: float | None = None
    confidence_interval_95_percentage_points: tuple[float, float] | None = None
    evaluated_session_coverage: float | None = None
    unattributed_evaluated_session_count: int = 0
