"""Typed shapes of what the SDK sends and receives. Every response model keeps unknown fields (`extra="allow"`), so
a newer server's additions reach the caller instead of being dropped."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SearchMode = Literal["vector", "fts", "hybrid"]
PlaybookStatus = Literal["pending", "approved", "rejected"]
ExportFormat = Literal["json", "parquet"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class ToolUsed(_Model):
    """A tool call made while producing a turn."""

    tool_name: str
    tool_data: dict[str, Any] = Field(default_factory=dict)


class InteractionData(_Model):
    """One conversation turn to publish. The service validates it (and answers 422 naming the field)."""

    role: str = "User"
    content: str = ""
    tools_used: list[ToolUsed] = Field(default_factory=list)
    expert_content: str = ""
    shadow_content: str = ""
    user_action: Literal["click", "scroll", "type", "none"] = "none"
    user_action_description: str = ""
    interacted_image_url: str = ""
    created_at: int | None = Field(None, description="unix seconds; default: when the service receives it")


class PublishResult(_Model):
    """The service's acknowledgement: the turns are durable. With `wait=True` also what was learned from them."""

    success: bool = True
    message: str = ""
    warnings: list[str] = Field(default_factory=list)
    request_id: str = ""
    storage_type: str | None = None
    storage_label: str | None = None
    profiles_added: int | None = None
    playbooks_added: int | None = None
    #: With `wait=True`: False when learning failed (the message says why; a later run retries the window).
    learned: bool | None = None


class BlockingIssue(_Model):
    kind: str
    details: str = ""


class Profile(_Model):
    """A fact about one user."""

    profile_id: str
    user_id: str = ""
    content: str
    last_modified_timestamp: int | None = None
    status: str | None = None
    source: str | None = None
    provenance: dict[str, Any] | None = None


class UserPlaybook(_Model):
    """A behaviour rule learned from one user's conversations: when `trigger`, do `content`."""

    user_playbook_id: int
    user_id: str | None = None
    agent_version: str = ""
    playbook_name: str = ""
    content: str = ""
    trigger: str | None = None
    rationale: str | None = None
    blocking_issue: BlockingIssue | None = None
    status: str | None = None
    created_at: int | None = None
    provenance: dict[str, Any] | None = None


class AgentPlaybook(_Model):
    """A rule consolidated across users, with its approval status."""

    agent_playbook_id: int
    playbook_name: str = ""
    agent_version: str = ""
    content: str = ""
    trigger: str | None = None
    rationale: str | None = None
    blocking_issue: BlockingIssue | None = None
    playbook_status: str = "pending"
    status: str | None = None
    created_at: int | None = None
    #: Review fields, in `get_agent_playbooks` only (search never serves them): who supported the rule and why it
    #: was flagged for review (None = nothing found).
    supporting_user_ids: list[str] = Field(default_factory=list)
    flag_reason: str | None = None


class Interaction(_Model):
    """A stored turn."""

    interaction_id: int | None = None
    user_id: str = ""
    request_id: str = ""
    role: str = ""
    content: str = ""
    created_at: int | None = None


class SearchResult(_Model):
    """Hybrid search hits per entity type, best first."""

    success: bool = True
    profiles: list[Profile] = Field(default_factory=list)
    user_playbooks: list[UserPlaybook] = Field(default_factory=list)
    agent_playbooks: list[AgentPlaybook] = Field(default_factory=list)
    msg: str | None = ""
    index_version: str | None = None
    holdout: bool = False  # the user is in the holdout control group: no learned context, by design

    @property
    def empty(self) -> bool:
        """True when nothing was found."""
        return not (self.profiles or self.user_playbooks or self.agent_playbooks)


class StatusUpdateResult(_Model):
    success: bool = True
    msg: str | None = ""


class Ack(_Model):
    """The answer of a manual add, edit or delete (`added_count` for adds)."""

    success: bool = True
    message: str | None = ""
    msg: str | None = ""
    added_count: int | None = None


class AggregationResult(_Model):
    """What an aggregation run changed; the run is visible in the Dagster UI under `run_id`."""

    success: bool = True
    message: str = ""
    run_id: str | None = None


class OperationStatus(_Model):
    """Progress of a background operation (rerun) as the original's OperationStatusInfo."""

    status: str | None = None
    operation_id: str | None = None
    error_message: str | None = None
    started_at: int | None = None
    completed_at: int | None = None
    progress_percentage: float | None = None
    #: Its process died without recording an end; `status` is then "failed" and a new rerun may start.
    interrupted: bool = False
    heartbeat_at: float | None = None


class CancelResult(_Model):
    """Which services' running operations were cancelled (or, forced, cleared)."""

    success: bool = True
    cancelled_services: list[str] = Field(default_factory=list)
    msg: str | None = ""


class EraseResult(_Model):
    """What erasing a user removed (counts per table, as the service reports them)."""

    success: bool = True
    message: str | None = ""


class ErasureRequest(_Model):
    """One erasure the service remembers, by its id (a salted hash: no user id)."""

    erasure_id: str
    status: str | None = None  # in_progress | completed
    started_at: int | None = None
    completed_at: int | None = None
    erased: dict[str, int] = Field(default_factory=dict)


class Erasures(_Model):
    """`GET /api/erasures`: every erasure request, oldest first."""

    success: bool = True
    erasures: list[ErasureRequest] = Field(default_factory=list)


class Health(_Model):
    status: str
    index_version: str | None = None


class WhoAmI(_Model):
    """The caller's identity as the service resolved it from the API key."""

    success: bool = True
    org_id: str = ""
    storage_type: str | None = None
    storage_label: str | None = None
    storage_configured: bool = False
    message: str | None = ""
