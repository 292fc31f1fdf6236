"""Landing files → the compacted `turns` table rows of one window."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from reflexio_pipelines.lake.schemas import LANDING_TURNS, TURNS
from reflexio_pipelines.storage import LakePath, read_parquet


def compact_landing(files: list[LakePath], relative_names: list[str], window: str) -> pa.Table:
    """Read landing files into one table for `window`: each turn once, ordered by (created_at, turn_id).

    A turn can appear twice only if a client retried without an idempotency key after a lost ack; the first
    durable copy wins, so re-reading the same files always gives the same rows.
    """
    parts = []
    for path, name in zip(files, relative_names):
        table = read_parquet(path, schema=LANDING_TURNS)
        table = table.append_column("landing_file", pa.array([name] * table.num_rows, pa.string()))
        parts.append(table)
    if not parts:
        return TURNS.empty_table()
    table = pa.concat_tables(parts)
    table = table.append_column("window", pa.array([window] * table.num_rows, pa.string()))
    table = table.sort_by([("ingested_at_us", "ascending"), ("landing_file", "ascending"), ("turn_index", "ascending")])
    first = _first_occurrence(table.column("turn_id"))
    table = table.filter(first)
    return table.sort_by([("created_at", "ascending"), ("turn_id", "ascending")]).select(TURNS.names).cast(TURNS)


def _first_occurrence(ids: pa.ChunkedArray) -> pa.Array:
    seen: set[str] = set()
    mask = []
    for value in ids.to_pylist():
        mask.append(value not in seen)
        seen.add(value)
    return pa.array(mask, pa.bool_())


def users_in(table: pa.Table) -> int:
    """Distinct users in a turns table."""
    return len(pc.unique(table.column("user_id"))) if table.num_rows else 0
