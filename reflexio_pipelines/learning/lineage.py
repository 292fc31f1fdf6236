"""Where a learned item stands in its lineage (the original 0.2.32's tombstone statuses `merged`, `superseded`,
`expired`, and this pipeline's own `forgotten` and `replaced`): read from the rows themselves, whose `supersedes`
lists name what each row retired. Pure: rows in, lineage out (serving/routers/provenance.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reflexio_pipelines.learning.lifecycle import FORGOTTEN, REPLACED, superseded_by


def lineage_of(item_id: Any, rows: Iterable[dict[str, Any]], id_column: str, now: int) -> dict[str, Any]:
    """`{status, by, reason}` of the item among `rows` (every row of its kind, superseded ones included):

    - retired by a tombstone: `forgotten` (the user asked to forget it) or `replaced` (a changed fact retired it);
    - retired by a row that retired several items at once: `merged` into it (consolidation);
    - retired by a row retiring it alone: `superseded` by it (a newer version, conflict resolution);
    - a profile past its `expiration_timestamp`: `expired`;
    - else its lifecycle status (`current`, `pending`, `archived`), `by` null."""
    rows = list(rows)
    by_id = {r[id_column]: r for r in rows}
    row = by_id[item_id]
    successor_id = superseded_by(rows, id_column).get(item_id)
    successor = by_id.get(successor_id) if successor_id is not None else None
    if successor is not None:
        status = successor["status"]
        if status in (FORGOTTEN, REPLACED):
            reason = "the user asked to forget it" if status == FORGOTTEN else "a changed fact of the user's retired it"
            return {"status": status, "by": str(successor_id), "reason": reason}
        if len(successor.get("supersedes") or []) > 1:
            return {"status": "merged", "by": str(successor_id), "reason": "consolidated with others into it"}
        return {"status": "superseded", "by": str(successor_id), "reason": "replaced by a newer version"}
    expires = row.get("expiration_timestamp")
    if expires and expires < now:
        return {"status": "expired", "by": None, "reason": "its time to live has passed"}
    return {"status": row["status"] or "current", "by": None, "reason": None}
