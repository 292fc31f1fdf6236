"""One JSON-returning LLM call with retries, shared by the LLM judges (dedup, aggregation).

Transient failures (timeouts, 429, 5xx, unparseable or schema-violating replies) are retried with exponential
backoff and jitter; anything else ends at once. Cost is counted on every attempt. The API key is scrubbed from
every message that could reach a log.
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
    backoff_delay,
    complete_chat,
    is_transient,
    reply_text,
    response_usage,
    scrub_secret,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class CallOutcome(Generic[T]):
    """The validated value (None when every attempt failed), the cost, and the scrubbed last error."""

    value: T | None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""


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
        for attempt in range(attempts):
            if attempt:
                self.sleep(backoff_delay(attempt - 1, self.backoff_base_s, rng))
            outcome.calls += 1
            try:
                response = complete_chat(self.model, messages, api_base=self.api_base, api_key=self.api_key,
                                         timeout_s=self.timeout_s, temperature=self.temperature)  # fmt: skip
                prompt_tokens, completion_tokens = response_usage(response)
                outcome.prompt_tokens += prompt_tokens
                outcome.completion_tokens += completion_tokens
                outcome.value = validate(parse_llm_json(reply_text(response), expected_keys=expected_keys))
                outcome.error = ""
                return outcome
            except Exception as exc:  # classified below: only transient failures are retried
                outcome.error = scrub_secret(f"{type(exc).__name__}: {exc}", self.api_key)[:500]
                log.warning("%s attempt %d/%d (%s) failed: %s", what, attempt + 1, attempts, self.model, outcome.error)
                if not is_transient(exc):
                    break
        return outcome
