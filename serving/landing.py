"""Group-commit writer of durable landing files.

Every publish hands its rows to one writer thread. The thread takes everything queued since its last write,
writes ONE Parquet file (temporary name, fsync, atomic rename, directory fsync) and only then resolves each
request's future, so an acknowledged turn is always on disk and concurrent publishes share one fsync instead of
paying one each. Idempotency keys are remembered (and rebuilt from the landing files at start-up) so a retried
publish lands once. A key belongs to one user of the organisation (the writer is per organisation) and is bound to
the body it came with (its sha256): another user's publish with the same key is stored as its own, and the same
user's publish with the same key but another body is refused (`IdempotencyConflict`), never answered as a duplicate
of turns it does not hold. An erased user's keys are forgotten with their rows. While a user is being erased their
publishes are refused (`UserBeingErased`), checked in the writer thread at commit time: nothing of theirs is
written after the erasure began.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake, landing_hour_dir
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS
from reflexio_pipelines.storage import write_parquet

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Receipt:
    """What the writer tells a publisher once its rows are durable (or were already, for a retry)."""

    request_id: str
    landing_file: str | None
    ingested_at_us: int
    duplicate: bool = False
    user_id: str | None = None
    body_sha256: str | None = None  # None: written before bodies were hashed (any body counts as the same)


class IdempotencyConflict(ValueError):
    """The publish was not stored: its user already used its idempotency key for a different body."""

    def __init__(self, key: str) -> None:
        super().__init__(f"idempotency key {key!r} was already used by this user for a different body")
        self.key = key


class UserBeingErased(RuntimeError):
    """The publish was not stored: its user is being erased (publish again once the erasure has completed)."""

    def __init__(self, user_id: str) -> None:
        super().__init__(f"user {user_id!r} is being erased")
        self.user_id = user_id


@dataclass
class _Pending:
    request_id: str
    idempotency_key: str | None
    rows: list[dict]
    body_sha256: str | None = None
    future: Future = field(default_factory=Future)

    @property
    def user_id(self) -> str | None:
        return self.rows[0]["user_id"] if self.rows else None  # one publish is one user's

    @property
    def seen_key(self) -> tuple[str | None, str] | None:
        """What the idempotency index knows this publish by: (user, key); None without a key."""
        return (self.user_id, self.idempotency_key) if self.idempotency_key else None


class LandingWriter:
    """Writes publishes into `lake/landing/turns/date=…/hour=…/` in group commits. Thread-safe."""

    def __init__(
        self,
        lake: Lake,
        max_batch_rows: int = 50_000,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        refuse: Callable[[str], bool] = lambda user_id: False,
    ) -> None:
        self._lake = lake
        self._refuse = refuse  # users being erased: their publishes fail with UserBeingErased
        self._clock = clock  # the commit time decides the landing hour, hence the window (tests set it)
        self._max_batch_rows = max_batch_rows
        self._queue: queue.Queue[_Pending | None] = queue.Queue()
        self._seen: dict[tuple[str | None, str], Receipt] = {}
        self._thread: threading.Thread | None = None
        self.files_written = 0
        self.rows_written = 0

    def start(self) -> None:
        """Rebuild the idempotency index from the landing files, then start the writer thread."""
        # an erasure may delete a file while we list: read again until it has committed
        self._seen = self._lake.read_consistently(self._scan_idempotency_keys)
        self._thread = threading.Thread(target=self._run, name="landing-writer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Flush what is queued and stop the writer thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def forget_user(self, user_id: str) -> None:
        """Drop the keys of a user's publishes (their rows were erased), so a later publish with one of them is
        stored, not answered as a duplicate of data that no longer exists."""
        for key in [k for k in self._seen if k[0] == user_id]:
            self._seen.pop(key, None)

    def submit(
        self, request_id: str, rows: list[dict], idempotency_key: str | None = None, body_sha256: str | None = None
    ) -> Future:
        """Queue one publish; the future resolves to a Receipt once the rows are durable (after start()), or fails
        with `UserBeingErased`, `IdempotencyConflict` or the write's error. `body_sha256` identifies the body the
        key is bound to (`body_digest`)."""
        pending = _Pending(request_id, idempotency_key, rows, body_sha256)
        self._queue.put(pending)
        return pending.future

    # -- writer thread -----------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch, stop = self._drain(first)
            self._commit(batch)
            if stop:
                return

    def _drain(self, first: _Pending) -> tuple[list[_Pending], bool]:
        batch, rows = [first], len(first.rows)
        while rows < self._max_batch_rows:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
            rows += len(item.rows)
        return batch, False

    def _commit(self, batch: list[_Pending]) -> None:
        refused = {user for user in {item.user_id for item in batch} if user is not None and self._refuse(user)}
        for item in batch:
            if item.user_id in refused:
                item.future.set_exception(UserBeingErased(item.user_id))
        fresh, duplicates = self._split_duplicates([item for item in batch if item.user_id not in refused])
        now = self._clock()
        ingested_us = int(now.timestamp() * 1_000_000)
        relative: str | None = None
        if fresh:
            try:
                relative = self._write(fresh, now, ingested_us)
            except Exception as exc:  # the disk said no: nothing was acknowledged, every waiter learns it
                log.exception("landing write failed")
                for item in fresh:
                    item.future.set_exception(exc)
                for item in duplicates:
                    item.future.set_exception(exc)
                return
        for item in fresh:
            receipt = Receipt(
                item.request_id, relative, ingested_us, user_id=item.user_id, body_sha256=item.body_sha256
            )
            if item.seen_key:
                self._seen[item.seen_key] = receipt
            item.future.set_result(receipt)
        for item in duplicates:
            receipt = self._seen[item.seen_key]  # stored before, or by the batch's first publish with the key
            if not _same_body(receipt.body_sha256, item.body_sha256):
                item.future.set_exception(IdempotencyConflict(item.idempotency_key or ""))
                continue
            item.future.set_result(
                Receipt(receipt.request_id, receipt.landing_file, receipt.ingested_at_us, True, receipt.user_id)
            )

    def _split_duplicates(self, batch: list[_Pending]) -> tuple[list[_Pending], list[_Pending]]:
        """Publishes whose (user, idempotency key) was seen before, or earlier in this batch, are not written again:
        each is a duplicate if its body is the one the key was first stored with, else a conflict (decided once the
        first one is stored)."""
        fresh: list[_Pending] = []
        duplicates: list[_Pending] = []
        in_batch: set[tuple[str | None, str]] = set()
        for item in batch:
            key = item.seen_key
            if key and (key in self._seen or key in in_batch):
                duplicates.append(item)
            else:
                if key:
                    in_batch.add(key)
                fresh.append(item)
        return fresh, duplicates

    def _write(self, items: list[_Pending], now: datetime, ingested_us: int) -> str:
        rows = [
            dict(
                row,
                ingested_at_us=ingested_us,
                idempotency_key=item.idempotency_key,
                idempotency_body_sha256=item.body_sha256 if item.idempotency_key else None,
            )
            for item in items
            for row in item.rows
        ]
        table = pa.Table.from_pylist(rows, schema=LANDING_TURNS)
        path = landing_hour_dir(self._lake.landing_turns, now) / f"{ingested_us}-{uuid.uuid4().hex[:12]}.parquet"
        write_parquet(table, path)
        self.files_written += 1
        self.rows_written += len(rows)
        return self._lake.relative(path)

    def _scan_idempotency_keys(self) -> dict[tuple[str | None, str], Receipt]:
        started = time.perf_counter()
        seen: dict[tuple[str | None, str], Receipt] = {}
        hour_dirs = [path for _, _, path in self._lake.landing_hours()]
        columns = ["idempotency_key", "request_id", "ingested_at_us", "user_id", "idempotency_body_sha256"]
        for path in self._lake.landing_files(hour_dirs):
            table = read_landing(self._lake, path, schema=LANDING_TURNS, columns=columns)
            if table is None:
                continue  # unreadable: quarantined (its keys are lost with its rows)
            for key, request_id, ingested, user_id, body in zip(*(table.column(c).to_pylist() for c in columns)):
                if key and (user_id, key) not in seen:
                    seen[(user_id, key)] = Receipt(
                        request_id, self._lake.relative(path), ingested, user_id=user_id, body_sha256=body
                    )
        log.info("idempotency index: %d keys in %.1f ms", len(seen), (time.perf_counter() - started) * 1000)
        return seen


def _same_body(stored: str | None, sent: str | None) -> bool:
    """Whether a publish repeats the body its key was stored with; a key stored before bodies were hashed (or by a
    caller that hashes none) cannot tell, and is taken as the same publish, as before."""
    return stored is None or sent is None or stored == sent
