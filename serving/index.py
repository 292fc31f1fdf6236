"""The loaded search index version, swapped atomically when the pipeline publishes a newer one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.shards import ShardSelector
from reflexio_pipelines.search.versions import current_version
from reflexio_pipelines.storage import LakePath

log = logging.getLogger(__name__)


class IndexHolder:
    """Holds the newest published index; a watcher thread swaps in new versions without a restart.

    Readers take `holder.index` once per request and use that object throughout, so a swap in the middle of a
    request never mixes two versions, and an old version stays alive until its last reader lets go of it.
    """

    def __init__(self, index_root: LakePath, poll_interval_s: float = 0.5, shards: ShardSelector | None = None) -> None:
        self._root = index_root
        self.shards = shards  # the index shards this replica loads (None = all)
        self._poll = poll_interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.index: LoadedIndex | None = None
        self.on_tick: Callable[[], None] | None = None  # also run on every poll (e.g. control-log refresh)

    @property
    def version(self) -> str | None:
        index = self.index
        return index.version if index is not None else None

    def refresh(self) -> bool:
        """Load the version CURRENT points at if it differs from the loaded one. Returns True on a swap."""
        with self._lock:
            wanted = current_version(self._root)
            if wanted is None or wanted == self.version:
                return False
            try:
                loaded = LoadedIndex.load(self._root, wanted, shards=self.shards)
            except Exception:  # a broken version must not take down serving: keep answering from the old one
                log.exception("could not load index version %s; keeping %s", wanted, self.version)
                return False
            self.index = loaded
            log.info("serving index version %s", wanted)
            return True

    def start(self) -> None:
        """Load the current version and start watching for new ones."""
        self.refresh()
        self._thread = threading.Thread(target=self._watch, name="index-watcher", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stop.wait(self._poll):
            try:
                self.refresh()
                if self.on_tick is not None:
                    self.on_tick()
            except Exception:
                log.exception("index watcher")
