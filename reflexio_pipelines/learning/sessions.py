"""Sessions for evaluation: grouping turns, deciding when a session is over, sampling, and simple counts.

Everything here is computed from the turns themselves at run time. The original armed an in-memory
600 s timer per session on publish: a restart lost every pending evaluation, and sessions published before it never
got one. Here a session is closed when its turns show a quiet period (`is_closed`), so any run over the lake's data
finds the same closed sessions. Sampling is a hash of (evaluation name, session id) instead of `random()`, so a
re-run evaluates exactly the same sessions.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

# Private on purpose in rules/corrections.py: "is this user turn a correction of the agent's previous answer".
# Imported (not copied) so the extractor's correction playbooks and the evaluation's correction count always agree.
from reflexio_pipelines.learning.rules.corrections import corrected_agent_index
from reflexio_pipelines.learning.transcript import session_key
from reflexio_pipelines.learning.types import Turn, Window
from reflexio_pipelines.learning.windows import turn_sort_key

#: A session with no new turn for this long is over (the original's GROUP_EVALUATION_DELAY_SECONDS).
DEFAULT_QUIET_PERIOD_S = 600
#: Share of closed sessions an evaluator judges by default (LLM judging every session is costly).
DEFAULT_SAMPLING_RATE = 0.05


@dataclass(frozen=True)
class Session:
    """One user's conversation: the turns sharing a `session_id` (else a `request_id`), in chronological order.

    `started_at` / `last_at` are the first and last turn's client time (`created_at`, unix seconds).
    """

    session_id: str
    user_id: str
    agent_version: str
    turns: tuple[Turn, ...]
    started_at: int
    last_at: int

    @property
    def last_arrival_at(self) -> int:
        """When the newest turn became durable (unix seconds; 0 when arrival times are unknown)."""
        return max((t.ingested_at_us for t in self.turns), default=0) // 1_000_000

    @property
    def window(self) -> Window:
        """The session as a Window (what the transcript renderer takes)."""
        return Window(user_id=self.user_id, turns=self.turns)


def group_sessions(turns: Iterable[Turn]) -> list[Session]:
    """Sessions of the given turns, keyed by (user, `session_id` or else `request_id`).

    The user is part of the key because session ids are chosen by clients: two users reusing "s1" are two
    sessions. Turns inside a session follow `windows.turn_sort_key`; sessions are ordered by (started_at, user,
    session id). A session's agent version is that of its newest turn that names one ("" if none does).
    """
    groups: dict[tuple[str, str], list[Turn]] = {}
    for turn in turns:
        groups.setdefault((turn.user_id, session_key(turn)), []).append(turn)
    sessions = []
    for (user_id, key), members in groups.items():
        ordered = tuple(sorted(members, key=turn_sort_key))
        version = next((t.agent_version for t in reversed(ordered) if t.agent_version), "")
        sessions.append(
            Session(
                session_id=key,
                user_id=user_id,
                agent_version=version,
                turns=ordered,
                started_at=min(t.created_at for t in ordered),
                last_at=max(t.created_at for t in ordered),
            )
        )
    return sorted(sessions, key=lambda s: (s.started_at, s.user_id, s.session_id))


def is_closed(session: Session, now: float, quiet_period_s: float = DEFAULT_QUIET_PERIOD_S) -> bool:
    """True when no turn of the session is newer than `quiet_period_s` before `now` (unix seconds).

    "Newer" is checked on both clocks: the client's `created_at` and the lake's arrival time. A client that uploads
    an old conversation in two parts a minute apart therefore does not get the first part judged alone, and a turn
    stamped in the future keeps its session open until that time has passed.
    """
    last = max(session.last_at, session.last_arrival_at)
    return now - last >= quiet_period_s


def closed_sessions(sessions: Iterable[Session], now: float, quiet_period_s: float) -> list[Session]:
    """The sessions among `sessions` that are closed at `now` (`is_closed`), in their order."""
    return [s for s in sessions if is_closed(s, now, quiet_period_s)]


def is_sampled(session_id: str, evaluation_name: str, rate: float = DEFAULT_SAMPLING_RATE) -> bool:
    """Whether evaluator `evaluation_name` judges session `session_id`, deterministically.

    sha256 of (evaluation name, session id) mapped to a uniform number in [0, 1), compared with `rate`: the same
    session is always in or out for an evaluator (re-runs and backfills agree), and different evaluators sample
    independently. rate 0 samples nothing, rate 1 everything.
    """
    if not isinstance(rate, (int, float)) or math.isnan(rate) or not 0.0 <= rate <= 1.0:
        raise ValueError(f"sampling rate must be within [0, 1], got {rate!r}")
    if rate <= 0.0:
        return False
    if rate >= 1.0:
        return True
    digest = hashlib.sha256(f"{evaluation_name}\x1f{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def corrected_turn_indexes(session: Session) -> list[int]:
    """Indexes of the user turns that correct the agent's previous answer (the builtin extractor's correction rule,
    a HEURISTIC: a user turn with correction markers right after an agent turn)."""
    return [i for i in range(len(session.turns)) if corrected_agent_index(session.turns, i) is not None]


def corrections_in(session: Session) -> int:
    """User turns that correct the agent's previous answer (`corrected_turn_indexes`). The original counted the
    user playbooks extracted from the session instead, which depends on the extractor and on when extraction ran."""
    return len(corrected_turn_indexes(session))


def user_turns_to_resolution(session: Session) -> int:
    """User turns in the session, up to and including the last one (the original's count of non-agent-role turns;
    it stores the number only for successful sessions — that choice is the caller's)."""
    return sum(turn.is_user for turn in session.turns)


def shadow_turns(session: Session) -> list[Turn]:
    """The session's turns that carry a shadow answer (`shadow_content`), in order: one head-to-head each."""
    return [turn for turn in session.turns if turn.shadow_content.strip()]
