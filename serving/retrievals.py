"""Records when each learned playbook was first served, so impact metrics can compare sessions before and after.

Search answers must not wait on the lake: the first time this process serves an item it is queued in memory, and
the index watcher flushes the queue to the lake's `retrievals` table every poll (one small append). A restart can
log an item again; the pipeline takes the earliest row per item.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES

_ID_FIELDS = {"user_playbook": "user_playbook_id", "agent_playbook": "agent_playbook_id"}


class RetrievalLog:
    """First-served times of learned playbooks, buffered in memory and flushed to the lake."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()
        self._pending: list[dict] = []

    def served(self, entity: str, payloads: list[dict]) -> None:
        """Note the items of one search response (cheap: a set lookup per item)."""
        id_field = _ID_FIELDS.get(entity)
        if id_field is None or not payloads:
            return
        now = int(time.time())
        with self._lock:
            for payload in payloads:
                if payload.get(id_field) is None:
                    continue  # not a learned item this log tracks
                key = (entity, str(payload[id_field]))
                if key not in self._seen:
                    self._seen.add(key)
                    self._pending.append({"entity": entity, "item_id": key[1],
                                          "agent_version": payload.get("agent_version"), "first_served_at": now})  # fmt: skip

    def flush(self) -> int:
        """Append what was served for the first time since the last flush; returns the rows written."""
        with self._lock:
            rows, self._pending = self._pending, []
        if rows:
            try:
                with self._lake.lock("retrievals"):  # erasure rewrites this table under the same lock
                    self._lake.append("retrievals", pa.Table.from_pylist(rows, schema=TABLES["retrievals"]))
            except Exception:
                with self._lock:  # keep them for the next flush rather than losing them
                    self._pending = rows + self._pending
                raise
        return len(rows)
