"""POST /api/publish_interaction: the turns a client sends, and the acknowledgement."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from serving.models.fields import MAX_ID, MAX_TEXT, CleanModel, UserId


class ToolUsed(CleanModel):
    tool_name: str = Field(min_length=1, max_length=MAX_ID)
    tool_data: dict[str, Any] = Field(default_factory=dict)


LearningKind = Literal["profile", "user_playbook", "agent_playbook"]


class Citation(CleanModel):
    """A learned item the agent cited as having shaped this turn (the original's Citation; `playbook` is its legacy
    name for a user playbook). Recorded as a serve of the item in the turn's session (serving/routers/publish.py)."""

    kind: Literal["playbook", "profile", "user_playbook", "agent_playbook"]
    real_id: str = Field(min_length=1, max_length=MAX_ID)
    tag: str = Field("", max_length=MAX_ID)
    title: str = Field("", max_length=1000)


class RetrievedLearning(CleanModel):
    """A learned item the caller retrieved and injected into the agent's context for this turn (the original's
    RetrievedLearning). Recorded as a serve of the item in the turn's session."""

    kind: LearningKind
    learning_id: str = Field(min_length=1, max_length=MAX_ID)


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
    citations: list[Citation] = Field(default_factory=list, max_length=1000)
    retrieved_learnings: list[RetrievedLearning] = Field(default_factory=list, max_length=1000)

    def served_items(self) -> list[tuple[str, str]]:
        """(entity, id) of every learned item this turn names as injected or cited, each once, in order."""
        named = [("user_playbook" if c.kind == "playbook" else c.kind, c.real_id) for c in self.citations]
        named += [(r.kind, r.learning_id) for r in self.retrieved_learnings]
        return list(dict.fromkeys(named))

    @model_validator(mode="after")
    def _preconditions(self) -> "InteractionData":
        if self.user_action != "none" and not self.user_action_description:
            raise ValueError("user_action_description is required when user_action is not 'none'")
        if not (self.content or self.interacted_image_url or self.user_action != "none" or self.tools_used):
            raise ValueError("a turn needs content, tools_used, a user_action or an interacted_image_url")
        for entity, item_id in self.served_items():
            if entity != "profile" and not item_id.isdecimal():
                raise ValueError(f"citations / retrieved_learnings: a {entity} id is a decimal number, not {item_id!r}")
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
    #: The original's "store for evaluation only, never learn from it": every turn is learned from here, so only
    #: false is accepted (true is a 422 naming the field rather than learning from turns the caller fenced off).
    evaluation_only: bool = False
    #: The original's (0.2.32) completion hint on the last publish of a session: its held-back turns are learned
    #: now, as with finalize_session.
    session_finished: bool = False
    #: No learning stall exists here (GET /stall_state), so there is nothing to override: accepted either way.
    override_learning_stall: bool = False
    #: Sent by the original's newer clients, null by default; set, they would be ignored here, so they are refused.
    request_id: str | None = Field(None, max_length=MAX_ID)
    retrieval_experiment_id: str | None = Field(None, max_length=MAX_ID)
    retrieval_experiment_arm: Literal["treatment", "holdout"] | None = None

    @model_validator(mode="after")
    def _unsupported(self) -> "PublishUserInteractionRequest":
        if self.evaluation_only:
            raise ValueError(
                "evaluation_only: not supported: this service learns from every published turn; publish sessions "
                "meant only for evaluation to another organisation (API key), or leave evaluation_only false"
            )
        if self.request_id is not None:
            raise ValueError("request_id: chosen by this service (answered in the response); omit it")
        if self.retrieval_experiment_id is not None or self.retrieval_experiment_arm is not None:
            raise ValueError(
                "retrieval_experiment_id / retrieval_experiment_arm: the experiment arm is the user's holdout arm, "
                "decided by this service per user (GET /api/retrieval_experiments); omit them"
            )
        return self


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
    #: "deferred" without `wait_for_response` (learning runs later; poll GET /api/learning_status?request_id=...),
    #: as the original answers; absent when the publish waited.
    learning_status: str | None = None
