"""Bookkeeping of user batches a learning run could not learn: rows of the `extraction_failures` table.

A run of window W records one row per failed user batch (learn.py `Failure`); the next run of W that learns the
user's batch marks the rows resolved (`resolved_by_run`, `resolved_at`), and rows are never dropped (audit). A
user with an unresolved row in an earlier window is *blocked* in later windows: learning the later turns first
would let newer statements be deduplicated against a history that misses the failed window's items (a fact
learned on the retry could then stay current next to the newer fact that should have superseded it). So a user's
stream never advances past a failed window, and every window with an unresolved row needs another run, oldest
first (`pending.windows_to_retry`, which the sensor and `launch()` use).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reflexio_pipelines.learning.batch import Failure
from reflexio_pipelines.learning.types import stable_uuid


def failure_rows(failures: Iterable[Failure], *, window: str, run_id: str, at: int) -> list[dict[str, Any]]:
    """Table rows for this run's failures in `window` (unresolved)."""
    return [
        {
            "failure_id": stable_uuid(run_id, f.user_id, f.extractor),
            "user_id": f.user_id,
            "extractor": f.extractor,
            "stage": f.stage,
            "extraction_window_id": f.extraction_window_id,
            "first_turn_id": f.first_turn_id,
            "last_turn_id": f.last_turn_id,
            "error_class": f.summary.error_class,
            "error_message": f.summary.message,
            "attempts": f.attempts,
            "run_id": run_id,
            "at": at,
            "resolved_by_run": None,
            "resolved_at": None,
            "window": window,
        }
        for f in failures
    ]


def merge_failures(
    previous: list[dict[str, Any]],
    failures: Iterable[Failure],
    learned_users: set[str],
    *,
    window: str,
    run_id: str,
    at: int,
) -> list[dict[str, Any]]:
    """All rows of `window` after this run: earlier rows (those of users learned now marked resolved by this run)
    followed by this run's new failures."""
    rows = []
    for row in previous:
        if row["resolved_by_run"] is None and row["user_id"] in learned_users:
            row = dict(row, resolved_by_run=run_id, resolved_at=at)
        rows.append(row)
    return rows + failure_rows(failures, window=window, run_id=run_id, at=at)


def blocked_users(earlier: Iterable[dict[str, Any]]) -> dict[str, str]:
    """user id -> why the user waits, from the rows of earlier windows (only unresolved rows block)."""
    oldest: dict[str, str] = {}
    for row in earlier:
        if row["resolved_by_run"] is None:
            user = row["user_id"]
            oldest[user] = min(oldest.get(user, row["window"]), row["window"])
    return {user: f"waiting for unresolved window {window}" for user, window in oldest.items()}
