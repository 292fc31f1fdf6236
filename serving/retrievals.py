"""The retrieval log: what `/api/search` served, buffered in memory and flushed to the lake by the index watcher.

Two tables, neither written in the request path (search answers must not wait on the lake): the first time this
process serves a learned playbook it is noted for `retrievals` (first-served times, the before/after comparison; a
restart can log an item again, the pipeline takes the earliest row per item), and every answer to a named user is
one `retrieval_events` row — the user, the session the caller named, the user's holdout arm, whether the answer was
held out (or the caller switched the holdout off) and which learned items it held — which the outcome counters and
the treated-vs-control comparison join with what happened next (assets/outcomes.py). The watcher flushes both every
poll (one small append each).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.llm_calls import window_of_call
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.outcome_types import ID_FIELDS

#: Entities whose first serve `retrievals` records (profiles are not part of the before/after comparison).
_FIRST_SERVED = ("user_playbook", "agent_playbook")
LOCK = "retrievals"  # erasure rewrites both tables under the same lock (privacy/erasure.WRITER_LOCKS)


class RetrievalLog:
    """First-served times of learned playbooks and one event per search answer to a user, flushed to the lake."""

    def __init__(self, lake: Lake) -> None:
        self._lake = lake
        self._lock = threading.Lock()
        self._seen: set[tuple[str, str]] = set()
        self._pending: list[dict] = []
        self._events: list[dict] = []

    def served(self, entity: str, payloads: list[dict]) -> None:
        """Note the items of one search response (cheap: a set lookup per item)."""
        id_field = ID_FIELDS.get(entity)
        if entity not in _FIRST_SERVED or not payloads:
            return
        now = int(time.time())
        with self._lock:
            for payload in payloads:
                if payload.get(id_field) is None:
                    continue  # not a learned item this log tracks
                key = (entity, str(payload[id_field]))
                if key not in self._seen:
                    self._seen.add(key)
                    self._pending.append(
                        {
                            "entity": entity,
                            "item_id": key[1],
                            "agent_version": payload.get("agent_version"),
                            "first_served_at": now,
                        }
                    )

    def searched(
        self,
        *,
        user_id: str,
        session_id: str | None,
        agent_version: str | None,
        arm: str,
        holdout: bool,
        override: bool,
        results: dict[str, list[dict[str, Any]]],
        index_version: str | None,
        served_at_us: int | None = None,
    ) -> None:
        """Note one search answer to a user: its holdout arm and the learned items it held (`results` maps the
        response fields `profiles`, `user_playbooks`, `agent_playbooks` to their payloads). `served_at_us`: when the
        items reached the agent if not now (a publish naming what was injected into an earlier turn)."""
        served_at_us = served_at_us if served_at_us is not None else time.time_ns() // 1_000
        ids = {
            field: [p[ID_FIELDS[entity]] for p in results.get(field, []) if p.get(ID_FIELDS[entity]) is not None]
            for field, entity in (
                ("profiles", "profile"),
                ("user_playbooks", "user_playbook"),
                ("agent_playbooks", "agent_playbook"),
            )
        }
        row = {
            "event_id": uuid.uuid4().hex,
            "served_at_us": served_at_us,
            "user_id": user_id,
            "session_id": session_id,
            "agent_version": agent_version or "",
            "arm": arm,
            "holdout": holdout,
            "holdout_override": override,
            "profile_ids": [str(i) for i in ids["profiles"]],
            "user_playbook_ids": [int(i) for i in ids["user_playbooks"]],
            "agent_playbook_ids": [int(i) for i in ids["agent_playbooks"]],
            "index_version": index_version,
            "window": window_of_call(served_at_us),
        }
        with self._lock:
            self._events.append(row)

    def flush(self) -> int:
        """Append what was noted since the last flush; returns the rows written."""
        with self._lock:
            rows, self._pending = self._pending, []
            events, self._events = self._events, []
        written = len(rows) + len(events)
        try:
            if rows or events:
                with self._lake.lock(LOCK):  # erasure rewrites these tables under the same lock
                    if rows:
                        self._lake.append("retrievals", pa.Table.from_pylist(rows, schema=TABLES["retrievals"]))
                        rows = []
                    if events:
                        self._lake.append(
                            "retrieval_events", pa.Table.from_pylist(events, schema=TABLES["retrieval_events"])
                        )
        except Exception:
            with self._lock:  # keep what was not written for the next flush rather than losing it
                self._pending = rows + self._pending
                self._events = events + self._events
            raise
        return written
