"""When to retry a failed call and how long to wait: exponential backoff with jitter, honouring Retry-After."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from reflexio_pipelines.sdk.errors import APIConnectionError, RateLimitError, ReflexioError, ServerError

#: Statuses that say "not now" without having done anything: safe to repeat any call.
_REFUSED = {503}
#: Gateway statuses after which the request may have been processed: repeat only idempotent calls.
_AMBIGUOUS = {502, 504}


@dataclass
class RetryPolicy:
    """Exponential backoff: attempt n (0-based) waits min(max_delay, base_delay * 2**n) scaled by a random factor in
    [1 - jitter, 1]; a 429's Retry-After is honoured instead, up to `max_retry_after` seconds (longer: give up)."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def backoff(self, attempt: int) -> float:
        """The wait before retry number `attempt + 1`, without a server hint."""
        ceiling = min(self.max_delay, self.base_delay * (2**attempt))
        return ceiling * (1.0 - self.jitter * self.rng.random())

    def delay(self, error: ReflexioError, attempt: int, idempotent: bool) -> float | None:
        """Seconds to wait before repeating a call that failed with `error` on attempt `attempt` (0-based), or None
        to give up. Non-idempotent calls are repeated only when the service certainly did not act on them."""
        if attempt >= self.max_retries or not retryable(error, idempotent):
            return None
        if isinstance(error, RateLimitError) and error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after else None
        return self.backoff(attempt)


def retryable(error: ReflexioError, idempotent: bool) -> bool:
    """Whether `error` is transient, and repeating the call cannot apply it twice."""
    if isinstance(error, APIConnectionError):
        return idempotent or not error.request_sent
    if isinstance(error, RateLimitError):
        return True
    if isinstance(error, ServerError):
        return error.status_code in _REFUSED or (idempotent and error.status_code in _AMBIGUOUS)
    return False
