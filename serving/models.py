"""Request and response shapes of the REST surface, compatible with the original Reflexio API (§6.1)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# C0 control characters except tab, newline and carriage return: stripped from stored text so that nothing
# invisible reaches prompts, indexes or analysts' terminals.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

MAX_TEXT = 100_000
MAX_ID = 256


def strip_control(value: str) -> str:
    """Remove control characters from a text field."""
    return _CONTROL.sub("", value)


class _Clean(BaseModel):
    """Base: strips control characters from every string field."""

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return strip_control(value) if isinstance(value, str) else value


class ToolUsed(_Clean):
    model_config = ConfigDict(extra="ignore")
    tool_name: str = Field(min_length=1, max_length=MAX_ID)
    tool_data: dict[str, Any] = Field(default_factory=dict)


class InteractionData(_Clean):
    """One turn as the client sends it (the original's InteractionData)."""

    model_config = ConfigDict(extra="ignore")
    role: str = Field("User", max_length=64)
    content: str = Field("", max_length=MAX_TEXT)
    tools_used: list[ToolUsed] = Field(default_factory=list, max_length=100)
    expert_content: str = Field("", max_length=MAX_TEXT)
    shadow_content: str = Field("", max_length=MAX_TEXT)
    user_action: Literal["click", "scroll", "type", "none"] = "none"
    user_action_description: str = Field("", max_length=MAX_TEXT)
    interacted_image_url: str = Field("", max_length=4096)
    image_encoding: str = Field("", max_length=0, description="not supported: images are not stored")
    created_at: int | None = Field(None, ge=0, le=4_102_444_800, description="unix seconds; default: receipt time")

    @model_validator(mode="after")
    def _preconditions(self) -> "InteractionData":
        if self.user_action != "none" and not self.user_action_description:
            raise ValueError("user_action_description is required when user_action is not 'none'")
        if not (self.content or self.interacted_image_url or self.user_action != "none" or self.tools_used):
            raise ValueError("a turn needs content, tools_used, a user_action or an interacted_image_url")
        return self


class PublishUserInteractionRequest(_Clean):
    """POST /api/publish_interaction body."""

    model_config = ConfigDict(extra="ignore")
    user_id: str = Field(min_length=1, max_length=MAX_ID)
    interaction_data_list: list[InteractionData] = Field(min_length=1, max_length=1000)
    source: str = Field("", max_length=MAX_ID)
    agent_version: str = Field("", max_length=MAX_ID)
    session_id: str | None = Field(None, max_length=MAX_ID)
    skip_aggregation: bool = False
    force_extraction: bool = False
    idempotency_key: str | None = Field(None, min_length=1, max_length=MAX_ID)

    @field_validator("user_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class PublishUserInteractionResponse(BaseModel):
    success: bool
    message: str = ""
    warnings: list[str] = Field(default_factory=list)
    request_id: str = ""
    storage_type: str = "lake"
    storage_label: str = ""
    profiles_added: int | None = None
    playbooks_added: int | None = None


class ConversationTurn(_Clean):
    role: str = Field(max_length=64)
    content: str = Field(max_length=MAX_TEXT)


class UnifiedSearchRequest(_Clean):
    """POST /api/search body (the original's UnifiedSearchRequest)."""

    model_config = ConfigDict(extra="ignore")
    query: str = Field(min_length=1, max_length=4096)
    top_k: int = Field(5, ge=1, le=100)
    threshold: float = Field(0.3, ge=0.0, le=1.0)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    user_id: str | None = Field(None, max_length=MAX_ID)
    conversation_history: list[ConversationTurn] | None = None
    enable_reformulation: bool = False
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class UnifiedSearchResponse(BaseModel):
    success: bool
    profiles: list[dict[str, Any]] = Field(default_factory=list)
    user_playbooks: list[dict[str, Any]] = Field(default_factory=list)
    agent_playbooks: list[dict[str, Any]] = Field(default_factory=list)
    msg: str = ""
    index_version: str | None = None


class RerunProfileGenerationRequest(_Clean):
    """POST /api/rerun_profile_generation (the original's shape)."""

    model_config = ConfigDict(extra="ignore")
    user_id: str | None = Field(None, max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0)
    end_time: int | None = Field(None, ge=0)
    source: str | None = Field(None, max_length=MAX_ID)
    extractor_names: list[str] | None = None


class RerunPlaybookGenerationRequest(_Clean):
    """POST /api/rerun_playbook_generation (the original's shape)."""

    model_config = ConfigDict(extra="ignore")
    agent_version: str = Field("agent-v0", max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0)
    end_time: int | None = Field(None, ge=0)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    source: str | None = Field(None, max_length=MAX_ID)


class UpgradeProfilesRequest(_Clean):
    """POST /api/upgrade_all_profiles and /api/downgrade_all_profiles."""

    model_config = ConfigDict(extra="ignore")
    user_id: str | None = Field(None, max_length=MAX_ID)
    profile_ids: list[str] | None = None
    only_affected_users: bool = False


class UpgradeUserPlaybooksRequest(_Clean):
    """POST /api/upgrade_all_user_playbooks and /api/downgrade_all_user_playbooks."""

    model_config = ConfigDict(extra="ignore")
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    archive_current: bool = True


class RunPlaybookAggregationRequest(_Clean):
    """POST /api/run_playbook_aggregation. Omitted fields widen the scope (all agent versions / playbook names)."""

    model_config = ConfigDict(extra="ignore")
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)


class UpdateAgentPlaybookStatusRequest(_Clean):
    """PUT /api/update_agent_playbook_status."""

    model_config = ConfigDict(extra="ignore")
    agent_playbook_id: int = Field(gt=0)
    playbook_status: Literal["pending", "approved", "rejected"]


class GetAgentPlaybooksRequest(_Clean):
    """POST /api/get_agent_playbooks."""

    model_config = ConfigDict(extra="ignore")
    limit: int = Field(100, ge=1, le=10_000)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[str | None] | None = None
    playbook_status_filter: Literal["pending", "approved", "rejected"] | None = None


class DashboardStatsRequest(_Clean):
    """POST /api/get_dashboard_stats."""

    model_config = ConfigDict(extra="ignore")
    days_back: int = Field(30, ge=1, le=3650)


class EvaluationResultsRequest(_Clean):
    """POST /api/get_agent_success_evaluation_results."""

    model_config = ConfigDict(extra="ignore")
    limit: int = Field(100, ge=1, le=10_000)
    agent_version: str | None = Field(None, max_length=MAX_ID)
