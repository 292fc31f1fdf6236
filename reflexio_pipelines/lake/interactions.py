"""Published turns as the API reads them: the compacted `turns` table plus landing files no run has consumed yet,
minus turns deleted through the API. A turn is readable as soon as its publish was acknowledged."""

from __future__ import annotations

import json
from typing import Any

from reflexio_pipelines.lake.curation import deleted_ids, read_ops
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS, TURNS
from reflexio_pipelines.storage import LakePath

#: The columns a turn is read with: the landing files' that the compacted table keeps too.
_COLUMNS = [name for name in LANDING_TURNS.names if name in TURNS.names]


def turn_rows(lake: Lake, filters: list[tuple] | None = None) -> list[dict[str, Any]]:
    """Every live turn matching conjunctive `(column, op, value)` filters, newest first (ties: turn order).

    A landing file listed here can be deleted by an erasure before it is opened: then everything is read again
    from a fresh listing, until the erasure has committed (`Lake.read_consistently`), so the answer is the lake before or after the erasure, never an error."""
    return lake.read_consistently(lambda: _turn_rows(lake, filters))


def _turn_rows(lake: Lake, filters: list[tuple] | None) -> list[dict[str, Any]]:
    compacted = lake.read_table("turns", filters=filters).select(_COLUMNS)
    seen = set(compacted.column("turn_id").to_pylist())
    rows = compacted.to_pylist()
    for path in _unconsumed_landing_files(lake):
        fresh = read_landing(lake, path, schema=LANDING_TURNS, filters=_arrow_filters(filters))
        if fresh is None:
            continue  # unreadable: quarantined
        fresh = fresh.select(_COLUMNS)
        rows.extend(r for r in fresh.to_pylist() if r["turn_id"] not in seen)
    gone = deleted_ids(read_ops(lake, "interaction"))
    rows = [r for r in rows if r["turn_id"] not in gone]
    rows.sort(key=lambda r: (-r["created_at"], -r["ingested_at_us"], r["request_id"], r["turn_index"]))
    return rows


def _unconsumed_landing_files(lake: Lake) -> list[LakePath]:
    consumed = lake.consumed_files()
    files = lake.landing_files([hour_dir for _, _, hour_dir in lake.landing_hours()])
    return [f for f in files if lake.relative(f) not in consumed]


def _arrow_filters(filters: list[tuple] | None) -> list[tuple] | None:
    # The landing schema lacks the table's `window` column; every other filter applies as is.
    kept = [f for f in (filters or []) if f[0] in _COLUMNS]
    return kept or None


def interaction_view(row: dict[str, Any]) -> dict[str, Any]:
    """The original's InteractionView of one turn (no embedding, no image bytes)."""
    return {
        "interaction_id": row["interaction_id"],
        "user_id": row["user_id"],
        "request_id": row["request_id"],
        "created_at": row["created_at"],
        "role": row["role"] or "User",
        "content": row["content"] or "",
        "user_action": row["user_action"] or "none",
        "user_action_description": row["user_action_description"] or "",
        "interacted_image_url": row["interacted_image_url"] or "",
        "shadow_content": row["shadow_content"] or "",
        "expert_content": row["expert_content"] or "",
        "tools_used": json.loads(row["tools_used"] or "[]"),
    }


def request_view(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The original's Request for the turns of one publish call."""
    first = min(rows, key=lambda r: r["turn_index"])
    return {
        "request_id": first["request_id"],
        "user_id": first["user_id"],
        "created_at": min(r["created_at"] for r in rows),
        "source": first["source"] or "",
        "agent_version": first["agent_version"] or "",
        "session_id": first["session_id"],
    }
