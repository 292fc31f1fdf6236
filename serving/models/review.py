"""POST /api/review_user_playbooks (reflexio-ai 0.2.32 ReviewUserPlaybooks*)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from serving.models.fields import CleanModel


class ReviewUserPlaybooksRequest(CleanModel):
    """Current user playbooks created in [start_time, end_time], newest `top_k`. `report_only` false (apply the
    decisions) is refused with a 422: retire a rejected playbook with delete_user_playbook, or keep a flagged one
    with review_flagged_item."""

    start_time: datetime
    end_time: datetime
    top_k: int = Field(10, gt=0, le=100)
    report_only: bool = True

    @model_validator(mode="after")
    def _checks(self) -> ReviewUserPlaybooksRequest:
        if self.start_time >= self.end_time:
            raise ValueError("start_time must be before end_time")
        if not self.report_only:
            raise ValueError(
                "report_only: applying review decisions is not supported by this service; report_only must be true "
                "(retire with delete_user_playbook, keep a flagged item with review_flagged_item)"
            )
        return self


class ReviewUserPlaybookResult(BaseModel):
    user_playbook_id: int
    decision: Literal["accept", "edit", "reject", "skip"]
    reason_code: str
    reason: str | None = None
    edit: dict | None = None
    applied: bool = False
    successor_user_playbook_id: int | None = None


class ReviewUserPlaybooksResponse(BaseModel):
    success: bool
    report_only: bool = True
    run_id: str | None = None
    selected_count: int = 0
    accepted_count: int = 0
    edited_count: int = 0
    rejected_count: int = 0
    skipped_count: int = 0
    results: list[ReviewUserPlaybookResult] = Field(default_factory=list)
    msg: str | None = None
