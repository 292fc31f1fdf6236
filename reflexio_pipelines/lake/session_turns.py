"""Sessions as the API names them. A publish without a session id (the original's older clients, this project's CLI
and SDK) is a session of its own named by its request id: the key the pipeline already groups such turns by
(learning/transcript.py `session_key`). Every answer that names a session uses it, so a client that requires a
session id (reflexio-client 0.2.16) reads such publishes back, and can address them by that id."""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake


def session_of(row: dict[str, Any]) -> str:
    """The session a turn row belongs to: its session id, else its request id."""
    return row["session_id"] or row["request_id"]


def session_turn_rows(lake: Lake, session_id: str, filters: list[tuple] | None = None) -> list[dict[str, Any]]:
    """The live turns of one session (`session_of`) that also match `filters`, newest first: those published with
    this session id, and those of the request with this id published without one."""
    named = turn_rows(lake, [*(filters or []), ("session_id", "=", session_id)])
    unnamed = [r for r in turn_rows(lake, [*(filters or []), ("request_id", "=", session_id)]) if not r["session_id"]]
    rows = named + unnamed
    rows.sort(key=lambda r: (-r["created_at"], -r["ingested_at_us"], r["request_id"], r["turn_index"]))
    return rows
