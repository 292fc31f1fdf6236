"""Per-user extraction windows: which consecutive turns one extractor call sees, and where the bookmark moves.

A user's turns form one stream: the turns of earlier partitions (already processed — the bookmark sits after the
last of them), then this partition's new turns. The new turns are tiled into chunks of at most `size` turns, one
extractor call each; every window also carries a short *lookback* of the turns just before its chunk (at most
`LOOKBACK_TURNS`, and at most `size - stride`, the overlap the original's windows have), so a correction at the
start of a chunk is read together with the agent answer it corrects and the request that answer was for.

So a batch of n new turns costs ceil(n / size) extraction calls instead of one per publish, no turn is ever
skipped (the original only looked at the last `size` turns when the stride was crossed), and the bookmark
advances past every processed window, whether or not anything was extracted. Items resting only on lookback
turns are not re-learned (see learn.py). A window that fails (after the LLM retries) is not processed: nothing of
the user's batch is written, the bookmark stays before it, and later partitions of that user wait until a re-run
of the partition learns it (learn.py, learning/failures.py).

Runs of the still-open window come often (the sensor every 15 s, a run per publish), so what one run extracts must
not depend on when it happens (`ready_turns`): a chunk starts where the user's stream went quiet (a gap of at least
the quiet period between two turns' arrival, a *session break*) and then every `size` turns; a run extracts the
complete chunks and holds back an incomplete last chunk while the session is still active. Held-back turns go
through once a full chunk has accumulated, the session has been quiet for the quiet period, the window has closed,
or the caller flushes (`wait_for_response`, a deliberate run). Because the chunk boundaries are a function of the
turns alone, learning a stream in one pass or in many runs cuts the same windows, and costs the same calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from reflexio_pipelines.learning.types import Turn, Window


def turn_sort_key(turn: Turn) -> tuple[int, int, str, int, str]:
    """Chronological order: client time, then arrival, then position within the publish (turns published in one
    call share `created_at`), with the turn id as the final stable tie-break."""
    return (turn.created_at, turn.ingested_at_us, turn.request_id, turn.turn_index, turn.turn_id)


def group_by_user(turns: Iterable[Turn]) -> dict[str, list[Turn]]:
    """Turns grouped per user, users in sorted order, each user's turns sorted chronologically."""
    groups: dict[str, list[Turn]] = {}
    for turn in turns:
        groups.setdefault(turn.user_id, []).append(turn)
    return {user_id: sorted(groups[user_id], key=turn_sort_key) for user_id in sorted(groups)}


#: Turns of lookback before each chunk: the answer a correction is about, and the request it answered.
LOOKBACK_TURNS = 2


def window_bounds(
    n_history: int, n_total: int, size: int, stride: int, breaks: Iterable[int] = ()
) -> list[tuple[int, int]]:
    """Half-open `(start, end)` ranges over a stream whose first `n_history` turns were already processed.

    The new turns `[n_history, n_total)` are split into consecutive chunks of at most `size`, a chunk also starting
    at every position in `breaks` (session breaks); each range is one chunk plus its lookback (so a range can hold up
    to `size + lookback` turns).
    """
    if size <= 0 or stride <= 0:
        raise ValueError(f"window size and stride must be positive (got size={size}, stride={stride})")
    if stride > size:
        raise ValueError(f"stride ({stride}) must not exceed the window size ({size})")
    lookback = min(LOOKBACK_TURNS, size - stride)
    segments = sorted({n_history, *(b for b in breaks if n_history < b < n_total)})
    ranges = []
    for seg_start, seg_end in zip(segments, [*segments[1:], n_total]):
        ranges += [(max(0, chunk - lookback), min(chunk + size, seg_end)) for chunk in range(seg_start, seg_end, size)]
    return ranges


def session_breaks(turns: list[Turn], quiet_us: int) -> list[int]:
    """Positions in chronologically sorted `turns` where a turn arrived at least `quiet_us` after the one before it
    (arrival = `ingested_at_us`, the service's clock). None when `quiet_us` is 0: every run extracts everything."""
    if quiet_us <= 0:
        return []
    return [i for i in range(1, len(turns)) if turns[i].ingested_at_us - turns[i - 1].ingested_at_us >= quiet_us]


@dataclass(frozen=True)
class Pace:
    """When held-back turns go through. `quiet_us` is the quiet period (0 = never hold back); `now_us` the run's
    clock; `flush` lets every turn through (a deliberate run, a closed window); `flush_users` those users' turns
    (`wait_for_response`)."""

    quiet_us: int = 0
    now_us: int = 0
    flush: bool = True
    flush_users: frozenset[str] = frozenset()

    def flushes(self, user_id: str) -> bool:
        return self.flush or self.quiet_us <= 0 or user_id in self.flush_users


#: A deliberate run: extract every new turn now.
FLUSH_ALL = Pace()


def pace_at(
    now_us: int,
    *,
    flush: Literal["all", "due"],
    flush_users: Iterable[str],
    quiet_period_s: float,
    window_end: datetime,
) -> Pace:
    """A run's pace at `now_us`: `flush` "all" lets every turn through (a deliberate run), "due" holds back the
    turns of sessions active within `quiet_period_s`, except `flush_users`' — and once the window has ended nothing
    is held back, as no turn lands in it any more to complete a chunk."""
    closed = now_us >= window_end.timestamp() * 1_000_000
    return Pace(
        quiet_us=int(quiet_period_s * 1_000_000),
        now_us=now_us,
        flush=flush == "all" or closed,
        flush_users=frozenset(flush_users),
    )


def ready_turns(new: list[Turn], size: int, pace: Pace) -> tuple[list[Turn], list[Turn]]:
    """Split ONE user's sorted new turns into (extract now, hold back).

    Everything before the last session break goes through; so do the complete `size`-turn chunks of the last
    session, and its incomplete tail once the session has been quiet for `pace.quiet_us` (or when flushed)."""
    if not new or pace.flushes(new[0].user_id) or pace.now_us - new[-1].ingested_at_us >= pace.quiet_us:
        return list(new), []
    last_start = ([0] + session_breaks(new, pace.quiet_us))[-1]
    cut = last_start + (len(new) - last_start) // size * size
    return list(new[:cut]), list(new[cut:])


def plan_windows(history: list[Turn], new: list[Turn], size: int, stride: int, quiet_us: int = 0) -> list[Window]:
    """Windows over ONE user's stream (processed `history`, then `new`), covering every new turn; with `quiet_us`,
    a chunk also starts at every session break among the new turns.

    Each part is sorted by (created_at, turn_id) first, so the result does not depend on input order.
    """
    if not new:
        return []
    user_ids = {turn.user_id for turn in [*history, *new]}
    if len(user_ids) > 1:
        raise ValueError(f"plan_windows expects the turns of one user, got {len(user_ids)} users")
    new = sorted(new, key=turn_sort_key)
    stream = sorted(history, key=turn_sort_key) + new
    user_id = stream[0].user_id
    breaks = [len(history) + i for i in session_breaks(new, quiet_us)]
    bounds = window_bounds(len(history), len(stream), size, stride, breaks)
    return [Window(user_id=user_id, turns=tuple(stream[a:b])) for a, b in bounds]
