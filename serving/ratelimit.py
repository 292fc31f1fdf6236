"""Per-key rate limits: a token bucket per (key, route class), refilled continuously."""

from __future__ import annotations

import threading
import time

#: Path prefixes of expensive operations (pipeline runs, bulk deletes) — the original limited these hardest.
_ADMIN = (
    "/api/rerun_",
    "/api/manual_",
    "/api/upgrade_",
    "/api/downgrade_",
    "/api/run_playbook_aggregation",
    "/api/delete_all_",
    "/api/erase_user_data",
    "/api/export_user_data",
    "/api/set_config",
    "/api/cancel_operation",
)


def route_class(path: str) -> str:
    """publish | search | admin | other."""
    if path.startswith("/api/publish_interaction"):
        return "publish"
    if path.startswith("/api/search"):
        return "search"
    if path.startswith(_ADMIN):
        return "admin"
    return "other"


class RateLimiter:
    """`allow(key, per_minute)` takes one token; when empty it returns the seconds until the next one."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, last refill time)

    def allow(self, key: str, per_minute: int) -> float | None:
        """None if allowed, else the wait in seconds (for Retry-After)."""
        rate = per_minute / 60.0
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(per_minute), now))
            tokens = min(float(per_minute), tokens + (now - last) * rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return None
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / rate if rate > 0 else 60.0
