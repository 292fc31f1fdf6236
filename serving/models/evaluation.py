"""Evaluation reads: impact metrics, outcome counters and their review, LLM usage, the original's dashboard stats
and evaluation results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from reflexio_pipelines.lake.llm_calls import DailyUsage
from serving.models.acks import rows_response
from serving.models.fields import MAX_ID, CleanModel


class DashboardStatsRequest(CleanModel):
    """POST /api/get_dashboard_stats."""

    days_back: int = Field(30, ge=1, le=3650)


class EvaluationResultsRequest(CleanModel):
    """POST /api/get_agent_success_evaluation_results."""

    limit: int = Field(100, ge=1, le=10_000)
    agent_version: str | None = Field(None, max_length=MAX_ID)


class ReviewFlaggedItemRequest(CleanModel):
    """POST /api/review_flagged_item: a reviewer keeps an item its outcome counters flagged (it is served again;
    the counters flag it again only on new harmful evidence). To retire it instead, reject (agent playbooks) or
    delete it (profiles, user playbooks) through the usual endpoints."""

    entity: Literal["profile", "user_playbook", "agent_playbook"]
    item_id: str = Field(min_length=1, max_length=MAX_ID)
    decision: Literal["keep"] = "keep"
    reason: str = Field("", max_length=1000)


class ExtractorInfo(BaseModel):
    """Which extractor learns, what kind of thing it is, and (for the learned built-in) its measured precision and
    recall on the lasting kinds of its development split."""

    name: str
    model: str
    kind: str = Field(description="LLM, learned heuristic, or heuristic (rules)")
    precision: float | None = None
    recall: float | None = None


class LLMUsageResponse(BaseModel):
    """GET /api/llm_usage: the LLM call ledger summed per UTC day (see `reflexio_pipelines.lake.llm_calls`)."""

    success: bool = True
    days: list[DailyUsage] = Field(description="oldest first; a day appears when it had LLM calls or turns")
    extractor: ExtractorInfo | None = None
    msg: str = ""


class ImpactMetricsResponse(BaseModel):
    """GET /api/impact_metrics: rows of the impact_metrics, impact_holdout and impact_before_after tables."""

    success: bool
    metrics: list[dict[str, Any]]
    holdout: list[dict[str, Any]]
    before_after: list[dict[str, Any]]
    msg: str


ItemOutcomesResponse = rows_response(
    "ItemOutcomesResponse", "items", "GET /api/item_outcomes: outcome counters per learned item, with its text."
)


OutcomeChangeLogResponse = rows_response("OutcomeChangeLogResponse", "entries", "GET /api/outcome_change_log.")


class ReviewFlaggedItemResponse(BaseModel):
    """POST /api/review_flagged_item: the decision's id in the outcome change log."""

    success: bool
    msg: str
    action_id: str


EvaluationResultsResponse = rows_response(
    "EvaluationResultsResponse",
    "agent_success_evaluation_results",
    "POST /api/get_agent_success_evaluation_results: rows of session_evaluations.",
)


class PeriodStats(BaseModel):
    """Counts of one period of the dashboard stats."""

    total_interactions: int
    total_profiles: int
    total_playbooks: int
    success_rate: float


class TimePoint(BaseModel):
    """One UTC day of a dashboard series: a count, or a success rate in percent."""

    timestamp: int
    value: int | float


class DashboardStats(BaseModel):
    """The original's DashboardStats."""

    current_period: PeriodStats
    previous_period: PeriodStats
    interactions_time_series: list[TimePoint]
    profiles_time_series: list[TimePoint]
    playbooks_time_series: list[TimePoint]
    evaluations_time_series: list[TimePoint]


class DashboardStatsResponse(BaseModel):
    """POST /api/get_dashboard_stats."""

    success: bool
    stats: DashboardStats
    msg: str
