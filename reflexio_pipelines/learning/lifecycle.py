"""Which learned rows are current. Nothing is ever deleted or rewritten:

- a row is *replaced* by a newer row whose `supersedes` names it (dedup, conflict resolution);
- a row's *status* (current / pending / archived) is the status it was written with, overridden by the latest
  lifecycle event about it (upgrade promotes pending rows and archives current ones; downgrade swaps back);
- a profile the user asked to forget is superseded by a *tombstone* row with status `forgotten` (learn.py), and a
  rule replaced by a changed fact by one with status `replaced` (stated_changes.py): a tombstone is in no lifecycle
  status, so neither it nor what it supersedes is ever live, served, upgraded or
  downgraded again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

LIFECYCLE_STATUSES = ("current", "pending", "archived")
#: Status of a tombstone row (and the change-log entry of what it removed): forgotten at the user's request.
FORGOTTEN = "forgotten"
#: Status of a tombstone row that retires rules replaced by a stated change of the user's own facts ("I've moved my
#: workouts to the evenings" retires "Don't put anything before 8 in the calendar"): the replacement is a profile,
#: so it cannot name the rules in its own `supersedes` (learning/stated_changes.py).
REPLACED = "replaced"
TOMBSTONE_STATUSES = (FORGOTTEN, REPLACED)


def superseded_by(rows: Iterable[dict[str, Any]], id_column: str) -> dict[Any, Any]:
    """Map of replaced item id -> the id of the item that replaced it (the newest replacement wins)."""
    out: dict[Any, Any] = {}
    for row in sorted(rows, key=lambda r: (r["window"], r.get("created_at") or r.get("last_modified_timestamp") or 0)):
        for old in row.get("supersedes") or []:
            out[old] = row[id_column]
    return out


def status_overlay(events: Iterable[dict[str, Any]], entity: str) -> dict[str, str]:
    """item id (as str) -> status set by the latest lifecycle event about it."""
    latest: dict[str, str] = {}
    for event in sorted((e for e in events if e["entity"] == entity), key=lambda e: e["seq"]):
        latest[event["item_id"]] = event["to_status"]
    return latest


def with_status(rows: list[dict[str, Any]], id_column: str, overlay: dict[str, str]) -> list[dict[str, Any]]:
    """Rows with `status` replaced by the overlay where an event changed it."""
    return [dict(r, status=overlay.get(str(r[id_column]), r["status"] or "current")) for r in rows]


def current_rows(
    rows: list[dict[str, Any]],
    id_column: str,
    order_column: str,
    overlay: dict[str, str] | None = None,
    statuses: tuple[str, ...] = ("current",),
) -> list[dict[str, Any]]:
    """The live items in `statuses`: one row per id (the newest window's), none that another row supersedes.

    Derived tables hold one row per (window, id) because an item may be re-observed in a later window; the newest
    observation is the one that counts. Ordered by `order_column`, then id.
    """
    replaced = superseded_by(rows, id_column)
    best: dict[Any, dict[str, Any]] = {}
    for row in with_status(rows, id_column, overlay or {}):
        key = row[id_column]
        if key in replaced or row["status"] not in statuses:
            continue
        seen = best.get(key)
        if seen is None or (row["window"], row[order_column] or 0) > (seen["window"], seen[order_column] or 0):
            best[key] = row
    return sorted(best.values(), key=lambda r: (r[order_column] or 0, str(r[id_column])))


@dataclass(frozen=True)
class StatusChange:
    """One planned lifecycle event."""

    item_id: str
    user_id: str
    from_status: str
    to_status: str


def plan_upgrade(
    rows: list[dict[str, Any]], id_column: str, archive_current: bool = True, only_affected_users: bool = True
) -> list[StatusChange]:
    """Promote every pending item to current; archive the current items of the users that have pending ones
    (or of every user when `only_affected_users` is False). `rows` carry their effective status."""
    live = _live(rows, id_column)
    pending = [r for r in live if r["status"] == "pending"]
    affected = {r["user_id"] for r in pending}
    changes = [StatusChange(str(r[id_column]), r["user_id"], "pending", "current") for r in pending]
    if archive_current and pending:
        changes += [
            StatusChange(str(r[id_column]), r["user_id"], "current", "archived")
            for r in live
            if r["status"] == "current" and (r["user_id"] in affected or not only_affected_users)
        ]
    return changes


def plan_downgrade(rows: list[dict[str, Any]], id_column: str) -> list[StatusChange]:
    """Swap back: archived items become current again and the current items of those users are archived."""
    live = _live(rows, id_column)
    archived = [r for r in live if r["status"] == "archived"]
    affected = {r["user_id"] for r in archived}
    changes = [StatusChange(str(r[id_column]), r["user_id"], "archived", "current") for r in archived]
    changes += [
        StatusChange(str(r[id_column]), r["user_id"], "current", "archived")
        for r in live
        if r["status"] == "current" and r["user_id"] in affected
    ]
    return changes


def _live(rows: list[dict[str, Any]], id_column: str) -> list[dict[str, Any]]:
    """One row per id with its effective status, excluding superseded items (they are history, not state)."""
    return current_rows(rows, id_column, id_column, statuses=LIFECYCLE_STATUSES)
