"""Human decisions applied to retrieval at once: an overlay of agent playbook statuses over the loaded index.

The decision is written to the lake's control log first (so the pipeline honours it on every later run), then to
this overlay, so a rejected playbook leaves `/api/search` in the same request cycle, without waiting for a run.
Other replicas pick decisions up when the control log's version changes (checked by the index watcher).
"""

from __future__ import annotations

import threading

from reflexio_pipelines.lake.control import decisions, log_version, record_decision
from reflexio_pipelines.lake.io import Lake


class ControlOverlay:
    """agent playbook id -> decided playbook_status, mirrored from the control log."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        # Refresh and decide run one at a time: a refresh that read the log just before a decision was appended
        # would otherwise replace the overlay afterwards and undo that decision until the next refresh (seen in CI:
        # an approve read back as the previous "pending").
        self._writer = threading.Lock()
        self._statuses: dict[str, str] = {}
        self._version: int | None = None

    def refresh(self) -> None:
        """Reload from the control log if it changed since the last load."""
        with self._writer:
            version = log_version(self._lake)
            if version == self._version:
                return
            statuses = decisions(self._lake)
            with self._lock:
                self._statuses, self._version = statuses, version

    def decide(self, item_id: str, status: str, actor: str = "api") -> None:
        """Record a decision durably, then apply it to retrieval."""
        with self._writer:
            record_decision(self._lake, "agent_playbook", item_id, status, actor)
            with self._lock:
                self._statuses[str(item_id)] = status

    def status(self, item_id: str, default: str | None) -> str | None:
        return self._statuses.get(str(item_id), default)

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._statuses)
