"""Which learned rows are current: nothing is ever deleted, a row is replaced by one that `supersedes` it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def superseded_by(rows: Iterable[dict[str, Any]], id_column: str) -> dict[Any, Any]:
    """Map of replaced item id -> the id of the item that replaced it (the newest replacement wins)."""
    out: dict[Any, Any] = {}
    for row in sorted(rows, key=lambda r: (r["window"], r.get("created_at") or r.get("last_modified_timestamp") or 0)):
        for old in row.get("supersedes") or []:
            out[old] = row[id_column]
    return out


def current_rows(rows: list[dict[str, Any]], id_column: str, order_column: str) -> list[dict[str, Any]]:
    """The current items: one row per id (the newest window's), minus every item another row supersedes.

    Derived tables hold one row per (window, id) because an item may be re-observed in a later window; the newest
    observation is the current one. Ordered by `order_column`, then id.
    """
    replaced = superseded_by(rows, id_column)
    best: dict[Any, dict[str, Any]] = {}
    for row in rows:
        key = row[id_column]
        if key in replaced:
            continue
        seen = best.get(key)
        if seen is None or (row["window"], row[order_column] or 0) > (seen["window"], seen[order_column] or 0):
            best[key] = row
    return sorted(best.values(), key=lambda r: (r[order_column] or 0, str(r[id_column])))
