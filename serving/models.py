"""Request and response shapes of the REST surface, compatible with the original Reflexio API (§6.1)."""

from __future__ import annotations

import typing
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator, model_validator

from reflexio_pipelines.lake.llm_calls import DailyUsage
from reflexio_pipelines.textclean import strip_invisible


MAX_TEXT = 100_000
MAX_ID = 256
MAX_INT64 = 2**63 - 1  # ids and times end up in Arrow int64 filters: larger numbers are a 422, not an overflow


def strip_control(value: str) -> str:
    """Remove control and invisible format characters from a text field, so that nothing invisible reaches prompts,
    indexes or analysts' terminals (`reflexio_pipelines/textclean.py`: C0 except tab/newline/CR, C1, zero-width and
    bidi characters; a joiner inside an emoji sequence or a joining script stays)."""
    return strip_invisible(value)


def _cleaned(value: Any) -> Any:
    """Strings stripped, also inside the dicts and lists a field holds (e.g. a tool call's `tool_data`)."""
    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def _takes_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any:
        return True
    return any(_takes_bool(arg) for arg in typing.get_args(annotation))


class _Clean(BaseModel):
    """Base: strips control characters from every string field."""

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, (str, dict, list)):
            return _cleaned(value)
        if isinstance(value, bool) and not _takes_bool(cls.model_fields[info.field_name].annotation):
            # Pydantic's lax mode would read true/false as 1/0 (e.g. a start_time); the schema says number.
            raise ValueError("a boolean is not allowed here")
        return value


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


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


#: A user id: 1..MAX_ID characters, not only whitespace.
UserId = Annotated[str, Field(min_length=1, max_length=MAX_ID), AfterValidator(_not_blank)]


class PublishUserInteractionRequest(_Clean):
    """POST /api/publish_interaction body."""

    model_config = ConfigDict(extra="ignore")
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
    #: The session the answer is for (not in the original's shape): the outcome counters join what was served with
    #: what happened next in this session; without it, the user's next turns decide (a heuristic).
    session_id: str | None = Field(None, max_length=MAX_ID)

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
    #: True when the user is in the holdout control group: no learned context, by design (serving/outcomes.py).
    holdout: bool = False


class RerunProfileGenerationRequest(_Clean):
    """POST /api/rerun_profile_generation (the original's shape)."""

    model_config = ConfigDict(extra="ignore")
    user_id: str | None = Field(None, max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0, le=MAX_INT64)
    end_time: int | None = Field(None, ge=0, le=MAX_INT64)
    source: str | None = Field(None, max_length=MAX_ID)
    extractor_names: list[str] | None = None


class RerunPlaybookGenerationRequest(_Clean):
    """POST /api/rerun_playbook_generation (the original's shape)."""

    model_config = ConfigDict(extra="ignore")
    agent_version: str = Field("agent-v0", max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0, le=MAX_INT64)
    end_time: int | None = Field(None, ge=0, le=MAX_INT64)
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
    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)
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


class ReviewFlaggedItemRequest(_Clean):
    """POST /api/review_flagged_item: a reviewer keeps an item its outcome counters flagged (it is served again;
    the counters flag it again only on new harmful evidence). To retire it instead, reject (agent playbooks) or
    delete it (profiles, user playbooks) through the usual endpoints."""

    model_config = ConfigDict(extra="ignore")
    entity: Literal["profile", "user_playbook", "agent_playbook"]
    item_id: str = Field(min_length=1, max_length=MAX_ID)
    decision: Literal["keep"] = "keep"
    reason: str = Field("", max_length=1000)


class LLMUsageResponse(BaseModel):
    """GET /api/llm_usage: the LLM call ledger summed per UTC day (see `reflexio_pipelines.lake.llm_calls`)."""

    success: bool = True
    days: list[DailyUsage] = Field(description="oldest first; a day appears when it had LLM calls or turns")
    msg: str = ""


# ---------------------------------------------------------------------------------------------------------------
# The rest of the original's surface: per-entity search, reads, manual adds, edits, deletes, config.
# Times are accepted as unix seconds or ISO-8601 (the original client sends datetimes) and used as unix seconds.

#: ISO-8601 or unix seconds (the schema says so, so clients and fuzzers know numbers are accepted).
Timestamp = Annotated[datetime, WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time"},
                                                         {"type": "number"}]})]  # fmt: skip
Status = Literal["current", "pending", "archived", "archive_in_progress"]
PlaybookStatus = Literal["pending", "approved", "rejected"]
SearchModeName = Literal["vector", "fts", "hybrid"]


class _TimeRange(_Clean):
    model_config = ConfigDict(extra="ignore")
    start_time: Timestamp | None = None
    end_time: Timestamp | None = None

    @model_validator(mode="after")
    def _ordered(self) -> "_TimeRange":
        if self.start_time and self.end_time and self.end_time < self.start_time:
            raise ValueError("end_time must not be before start_time")
        return self

    @property
    def start_unix(self) -> int | None:
        return None if self.start_time is None else int(self.start_time.timestamp())

    @property
    def end_unix(self) -> int | None:
        return None if self.end_time is None else int(self.end_time.timestamp())


class SearchProfilesRequest(_TimeRange):
    """POST /api/search_profiles (the original's SearchUserProfileRequest)."""

    user_id: UserId
    generated_from_request_id: str | None = Field(None, max_length=MAX_ID)
    query: str | None = Field(None, max_length=4096)
    top_k: int = Field(10, ge=1, le=100)
    source: str | None = Field(None, max_length=MAX_ID)
    custom_feature: str | None = Field(None, max_length=MAX_ID)
    extractor_name: str | None = Field(None, max_length=MAX_ID)
    threshold: float = Field(0.4, ge=0.0, le=1.0)
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"


class SearchUserPlaybooksRequest(_TimeRange):
    """POST /api/search_user_playbooks."""

    query: str | None = Field(None, max_length=4096)
    user_id: str | None = Field(None, max_length=MAX_ID)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None
    top_k: int = Field(10, ge=1, le=100)
    threshold: float = Field(0.4, ge=0.0, le=1.0)
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"


class SearchAgentPlaybooksRequest(_TimeRange):
    """POST /api/search_agent_playbooks. `playbook_status_filter` takes one status or a list (default: approved
    and pending, so a rejected playbook is only found when asked for)."""

    query: str | None = Field(None, max_length=4096)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None
    playbook_status_filter: PlaybookStatus | list[PlaybookStatus] | None = None
    top_k: int = Field(10, ge=1, le=100)
    threshold: float = Field(0.4, ge=0.0, le=1.0)
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"


class SearchInteractionsRequest(_TimeRange):
    """POST /api/search_interactions."""

    user_id: UserId
    request_id: str | None = Field(None, max_length=MAX_ID)
    query: str | None = Field(None, max_length=4096)
    top_k: int | None = Field(None, ge=1, le=1000)
    most_recent_k: int | None = Field(None, ge=1, le=1000)
    search_mode: SearchModeName = "hybrid"


class GetInteractionsRequest(_TimeRange):
    """POST /api/get_interactions."""

    user_id: UserId
    top_k: int = Field(30, ge=1, le=10_000)


class GetRequestsRequest(_TimeRange):
    """POST /api/get_requests."""

    user_id: str | None = Field(None, max_length=MAX_ID)
    request_id: str | None = Field(None, max_length=MAX_ID)
    session_id: str | None = Field(None, max_length=MAX_ID)
    top_k: int = Field(30, ge=1, le=10_000)
    offset: int = Field(0, ge=0, le=MAX_INT64)


class GetProfilesRequest(_TimeRange):
    """POST /api/get_profiles."""

    user_id: UserId
    top_k: int = Field(30, ge=1, le=10_000)
    status_filter: list[Status | None] | None = None


class GetUserPlaybooksRequest(_Clean):
    """POST /api/get_user_playbooks (no status filter = every status, as in the original)."""

    model_config = ConfigDict(extra="ignore")
    limit: int = Field(100, ge=1, le=10_000)
    user_id: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None


class BlockingIssue(_Clean):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["missing_tool", "permission_denied", "external_dependency", "policy_restriction"]
    details: str = Field("", max_length=MAX_TEXT)


class StructuredData(_Clean):
    """The newer client's home for trigger / rationale / blocking_issue (the snapshot API has them top-level)."""

    model_config = ConfigDict(extra="ignore")
    rationale: str | None = Field(None, max_length=MAX_TEXT)
    trigger: str | None = Field(None, max_length=MAX_TEXT)
    instruction: str | None = Field(None, max_length=MAX_TEXT)
    blocking_issue: BlockingIssue | None = None


class _PlaybookFields(_Clean):
    """Playbook text fields, accepted top-level or under `structured_data`."""

    model_config = ConfigDict(extra="ignore")
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
        out = {"playbook_name": self.playbook_name, "content": self.content or sd.instruction,
               "trigger": self.trigger or sd.trigger, "rationale": self.rationale or sd.rationale}  # fmt: skip
        if blocking is not None:
            out.update(blocking_issue_kind=blocking.kind, blocking_issue_details=blocking.details)
        return {k: v for k, v in out.items() if v is not None}


class NewUserPlaybook(_PlaybookFields):
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


class AddUserPlaybookRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_playbooks: list[NewUserPlaybook] = Field(min_length=1, max_length=1000)


class NewAgentPlaybook(_PlaybookFields):
    agent_version: str = Field(min_length=1, max_length=MAX_ID)
    content: str = Field(min_length=1, max_length=MAX_TEXT)
    playbook_status: PlaybookStatus = "pending"
    playbook_metadata: str = Field("", max_length=MAX_TEXT)


class AddAgentPlaybookRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    agent_playbooks: list[NewAgentPlaybook] = Field(min_length=1, max_length=1000)


class NewUserProfile(_Clean):
    model_config = ConfigDict(extra="ignore")
    profile_id: str | None = Field(None, max_length=MAX_ID)
    user_id: UserId
    content: str = Field(min_length=1, max_length=MAX_TEXT)
    generated_from_request_id: str = Field("", max_length=MAX_ID)
    profile_time_to_live: Literal["one_day", "one_week", "one_month", "one_quarter", "one_year", "infinity"] = "infinity"
    custom_features: dict[str, Any] | None = None
    source: str | None = Field(None, max_length=MAX_ID)
    extractor_names: list[str] | None = None

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class AddUserProfileRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_profiles: list[NewUserProfile] = Field(min_length=1, max_length=1000)


class UpdateUserPlaybookRequest(_PlaybookFields):
    """PUT /api/update_user_playbook."""

    user_playbook_id: int = Field(gt=0, le=MAX_INT64)


class UpdateAgentPlaybookRequest(_PlaybookFields):
    """PUT /api/update_agent_playbook."""

    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)
    playbook_status: PlaybookStatus | None = None


class UpdateUserProfileRequest(_Clean):
    """PUT /api/update_user_profile."""

    model_config = ConfigDict(extra="ignore")
    user_id: UserId
    profile_id: str = Field(min_length=1, max_length=MAX_ID)
    content: str | None = Field(None, min_length=1, max_length=MAX_TEXT)
    custom_features: dict[str, Any] | None = None


class DeleteProfileRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_id: UserId
    profile_id: str = Field("", max_length=MAX_ID)
    search_query: str = Field("", max_length=4096)

    @model_validator(mode="after")
    def _one_target(self) -> "DeleteProfileRequest":
        if not (self.profile_id or self.search_query.strip()):
            raise ValueError("give profile_id or search_query")
        return self


class DeleteInteractionRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_id: UserId
    interaction_id: int = Field(gt=0, le=MAX_INT64)


class DeleteRequestRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    request_id: str = Field(min_length=1, max_length=MAX_ID)


class DeleteSessionRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    session_id: str = Field(min_length=1, max_length=MAX_ID)


class DeleteAgentPlaybookRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    agent_playbook_id: int = Field(gt=0, le=MAX_INT64)


class DeleteUserPlaybookRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_playbook_id: int = Field(gt=0, le=MAX_INT64)


class DeleteRequestsByIdsRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    request_ids: list[str] = Field(min_length=1, max_length=10_000)


class DeleteProfilesByIdsRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    profile_ids: list[str] = Field(min_length=1, max_length=10_000)


class DeleteAgentPlaybooksByIdsRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    agent_playbook_ids: list[Annotated[int, Field(gt=0, le=MAX_INT64)]] = Field(min_length=1, max_length=10_000)


class DeleteUserPlaybooksByIdsRequest(_Clean):
    model_config = ConfigDict(extra="ignore")
    user_playbook_ids: list[Annotated[int, Field(gt=0, le=MAX_INT64)]] = Field(min_length=1, max_length=10_000)


class ExportUserDataRequest(_Clean):
    """POST /api/export_user_data body."""

    model_config = ConfigDict(extra="ignore")
    user_id: UserId
    format: Literal["json", "parquet"] = "json"


class EraseUserDataRequest(_Clean):
    """DELETE /api/erase_user_data body."""

    model_config = ConfigDict(extra="ignore")
    user_id: UserId


# ---------------------------------------------------------------------------------------------------------------
# Organisation config and background operations (the original's response models, so its client parses them).


class SetConfigResponse(BaseModel):
    """POST /api/set_config."""

    success: bool
    msg: str = ""


class MyConfigResponse(BaseModel):
    """GET /api/my_config: always `success: false` here (the original hands out storage credentials)."""

    success: bool
    storage_config: dict[str, Any] | None = None
    storage_type: str | None = None
    message: str = ""


class OperationStatusInfo(BaseModel):
    """Progress of a rerun (the original's OperationStatusInfo; every field it requires is always present)."""

    model_config = ConfigDict(extra="allow")  # operation_id and other additions reach the caller
    service_name: str
    status: Literal["in_progress", "completed", "failed", "cancelled"]
    started_at: int = 0
    completed_at: int | None = None
    total_users: int = 0
    processed_users: int = 0
    failed_users: int = 0
    current_user_id: str | None = None
    processed_user_ids: list[str] = Field(default_factory=list)
    failed_user_ids: list[dict[str, Any]] = Field(default_factory=list)
    request_params: dict[str, Any] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)
    error_message: str | None = None
    progress_percentage: float = Field(0.0, ge=0.0, le=100.0)
    #: The process running it and its last sign of life (a rerun whose process died is reported `failed` with
    #: `interrupted: true`, and no longer blocks a new one).
    owner_pid: int | None = None
    owner_host: str | None = None
    heartbeat_at: float | None = None
    interrupted: bool = False


class GetOperationStatusResponse(BaseModel):
    """GET /api/get_operation_status."""

    success: bool
    operation_status: OperationStatusInfo | None = None
    msg: str | None = None


class CancelOperationRequest(_Clean):
    """POST /api/cancel_operation: one service, or both when omitted. `force` settles a hung rerun as cancelled at
    once instead of asking it to stop before its next user."""

    model_config = ConfigDict(extra="ignore")
    service_name: Literal["profile_generation", "playbook_generation", "feedback_generation"] | None = None
    force: bool = False


class CancelOperationResponse(BaseModel):
    """POST /api/cancel_operation."""

    success: bool
    cancelled_services: list[str] = Field(default_factory=list)
    msg: str | None = None
