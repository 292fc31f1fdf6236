"""Process-wide back-pressure for LLM calls: one `Throttle` per (model, api_base), shared by every `LLMEndpoint`.

A provider's limits belong to the provider, not to a caller: the extractor, the gate, the dedup judge, the session
and shadow judges and the consolidator all draw on the same quota, and the learning step calls them from many threads
at once. So the throttle is looked up by (model, api_base) in a process-wide registry (`throttle_for`), and each call
goes through `Throttle.slot()`, which

1. waits while the throttle is paused (a 429's Retry-After, `pause()`),
2. takes one of `concurrency` slots (calls in flight),
3. takes one request and the call's estimated prompt tokens from the requests/min and tokens/min limiters
   (pyrate-limiter token buckets; 0 = unlimited),
4. checks the pause again (a 429 may have arrived while it waited), and only then lets the call start.

The rate buckets hold ten seconds of allowance (`BURST_SECONDS`): short bursts are admitted at once, sustained load
is spread evenly, as providers enforce their per-minute limits in shorter slices rather than per calendar minute.
Tokens are estimated before the call, at 4 characters per token of the prompt (`estimate_tokens`): the completion is
not known yet and providers meter the prompt first; the estimate only has to keep us near the limit, the provider's
429 (and its Retry-After, honoured for every caller) is the backstop.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pyrate_limiter import Duration, Limiter, Rate, StateBucket, TokenBucket

log = logging.getLogger(__name__)

#: Seconds of allowance a rate bucket holds (its burst): rpm=600 admits 100 calls at once, then 10 per second.
BURST_SECONDS = 10
#: Characters per token in the pre-call estimate (the usual rule of thumb for English text and JSON).
CHARS_PER_TOKEN = 4


def estimate_tokens(messages: Sequence[dict[str, str]]) -> int:
    """The prompt's token count estimated before the call: characters / 4 (at least 1)."""
    return max(1, sum(len(str(m.get("content", ""))) for m in messages) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class ThrottleLimits:
    """Calls in flight at most, requests per minute and prompt tokens per minute (0 = unlimited)."""

    concurrency: int = 32
    rpm: int = 0
    tpm: int = 0

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.rpm < 0 or self.tpm < 0:
            raise ValueError(f"invalid throttle limits {self}: concurrency must be >= 1, rpm and tpm >= 0")


class Waiter:
    """Sleeps with a given sleep function and remembers how far it has slept.

    An endpoint's retry backoff and the throttle's pause are two waits for the same moment: after a 429 the caller
    sleeps at least the Retry-After, and the pause it set for everyone ends then too. The waiter lets the second wait
    see that the first one already covered it, also when `sleep` only records the delay (tests), where the clock
    does not move: the waiter's `now()` is the later of the clock and the end of the last sleep.
    """

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep
        self._reached = 0.0

    def now(self) -> float:
        """Monotonic seconds, or the end of the last sleep if that is later."""
        return max(time.monotonic(), self._reached)

    def sleep(self, seconds: float) -> None:
        """Sleep `seconds` (nothing when not positive)."""
        if seconds <= 0:
            return
        start = self.now()
        self._sleep(seconds)
        self._reached = start + seconds

    def sleep_until(self, deadline: float) -> None:
        """Sleep until the monotonic time `deadline` (nothing if it has passed)."""
        self.sleep(deadline - self.now())


class _PerMinute:
    """A pyrate-limiter token bucket of `per_minute` units holding BURST_SECONDS of allowance."""

    def __init__(self, per_minute: int) -> None:
        self.burst = max(1, math.ceil(per_minute * BURST_SECONDS / 60))
        rate = Rate(per_minute, Duration.MINUTE, burst=self.burst)
        self._limiter = Limiter(StateBucket([rate], algorithm=TokenBucket()))

    def take(self, name: str, units: int) -> None:
        """Block until `units` are admitted; a request larger than the bucket could never be, so it takes the
        whole bucket instead."""
        self._limiter.try_acquire(name, max(1, min(units, self.burst)))


def _per_minute(limit: int) -> _PerMinute | None:
    return _PerMinute(limit) if limit > 0 else None


class Throttle:
    """Concurrency slots, request and token rate limits and a shared pause for one provider endpoint (thread-safe)."""

    def __init__(self, limits: ThrottleLimits) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0
        self._paused_until = 0.0  # monotonic seconds; every call waits for it before starting
        self._limits = limits
        self._requests = _per_minute(limits.rpm)
        self._tokens = _per_minute(limits.tpm)

    @property
    def limits(self) -> ThrottleLimits:
        """The limits in force."""
        return self._limits

    @property
    def in_flight(self) -> int:
        """Calls holding a slot right now."""
        with self._cond:
            return self._in_flight

    def configure(self, limits: ThrottleLimits) -> None:
        """Apply new limits (the latest configuration of this provider wins). Calls in flight keep their slots; a
        lower concurrency takes effect as they finish. Rate buckets are rebuilt only when their limit changed."""
        with self._cond:
            if limits == self._limits:
                return
            log.info("LLM throttle limits changed from %s to %s", self._limits, limits)
            if limits.rpm != self._limits.rpm:
                self._requests = _per_minute(limits.rpm)
            if limits.tpm != self._limits.tpm:
                self._tokens = _per_minute(limits.tpm)
            self._limits = limits
            self._cond.notify_all()

    def pause(self, seconds: float) -> None:
        """No call of any caller starts in the next `seconds` (a provider's Retry-After). Pauses never shorten."""
        if seconds <= 0:
            return
        with self._cond:
            self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    def paused_until(self) -> float:
        """The monotonic time before which no call starts (in the past when not paused)."""
        with self._cond:
            return self._paused_until

    def _wait_for_pause(self, waiter: Waiter) -> None:
        # Loops only while the pause keeps moving (another 429 arrived meanwhile): each round sleeps to its end.
        while (until := self.paused_until()) > waiter.now():
            waiter.sleep_until(until)

    def _take_slot(self) -> None:
        with self._cond:
            while self._in_flight >= self._limits.concurrency:
                self._cond.wait()
            self._in_flight += 1

    def _release_slot(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify()

    def _take_rate(self, tokens: int) -> None:
        with self._cond:  # read both under the lock: configure() may swap them
            requests, token_bucket = self._requests, self._tokens
        if requests is not None:
            requests.take("requests", 1)
        if token_bucket is not None:
            token_bucket.take("tokens", tokens)

    @contextmanager
    def slot(self, tokens: int = 1, waiter: Waiter | None = None) -> Iterator[None]:
        """Hold one call's place: blocks until the pause is over, a slot is free and the rate limits admit a request
        of about `tokens` prompt tokens; the slot is released when the block ends. `waiter` carries the caller's
        sleep function and what it already slept (see `Waiter`)."""
        waiter = waiter or Waiter()
        self._wait_for_pause(waiter)  # before taking a slot, so a paused caller does not hold one
        self._take_slot()
        try:
            self._take_rate(tokens)
            self._wait_for_pause(waiter)  # a 429 may have paused everyone while this caller waited
            yield
        finally:
            self._release_slot()


_THROTTLES: dict[tuple[str, str], Throttle] = {}
_REGISTRY_LOCK = threading.Lock()


def throttle_for(model: str, api_base: str, limits: ThrottleLimits) -> Throttle:
    """The process-wide throttle of (model, api_base), created on first use, with `limits` applied."""
    key = (model, api_base.rstrip("/"))
    with _REGISTRY_LOCK:
        throttle = _THROTTLES.get(key)
        if throttle is None:
            throttle = _THROTTLES[key] = Throttle(limits)
            return throttle
    throttle.configure(limits)
    return throttle
