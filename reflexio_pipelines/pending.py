"""Which windows need a run: landing files that no `turns` run has consumed yet, or user batches a run could not
learn (unresolved `extraction_failures` rows, e.g. the LLM kept failing)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.partitions import Granularity, key_of_landing_hour, key_of_window, window_of_key

#: A window whose batches failed in this many runs is no longer retried automatically (re-materialise it by hand
#: once the cause is fixed): a provider that is down for good must not be called every sensor tick forever.
MAX_AUTOMATIC_RETRIES = 5


@dataclass(frozen=True)
class PendingWindow:
    partition_key: str
    window: str
    files: tuple[str, ...]
    retry_of: tuple[str, ...] = ()  # the unresolved failure ids a retry run is for

    @property
    def digest(self) -> str:
        """Identifies this exact set of landing files and failures (a sensor run key: each is requested once)."""
        return hashlib.sha256("\n".join(self.files + self.retry_of).encode()).hexdigest()[:16]


def pending_windows(lake: Lake, granularity: Granularity) -> list[PendingWindow]:
    """Windows whose committed landing files differ from what their last `turns` run consumed, oldest first."""
    by_key: dict[str, list] = defaultdict(list)
    for date, hour, path in lake.landing_hours():
        by_key[key_of_landing_hour(date, hour, granularity)].append(path)
    pending = []
    for key in sorted(by_key):
        window = window_of_key(key, granularity)
        files = tuple(lake.relative(f) for f in lake.landing_files(by_key[key]))
        if files and sorted(files) != lake.read_consumed(window):
            pending.append(PendingWindow(key, window, files))
    waiting = {p.partition_key for p in pending}
    for window, failure_ids in windows_to_retry(lake).items():
        key = key_of_window(window, granularity)
        if key not in waiting:
            pending.append(PendingWindow(key, window, tuple(lake.read_consumed(window)), failure_ids))
    return sorted(pending, key=lambda p: p.partition_key)


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
