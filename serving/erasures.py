"""Erasure as the service runs it: the user's ingest paused for its duration, what the process holds in memory
brought in line afterwards, interrupted erasures resumed at start-up.

The lake logic lives in `reflexio_pipelines/privacy/erasure.py`. Here:

- `ErasureGate` says whose publishes are refused: users this process is erasing (at once) and users any other
  process on the lake is erasing (its `state/erasure_requests/active/` entries, re-read on the service's tick). The
  landing writer asks it at commit time, so once an erasure began nothing of the user is written until it is done:
  a user who keeps publishing cannot outrun their erasure (the publish answers 409, `UserBeingErased`).
- `erase(state, user_id)` is what `DELETE /api/erase_user_data` and the start-up resume both run.
- `resume_interrupted(state)` finishes every erasure a crash or a restart interrupted (marker still in progress).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.clauses.classifier import shared_classifier
from reflexio_pipelines.privacy.erasure import (
    ErasureIncomplete,
    ErasureResult,
    active_erasures,
    erase_user,
    hash_user,
    resume_erasure,
    salt_of,
)
from reflexio_pipelines.runs import exclusive

if TYPE_CHECKING:  # serving.state imports this module
    from serving.state import ServiceState

log = logging.getLogger(__name__)

#: Seconds a refused publish is told to wait before retrying (an erasure takes seconds to a few minutes).
RETRY_AFTER_S = 5
#: Seconds after an erasure that pipeline runs outpaced before it is tried again in the background.
FINISH_AFTER_S = 30.0


class ErasureGate:
    """Whose publishes wait for an erasure to finish (see the module docstring). Thread-safe."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        self._local: Counter[str] = Counter()
        self._active: frozenset[str] = frozenset()  # erasure ids in progress anywhere on the lake
        self._salt: bytes | None = None

    def refresh(self) -> None:
        """Re-read which erasures are in progress on the lake (cheap: one directory listing)."""
        active = active_erasures(self._lake)
        salt = self._salt or (salt_of(self._lake) if active else None)
        with self._lock:
            self._active, self._salt = active, salt

    def blocks(self, user_id: str) -> bool:
        """Whether publishes of `user_id` are refused now."""
        with self._lock:
            if self._local[user_id]:
                return True
            return bool(self._active) and self._salt is not None and hash_user(self._salt, user_id) in self._active

    @contextmanager
    def holding(self, user_id: str) -> Iterator[None]:
        """Refuse `user_id`'s publishes for the duration of the block (nested holds count)."""
        with self._lock:
            self._local[user_id] += 1
        try:
            yield
        finally:
            self.refresh()  # the erasure's own active entry is gone: no stale refusal after the block
            with self._lock:
                self._local[user_id] -= 1
                if not self._local[user_id]:
                    del self._local[user_id]


def erase(state: ServiceState, user_id: str, finish_later: bool = True) -> ErasureResult:
    """Erase `user_id` from the organisation's lake with their ingest paused, then forget their idempotency keys and
    bring the index, the overlays and the query cache in line (`state`: the organisation's).

    If pipeline runs kept writing the user's rows back (ErasureIncomplete, re-raised), the request stays in progress
    and, with `finish_later`, is finished in the background `FINISH_AFTER_S` later."""
    state.retrievals.flush()  # what this process served of the user is erased with the rest
    with state.gate.holding(user_id):
        try:
            with exclusive(str(state.lake.root)):  # no in-process run reads the lake before and writes after it
                result = erase_user(state.lake, user_id, state.embedder, on_table=_log_table)
        except ErasureIncomplete:
            # The request stays in progress (the user's publishes stay refused): finish it once those runs are done,
            # as the client's retry would. Once only: a further failure waits for a retry or the next start.
            if finish_later:
                timer = threading.Timer(FINISH_AFTER_S, resume_interrupted, args=(state,))
                timer.daemon = True
                timer.start()
            raise
        state.writer.forget_user(user_id)  # before publishes resume: an old key is no duplicate any more
        state.recent_turns.forget_user(user_id)
    clear = getattr(state.embedder, "clear_query_cache", None)  # cached query texts can quote the user
    if clear is not None:
        clear()
    shared_classifier().forget_vectors()  # learning runs in this process remember clause vectors too
    state.index.refresh()
    state.control.refresh()
    state.curation.refresh()
    return result


def _log_table(name: str, rows: int) -> None:
    log.info("erasure: %s: %d rows", name, rows)


def resume_interrupted(state: ServiceState) -> list[ErasureResult]:
    """Finish every erasure still in progress on the organisation's lake (run at start-up, in the background).

    A failure is logged and leaves the request in progress: the user's publishes stay refused and the next start,
    or the client's retry of the same erasure, finishes it."""
    results = []
    for erasure_id in sorted(active_erasures(state.lake)):
        try:
            results.append(resume_erasure(state.lake, erasure_id, lambda user_id: erase(state, user_id, False)))
            log.info("resumed interrupted erasure %s", erasure_id)
        except Exception:
            log.exception("could not resume erasure %s; it stays in progress", erasure_id)
    state.gate.refresh()
    return results
