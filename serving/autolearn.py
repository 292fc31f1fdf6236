"""Keyed mode's sensor: learn each organisation's newly published windows on an interval.

Dagster's `landing_sensor` watches the one lake its code location is configured with. Organisations live in
their own lakes (`<lake>/orgs/<org>`), so in keyed mode the service runs this loop instead: every interval, for
each organisation directory, it launches the same Dagster jobs for the pending windows (real runs, recorded in
`$DAGSTER_HOME` and shown in the UI). Pending windows are recomputed from the landing files each time, so a
restart loses nothing.
"""

from __future__ import annotations

import logging
import threading

from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows
from serving.tenancy import ORG_ID, Tenants

log = logging.getLogger(__name__)


class AutoLearner:
    """A daemon thread; `run_once()` is the loop body (tests call it directly)."""

    def __init__(self, tenants: Tenants, interval_s: float) -> None:
        self._tenants = tenants
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="autolearn", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def run_once(self) -> dict[str, int]:
        """Learn every organisation's pending windows; returns org -> windows launched."""
        root = self._tenants.lake_of("default").parent  # <lake>/orgs
        launched: dict[str, int] = {}
        for org_dir in sorted(root.iterdir()) if root.is_dir() else []:
            if not (org_dir.is_dir() and ORG_ID.match(org_dir.name)):
                continue
            state = self._tenants.state(org_dir.name)
            keys = [p.partition_key for p in pending_windows(state.lake, GRANULARITY)]
            if keys:
                state.launcher(keys)
                state.index.refresh()
                launched[org_dir.name] = len(keys)
        return launched

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.run_once()
            except Exception:  # the windows stay pending; the next tick retries
                log.exception("auto-learn tick failed")
