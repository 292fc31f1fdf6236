"""Keyed mode's sensor: learn each organisation's newly published windows on an interval.

Dagster's `landing_sensor` watches the one lake its code location is configured with. Organisations live in
their own lakes (`<lake>/orgs/<org>`), so in keyed mode the service runs this loop instead: every interval, for
each organisation directory, it launches the same Dagster jobs for the pending windows (real runs, recorded in
`$DAGSTER_HOME` and shown in the UI). Pending windows are recomputed from the landing files each time, so a
restart loses nothing. Organisations learn in parallel (one pass in flight per organisation, in a small thread pool):
a large pass of one organisation never holds back another's. Runs hold back incomplete windows of active sessions,
as the sensor's do (`flush="due"`). Failures stay inside their organisation: one whose lake cannot be read or whose
runs fail is logged and retried on the next tick, and every other organisation's pass goes ahead as usual.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from reflexio_pipelines.organisations import organisation_ids
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, unindexed_turn_files
from reflexio_pipelines.runs import rebuild_index
from reflexio_pipelines.storage import lake_path
from serving.tenancy import Tenants

log = logging.getLogger(__name__)


class AutoLearner:
    """A daemon thread; `run_once()` is the loop body (tests call it directly)."""

    def __init__(self, tenants: Tenants, interval_s: float, max_parallel: int = 4) -> None:
        self._tenants = tenants
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="autolearn-org")
        self._running: dict[str, Future] = {}  # org -> its pass in flight (one per organisation)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="autolearn", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def run_once(self, wait: bool = True) -> dict[str, int]:
        """Start a pass for every organisation with pending windows and no pass in flight; returns org -> windows
        launched. With `wait`, returns once those passes are done (a failed pass is logged, its windows stay
        pending)."""
        launched: dict[str, int] = {}
        started: list[Future] = []
        for org in organisation_ids(lake_path(self._tenants.settings.lake)):
            if not self._running.get(org, _DONE).done():
                continue
            keys = self._pending(org)
            if keys:
                self._running[org] = self._pool.submit(self._learn, org, keys)
                started.append(self._running[org])
                launched[org] = len(keys)
        if wait:
            for future in started:
                future.exception()
        return launched

    def _pending(self, org: str) -> list[str]:
        """The organisation's pending windows; none (logged) when its state or lake cannot be read, so the
        organisations after it in the loop are still looked at."""
        try:
            state = self._tenants.state(org)
            return [p.partition_key for p in pending_windows(state.lake, GRANULARITY)]
        except Exception:  # its windows stay pending; the next tick looks again
            log.exception("auto-learn: pending windows of organisation %s not readable", org)
            return []

    def _learn(self, org: str, keys: list[str]) -> None:
        try:
            state = self._tenants.state(org)
            state.launcher(keys, flush="due")
            # the organisation's new turns into its index too (what interaction_index_sensor does for the
            # configured lake); the landing overlay serves them until then
            if unindexed_turn_files(state.lake):
                rebuild_index(settings=state.settings, index_turns=True)
            state.index.refresh()
        except Exception:  # the windows stay pending; the next tick retries
            log.exception("auto-learn pass failed for organisation %s", org)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.run_once(wait=False)
            except Exception:  # the windows stay pending; the next tick retries
                log.exception("auto-learn tick failed")


_DONE: Future = Future()
_DONE.set_result(None)
