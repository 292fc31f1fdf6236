"""Search over the served index: the unified search and the per-entity searches (their answers are the read shapes
of `serving/models/reads.py` and `serving/models/playbooks.py`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator

from serving.models.fields import (
    MAX_ID,
    MAX_TEXT,
    CleanModel,
    PlaybookStatus,
    SearchModeName,
    Status,
    TimeRange,
    UserId,
)


def _threshold(default: float) -> Any:
    """A similarity threshold in [0, 1]; null means the route's default (reflexio-client 0.2.16 and the 0.2.32 CLI
    send `"threshold": null` unless told otherwise)."""
    return Annotated[
        float | None,
        Field(ge=0.0, le=1.0, description=f"minimum cosine for the vector leg; null = {default}"),
        AfterValidator(lambda value: default if value is None else value),
    ]


def _no_tags(value: list[str] | None) -> list[str] | None:
    if value:
        raise ValueError(
            "learned items here carry no tags (the original's tagging prompts are not supported), so a tag filter "
            "would match nothing; leave tags empty"
        )
    return value


def _no_agent_answer(value: bool | None) -> bool:
    if value:
        raise ValueError("this service answers with learned items only, never an LLM-written answer; leave it false")
    return False


#: Refused when set rather than ignored (a caller relying on them would get unfiltered or unanswered results).
NoTags = Annotated[list[str] | None, AfterValidator(_no_tags)]
NoAgentAnswer = Annotated[bool | None, AfterValidator(_no_agent_answer)]

UnifiedThreshold = _threshold(0.3)
EntityThreshold = _threshold(0.4)


class ConversationTurn(CleanModel):
    role: str = Field(max_length=64)
    content: str = Field(max_length=MAX_TEXT)


class UnifiedSearchRequest(CleanModel):
    """POST /api/search body (the original's UnifiedSearchRequest). Without `user_id` no user's items are served."""

    query: str = Field(min_length=1, max_length=4096)
    top_k: int = Field(5, ge=1, le=100)
    threshold: UnifiedThreshold = 0.3
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    user_id: str | None = Field(None, max_length=MAX_ID)
    conversation_history: list[ConversationTurn] | None = None
    enable_reformulation: bool = False
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    #: The session the answer is for: the outcome counters join what was served with what happened next in this
    #: session; without it, the user's next turns decide (a heuristic).
    session_id: str | None = Field(None, max_length=MAX_ID)
    # The original's 2026 filters (reflexio-client 0.2.16), honoured by serving/search_options.py, or refused.
    entity_types: list[Literal["profiles", "user_playbooks", "agent_playbooks"]] | None = None
    agent_playbook_status_filter: list[PlaybookStatus] | None = Field(
        None, description="agent playbook statuses served (default: the ones search serves)"
    )
    source: str | None = Field(None, max_length=MAX_ID)
    tags: NoTags = None
    enable_agent_answer: NoAgentAnswer = False
    #: The caller's correlation ids (the original meters with them): logged with nothing, they change no result.
    request_id: str | None = Field(None, max_length=MAX_ID)
    interaction_id: int | None = Field(None, gt=0)

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


class SearchProfilesRequest(TimeRange):
    """POST /api/search_profiles (the original's SearchUserProfileRequest)."""

    user_id: UserId
    generated_from_request_id: str | None = Field(None, max_length=MAX_ID)
    query: str | None = Field(None, max_length=4096)
    top_k: int = Field(10, ge=1, le=100)
    source: str | None = Field(None, max_length=MAX_ID)
    custom_feature: str | None = Field(None, max_length=MAX_ID)
    extractor_name: str | None = Field(None, max_length=MAX_ID)
    threshold: EntityThreshold = 0.4
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"


class SearchUserPlaybooksRequest(TimeRange):
    """POST /api/search_user_playbooks. Without `user_id` (the original searched every user's) nothing is served,
    with a message saying why: a search serves one user's items only; `get_user_playbooks` lists every user's for an
    operator. Not a 422, so the original's CLI `context` (which sends none) still gets its other sections."""

    query: str | None = Field(None, max_length=4096)
    user_id: UserId | None = None
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None
    top_k: int = Field(10, ge=1, le=100)
    threshold: EntityThreshold = 0.4
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"


class SearchAgentPlaybooksRequest(TimeRange):
    """POST /api/search_agent_playbooks. `playbook_status_filter` takes one status or a list (default: approved
    only, so a pending or rejected playbook is only found when asked for)."""

    query: str | None = Field(None, max_length=4096)
    agent_version: str | None = Field(None, max_length=MAX_ID)
    playbook_name: str | None = Field(None, max_length=MAX_ID)
    status_filter: list[Status | None] | None = None
    playbook_status_filter: PlaybookStatus | list[PlaybookStatus] | None = None
    top_k: int = Field(10, ge=1, le=100)
    threshold: EntityThreshold = 0.4
    enable_reformulation: bool = False
    search_mode: SearchModeName = "hybrid"
