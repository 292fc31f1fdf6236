"""Which windows have landing files that no `turns` run has consumed yet."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.partitions import Granularity, key_of_landing_hour, window_of_key


@dataclass(frozen=True)
class PendingWindow:
    partition_key: str
    window: str
    files: tuple[str, ...]

    @property
    def digest(self) -> str:
        """Identifies this exact set of landing files (a sensor run key: the same set is requested once)."""
        return hashlib.sha256("\n".join(self.files).encode()).hexdigest()[:16]


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
    return pending
