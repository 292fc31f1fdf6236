"""Agent playbooks: aggregation runs, approval decisions, reads and the aggregation change log."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.models.acks import rows_response
from serving.models.fields import MAX_ID, MAX_INT64, CleanModel


class RunPlaybookAggregationRequest(CleanModel):
    """POST /api/run_playbook_aggregation. Omitted fields widen the scope (all agent versions / playbook names)."""

    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)


class UpdateAgentPlaybookStatusRequest(CleanModel):
    """PUT /api/update_agent_playbook_status."""

    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)
    playbook_status: Literal["pending", "approved", "rejected"]


class GetAgentPlaybooksRequest(CleanModel):
    """POST /api/get_agent_playbooks."""

    limit: int = Field(100, ge=1, le=10_000)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[str | None] | None = None
    playbook_status_filter: Literal["pending", "approved", "rejected"] | None = None


AgentPlaybooksResponse = rows_response(
    "AgentPlaybooksResponse", "agent_playbooks", "POST /api/get_agent_playbooks and POST /api/search_agent_playbooks."
)


class AggregationResponse(BaseModel):
    """POST /api/run_playbook_aggregation: the Dagster run, whether it succeeded, and the agent_playbooks
    materialisation's counts (e.g. `consolidate_new`, `reconsolidate`, `keep`)."""

    model_config = ConfigDict(extra="allow")  # the counts are whatever integer metadata the materialisation carries
    success: bool
    message: str
    run_id: str


class AggregationChangeLogsResponse(BaseModel):
    """GET /api/playbook_aggregation_change_logs: the original's PlaybookAggregationChangeLog entries."""

    success: bool
    change_logs: list[dict[str, Any]]
