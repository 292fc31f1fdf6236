"""Which windows need a run: landing files that no `turns` run has consumed yet, turns whose learning never
committed (the run died between compacting and learning), user batches a run could not learn (unresolved
`extraction_failures` rows, e.g. the LLM kept failing), or turns a run held back that are now due (their session
went quiet, or their window closed; `extraction_bookmarks.due_at_us`). Also which landing files hold turns the
served index version has not taken in (`landing_files_after`)."""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import Granularity, key_of_landing_hour, key_of_window, window_end, window_of_key
from reflexio_pipelines.storage import LakePath

#: A window whose batches failed in this many runs is no longer retried automatically (re-materialise it by hand
#: once the cause is fixed): a provider that is down for good must not be called every sensor tick forever.
MAX_AUTOMATIC_RETRIES = 5


@dataclass(frozen=True)
class PendingWindow:
    partition_key: str
    window: str
    files: tuple[str, ...]
    retry_of: tuple[str, ...] = ()  # the unresolved failure ids a retry run is for
    due: tuple[str, ...] = ()  # markers of held-back turns now due (their due times; no user ids)
    unlearned: tuple[str, ...] = ()  # a marker per attempt when learning never committed the consumed turns

    @property
    def digest(self) -> str:
        """Identifies this exact set of landing files and failures (a sensor run key: each is requested once)."""
        markers = self.files + self.retry_of + self.due + self.unlearned
        return hashlib.sha256("\n".join(markers).encode()).hexdigest()[:16]


def pending_windows(lake: Lake, granularity: Granularity, now_us: int | None = None) -> list[PendingWindow]:
    """Windows whose committed landing files differ from what their last `turns` run consumed, whose consumed
    turns learning has not committed (up to MAX_AUTOMATIC_RETRIES attempts), with failed batches to retry, or with
    held-back turns due by `now_us` (default: now), oldest first."""
    by_key: dict[str, list] = defaultdict(list)
    for date, hour, path in lake.landing_hours():
        by_key[key_of_landing_hour(date, hour, granularity)].append(path)
    pending = []
    for key in sorted(by_key):
        window = window_of_key(key, granularity)
        files = tuple(lake.relative(f) for f in lake.landing_files(by_key[key]))
        consumed = lake.consumed_state(window)
        if files and sorted(files) != consumed.files:
            pending.append(PendingWindow(key, window, files))
        elif files and not consumed.learned and consumed.attempts <= MAX_AUTOMATIC_RETRIES:
            pending.append(PendingWindow(key, window, files, unlearned=(f"unlearned:{consumed.attempts}",)))
    waiting = {p.partition_key for p in pending}
    for window, failure_ids in windows_to_retry(lake).items():
        key = key_of_window(window, granularity)
        if key not in waiting:
            pending.append(PendingWindow(key, window, tuple(lake.read_consumed(window)), failure_ids))
            waiting.add(key)
    for window, due in windows_due(lake, granularity, now_us).items():
        key = key_of_window(window, granularity)
        if key not in waiting:
            pending.append(PendingWindow(key, window, tuple(lake.read_consumed(window)), due=due))
    return sorted(pending, key=lambda p: p.partition_key)


def windows_due(lake: Lake, granularity: Granularity, now_us: int | None = None) -> dict[str, tuple[str, ...]]:
    """Windows with held-back turns whose session has gone quiet or whose window has closed by `now_us` -> the due
    times, as markers (a window is requested again only when what is due changes)."""
    now_us = now_us if now_us is not None else time.time_ns() // 1000
    held = lake.read_table("extraction_bookmarks", filters=[("held_turns", ">", 0)])
    due: dict[str, set[str]] = defaultdict(set)
    for window, due_at in zip(held.column("window").to_pylist(), held.column("due_at_us").to_pylist()):
        closed = window_end(key_of_window(window, granularity), granularity).timestamp() * 1_000_000 <= now_us
        if closed or (due_at is not None and due_at <= now_us):
            due[window].add(f"due:{due_at}")
    return {w: tuple(sorted(markers)) for w, markers in due.items()}


def windows_to_retry(lake: Lake) -> dict[str, tuple[str, ...]]:
    """Windows with user batches still unlearned (`extraction_failures` rows without `resolved_by_run`) -> their
    unresolved failure ids; windows that failed in MAX_AUTOMATIC_RETRIES runs or more are left to an operator."""
    ids: dict[str, list[str]] = defaultdict(list)
    runs: dict[str, set[str]] = defaultdict(set)
    for row in lake.read_table("extraction_failures").to_pylist():
        if row["resolved_by_run"] is None:
            ids[row["window"]].append(row["failure_id"])
            runs[row["window"]].add(row["run_id"])
    return {w: tuple(sorted(f)) for w, f in ids.items() if len(runs[w]) < MAX_AUTOMATIC_RETRIES}


def unindexed_turn_files(lake: Lake) -> list[LakePath]:
    """Landing files holding turns the served index version has not taken in (after its turn watermark), oldest
    first: what an `index_job` run with `index_turns` would add."""
    from reflexio_pipelines.search.versions import turns_watermark  # the search package is heavy; only this needs it

    return landing_files_after(lake, turns_watermark(lake.index_root))


def landing_files_after(lake: Lake, watermark_us: int) -> list[LakePath]:
    """Committed landing files whose turns were ingested after `watermark_us` (the name starts with the ingest
    instant), oldest first: the turns an index version with that turn watermark does not hold. Lists only the
    landing hours from the watermark's on."""
    start = datetime.fromtimestamp(watermark_us / 1_000_000, tz=timezone.utc)
    first = (f"{start:%Y-%m-%d}", f"{start:%H}")
    hours = [path for date, hour, path in lake.landing_hours() if (date, hour) >= first]
    return [p for p in lake.landing_files(hours) if landing_ingested_us(p.name) > watermark_us]


def landing_ingested_us(name: str) -> int:
    """The ingest instant (unix microseconds) a landing file's name starts with; -1 for another name."""
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else -1
