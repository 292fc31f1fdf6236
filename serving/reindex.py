"""Rebuilds the search index after curated changes, coalescing bursts into one rebuild at a time.

A rebuild is a real Dagster `index_job` run (visible in the UI). Callers that must see their change searchable
(`?wait_for_response=true`) wait for the first rebuild that started after their request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Reindexer:
    """One background thread; `request()` returns a ticket that `wait()` resolves once a rebuild covering it ends."""

    def __init__(self, rebuild: Callable[[], None]) -> None:
        self._rebuild = rebuild
        self._cond = threading.Condition()
        self._requested = 0
        self._done = 0
        self._failed_upto = 0
        self._stop = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="reindexer", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def request(self) -> int:
        """Ask for a rebuild; returns the ticket to wait on."""
        with self._cond:
            self._requested += 1
            self._cond.notify_all()
            return self._requested

    def wait(self, ticket: int, timeout_s: float) -> bool:
        """Block until a rebuild covering `ticket` finished; False on timeout or if that rebuild failed."""
        with self._cond:
            finished = self._cond.wait_for(lambda: self._done >= ticket or self._stop, timeout=timeout_s)
            return finished and self._done >= ticket and ticket > self._failed_upto

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested > self._done or self._stop)
                if self._stop:
                    return
                target = self._requested
            failed = False
            try:
                self._rebuild()
            except Exception:  # the failed run is in Dagster; the next request retries
                log.exception("index rebuild after curation failed")
                failed = True
            with self._cond:
                self._done = target
                if failed:
                    self._failed_upto = target
                self._cond.notify_all()
