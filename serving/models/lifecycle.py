"""Reruns, upgrades, downgrades and background operations (the original's response models, so its client parses
them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from serving.models.fields import MAX_ID, MAX_INT64, CleanModel


class RerunProfileGenerationRequest(CleanModel):
    """POST /api/rerun_profile_generation (the original's shape)."""

    user_id: str | None = Field(None, max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0, le=MAX_INT64)
    end_time: int | None = Field(None, ge=0, le=MAX_INT64)
    source: str | None = Field(None, max_length=MAX_ID)
    extractor_names: list[str] | None = None


class RerunPlaybookGenerationRequest(CleanModel):
    """POST /api/rerun_playbook_generation (the original's shape)."""

    agent_version: str = Field("agent-v0", max_length=MAX_ID)
    start_time: int | None = Field(None, ge=0, le=MAX_INT64)
    end_time: int | None = Field(None, ge=0, le=MAX_INT64)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    source: str | None = Field(None, max_length=MAX_ID)


class UpgradeProfilesRequest(CleanModel):
    """POST /api/upgrade_all_profiles and /api/downgrade_all_profiles."""

    user_id: str | None = Field(None, max_length=MAX_ID)
    profile_ids: list[str] | None = None
    only_affected_users: bool = False


class UpgradeUserPlaybooksRequest(CleanModel):
    """POST /api/upgrade_all_user_playbooks and /api/downgrade_all_user_playbooks."""

    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    archive_current: bool = True


class ManualGenerationRequest(RerunProfileGenerationRequest):
    """POST /api/manual_profile_generation and /api/manual_playbook_generation (extra fields are accepted and
    ignored: the run covers every published window not yet learned from, for every user)."""


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


class CancelOperationRequest(CleanModel):
    """POST /api/cancel_operation: one service, or both when omitted. `force` settles a hung rerun as cancelled at
    once instead of asking it to stop before its next user."""

    service_name: Literal["profile_generation", "playbook_generation", "feedback_generation"] | None = None
    force: bool = False


class CancelOperationResponse(BaseModel):
    """POST /api/cancel_operation."""

    success: bool
    cancelled_services: list[str] = Field(default_factory=list)
    msg: str | None = None


class ProfileGenerationResponse(BaseModel):
    """POST /api/manual_profile_generation."""

    success: bool
    msg: str
    profiles_generated: int


class RerunProfileGenerationResponse(ProfileGenerationResponse):
    """POST /api/rerun_profile_generation: started in the background; its progress is polled by this id."""

    operation_id: str


class PlaybookGenerationResponse(BaseModel):
    """POST /api/manual_playbook_generation."""

    success: bool
    msg: str
    playbooks_generated: int


class RerunPlaybookGenerationResponse(PlaybookGenerationResponse):
    """POST /api/rerun_playbook_generation: started in the background; its progress is polled by this id."""

    operation_id: str


class UpgradeProfilesResponse(BaseModel):
    """POST /api/upgrade_all_profiles."""

    success: bool
    profiles_archived: int
    profiles_promoted: int
    profiles_deleted: int
    message: str


class DowngradeProfilesResponse(BaseModel):
    """POST /api/downgrade_all_profiles."""

    success: bool
    profiles_demoted: int
    profiles_restored: int
    message: str


class UpgradeUserPlaybooksResponse(BaseModel):
    """POST /api/upgrade_all_user_playbooks."""

    success: bool
    user_playbooks_deleted: int
    user_playbooks_archived: int
    user_playbooks_promoted: int
    message: str


class DowngradeUserPlaybooksResponse(BaseModel):
    """POST /api/downgrade_all_user_playbooks."""

    success: bool
    user_playbooks_demoted: int
    user_playbooks_restored: int
    message: str
