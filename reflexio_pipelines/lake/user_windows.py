"""Which windows hold each user's turns: the directory that makes a window's state reads follow its own users.

Every window's files hold users from the whole id space, so min/max statistics on `user_id` skip no file: a read
of 20 users' history opened every window's files of `turns`, `user_profiles` and `user_playbooks` (303 files,
44 MB, ~0.55 s on a lake of 50,000 users). With this directory a window's run first reads the windows that hold
its users' turns (usually none for new users, a few for returning ones), then only those windows' partitions.
A user's learned rows live only in windows that hold their turns (a row's window is its source turns' window,
reruns included), so the same windows bound every state table.

The table `user_windows` holds (user_id, turns_window) pairs. The `turns` compaction records a window's users here
*before* it commits their turns, so the directory may name a window too early (a crash in between: a harmless
extra read) but never misses one. Appends are small files; once there are `COMPACT_AT_FILES` of them the table is
rewritten sorted by user id (delta-rs `optimize.z_order`), so that its own reads skip files by their statistics,
and its history is purged. A lake whose turns predate the directory is read in full until `ensure_complete` has
listed its existing turns once (the `complete` marker under `state/`); until then `history_windows` answers None
and readers fall back to every earlier window. Erasure removes a user's pairs like any other `user_id` rows.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.storage import open_delta, read_delta, write_bytes

TABLE = "user_windows"
#: The lock every writer of the directory holds while it commits (erasure too: privacy/erasure.WRITER_LOCKS).
LOCK = "user-windows"
#: Appended files before the table is rewritten sorted by user id (each append is one commit's new users).
COMPACT_AT_FILES = 32
#: Target size of the sorted files: small enough that a lookup of a window's users opens a few of them.
TARGET_FILE_BYTES = 4 << 20
_MARKER = ("state", "user_windows.complete")


def record(lake: Lake, window: str, user_ids: Iterable[str]) -> None:
    """Note that `user_ids` have turns in `window`. Call before committing those turns (see the module docstring)."""
    users = sorted(set(user_ids))
    if not users:
        return
    rows = pa.table({"user_id": users, "turns_window": [window] * len(users)}, schema=TABLES[TABLE])
    with lake.lock(LOCK):
        lake.append(TABLE, rows)
        _compact_if_due(lake)


def ensure_complete(lake: Lake) -> None:
    """List the users of every window already in `turns` once, on a lake whose turns predate the directory, and
    mark the directory complete. Cheap once done (one marker check)."""
    marker = lake.root.joinpath(*_MARKER)
    if marker.exists():
        return
    with lake.lock(LOCK):
        if marker.exists():
            return
        turns = lake.table_path("turns")
        if (turns / "_delta_log").exists():
            pairs = read_delta(open_delta(turns), None, ["user_id", "window"])
            pairs = pairs.group_by(["user_id", "window"]).aggregate([])
            rows = pa.table(
                {"user_id": pairs.column("user_id"), "turns_window": pairs.column("window")}, schema=TABLES[TABLE]
            )
            if rows.num_rows:
                lake.append(TABLE, rows.sort_by("user_id"))
        write_bytes(marker, b"complete\n")


def history_windows(lake: Lake, user_ids: Iterable[str], before: str | None = None) -> list[str] | None:
    """The windows (before `before`, if given) that hold turns of any of `user_ids`, sorted; None when the directory
    cannot tell (not complete yet): then every window may hold them."""
    users = sorted(set(user_ids))
    if not users:
        return []
    if not lake.root.joinpath(*_MARKER).exists():
        return None
    filters = [("user_id", "in", users), *([("turns_window", "<", before)] if before is not None else [])]
    rows = lake.read_table(TABLE, filters=filters)
    return sorted(pc.unique(rows.column("turns_window")).to_pylist())


def _compact_if_due(lake: Lake) -> None:
    table = open_delta(lake.table_path(TABLE))
    if len(table.file_uris()) < COMPACT_AT_FILES:
        return
    table.optimize.z_order(["user_id"], target_size=TARGET_FILE_BYTES)
    lake.purge_history(TABLE)  # the unsorted files and their log entries
