"""Landing files → the compacted `turns` table rows of one window, and the window's compaction run against the lake
(`compact_window`, the `turns` asset's work)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from reflexio_pipelines.lake import user_windows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS, TURNS
from reflexio_pipelines.storage import LakePath

_READERS = 4


def compact_landing(store: Lake, files: list[LakePath], relative_names: list[str], window: str) -> Landed:
    """Read landing files into one table for `window`: each turn once, ordered by (created_at, turn_id).

    A turn can appear twice only if a client retried without an idempotency key after a lost ack; the first
    durable copy wins, so re-reading the same files always gives the same rows. A file that cannot be decoded is
    quarantined (`lake/quarantine.py`) and left out, with its name.
    """
    # Many small files (one per group commit: ~400 per learning run at 50 turns/s): read side by side, since Arrow
    # releases the GIL while it reads and decodes (one after the other: 2.8 s of a run's `turns` step, py-spy).
    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        tables = list(pool.map(lambda path: read_landing(store, path, schema=LANDING_TURNS), files))
    read = [(table, name) for table, name in zip(tables, relative_names) if table is not None]
    return Landed(_compacted([t for t, _ in read], [n for _, n in read], window), [n for _, n in read])


@dataclass(frozen=True)
class Landed:
    """Landing files compacted: the rows, and the files they were read from (quarantined ones left out)."""

    table: pa.Table
    names: list[str]


def _compacted(tables: list[pa.Table], relative_names: list[str], window: str) -> pa.Table:
    parts = [
        table.append_column("landing_file", pa.array([name] * table.num_rows, pa.string()))
        for table, name in zip(tables, relative_names)
    ]
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


def _user_ids(table: pa.Table) -> set[str]:
    return set(pc.unique(table.column("user_id")).to_pylist()) if table.num_rows else set()


def users_in(table: pa.Table) -> int:
    """Distinct users in a turns table."""
    return len(pc.unique(table.column("user_id"))) if table.num_rows else 0


#: How long a run waits for its window's lock before compacting. The landing sensor requests a window's next run while
#: the current one learns (sensors.py), so the next one waits out a whole learning step here, which on a backlog (the
#: first run after an outage, a large pass with a slow model) takes far longer than the lake's default lock wait.
WINDOW_LOCK_WAIT_S = 6 * 3600


@dataclass(frozen=True)
class Compacted:
    """What compacting a window did: its `turns` rows now, the table's Delta version, whether only newly landed
    files were read, and how many landing files the window has and how many were read."""

    table: pa.Table
    version: int | None
    incremental: bool
    landing_files: int
    files_compacted: int


def compact_window(store: Lake, window: str, landing_hours: list[tuple[str, str]]) -> Compacted:
    """Compact the window's landing files (in its `landing_hours`, (date, hour) directories) into `turns`, under the
    window's lock: only the files that landed since the last run, or all of them again when a file that run
    consumed is gone without the consumed list saying so."""
    hour_dirs = [store.landing_turns / f"date={d}" / f"hour={h}" for d, h in landing_hours]
    user_windows.ensure_complete(store)
    with store.lock(f"window-{window}", timeout_s=WINDOW_LOCK_WAIT_S):
        # listed once the lock is held: a run that waited for it takes the files that landed while it waited
        files = store.landing_files(hour_dirs)
        names = [store.relative(f) for f in files]
        consumed = set(store.read_consumed(window))
        incremental = bool(consumed) and consumed <= set(names)
        if incremental:
            fresh = [(f, n) for f, n in zip(files, names) if n not in consumed]
            landed = compact_landing(store, [f for f, _ in fresh], [n for _, n in fresh], window)
            new_names = landed.names  # a quarantined file is no input: not replaced, not consumed
            names = [n for n in names if n in consumed or n in new_names]
            # rows of a fresh file may be there already (a crash after the commit, before the consumed list)
            kept = store.read_table("turns", window)
            kept = kept.filter(
                pc.invert(pc.is_in(kept.column("landing_file"), value_set=pa.array(new_names, pa.string())))
            )
            added = landed.table.filter(
                pc.invert(pc.is_in(landed.table.column("turn_id"), value_set=kept.column("turn_id")))
            )  # first copy wins
            user_windows.record(store, window, _user_ids(added) - _user_ids(kept))
            version = (
                store.replace_landing_files(window, new_names, added) if new_names else store.table_version("turns")
            )
            table = pa.concat_tables([kept, added])
        else:
            landed = compact_landing(store, files, names, window)
            table, names = landed.table, landed.names
            user_windows.record(store, window, _user_ids(table))
            version = store.replace_window("turns", window, table)
        store.write_consumed(window, names)
    return Compacted(table, version, incremental, len(files), len(new_names) if incremental else len(files))
