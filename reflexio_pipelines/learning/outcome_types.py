"""The value types of the outcome counters (learning/outcomes.py) and the labels their rows carry: learned items,
serves, per-session outcomes, per-item counters and flag actions. Pure data, shared by the rules, the lake readers
(lake/outcomes.py) and the service."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Labels every outcome row: which version of the heuristic matching rules produced it.
RULES_VERSION = "outcome-heuristic-v1"
ENTITIES = ("profile", "user_playbook", "agent_playbook")
#: The id field of each entity's API payload.
ID_FIELDS = {"profile": "profile_id", "user_playbook": "user_playbook_id", "agent_playbook": "agent_playbook_id"}
HELPFUL, HARMFUL, MISSED = "helpful", "harmful", "missed"
#: At most this many evidence sessions are logged with a flag (the counts hold the rest).
MAX_EVIDENCE = 50


@dataclass(frozen=True)
class ItemRef:
    """A learned item: entity (`profile` | `user_playbook` | `agent_playbook`) and id (as a string)."""

    entity: str
    item_id: str


@dataclass(frozen=True)
class LearnedItem:
    """What the rules read of a learned item. `owner` is the user of a profile or user playbook (None for agent
    playbooks); `learned_at` when it was learned (unix s); `source_turn_ids` the turns it was learned from."""

    ref: ItemRef
    owner: str | None
    agent_version: str
    content: str
    trigger: str = ""
    learned_at: int = 0
    source_turn_ids: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RetrievalEvent:
    """One `/api/search` answer to a named user (a `retrieval_events` row)."""

    event_id: str
    served_at_us: int
    user_id: str
    session_id: str | None
    agent_version: str
    arm: str
    holdout: bool
    override: bool
    items: tuple[ItemRef, ...]


@dataclass(frozen=True)
class OutcomeEvent:
    """The outcome of one served item in one closed session (an `item_outcome_events` row)."""

    ref: ItemRef
    user_id: str
    session_id: str
    agent_version: str
    outcome: str | None  # helpful | harmful | missed | None (served, no signal)
    reason: str
    served_at_us: int
    turn_index: int  # the first turn of the session after the serve
    day: str


@dataclass
class SessionOutcome:
    """Per closed session: its arm, what it was served, and the heuristic signals (a `session_outcomes` row)."""

    session_id: str
    user_id: str
    agent_version: str
    arm: str  # treated | control
    override: bool  # a search of the session asked for the holdout to be off (left out of the comparison)
    searches: int
    items_served: int
    first_search_at: int | None  # unix s
    corrections: int
    recurring_corrections: int  # repeats of an item learned and served before the correction (treated only)
    repeated_learned_corrections: int  # repeats of an item learned before, served or not
    tool_failures: int
    user_turns: int
    started_at: int
    closed_at: int
    day: str


@dataclass
class Counters:
    """Per learned item: times served, closed sessions it was served in, and their outcomes with evidence."""

    ref: ItemRef
    owner: str | None
    agent_version: str
    served: int = 0
    sessions: int = 0
    evidence: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: {HELPFUL: [], HARMFUL: [], MISSED: []})

    def count(self, outcome: str) -> int:
        return len(self.evidence[outcome])

    @property
    def outcomes(self) -> int:
        return sum(self.count(o) for o in (HELPFUL, HARMFUL, MISSED))


@dataclass(frozen=True)
class FlagAction:
    """A change of an item's flag state for the outcome change log, with the sessions that are its evidence."""

    ref: ItemRef
    action: str  # flagged | held_out | unflagged
    reason: str
    counters: Counters
    evidence: tuple[tuple[str, str], ...]  # (user id, session id) of the harmful outcomes


@dataclass
class OutcomeResult:
    sessions: list[SessionOutcome]
    events: list[OutcomeEvent]
    counters: dict[ItemRef, Counters]
