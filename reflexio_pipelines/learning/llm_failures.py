"""What a failed LLM call was, and whether to try it again: the storable `FailureSummary` (never provider text or
the model's reply), the ledger outcome of a failed attempt, the transient failures worth retrying, and tenacity's wait
between attempts (exponential backoff with full jitter, or a 429's Retry-After when longer). Used by the one endpoint
(llm_call.py) and by the stages that record their failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tenacity import wait_exponential, wait_random_exponential
from tenacity.wait import wait_base

from reflexio_pipelines.learning.jsonparse import LLMOutputError

if TYPE_CHECKING:
    from tenacity import RetryCallState

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_BACKOFF_S = 30.0
NO_JSON_MESSAGE = "the reply holds no usable JSON object"


@dataclass(frozen=True)
class FailureSummary:
    """Why a call failed, safe to store and log: the exception class and a fixed description of its kind (HTTP
    status where there is one). Never the provider's message or the model's reply: either can echo the prompt."""

    error_class: str
    message: str

    def __str__(self) -> str:
        return f"{self.error_class}: {self.message}"


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def failure_outcome(exc: BaseException) -> str:
    """The ledger outcome (one of llm_ledger.OUTCOMES other than `ok`) of a failed attempt."""
    name = type(exc).__name__.lower()
    status = _status_code(exc)
    if isinstance(exc, LLMOutputError):
        return "bad_output"
    if isinstance(exc, TimeoutError) or "timeout" in name:  # LiteLLM's Timeout carries 408: the name decides
        return "timeout"
    if status == 429:
        return "rate_limited"
    if status is not None:
        return "server_error" if status >= 500 else "refused"
    if isinstance(exc, ConnectionError) or "connection" in name:
        return "connection"
    return "error"


def summarize_failure(exc: BaseException) -> FailureSummary:
    """The `FailureSummary` of a failed call. An `LLMOutputError` subclass may name its own fixed description in a
    `summary_message` class attribute (e.g. the extractor's SchemaViolation)."""
    status = _status_code(exc)
    messages = {
        "bad_output": getattr(exc, "summary_message", NO_JSON_MESSAGE),
        "timeout": "the call timed out",
        "rate_limited": "rate limited (HTTP 429)",
        "server_error": f"server error (HTTP {status})",
        "refused": f"request refused (HTTP {status})",
        "connection": "the connection failed",
        "error": "unexpected error",
    }
    return FailureSummary(type(exc).__name__, messages[failure_outcome(exc)])


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: bad model output, timeouts, connection errors, 408/409/425/429, 5xx.

    Authentication, permission and request-shape errors (other 4xx) fail at once: retrying cannot fix them.
    """
    if isinstance(exc, (LLMOutputError, TimeoutError, ConnectionError)):
        return True
    status = _status_code(exc)
    if status is not None:
        return status in RETRYABLE_STATUS or status >= 500
    # LiteLLM maps transport problems to these class names (no status code attached)
    return type(exc).__name__ in {"Timeout", "APIConnectionError", "APITimeoutError", "ServiceUnavailableError"}


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a rate-limited provider asked us to wait (its `Retry-After` header, in seconds), None if not given.

    LiteLLM keeps the provider's headers on the exception (`headers`, `litellm_response_headers`) or on its httpx
    response; an HTTP-date value is ignored (the exponential backoff applies)."""
    sources = (
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    )
    for headers in sources:
        if not headers or not hasattr(headers, "get"):
            continue
        value = headers.get("retry-after") or headers.get("Retry-After")
        try:
            return max(0.0, float(value))
        except (TypeError, ValueError):
            continue
    return None


class wait_backoff_or_retry_after(wait_base):  # noqa: N801 - named like tenacity's own wait strategies
    """Tenacity wait: exponential backoff with full jitter on top, or the provider's Retry-After when longer.

    Retry k (0-based) waits a delay in [base·2^k, 2·base·2^k] (tenacity's `wait_exponential` plus
    `wait_random_exponential`: parallel workers do not retry in lockstep), the whole capped at MAX_BACKOFF_S."""

    def __init__(self, base_s: float) -> None:
        self._backoff = wait_exponential(multiplier=base_s, max=MAX_BACKOFF_S) + wait_random_exponential(
            multiplier=base_s, max=MAX_BACKOFF_S
        )

    def __call__(self, retry_state: RetryCallState) -> float:
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        asked = (retry_after_s(failure) or 0.0) if failure is not None else 0.0
        return min(MAX_BACKOFF_S, max(self._backoff(retry_state), asked))


def scrub_secret(text: str, secret: str) -> str:
    """`text` with every occurrence of `secret` replaced by `***` (unchanged when there is no secret)."""
    return text.replace(secret, "***") if secret else text
