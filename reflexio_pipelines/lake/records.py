"""Conversions between lake rows (Arrow) and the learning logic's value types."""

from __future__ import annotations

import json

import pyarrow as pa

from reflexio_pipelines.lake.curation import MANUAL_WINDOW, apply_adds_and_updates, deleted_ids, read_ops
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.user_windows import history_windows
from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.lifecycle import current_rows, status_overlay
from reflexio_pipelines.learning.types import ToolCall, Turn


def turns_from_table(table: pa.Table) -> list[Turn]:
    """Turn rows of the `turns` table into Turn values (order preserved)."""
    return [
        Turn(
            turn_id=row["turn_id"],
            interaction_id=row["interaction_id"],
            request_id=row["request_id"],
            user_id=row["user_id"],
            role=row["role"] or "",
            content=row["content"] or "",
            created_at=row["created_at"],
            session_id=row["session_id"],
            source=row["source"] or "",
            agent_version=row["agent_version"] or "",
            tools_used=tuple(
                ToolCall(call.get("tool_name", ""), call.get("tool_data") or {})
                for call in json.loads(row["tools_used"] or "[]")
            ),
            expert_content=row["expert_content"] or "",
            shadow_content=row["shadow_content"] or "",
            user_action=row["user_action"] or "none",
            user_action_description=row["user_action_description"] or "",
            ingested_at_us=row["ingested_at_us"],
            turn_index=row["turn_index"],
        )
        for row in table.to_pylist()
    ]


def user_states(
    lake: Lake, user_ids: set[str], window: str, bookmarks: list[dict] | None = None
) -> dict[str, UserState]:
    """Each user's processed turns and current learned items from the windows before `window`.

    With `bookmarks` (this window's `extraction_bookmarks` rows, left by earlier runs of it) the state is the one
    an incremental run continues from: the current items include what earlier runs of this window learned, and
    each user's `processed` / `bookmarks` say which of this window's turns are done (learn.py treats them as
    context, not as new). Windows sort lexically in time order (`2026-11-30T04` < `2026-11-30T05`), so "before" is
    a string compare.
    """
    if not user_ids:
        return {}
    users = ("user_id", "in", sorted(user_ids))
    states = {user_id: UserState() for user_id in user_ids}
    earlier = history_windows(lake, user_ids, window)
    history: list[tuple] | None  # None: no earlier window holds the users' turns
    if earlier is None:  # the directory cannot tell yet: every earlier window
        history = [users, ("window", "<", window)]
        items = [users, ("window", "<=" if bookmarks is not None else "<", window)]
    else:
        history = [users, ("window", "in", earlier)] if earlier else None
        # manual adds (window MANUAL_WINDOW), and this window's items once an earlier run of it left bookmarks
        current = [window] if bookmarks is not None else []
        items = [users, ("window", "in", [MANUAL_WINDOW, *earlier, *current])]
    for turn in live_turns(lake, filters=history) if history else ():
        states[turn.user_id].history.append(turn)
    for row in live_rows(lake, "profile", filters=items):
        states[row["user_id"]].profiles.append(row)
    for row in live_rows(lake, "user_playbook", filters=items):
        states[row["user_id"]].playbooks.append(row)
    for row in bookmarks or []:
        if row["user_id"] in states:
            states[row["user_id"]].processed[row["extractor"]] = frozenset(row["processed_turn_ids"] or ())
            states[row["user_id"]].bookmarks[row["extractor"]] = row
    return states


#: entity -> (table, id column, order column)
ENTITY_TABLES = {
    "profile": ("user_profiles", "profile_id", "last_modified_timestamp"),
    "user_playbook": ("user_playbooks", "user_playbook_id", "created_at"),
}


def live_rows(
    lake: Lake, entity: str, filters: list[tuple] | None = None, statuses: tuple[str, ...] = ("current",)
) -> list[dict]:
    """Rows of `entity` in `statuses` after supersession, lifecycle events (see learning/lifecycle.py) and manual
    curation (lake/curation.py: adds and edits join before supersession; deletions apply last, so deleting an
    item never brings back the one it replaced)."""
    table, id_column, order_column = ENTITY_TABLES[entity]
    # Lifecycle events and curation ops of profiles and user playbooks name the item's user: a read for some users
    # needs only theirs (a window's state reads follow the window's users, not the lake's size).
    users = [f for f in filters or () if f[0] == "user_id"] or None
    overlay = status_overlay(lake.read_table("lifecycle_events", filters=users).to_pylist(), entity)
    ops = read_ops(lake, entity, filters=users)
    rows = apply_adds_and_updates(lake.read_table(table, filters=filters).to_pylist(), ops, id_column, filters)
    gone = deleted_ids(ops)
    return [r for r in current_rows(rows, id_column, order_column, overlay, statuses) if str(r[id_column]) not in gone]


def every_item(lake: Lake, entity: str) -> list[dict]:
    """Every item of `entity` ever learned or added, superseded and archived ones included (the newest row per id,
    curation applied, deleted ones left out): what outcome counters and audit views may still refer to."""
    table, id_column, order_column = ENTITY_TABLES[entity]
    ops = read_ops(lake, entity)
    gone = deleted_ids(ops)
    best: dict = {}
    for row in apply_adds_and_updates(lake.read_table(table).to_pylist(), ops, id_column, None):
        seen = best.get(row[id_column])
        if seen is None or (row["window"], row[order_column] or 0) > (seen["window"], seen[order_column] or 0):
            best[row[id_column]] = row
    return [r for key, r in best.items() if str(key) not in gone]


def live_turns(lake: Lake, window: str | None = None, filters: list[tuple] | None = None) -> list[Turn]:
    """Turns of the compacted table (one window, or matching `filters`) minus those deleted through the API, so
    re-materialising a window never relearns from a deleted interaction."""
    gone = deleted_ids(read_ops(lake, "interaction"))
    table = lake.read_table("turns", window, filters=filters)
    return [t for t in turns_from_table(table) if t.turn_id not in gone]
