"""The LLM extractor: one LiteLLM chat call per window, prompt `extraction`, JSON out.

Differences from the original on purpose: temperature defaults to 0 (reproducible), transient failures (timeouts,
429, 5xx, connection errors, unparseable replies) are retried with exponential backoff and jitter instead of a
single attempt, a window that still fails raises `ExtractionFailed` instead of silently yielding nothing, and the
API key is never placed in logs, results or exception text.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any

from reflexio_pipelines.learning.jsonparse import EXTRACTION_KEYS, LLMOutputError, parse_llm_json, validate_extraction
from reflexio_pipelines.learning.prompts import Prompt, load_prompt
from reflexio_pipelines.learning.transcript import render_expert_pairs, render_window
from reflexio_pipelines.learning.types import ExtractionResult, Window

log = logging.getLogger(__name__)

EXTRACTOR_NAME = "litellm"
PROMPT_ID = "extraction"
PROMPT_VERSION = "1.0.0"
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_BACKOFF_S = 30.0


class ExtractionFailed(RuntimeError):
    """A window could not be extracted after all retries. Carries the cost spent so the caller can record it."""

    def __init__(self, message: str, *, attempts: int, llm_calls: int, prompt_tokens: int, completion_tokens: int):
        super().__init__(message)
        self.attempts = attempts
        self.llm_calls = llm_calls
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


def _status_code(exc: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


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


def response_usage(response: Any) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) from a chat response's usage block; (0, 0) when absent."""
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if usage is None:
        return 0, 0
    get = usage.get if isinstance(usage, dict) else lambda key: getattr(usage, key, None)
    return int(get("prompt_tokens") or 0), int(get("completion_tokens") or 0)


def reply_text(response: Any) -> str:
    """The first choice's message text, or "" when the response has none."""
    try:
        return response.choices[0].message.content or ""
    except (AttributeError, IndexError, KeyError, TypeError):
        return ""


def scrub_secret(text: str, secret: str) -> str:
    """`text` with every occurrence of `secret` replaced by `***` (unchanged when there is no secret)."""
    return text.replace(secret, "***") if secret else text


def backoff_delay(attempt: int, base_s: float, rng: random.Random) -> float:
    """Exponential delay with full jitter on top, so parallel workers do not retry in lockstep."""
    base = min(MAX_BACKOFF_S, base_s * (2**attempt))
    return base + rng.uniform(0, base)


def complete_chat(
    model: str,
    messages: list[dict[str, str]],
    *,
    api_base: str = "",
    api_key: str = "",
    timeout_s: float = 120,
    temperature: float = 0.0,
) -> Any:
    """One LiteLLM chat call in JSON mode, with LiteLLM's and the SDKs' own retries off (retries are the caller's)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map at import
    import litellm  # lazy: importing litellm takes seconds

    litellm.suppress_debug_info = True
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "timeout": timeout_s,
        "temperature": temperature,
        "response_format": {"type": "json_object"},
        "drop_params": True,  # providers without JSON mode get the prompt's JSON instruction only
        "num_retries": 0,  # retries are ours (the provider SDKs would retry silently, uncounted)
        "max_retries": 0,
    }
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    return litellm.completion(**kwargs)


class LiteLLMExtractor:
    """Extracts profiles and playbooks from a window with any LiteLLM-supported chat model."""

    name = EXTRACTOR_NAME

    def __init__(
        self,
        model: str,
        api_base: str = "",
        api_key: str = "",
        timeout_s: float = 120,
        max_retries: int = 2,
        temperature: float = 0.0,
        *,
        backoff_base_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        prompt: Prompt | None = None,
    ) -> None:
        if not model:
            raise ValueError("LiteLLMExtractor needs a model name (an empty model means the built-in extractor)")
        self.model = model
        self.api_base = api_base
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.temperature = temperature
        self.backoff_base_s = backoff_base_s
        self._api_key = api_key
        self._sleep = sleep
        self._rng = random.Random()
        self.prompt = prompt or load_prompt(PROMPT_ID, PROMPT_VERSION)

    def __repr__(self) -> str:  # the key is deliberately absent
        return f"LiteLLMExtractor(model={self.model!r}, api_base={self.api_base!r}, prompt={self.prompt.ref!r})"

    @property
    def prompt_version(self) -> str:
        """`extraction@<version>`, recorded with every result."""
        return self.prompt.ref

    def messages(self, window: Window, agent_context: str = "") -> list[dict[str, str]]:
        """The chat messages sent for `window` (system + user)."""
        return self.prompt.render_messages(
            agent_context=agent_context.strip() or "(not given)",
            transcript=render_window(window),
            expert_pairs=render_expert_pairs(window) or "(none)",
        )

    def _scrub(self, text: str) -> str:
        return scrub_secret(text, self._api_key)

    def _backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self.backoff_base_s, self._rng)

    def _complete(self, messages: list[dict[str, str]]) -> Any:
        return complete_chat(
            self.model,
            messages,
            api_base=self.api_base,
            api_key=self._api_key,
            timeout_s=self.timeout_s,
            temperature=self.temperature,
        )

    def extract(self, window: Window, agent_context: str = "") -> ExtractionResult:
        """Profiles and playbooks for `window`; raises `ExtractionFailed` when every attempt failed."""
        messages = self.messages(window, agent_context)
        calls = prompt_tokens = completion_tokens = 0
        last_error = ""
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            if attempt:
                self._sleep(self._backoff(attempt - 1))
            calls += 1
            try:
                response = self._complete(messages)
                used = response_usage(response)
                prompt_tokens += used[0]
                completion_tokens += used[1]
                obj = parse_llm_json(reply_text(response), expected_keys=EXTRACTION_KEYS)
            except Exception as exc:  # classified below; anything not transient ends the window at once
                last_error = self._scrub(f"{type(exc).__name__}: {exc}")[:500]
                log.warning(
                    "extraction attempt %d/%d failed for window %s: %s",
                    attempt + 1,
                    attempts,
                    window.window_id,
                    last_error,
                )
                if not is_transient(exc):
                    break
                continue
            profiles, playbooks, problems = validate_extraction(obj, window)
            if problems:
                log.info("window %s: %d item problem(s): %s", window.window_id, len(problems), "; ".join(problems))
            return ExtractionResult(
                profiles=profiles,
                playbooks=playbooks,
                extractor=EXTRACTOR_NAME,
                model=self.model,
                prompt_version=self.prompt_version,
                llm_calls=calls,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
        # raised without chaining: the provider's exception (and its request context) could carry the key
        raise ExtractionFailed(
            f"extraction failed for window {window.window_id} after {calls} call(s) to {self.model}: {last_error}",
            attempts=calls,
            llm_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        ) from None
