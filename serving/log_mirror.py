"""One mechanism for the service's in-memory mirrors of lake logs that people write to (approval decisions, manual
curation, outcome reviews): reloaded when the logs' version moves, updated at once by this process's own writes.

Reloads and writes run one at a time. A reload that read the log just before a write was appended would otherwise
install its older state afterwards and undo that write in retrieval until the log's next change (seen in CI: an
approval read back as the previous "pending"). Readers take only the short `_lock`, never a lake read.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from reflexio_pipelines.lake.io import Lake

Written = TypeVar("Written")


class LogMirror(ABC):
    """Base of the overlays: subclasses say how to read the logs' version, load them, and install what was loaded."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()  # guards the mirrored state for readers
        self._writer = threading.Lock()  # one reload or write at a time
        self._version: Hashable | None = None

    def refresh(self) -> None:
        """Reload from the lake if the logs changed since the last load."""
        with self._writer:
            version = self._log_version()
            if version == self._version:
                return
            loaded = self._load()
            with self._lock:
                self._install(loaded)
                self._version = version

    def _write(self, write: Callable[[], Written], apply: Callable[[Written], None]) -> Written:
        """Write to the lake durably, then apply what was written to the mirror; returns what `write` returned."""
        with self._writer:
            written = write()
            with self._lock:
                apply(written)
            return written

    @abstractmethod
    def _log_version(self) -> Hashable | None:
        """A cheap change check of the mirrored logs (None: nothing written yet)."""

    @abstractmethod
    def _load(self) -> Any:
        """Read the logs (lake I/O, outside `_lock`)."""

    @abstractmethod
    def _install(self, loaded: Any) -> None:
        """Replace the mirrored state with what `_load` returned (called holding `_lock`)."""
