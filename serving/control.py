"""Human decisions applied to retrieval at once: an overlay of agent playbook statuses over the loaded index.

The decision is written to the lake's control log first (so the pipeline honours it on every later run), then to
this overlay, so a rejected playbook leaves `/api/search` in the same request cycle, without waiting for a run.
Other replicas pick decisions up when the control log's version changes (checked by the index watcher).
"""

from __future__ import annotations

from reflexio_pipelines.lake.control import decisions, log_version, record_decision
from reflexio_pipelines.lake.io import Lake
from serving.log_mirror import LogMirror


class ControlOverlay(LogMirror):
    """agent playbook id -> decided playbook_status, mirrored from the control log."""

    def __init__(self, lake: Lake) -> None:
        super().__init__(lake)
        self._statuses: dict[str, str] = {}

    def _log_version(self) -> int | None:
        return log_version(self._lake)

    def _load(self) -> dict[str, str]:
        return decisions(self._lake)

    def _install(self, loaded: dict[str, str]) -> None:
        self._statuses = loaded

    def decide(self, item_id: str, status: str, actor: str = "api") -> None:
        """Record a decision durably, then apply it to retrieval."""

        def apply(_: dict) -> None:
            self._statuses[str(item_id)] = status

        self._write(lambda: record_decision(self._lake, "agent_playbook", item_id, status, actor), apply)

    def status(self, item_id: str, default: str | None) -> str | None:
        return self._statuses.get(str(item_id), default)

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._statuses)
