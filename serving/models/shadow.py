"""GET /api/evaluations/shadow_comparisons/recent (reflexio-ai 0.2.32 ShadowComparisonVerdict and
GetRecentShadowComparisonsResponse)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class ShadowComparisonOutput(BaseModel):
    better_request: Literal["1", "2", "tie"]
    is_significantly_better: bool
    comparison_reason: str | None = None


class ShadowComparisonVerdict(BaseModel):
    verdict_id: int
    interaction_id: str
    session_id: str
    agent_version: str
    reflexio_is_request_1: bool
    output: ShadowComparisonOutput
    judge_prompt_version: str
    created_at: datetime


class RecentShadowComparisonsResponse(BaseModel):
    verdicts: list[ShadowComparisonVerdict] = Field(default_factory=list)
