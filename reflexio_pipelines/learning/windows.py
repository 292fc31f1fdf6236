"""Per-user extraction windows: which consecutive turns one extractor call sees.

The original only ever looked at a user's *last* `batch_size` interactions when the stride was crossed, so turns
that scrolled past between triggers were never seen (§2.3). Here the whole history of a user in a partition is
tiled deterministically: windows start at 0, stride, 2*stride, … and one extra window is anchored at the last turn
whenever the regular tiling stops short of it, so every tail turn is covered.
"""

from __future__ import annotations

from collections.abc import Iterable

from reflexio_pipelines.learning.types import Turn, Window


def turn_sort_key(turn: Turn) -> tuple[int, str]:
    """Chronological order with a stable tie-break (turns published in one call share `created_at`)."""
    return (turn.created_at, turn.turn_id)


def group_by_user(turns: Iterable[Turn]) -> dict[str, list[Turn]]:
    """Turns grouped per user, users in sorted order, each user's turns sorted chronologically."""
    groups: dict[str, list[Turn]] = {}
    for turn in turns:
        groups.setdefault(turn.user_id, []).append(turn)
    return {user_id: sorted(groups[user_id], key=turn_sort_key) for user_id in sorted(groups)}


def window_bounds(n_turns: int, size: int, stride: int) -> list[tuple[int, int]]:
    """Half-open `(start, end)` index ranges of the windows over `n_turns` turns.

    Regular windows start at multiples of `stride` while a full window still fits; if the last of them ends before
    the final turn, one more window ending exactly at the final turn is added. A stride larger than the size leaves
    gaps between regular windows by design (the caller chose to sample).
    """
    if size <= 0 or stride <= 0:
        raise ValueError(f"window size and stride must be positive (got size={size}, stride={stride})")
    if n_turns <= 0:
        return []
    if n_turns <= size:
        return [(0, n_turns)]
    bounds = [(start, start + size) for start in range(0, n_turns - size + 1, stride)]
    if bounds[-1][1] < n_turns:
        bounds.append((n_turns - size, n_turns))
    return bounds


def plan_windows(turns: list[Turn], size: int, stride: int) -> list[Window]:
    """Windows of `size` consecutive turns of ONE user, advancing by `stride`, the last one ending at the last turn.

    Turns are sorted by (created_at, turn_id) first, so the result does not depend on input order.
    """
    if not turns:
        return []
    user_ids = {turn.user_id for turn in turns}
    if len(user_ids) > 1:
        raise ValueError(f"plan_windows expects the turns of one user, got {len(user_ids)} users")
    ordered = sorted(turns, key=turn_sort_key)
    user_id = ordered[0].user_id
    return [Window(user_id=user_id, turns=tuple(ordered[a:b])) for a, b in window_bounds(len(ordered), size, stride)]
