"""POST /api/get_learning_provenance (reflexio-ai 0.2.32 GetLearningProvenanceRequest /
LearningProvenanceViewResponse), plus this service's `lineage` block."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from serving.models.fields import MAX_ID, CleanModel

Kind = Literal["profile", "user_playbook", "agent_playbook"]


class GetLearningProvenanceRequest(CleanModel):
    kind: Kind
    id: str = Field(min_length=1, max_length=MAX_ID)


class Lineage(BaseModel):
    """Where the item stands: current / pending / archived, or retired — `merged`, `superseded`, `expired` (the
    original's tombstone statuses), `forgotten`, `replaced` (this pipeline's) — with the row that retired it."""

    status: str
    by: str | None = None
    reason: str | None = None


class SourceUserPlaybookProvenance(BaseModel):
    user_playbook: dict[str, Any]
    interactions: list[dict[str, Any]] = Field(default_factory=list)
    source_interaction_ids: list[int] = Field(default_factory=list)


class LearningProvenanceResponse(BaseModel):
    success: bool
    target_kind: Kind
    target_id: str
    provenance_status: Literal["exact", "best_effort", "unavailable"] = "unavailable"
    trigger_request_id: str | None = None
    interactions: list[dict[str, Any]] = Field(default_factory=list)
    source_user_playbooks: list[SourceUserPlaybookProvenance] = Field(default_factory=list)
    msg: str | None = None
    lineage: Lineage | None = None
