"""Manual adds, edits and deletes (the curation log), and what they answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from serving.models.fields import MAX_ID, MAX_INT64, MAX_TEXT, CleanModel, PlaybookStatus, UserId


class BlockingIssue(CleanModel):
    kind: Literal["missing_tool", "permission_denied", "external_dependency", "policy_restriction"]
    details: str = Field("", max_length=MAX_TEXT)


class StructuredData(CleanModel):
    """The newer client's home for trigger / rationale / blocking_issue (the snapshot API has them top-level)."""

    rationale: str | None = Field(None, max_length=MAX_TEXT)
    trigger: str | None = Field(None, max_length=MAX_TEXT)
    instruction: str | None = Field(None, max_length=MAX_TEXT)
    blocking_issue: BlockingIssue | None = None


class PlaybookFields(CleanModel):
    """Playbook text fields, accepted top-level or under `structured_data`."""

    playbook_name: str | None = Field(None, max_length=MAX_ID)
    content: str | None = Field(None, max_length=MAX_TEXT)
    trigger: str | None = Field(None, max_length=MAX_TEXT)
    rationale: str | None = Field(None, max_length=MAX_TEXT)
    blocking_issue: BlockingIssue | None = None
    structured_data: StructuredData | None = None

    def text_fields(self) -> dict[str, Any]:
        """The set fields as table columns (structured_data fills what is not given top-level)."""
        sd = self.structured_data or StructuredData()
        blocking = self.blocking_issue or sd.blocking_issue
        out = {
            "playbook_name": self.playbook_name,
            "content": self.content or sd.instruction,
            "trigger": self.trigger or sd.trigger,
            "rationale": self.rationale or sd.rationale,
        }
        if blocking is not None:
            out.update(blocking_issue_kind=blocking.kind, blocking_issue_details=blocking.details)
        return {k: v for k, v in out.items() if v is not None}


class NewUserPlaybook(PlaybookFields):
    user_id: UserId
    agent_version: str = Field("agent-v0", max_length=MAX_ID)
    request_id: str = Field("", max_length=MAX_ID)
    source: str | None = Field(None, max_length=MAX_ID)

    @model_validator(mode="after")
    def _has_text(self) -> "NewUserPlaybook":
        fields = self.text_fields()
        if not (fields.get("content") or fields.get("trigger")):
            raise ValueError("each user playbook needs content or a trigger")
        return self


class AddUserPlaybookRequest(CleanModel):
    user_playbooks: list[NewUserPlaybook] = Field(min_length=1, max_length=1000)


class NewAgentPlaybook(PlaybookFields):
    agent_version: str = Field(min_length=1, max_length=MAX_ID)
    content: str = Field(min_length=1, max_length=MAX_TEXT)
    playbook_status: PlaybookStatus = "pending"
    playbook_metadata: str = Field("", max_length=MAX_TEXT)


class AddAgentPlaybookRequest(CleanModel):
    agent_playbooks: list[NewAgentPlaybook] = Field(min_length=1, max_length=1000)


class NewUserProfile(CleanModel):
    profile_id: str | None = Field(None, max_length=MAX_ID)
    user_id: UserId
    content: str = Field(min_length=1, max_length=MAX_TEXT)
    generated_from_request_id: str = Field("", max_length=MAX_ID)
    profile_time_to_live: Literal["one_day", "one_week", "one_month", "one_quarter", "one_year", "infinity"] = (
        "infinity"
    )
    custom_features: dict[str, Any] | None = None
    source: str | None = Field(None, max_length=MAX_ID)
    extractor_names: list[str] | None = None

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class AddUserProfileRequest(CleanModel):
    user_profiles: list[NewUserProfile] = Field(min_length=1, max_length=1000)


class UpdateUserPlaybookRequest(PlaybookFields):
    """PUT /api/update_user_playbook."""

    user_playbook_id: int = Field(gt=0, le=MAX_INT64)


class UpdateAgentPlaybookRequest(PlaybookFields):
    """PUT /api/update_agent_playbook."""

    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)
    playbook_status: PlaybookStatus | None = None


class UpdateUserProfileRequest(CleanModel):
    """PUT /api/update_user_profile."""

    user_id: UserId
    profile_id: str = Field(min_length=1, max_length=MAX_ID)
    content: str | None = Field(None, min_length=1, max_length=MAX_TEXT)
    custom_features: dict[str, Any] | None = None


class DeleteProfileRequest(CleanModel):
    user_id: UserId
    profile_id: str = Field("", max_length=MAX_ID)
    search_query: str = Field("", max_length=4096)

    @model_validator(mode="after")
    def _one_target(self) -> "DeleteProfileRequest":
        if not (self.profile_id or self.search_query.strip()):
            raise ValueError("give profile_id or search_query")
        return self


class DeleteInteractionRequest(CleanModel):
    user_id: UserId
    interaction_id: int = Field(gt=0, le=MAX_INT64)


class DeleteRequestRequest(CleanModel):
    request_id: str = Field(min_length=1, max_length=MAX_ID)


class DeleteSessionRequest(CleanModel):
    session_id: str = Field(min_length=1, max_length=MAX_ID)


class DeleteAgentPlaybookRequest(CleanModel):
    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)


class DeleteUserPlaybookRequest(CleanModel):
    user_playbook_id: int = Field(gt=0, le=MAX_INT64)


class DeleteRequestsByIdsRequest(CleanModel):
    request_ids: list[str] = Field(min_length=1, max_length=10_000)


class DeleteProfilesByIdsRequest(CleanModel):
    profile_ids: list[str] = Field(min_length=1, max_length=10_000)


class DeleteAgentPlaybooksByIdsRequest(CleanModel):
    agent_playbook_ids: list[Annotated[int, Field(gt=0, le=MAX_INT64)]] = Field(min_length=1, max_length=10_000)


class DeleteUserPlaybooksByIdsRequest(CleanModel):
    user_playbook_ids: list[Annotated[int, Field(gt=0, le=MAX_INT64)]] = Field(min_length=1, max_length=10_000)


class AddResponse(BaseModel):
    """POST /api/add_user_profile, /api/add_user_playbook and /api/add_agent_playbook."""

    success: bool
    message: str
    added_count: int


class DeleteSessionResponse(BaseModel):
    """DELETE /api/delete_session."""

    success: bool
    message: str
    deleted_requests_count: int


class BulkDeleteResponse(BaseModel):
    """The deletes of many items: by ids, and every item of a kind."""

    success: bool
    deleted_count: int
    message: str
