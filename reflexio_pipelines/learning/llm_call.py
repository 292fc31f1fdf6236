"""One JSON-returning LLM call with retries, shared by the LLM judges (dedup, aggregation).

Transient failures (timeouts, 429, 5xx, unparseable or schema-violating replies) are retried with exponential
backoff and full jitter (a 429's Retry-After is honoured when longer); anything else ends at once. Cost is counted
on every attempt. Logs carry only a `FailureSummary` (error class and kind), never provider text or replies; the
scrubbed exception text is kept on the outcome for the caller.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from reflexio_pipelines.learning.jsonparse import parse_llm_json
from reflexio_pipelines.learning.llm_extract import (
    FailureSummary,
    complete_chat,
    is_transient,
    reply_text,
    response_usage,
    retry_delay,
    scrub_secret,
    summarize_failure,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class CallOutcome(Generic[T]):
    """The validated value (None when every attempt failed), the cost, the scrubbed last error text and its
    storable summary (None when the call succeeded)."""

    value: T | None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    failure: FailureSummary | None = None


@dataclass
class LLMEndpoint:
    """Where and how to call: model, endpoint, key (never shown), retry policy."""

    model: str
    api_base: str = ""
    api_key: str = ""
    timeout_s: float = 120
    max_retries: int = 2
    temperature: float = 0.0
    backoff_base_s: float = 1.0
    sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:  # the key is deliberately absent
        return f"LLMEndpoint(model={self.model!r}, api_base={self.api_base!r})"

    def call_json(self, messages: list[dict[str, str]], expected_keys: tuple[str, ...],
                  validate: Callable[[dict], T], what: str) -> CallOutcome[T]:  # fmt: skip
        """Call until `validate(parsed_json)` returns without raising, or the retries are spent."""
        outcome: CallOutcome[T] = CallOutcome(None)
        rng = random.Random()
        attempts = max(0, self.max_retries) + 1
        last: BaseException | None = None
        for attempt in range(attempts):
            if last is not None:
                self.sleep(retry_delay(last, attempt - 1, self.backoff_base_s, rng))
            outcome.calls += 1
            try:
                response = complete_chat(self.model, messages, api_base=self.api_base, api_key=self.api_key,
                                         timeout_s=self.timeout_s, temperature=self.temperature)  # fmt: skip
                prompt_tokens, completion_tokens = response_usage(response)
                outcome.prompt_tokens += prompt_tokens
                outcome.completion_tokens += completion_tokens
                outcome.value = validate(parse_llm_json(reply_text(response), expected_keys=expected_keys))
                outcome.error, outcome.failure = "", None
                return outcome
            except Exception as exc:  # classified below: only transient failures are retried
                last = exc
                outcome.error = scrub_secret(f"{type(exc).__name__}: {exc}", self.api_key)[:500]
                outcome.failure = summarize_failure(exc)
                log.warning("%s attempt %d/%d (%s) failed: %s", what, attempt + 1, attempts, self.model, outcome.failure)
                if not is_transient(exc):
                    break
        return outcome
