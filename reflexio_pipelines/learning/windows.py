"""Per-user extraction windows: which consecutive turns one extractor call sees, and where the bookmark moves.

A user's turns form one stream: the turns of earlier partitions (already processed — the bookmark sits after the
last of them), then this partition's new turns. The new turns are tiled into chunks of at most `size` turns, one
extractor call each; every window also carries a short *lookback* of the turns just before its chunk (at most
`LOOKBACK_TURNS`, and at most `size - stride`, the overlap the original's windows have), so a correction at the
start of a chunk is read together with the agent answer it corrects and the request that answer was for.

So a batch of n new turns costs ceil(n / size) extraction calls instead of one per publish, no turn is ever
skipped (the original only looked at the last `size` turns when the stride was crossed, §2.3), and the bookmark
advances past every processed window, whether or not anything was extracted. Items resting only on lookback
turns are not re-learned (see learn.py). A window that fails (after the LLM retries) is not processed: nothing of
the user's batch is written, the bookmark stays before it, and later partitions of that user wait until a re-run
of the partition learns it (learn.py, learning/failures.py).
"""

from __future__ import annotations

from collections.abc import Iterable

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


def window_bounds(n_history: int, n_total: int, size: int, stride: int) -> list[tuple[int, int]]:
    """Half-open `(start, end)` ranges over a stream whose first `n_history` turns were already processed.

    The new turns `[n_history, n_total)` are split into consecutive chunks of at most `size`; each range is one
    chunk plus its lookback (so a range can hold up to `size + lookback` turns).
    """
    if size <= 0 or stride <= 0:
        raise ValueError(f"window size and stride must be positive (got size={size}, stride={stride})")
    if stride > size:
        raise ValueError(f"stride ({stride}) must not exceed the window size ({size})")
    lookback = min(LOOKBACK_TURNS, size - stride)
    return [
        (max(0, chunk - lookback), min(chunk + size, n_total))
        for chunk in range(n_history, n_total, size)
    ]


def plan_windows(history: list[Turn], new: list[Turn], size: int, stride: int) -> list[Window]:
    """Windows over ONE user's stream (processed `history`, then `new`), covering every new turn.

    Each part is sorted by (created_at, turn_id) first, so the result does not depend on input order.
    """
    if not new:
        return []
    user_ids = {turn.user_id for turn in [*history, *new]}
    if len(user_ids) > 1:
        raise ValueError(f"plan_windows expects the turns of one user, got {len(user_ids)} users")
    stream = sorted(history, key=turn_sort_key) + sorted(new, key=turn_sort_key)
    user_id = stream[0].user_id
    bounds = window_bounds(len(history), len(stream), size, stride)
    return [Window(user_id=user_id, turns=tuple(stream[a:b])) for a, b in bounds]
