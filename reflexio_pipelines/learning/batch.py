"""A learning run's per-user inputs and results: the state a user's batch starts from, its counts, the rows the run
produced, and the batches that failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reflexio_pipelines.learning.llm_failures import FailureSummary
from reflexio_pipelines.learning.types import Turn


@dataclass
class LearnStats:
    """Counts for Dagster metadata and cost accounting."""

    users: int = 0
    windows: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dedup_calls: int = 0
    superseded: int = 0
    duplicates_dropped: int = 0
    gate_calls: int = 0  # included in llm_calls
    gate_skipped: int = 0  # windows the gate rejected: processed (bookmark advanced), no extraction call
    forget_requests: int = 0  # forget directives read from new turns
    forgotten: int = 0  # profiles they removed (matched by the heuristic in learning/forget.py)
    turns_extracted: int = 0  # new turns that went through this run (per extractor group)
    turns_held: int = 0  # new turns held back for a full window or a quiet session (per extractor group)
    passes: int = 1  # learning passes of the run over the window (window_pass.py catch-up passes); not summed by add
    extractors: set[str] = field(default_factory=set)

    def add(self, other: LearnStats) -> None:
        """Add another batch's counts (users excepted: the caller counts those)."""
        for name in (
            "windows",
            "llm_calls",
            "prompt_tokens",
            "completion_tokens",
            "dedup_calls",
            "superseded",
            "duplicates_dropped",
            "gate_calls",
            "gate_skipped",
            "forget_requests",
            "forgotten",
            "turns_extracted",
            "turns_held",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.extractors |= other.extractors


@dataclass(frozen=True)
class Failure:
    """A user batch that could not be learned in this run (nothing of the user was written). `stage` is
    `extract` (a window failed after the extractor's retries), `dedup` (the judge got no usable answer) or
    `blocked` (an earlier window of the user is still unresolved, so this one waits behind it). The summary holds
    no prompt content and no secret (see llm_extract.FailureSummary)."""

    user_id: str
    extractor: str  # the extractor group
    stage: str
    summary: FailureSummary
    attempts: int = 0
    extraction_window_id: str | None = None
    first_turn_id: str | None = None
    last_turn_id: str | None = None


@dataclass
class LearnOutput:
    profiles: list[dict[str, Any]]
    playbooks: list[dict[str, Any]]
    change_log: list[dict[str, Any]]
    bookmarks: list[dict[str, Any]]
    stats: LearnStats
    failures: list[Failure] = field(default_factory=list)
    learned_users: set[str] = field(default_factory=set)  # users whose whole batch was learned in this run


@dataclass
class UserState:
    """What the pipeline knows about one user before this run: processed turns, current items (of earlier
    partitions, and of earlier runs of this one), and per extractor group the bookmark an earlier run of this
    partition left (`bookmarks`, the table row) with the turns of this partition it processed (`processed`)."""

    history: list[Turn] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)  # current profile rows
    playbooks: list[dict[str, Any]] = field(default_factory=list)  # current user playbook rows
    processed: dict[str, frozenset[str]] = field(default_factory=dict)
    bookmarks: dict[str, dict[str, Any]] = field(default_factory=dict)
