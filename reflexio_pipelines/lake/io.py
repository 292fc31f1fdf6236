"""Where things live in the lake and how they are written: atomically, durably, idempotently.

Layout (see lake/README.md):
    landing/turns/date=YYYY-MM-DD/hour=HH/<ingested_us>-<rand>.parquet   immutable landing files
    tables/<name>/                                                       Delta tables, partitioned by `window`
    state/consumed/<window>.json                                         landing files a `turns` run consumed, learned?
    indexes/search/<version>/, indexes/search/CURRENT                    published search index versions
    _locks/                                                              cross-process write locks
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
from filelock import FileLock
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random

from reflexio_pipelines.files import TMP_PREFIX
from reflexio_pipelines.lake import quarantine
from reflexio_pipelines.lake.reads import note_read
from reflexio_pipelines.lake.schemas import OPERATION_TABLES, TABLES
from reflexio_pipelines.storage import (
    LakePath,
    delta_options,
    delta_uri,
    lake_path,
    local_state_dir,
    open_delta,
    pruned_dataset,
    read_vanishing,
    row_filter,
    sync_dir,
    write_bytes,
)

T = TypeVar("T")

#: Where erasures in progress are listed, relative to the lake root.
ERASURES_ACTIVE = ("state", "erasure_requests", "active")


def committed(paths: Iterable[LakePath]) -> list[LakePath]:
    """`paths` without temporary files (`.tmp-*`: a write not yet renamed into place, or one a crash left): what
    every reader that lists a directory of the lake must take, so it never opens a half-written file."""
    return [p for p in paths if not p.name.startswith(TMP_PREFIX)]


def _sorted_glob(directory: LakePath, pattern: str) -> list[LakePath]:
    """The entries of `directory` matching `pattern`, in path order."""
    # annotated: from the union of Path's and UPath's glob generators alone, mypy infers no path type for the list
    entries: list[LakePath] = sorted(directory.glob(pattern))
    return entries


def landing_hour_dir(landing_root: LakePath, moment: datetime) -> LakePath:
    """The landing directory for the UTC hour containing `moment`."""
    moment = moment.astimezone(timezone.utc)
    return landing_root / f"date={moment:%Y-%m-%d}" / f"hour={moment:%H}"


@dataclass(frozen=True)
class ConsumedState:
    """A window's `state/consumed/<window>.json`: the landing files in its `turns` table, whether the learning step
    has committed since they were (`learned`), and how many `turns` runs have left them unlearned (`attempts`; a
    window whose learning keeps dying is not retried for ever, `pending.MAX_AUTOMATIC_RETRIES`)."""

    files: list[str]
    learned: bool = True
    attempts: int = 0


@dataclass(frozen=True)
class Lake:
    """A lake rooted at a local directory or an object-store prefix (`s3://bucket/prefix`; see `storage`). All paths
    the pipeline and the service use come from here."""

    root: LakePath

    @classmethod
    def at(cls, root: str | LakePath) -> "Lake":
        """A lake at `root` (created on first write)."""
        return cls(lake_path(root) if isinstance(root, (str, Path)) else root)

    @property
    def landing_turns(self) -> LakePath:
        return self.root / "landing" / "turns"

    @property
    def index_root(self) -> LakePath:
        return self.root / "indexes" / "search"

    def table_path(self, name: str) -> LakePath:
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        return self.root / "tables" / name

    @property
    def extraction_config_path(self) -> LakePath:
        """Where `set_config` stores the organisation's extraction config (overrides the settings' file)."""
        return self.root / "state" / "extraction_config.json"

    def extraction_config(self, fallback: str | None) -> str | None:
        """The extraction config spec in force: the one stored through `set_config` (as inline JSON), else
        `fallback` (the settings' file, inline JSON or None; see `resolve_extraction_config`)."""
        stored = self.extraction_config_path
        return stored.read_text() if stored.exists() else fallback

    def consumed_path(self, window: str) -> LakePath:
        return self.root / "state" / "consumed" / f"{window}.json"

    @property
    def erasures_active_dir(self) -> LakePath:
        """One empty entry per erasure in progress (privacy/erasure.py `ErasureMarker`)."""
        return self.root.joinpath(*ERASURES_ACTIVE)

    def erasing(self) -> bool:
        """Whether an erasure is in progress on this lake (it deletes files as it goes: readers wait for it)."""
        active = self.erasures_active_dir
        return active.exists() and any(True for _ in active.iterdir())

    def read_consistently(self, read: Callable[[], T]) -> T:
        """`read()`, started again from a fresh listing while a file it listed vanishes, and for as long as an
        erasure is in progress (`storage.read_vanishing`)."""
        return read_vanishing(read, busy=self.erasing)

    def consumed_files(self) -> set[str]:
        """Every landing file (relative path) some window's `turns` run consumed."""
        consumed_dir = self.root / "state" / "consumed"
        if not consumed_dir.exists():
            return set()
        files: set[str] = set()
        for path in committed(consumed_dir.glob("*.json")):
            files.update(json.loads(path.read_text())["files"])
        return files

    # -- landing -----------------------------------------------------------------------------------------

    def landing_hours(self) -> list[tuple[str, str, LakePath]]:
        """Every landing hour directory as (date, hour, path), oldest first."""
        out: list[tuple[str, str, LakePath]] = []
        if not self.landing_turns.exists():
            return out
        for date_dir in _sorted_glob(self.landing_turns, "date=*"):
            for hour_dir in _sorted_glob(date_dir, "hour=*"):
                out.append((date_dir.name[5:], hour_dir.name[5:], hour_dir))
        return out

    def landing_files(self, hour_dirs: list[LakePath]) -> list[LakePath]:
        """Committed landing files in the given hour directories (temporary files are never listed)."""
        files: list[LakePath] = []
        for hour_dir in hour_dirs:
            files.extend(committed(sorted(hour_dir.glob("*.parquet"))))
        return files

    def consumed_state(self, window: str) -> ConsumedState:
        """What the last `turns` run of `window` consumed, and whether learning has committed since."""
        path = self.consumed_path(window)
        if not path.exists():
            return ConsumedState(files=[])
        data = json.loads(path.read_text())
        # a list written before `learned` existed was only written by runs whose learning is not tracked: learned
        return ConsumedState(files=data["files"], learned=data.get("learned", True), attempts=data.get("attempts", 0))

    def read_consumed(self, window: str) -> list[str]:
        """Landing files (relative paths) that the last successful `turns` run for `window` consumed."""
        return self.consumed_state(window).files

    def write_consumed(self, window: str, files: list[str]) -> None:
        """Record the landing files a `turns` run has just committed to the table, not yet learned from: until
        `mark_learned`, the window stays pending (a run that dies between the two steps is run again)."""
        before = self.consumed_state(window)
        attempts = 1 if before.learned else before.attempts + 1
        self._write_consumed(window, ConsumedState(sorted(files), learned=False, attempts=attempts))

    def drop_consumed(self, window: str, name: str) -> None:
        """Forget one consumed landing file (erasure deleted it), keeping the window's learning state."""
        before = self.consumed_state(window)
        if name in before.files:
            self._write_consumed(
                window, ConsumedState([f for f in before.files if f != name], before.learned, before.attempts)
            )

    def mark_learned(self, window: str) -> None:
        """Learning has committed the window's tables from every turn the consumed files hold."""
        before = self.consumed_state(window)
        if not before.learned:
            self._write_consumed(window, ConsumedState(before.files))

    def _write_consumed(self, window: str, state: ConsumedState) -> None:
        body = {"files": state.files, "learned": state.learned, "attempts": state.attempts}
        write_bytes(self.consumed_path(window), json.dumps(body).encode())

    def relative(self, path: LakePath) -> str:
        # `path` lies under the root, so both are local or both remote: pairs the checker cannot tell from the types
        return str(path.relative_to(self.root))  # type: ignore[arg-type]

    # -- tables ------------------------------------------------------------------------------------------

    def read_table(self, name: str, window: str | None = None, filters: list[tuple] | None = None) -> pa.Table:
        """A Delta table as Arrow, optionally one window and/or DNF `filters` (e.g. `[("user_id", "in", ids)]`);
        an empty table with the schema if it doesn't exist yet."""
        schema = TABLES[name]
        path = self.table_path(name)
        if not (path / "_delta_log").exists():
            return schema.empty_table()
        filters = [*(filters or []), *([("window", "=", window)] if window is not None else [])] or None
        # A data file of the version opened can be vacuumed before it is read (erasure purges history at once):
        # then the table is opened again at its new version. A data file that cannot be decoded is quarantined
        # (moved aside, removed from the table by a commit) and the table read without it.
        try:
            table = self.read_consistently(lambda: _read_delta(name, path, filters))
        except Exception as exc:
            if name == quarantine.TABLE or not quarantine.unreadable(exc) or not quarantine.repair_table(self, name):
                raise
            table = self.read_consistently(lambda: _read_delta(name, path, filters))
        for field in schema:
            # A column added to the schema after this table was last written: null until a write adds it (writes
            # merge additive schema changes, see `_overwrite`).
            if field.name not in table.column_names and field.nullable:
                table = table.append_column(field.name, pa.nulls(table.num_rows, field.type))
        return table.select(schema.names).cast(schema)

    def table_version(self, name: str) -> int | None:
        """The Delta version of table `name` (None before its first commit): a cheap change check for readers
        that mirror a small log in memory."""
        log_dir = self.table_path(name) / "_delta_log"
        versions = [int(p.stem) for p in log_dir.glob("*.json")] if log_dir.exists() else []
        return max(versions) if versions else None

    def replace_window(self, name: str, window: str, table: pa.Table) -> int:
        """Atomically replace every row of `window` in table `name` with `table` (a Delta commit).

        Deterministic inputs give identical rows, so re-materialising a partition never duplicates anything.
        Rows written by rerun operations are left alone. Returns the new table version.
        """
        predicate = f"window = '{_quote(window)}'"
        if name in OPERATION_TABLES:
            predicate += " AND operation_id IS NULL"
        return self._overwrite(name, table, predicate)

    def replace_operation(self, name: str, operation_id: str, table: pa.Table) -> int:
        """Atomically replace every row a rerun operation wrote to table `name` (a retried operation is idempotent)."""
        if name not in OPERATION_TABLES:
            raise KeyError(f"table {name!r} holds no operation rows")
        return self._overwrite(name, table, f"operation_id = '{_quote(operation_id)}'")

    def replace_where(self, name: str, predicate: str | None, table: pa.Table) -> int:
        """Atomically replace the rows matching a SQL `predicate` (None = every row) with `table`."""
        return self._overwrite(name, table, predicate or "true")

    def replace_windows(self, name: str, windows: list[str] | None, table: pa.Table) -> int:
        """Atomically replace every row of the given windows (rerun rows included; None = the whole table).

        The commit's predicate names only the partition column, so the Delta log never records which rows were
        looked for (erasure relies on this: a predicate on `user_id` would write the id into the log).
        """
        if windows is None:
            return self.replace_where(name, None, table)
        quoted = ", ".join(f"'{_quote(w)}'" for w in sorted(set(windows)))
        return self._overwrite(name, table, f"window IN ({quoted})")

    def replace_landing_files(self, window: str, files: list[str], table: pa.Table) -> int:
        """Atomically replace the `turns` rows of `window` compacted from the landing `files` with `table` (an
        incremental compaction: a retry after a crash rewrites the same rows instead of appending them twice)."""
        quoted = ", ".join(f"'{_quote(f)}'" for f in sorted(set(files)))
        return self._overwrite("turns", table, f"window = '{_quote(window)}' AND landing_file IN ({quoted})")

    def purge_history(self, name: str) -> int:
        """Physically forget everything but the current version of table `name`; returns data files deleted.

        Deletes every data file a commit removed, however recently (a zero-retention vacuum of removed files),
        and files no commit ever referenced that are older than an hour (left by a writer that crashed before
        committing; younger ones may be a concurrent writer's not-yet-committed files, so they stay). Then writes a
        checkpoint of the current version and deletes the older commit files and checkpoints, whose `add`
        statistics (column min/max values) describe rows that no longer exist. Time travel is gone afterwards; a
        writer committing to this table at the same moment may have to retry (callers hold its writer lock).
        """
        table_dir = self.table_path(name)
        log_dir = table_dir / "_delta_log"
        if not log_dir.exists():
            return 0
        table = open_delta(table_dir)
        removed = table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
        removed += table.vacuum(retention_hours=1, dry_run=False, enforce_retention_duration=False, full=True)
        table = open_delta(table_dir)
        table.create_checkpoint()
        version = table.version()
        for path in log_dir.iterdir():
            # `00000000000000000012.json`, `…12.checkpoint.parquet`, abandoned `_commit_*.json.tmp` files
            stem = path.name.split(".", 1)[0]
            if (stem.isdigit() and int(stem) < version) or path.name.startswith("_commit_"):
                path.unlink()
        sync_dir(log_dir)
        return len(removed)

    def append(self, name: str, table: pa.Table) -> int:
        """Append rows to an append-only table (e.g. lifecycle events). Returns the new table version."""
        return self._overwrite(name, table, None)

    def _overwrite(self, name: str, table: pa.Table, predicate: str | None) -> int:
        from deltalake import write_deltalake

        schema = TABLES[name]
        table = table.select(schema.names).cast(schema)
        path = self.table_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        uri, options = delta_uri(path), delta_options(path)
        partition_by = ["window"] if "window" in schema.names else None
        # schema_mode="merge": a nullable column added to a schema in `schemas.py` joins an existing table with its
        # next write (older rows read as null); the table is cast to the schema above, so nothing else can change.
        for attempt in _COMMIT_RETRIES.copy():  # a copy per commit: its statistics are per call
            with attempt:
                if not (path / "_delta_log").exists() or predicate is None:
                    write_deltalake(
                        uri,
                        table,
                        partition_by=partition_by,
                        mode="append",
                        storage_options=options,
                        schema_mode="merge",
                    )
                else:
                    write_deltalake(
                        uri, table, mode="overwrite", predicate=predicate, storage_options=options, schema_mode="merge"
                    )
        return open_delta(path).version()

    # -- locks -------------------------------------------------------------------------------------------

    @contextmanager
    def lock(self, name: str, timeout_s: float = 600) -> Iterator[None]:
        """An exclusive cross-process lock, so two runs racing on one partition commit one after the other.

        It is a local file lock (under the cache directory for a remote lake), so it serialises the writers of one
        host; a lake on object storage takes its writes from one Dagster deployment (see docs/deployment.md)."""
        lock_dir = local_state_dir(self.root, "locks")
        lock_dir.mkdir(parents=True, exist_ok=True)
        with FileLock(str(lock_dir / f"{name}.lock"), timeout=timeout_s):
            yield


def _commit_conflict(exc: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError

    return isinstance(exc, CommitFailedError)


#: A commit that lost a race (another writer, e.g. another host on object storage, committed that version first, or
#: created the table at the same moment: "protocol changed") did not happen: retry it against the new table state.
_COMMIT_RETRIES = Retrying(
    retry=retry_if_exception(_commit_conflict), stop=stop_after_attempt(6), wait=wait_random(0.05, 0.5), reraise=True
)


def _quote(value: str) -> str:
    return value.replace("'", "''")


def _read_delta(name: str, path: LakePath, filters: list[tuple] | None) -> pa.Table:
    table = open_delta(path)
    dataset = pruned_dataset(table, filters)
    note_read(name, table, dataset)
    return dataset.to_table(filter=row_filter(filters))
