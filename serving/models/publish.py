"""POST /api/publish_interaction: the turns a client sends, and the acknowledgement."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from serving.models.fields import MAX_ID, MAX_TEXT, CleanModel, UserId


class ToolUsed(CleanModel):
    tool_name: str = Field(min_length=1, max_length=MAX_ID)
    tool_data: dict[str, Any] = Field(default_factory=dict)


class InteractionData(CleanModel):
    """One turn as the client sends it (the original's InteractionData)."""

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


class PublishUserInteractionRequest(CleanModel):
    """POST /api/publish_interaction body."""

    user_id: UserId
    interaction_data_list: list[InteractionData] = Field(min_length=1, max_length=1000)
    source: str = Field("", max_length=MAX_ID)
    agent_version: str = Field("", max_length=MAX_ID)
    session_id: str | None = Field(None, max_length=MAX_ID)
    skip_aggregation: bool = False
    force_extraction: bool = False
    idempotency_key: str | None = Field(None, min_length=1, max_length=MAX_ID)


class PublishUserInteractionResponse(BaseModel):
    success: bool
    message: str = ""
    warnings: list[str] = Field(default_factory=list)
    request_id: str = ""
    storage_type: str = "lake"
    storage_label: str = ""
    profiles_added: int | None = None
    playbooks_added: int | None = None
    #: With `wait_for_response`: whether the turns were learned from and indexed (False: learning failed, the
    #: message says why, and the window is retried by a later run). Absent without it.
    learned: bool | None = None
