"""Learning a session now: the windows holding its turns, run with the user's held-back turns forced through. Used
by finalize_session and by a publish marked `session_finished` (the original's two completion hints)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from serving.state import ServiceState

log = logging.getLogger(__name__)


def windows_of(turns: list[dict[str, Any]]) -> list[str]:
    """The partition keys of the windows the turns were ingested in, oldest first."""
    moments = {datetime.fromtimestamp(t["ingested_at_us"] / 1_000_000, tz=timezone.utc) for t in turns}
    return sorted({key_of_moment(moment, GRANULARITY) for moment in moments})


def session_turns(state: ServiceState, user_id: str, session_id: str) -> list[dict[str, Any]]:
    return turn_rows(state.lake, [("user_id", "=", user_id), ("session_id", "=", session_id)])


def session_windows(state: ServiceState, user_id: str, session_id: str) -> list[str]:
    """The windows holding the session's published turns, oldest first ([] for a session without turns)."""
    return windows_of(session_turns(state, user_id, session_id))


def learn_now(state: ServiceState, keys: list[str], user_id: str) -> None:
    """Run the learning loop for `keys` with the user's held-back turns forced through, then serve the new index.
    A failure is logged and left to the sensor's retries (the turns are durable)."""
    try:
        state.launcher(keys, flush="due", flush_users=[user_id])
        state.index.refresh()
    except Exception:
        log.exception("session learning run failed; the sensor retries the window")
