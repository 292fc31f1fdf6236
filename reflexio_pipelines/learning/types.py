"""The value types the learning logic works on, independent of storage and orchestration."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

BlockingIssueKind = Literal["missing_tool", "permission_denied", "external_dependency", "policy_restriction"]
PlaybookKind = Literal["correction", "tool_failure", "expert", "recipe"]
TimeToLive = Literal["one_day", "one_week", "one_month", "one_quarter", "one_year", "infinity"]

TTL_SECONDS: dict[str, int | None] = {
    "one_day": 86_400,
    "one_week": 7 * 86_400,
    "one_month": 30 * 86_400,
    "one_quarter": 90 * 86_400,
    "one_year": 365 * 86_400,
    "infinity": None,
}
NEVER_EXPIRES_TIMESTAMP = 4_102_444_800  # 2100-01-01, the original's sentinel


def stable_int_id(*parts: str) -> int:
    """A deterministic 52-bit integer id (safe in JSON/JavaScript numbers) from the given parts.

    The original API exposes integer ids for interactions and playbooks; deriving them from content keys keeps
    re-materialisation idempotent (the same partition always yields the same ids).
    """
    digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return int(digest[:13], 16)


def stable_uuid(*parts: str) -> str:
    """A deterministic UUID-shaped string id from the given parts."""
    h = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-a{h[17:20]}-{h[20:32]}"


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation reported with a turn; `tool_data` is free-form (input, output, error, …)."""

    tool_name: str
    tool_data: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> str | None:
        """The error string if the call failed, else None."""
        for key in ("error", "error_message", "exception"):
            value = self.tool_data.get(key)
            if value:
                return str(value)
        status = str(self.tool_data.get("status", "")).lower()
        if status in {"error", "failed", "failure"}:
            return str(self.tool_data.get("output") or status)
        return None


@dataclass(frozen=True)
class Turn:
    """One published conversation turn (the original's Interaction)."""

    turn_id: str
    interaction_id: int
    request_id: str
    user_id: str
    role: str
    content: str
    created_at: int
    session_id: str | None = None
    source: str = ""
    agent_version: str = ""
    tools_used: tuple[ToolCall, ...] = ()
    expert_content: str = ""
    shadow_content: str = ""
    user_action: str = "none"
    user_action_description: str = ""
    ingested_at_us: int = 0  # when the turn became durable; orders turns that share a created_at second
    turn_index: int = 0  # position within its publish

    @property
    def is_user(self) -> bool:
        """True for turns written by the human user (the original counts every non-agent role as user)."""
        return self.role.strip().lower() not in {"assistant", "agent", "system", "tool", "internal"}


@dataclass(frozen=True)
class Window:
    """A contiguous slice of one user's turns that one extraction call covers."""

    user_id: str
    turns: tuple[Turn, ...]

    @property
    def window_id(self) -> str:
        """Deterministic id from the first and last turn ids."""
        return stable_uuid(self.user_id, self.turns[0].turn_id, self.turns[-1].turn_id)


@dataclass
class ExtractedProfile:
    """A per-user fact as an extractor returns it (before ids and provenance are attached)."""

    content: str
    time_to_live: str = "infinity"
    source_turn_ids: list[str] = field(default_factory=list)
    custom_features: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExtractedPlaybook:
    """A per-user behavioural rule as an extractor returns it."""

    content: str
    trigger: str | None = None
    rationale: str | None = None
    kind: str = "correction"
    blocking_issue_kind: str | None = None
    blocking_issue_details: str | None = None
    source_turn_ids: list[str] = field(default_factory=list)


@dataclass
class ForgetDirective:
    """A user's request to forget something about them ("forget that I live in Paris"): `target` describes the
    fact, phrased like a profile where possible ("Lives in Paris"); `source_turn_ids` are the turns asking for it.
    Which stored profiles it removes is decided against the user's profiles in learn.py, not by the extractor."""

    target: str
    source_turn_ids: list[str] = field(default_factory=list)


@dataclass
class ExtractionResult:
    """What one extractor call over one window produced, with cost accounting for metadata."""

    profiles: list[ExtractedProfile] = field(default_factory=list)
    playbooks: list[ExtractedPlaybook] = field(default_factory=list)
    forget: list[ForgetDirective] = field(default_factory=list)
    extractor: str = ""
    model: str = ""
    prompt_version: str = ""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: One-off fixes the user made within this conversation ("No, I meant the staging server"): they hold for the
    #: session they were said in and are never stored as profiles or playbooks (the built-in rules fill it).
    session_context: list[str] = field(default_factory=list)
    #: Clauses the extractor saw but does not learn from because it does not support their language (the built-in
    #: extractor reads English only; an LLM provider learns the rest).
    unsupported_clauses: int = 0
