"""Durable aggregation operations: the original's SubmitPlaybookAggregationRequest and PlaybookAggregationOperation
(reflexio-ai 0.2.32, `reflexio.models.api_schema.aggregation_operations`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from serving.models.fields import CleanModel


class SubmitPlaybookAggregationRequest(CleanModel):
    """POST /api/playbook_aggregation_operations."""

    request_id: str = Field(min_length=1, max_length=200, pattern=r".*\S.*")
    agent_version: str = Field(min_length=1, max_length=200, pattern=r".*\S.*")


class PlaybookAggregationResult(BaseModel):
    clusters_found: int = 0
    user_playbooks_processed: int = 0
    playbooks_generated: int = 0
    skipped: str | None = None


class PlaybookAggregationOperation(BaseModel):
    operation_id: str
    request_id: str
    agent_version: str
    status: Literal["queued", "running", "retrying", "succeeded", "failed"]
    created_at: int
    updated_at: int
    started_at: int | None = None
    completed_at: int | None = None
    attempts: int = 0
    next_attempt_at: int | None = None
    error: str | None = None
    result: PlaybookAggregationResult | None = None
