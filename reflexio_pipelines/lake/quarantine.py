"""Unreadable files moved aside (quarantined) instead of taking an organisation down.

A landing file or a Delta table data file that exists but cannot be decoded (truncated, zeroed, bit-flipped, not
Parquet at all) used to fail every read that listed it: every user's reads and exports, every learning run of its
window, every erasure. Now the reader that meets one confirms it (the file read again on its own still fails as
undecodable, not as missing or as a transient I/O error), moves it to `quarantine/<its path in the lake>` byte for
byte, records it in the `quarantine` table and goes on without it:

- a landing file: its turns are no longer read from it (the `turns` table keeps what a run compacted from it while
  it was readable); a window that had consumed it forgets it, as when an erasure deletes one;
- a table data file: a Delta commit removes it from the table (`DeltaTable.repair`: files missing from storage), so
  the table reads again, without that file's rows, and every later commit and history purge goes on.

Erasure: an unreadable file cannot be shown not to hold the user's rows, so erasing any user deletes every file
still in quarantine (`erase_quarantined`); its row stays, marked `erased` (paths, size, sha256, the error: never a
user id or any content). docs/operations.md says what an operator can do before that.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.lake.windows import configured_granularity, key_of_landing_hour, window_of_key
from reflexio_pipelines.storage import LakePath, is_remote, open_delta, read_parquet, sync_dir, vanished

if TYPE_CHECKING:  # lake/io.py imports this module
    from reflexio_pipelines.lake.io import Lake

log = logging.getLogger(__name__)

TABLE = "quarantine"
QUARANTINE_DIR = "quarantine"
LOCK = "quarantine"
#: Characters of the decoder's error kept in the row (enough to tell a truncated file from a corrupt page).
MAX_ERROR = 500


def unreadable(exc: BaseException) -> bool:
    """Whether `exc` says a file that exists cannot be decoded as Parquet: Arrow's invalid-data errors, and the
    errno-less OSError a corrupt compressed page raises ("ZSTD decompression failed"); not a missing file, not an
    operating-system or network I/O error (those carry an errno, or are not OSErrors at all)."""
    if vanished(exc):
        return False
    return isinstance(exc, pa.ArrowInvalid) or (isinstance(exc, OSError) and exc.errno is None)


def read_landing(lake: Lake, path: LakePath, **kwargs: Any) -> pa.Table | None:
    """A landing file's rows (`kwargs` as for `read_parquet`), or None when the file is unreadable: it is then
    quarantined, and every reader goes on without it. A vanished file raises as before (readers start again)."""
    try:
        return read_parquet(path, **kwargs)
    except Exception as exc:
        if not unreadable(exc) or not quarantine_landing(lake, path):
            raise
        return None


def quarantine_landing(lake: Lake, path: LakePath) -> bool:
    """Move the landing file `path` aside if it is still there and still unreadable (under the quarantine lock, so
    two readers meeting it at once move it once). True when it is in quarantine now."""
    relative = lake.relative(path)
    with lake.lock(LOCK):
        if not path.exists():
            return (lake.root / QUARANTINE_DIR / relative).exists()  # another reader moved it meanwhile
        error = _decode_error(path)
        if error is None:
            return False  # readable after all (the first failure was transient): not quarantined
        row = _move(lake, path, relative, "landing", None, error)
        lake.drop_consumed(_landing_window(relative), relative)
        _record(lake, [row])
    log.error("quarantined unreadable landing file %s: %s", relative, error)
    return True


def repair_table(lake: Lake, name: str) -> bool:
    """Move every unreadable data file of Delta table `name` aside and commit their removal from the table. True when
    at least one file was quarantined (read the table again), False when every file reads (the error was another)."""
    root = lake.table_path(name)
    with lake.lock(LOCK):
        table = open_delta(root)
        rows = []
        for relative in _data_files(table):
            path = root / relative
            error = _decode_error(path)
            if error is not None:
                rows.append(_move(lake, path, lake.relative(path), "table", name, error))
        if not rows:
            return False
        open_delta(root).repair(dry_run=False)  # a commit removing the files no longer in storage
        _record(lake, rows)
    for row in rows:
        log.error("quarantined unreadable data file %s of table %s: %s", row["original_path"], name, row["error"])
    return True


def quarantined(lake: Lake) -> list[dict[str, Any]]:
    """Every quarantine row, newest first."""
    rows = lake.read_table(TABLE).to_pylist()
    return sorted(rows, key=lambda r: (-r["quarantined_at_us"], r["original_path"]))


def erase_quarantined(lake: Lake) -> int:
    """Delete every file still in quarantine (an erasure cannot tell which of them hold the erased user's rows) and
    mark its row `erased`. Returns the files deleted."""
    with lake.lock(LOCK):
        rows = lake.read_table(TABLE).to_pylist()
        pending = [r for r in rows if r["status"] == "quarantined"]
        if not pending:
            return 0
        now = _now_us()
        for row in pending:
            path = lake.root / row["quarantine_path"]
            if path.exists():
                path.unlink()
                sync_dir(path.parent)
            row.update(status="erased", erased_at_us=now)
        lake.replace_where(TABLE, None, pa.Table.from_pylist(rows, schema=TABLES[TABLE]))
        lake.purge_history(TABLE)  # no earlier version lists them as held
    return len(pending)


def _decode_error(path: LakePath) -> str | None:
    """Why `path` cannot be decoded, or None if it reads whole (every page decompressed and decoded)."""
    try:
        read_parquet(path)
        return None
    except Exception as exc:
        if not unreadable(exc):
            raise
        return f"{type(exc).__name__}: {exc}"[:MAX_ERROR]


def _move(lake: Lake, path: LakePath, relative: str, kind: str, table: str | None, error: str) -> dict[str, Any]:
    """Move one file into the quarantine directory (same relative path), durably; its quarantine row."""
    target = lake.root / QUARANTINE_DIR / relative
    data = path.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    if is_remote(target):  # the file and its target are both under the lake root: both local or both remote
        target.write_bytes(data)
        path.unlink()
    else:
        path.rename(target)
        sync_dir(target.parent)
        sync_dir(path.parent)
    return {
        "quarantined_at_us": _now_us(),
        "kind": kind,
        "table_name": table,
        "original_path": relative,
        "quarantine_path": lake.relative(target),
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "error": error,
        "status": "quarantined",
        "erased_at_us": None,
    }


def _record(lake: Lake, rows: list[dict[str, Any]]) -> None:
    lake.append(TABLE, pa.Table.from_pylist(rows, schema=TABLES[TABLE]))


def _data_files(table: Any) -> list[str]:
    """The data files (paths relative to the table) of a Delta table's current version."""
    from urllib.parse import unquote

    actions = pa.table(table.get_add_actions(flatten=False))
    return [unquote(p) for p in actions.column("path").to_pylist()]


def _landing_window(relative: str) -> str:
    """The window of a landing file from its path `landing/turns/date=D/hour=H/<name>`."""
    date, hour = (part.split("=", 1)[1] for part in relative.split("/")[2:4])
    granularity = configured_granularity()
    return window_of_key(key_of_landing_hour(date, hour, granularity), granularity)


def _now_us() -> int:
    return int(time.time() * 1_000_000)
