"""The one LLM endpoint: every chat call of every stage (extraction, gate, dedup judge, session and shadow judges,
consolidation) goes through `LLMEndpoint.call` / `call_json`.

One call is: the process-wide throttle of the provider (llm_throttle.py: calls in flight, requests/min, tokens/min,
a 429's Retry-After pausing every caller), one LiteLLM request with every setting applied, the reply parsed and
validated by the caller's function, one `LLMCall` in the cost ledger (llm_ledger.py) per attempt, and tenacity
retrying transient failures (timeouts, connection errors, 408/409/425/429, 5xx, unparseable or schema-violating
replies) with exponential backoff and full jitter, a 429's Retry-After honoured when longer. Anything else ends at
once. Cost is counted on every attempt.

Parameters a model does not accept are dropped, never failing every call: LiteLLM's `drop_params=True`. Verified
against LiteLLM 1.110 and the local stub: for the gpt-5 family and the o-series, which take only temperature 1, a
temperature of 0 or 0.7 is removed from the request (without `drop_params` LiteLLM raises UnsupportedParamsError
before sending anything); for models that take it, it is sent as configured (tests/test_llm_endpoint.py).

Logs carry only a `FailureSummary` (error class and kind), never provider text or replies; the scrubbed exception
text is kept on the outcome for the caller.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt

from reflexio_pipelines.learning.jsonparse import parse_llm_json
from reflexio_pipelines.learning.llm_failures import (
    MAX_BACKOFF_S,
    FailureSummary,
    failure_outcome,
    is_transient,
    retry_after_s,
    scrub_secret,
    summarize_failure,
    wait_backoff_or_retry_after,
)
from reflexio_pipelines.learning.llm_ledger import LLMCall, current_user, record
from reflexio_pipelines.learning.llm_reply import answer_text
from reflexio_pipelines.learning.llm_throttle import Throttle, ThrottleLimits, Waiter, estimate_tokens, throttle_for

if TYPE_CHECKING:
    from reflexio_pipelines.settings import LLMSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The callers of the endpoint, as the ledger names them.
STAGES = ("extraction", "gate", "dedup", "session_judge", "shadow_judge", "consolidation")


# --- one request --------------------------------------------------------------------------------------------------


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


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map at import
    import litellm  # lazy: importing litellm takes seconds

    litellm.suppress_debug_info = True
    return litellm


#: Modules the first real request of a process imports (httpx's transport: httpcore, h11, h2). Imported by
#: `preload_litellm` so that a run's first wave of concurrent calls does not queue on the import lock for them.
_TRANSPORT_MODULES = ("httpcore", "h11", "h2.connection")


def preload_litellm(model: str = "", *, api_base: str = "", api_version: str = "") -> threading.Thread:
    """Start importing LiteLLM in a daemon thread and return it. A run that will call a model starts this when its
    resources are set up, so the import (5-6 s of the first call on this 2-core machine, measured) overlaps the
    run's earlier steps instead of stalling the first extraction; the import lock makes a concurrent import wait.

    With `model`, the thread then warms up what LiteLLM and httpx set up lazily on a process's first request: one
    call answered by LiteLLM's `mock_response` (nothing is sent, nothing is billed or recorded) and the transport
    modules. Without it, every call of a run's first wave waited for that set-up at once: under steady publishing
    with a 1 s model the first wave's calls took 1.3-6.3 s instead of ~1.05 s (the `llm_calls` ledger, 30 runs);
    64 calls at once on a quiet machine: 1.51-1.65 s cold, 1.04-1.13 s warmed."""
    thread = threading.Thread(target=_warm_up, args=(model, api_base, api_version), name="preload-litellm", daemon=True)
    thread.start()
    return thread


def _warm_up(model: str, api_base: str, api_version: str) -> None:
    litellm = _litellm()
    if not model:
        return
    messages = [{"role": "user", "content": "warm-up"}]
    try:
        litellm.completion(
            **_chat_kwargs(model, messages, api_base, "", 10, 0.0, True, api_version), mock_response="{}"
        )
        for name in _TRANSPORT_MODULES:
            importlib.import_module(name)
    except Exception:  # best effort: whatever this fails on is set up by the first real call instead
        log.debug("LiteLLM warm-up skipped for %s", model)


def _chat_kwargs(
    model: str,
    messages: Sequence[dict[str, str]],
    api_base: str,
    api_key: str,
    timeout_s: float,
    temperature: float,
    json_mode: bool,
    api_version: str,
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": list(messages),
        "timeout": timeout_s,
        "temperature": temperature,
        "drop_params": True,
        "num_retries": 0,  # retries are ours (the provider SDKs would retry silently, uncounted)
        "max_retries": 0,
    }
    if json_mode:
        kwargs["response_format"] = {"type": "json_object"}
    if api_base:
        kwargs["api_base"] = api_base
    if api_key:
        kwargs["api_key"] = api_key
    if api_version:  # Azure OpenAI's api-version
        kwargs["api_version"] = api_version
    return kwargs


def complete_chat(
    model: str,
    messages: Sequence[dict[str, str]],
    *,
    api_base: str = "",
    api_key: str = "",
    timeout_s: float = 120,
    temperature: float = 0.0,
    json_mode: bool = True,
    api_version: str = "",
) -> Any:
    """One LiteLLM chat call (JSON mode unless `json_mode` is False), with LiteLLM's and the SDKs' own retries off
    (retries are the endpoint's). Parameters the model does not accept (temperature on reasoning models, JSON mode
    on providers without it) are dropped by LiteLLM (`drop_params`), so they cannot fail the call."""
    kwargs = _chat_kwargs(model, messages, api_base, api_key, timeout_s, temperature, json_mode, api_version)
    return _litellm().completion(**kwargs)


def response_cost_usd(response: Any) -> float | None:
    """The USD cost LiteLLM priced a response at from its bundled cost map (`_hidden_params.response_cost`, set on
    every completion), None when the model is not in the map. Reading it instead of pricing the tokens again saves
    a second cost-map lookup per call, ~1 ms of the ~12 ms a call holds the GIL (py-spy, 500 calls)."""
    hidden = getattr(response, "_hidden_params", None)
    value = hidden.get("response_cost") if isinstance(hidden, dict) else getattr(hidden, "response_cost", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for these token counts from LiteLLM's bundled cost map (offline), None when the model is not in it."""
    try:
        prompt_cost, completion_cost = _litellm().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # LiteLLM raises for unmapped models (a local stub, a fine-tune, a self-hosted model)
        return None
    return float(prompt_cost) + float(completion_cost)


# --- the endpoint -------------------------------------------------------------------------------------------------


@dataclass
class CallOutcome(Generic[T]):
    """The validated value, the cost, the scrubbed last error text and its storable summary. `failure` is None
    exactly when the call succeeded (`ok`); a successful value may itself be None (e.g. a consolidator's null)."""

    value: T | None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    failure: FailureSummary | None = None

    @property
    def ok(self) -> bool:
        """True when an attempt returned a validated value."""
        return self.failure is None and self.calls > 0


@dataclass
class LLMEndpoint:
    """Where and how to call: model, endpoint, key (never shown), timeout, retry policy, temperature and the
    provider limits of the shared throttle. Build it from settings with `from_settings`."""

    model: str
    api_base: str = ""
    api_key: str = ""
    timeout_s: float = 120
    max_retries: int = 2
    temperature: float = 0.0
    backoff_base_s: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    concurrency: int = 32
    rpm: int = 0
    tpm: int = 0
    api_version: str = ""  # Azure OpenAI's api-version ("" = LiteLLM's default)

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("an LLM endpoint needs a model name (an empty model means the offline built-ins)")
        self.model = self.model.strip()
        ThrottleLimits(self.concurrency, self.rpm, self.tpm)  # invalid limits fail here, not at the first call

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, sleep: Callable[[float], None] = time.sleep) -> LLMEndpoint:
        """The endpoint for `settings`: every LLMSettings field the endpoint has (all but gate_model, which names a
        second endpoint, `with_model(settings.gate_model)`, and builtin), read by name so a setting added to both
        is never left behind here."""
        shared = {f.name for f in dataclasses.fields(cls) if f.name in type(settings).model_fields} - {"api_key"}
        return cls(**settings.model_dump(include=shared), api_key=settings.api_key.get_secret_value(), sleep=sleep)

    def with_model(self, model: str) -> LLMEndpoint:
        """The same endpoint settings for another model (e.g. the gate's); it gets that model's own throttle."""
        return dataclasses.replace(self, model=model)

    def __repr__(self) -> str:  # the key is deliberately absent
        return f"LLMEndpoint(model={self.model!r}, api_base={self.api_base!r})"

    @property
    def limits(self) -> ThrottleLimits:
        """The provider limits this endpoint applies to its throttle."""
        return ThrottleLimits(self.concurrency, self.rpm, self.tpm)

    @property
    def throttle(self) -> Throttle:
        """The process-wide throttle of this model and api_base (shared with every other endpoint on them)."""
        return throttle_for(self.model, self.api_base, self.limits)

    def call_json(
        self,
        messages: Sequence[dict[str, str]],
        expected_keys: tuple[str, ...],
        validate: Callable[[dict], T],
        what: str,
        *,
        stage: str,
    ) -> CallOutcome[T]:
        """A JSON-mode call: retried until `validate(parsed_json)` returns without raising (raise LLMOutputError
        for a reply worth retrying), or the retries are spent."""
        return self.call(
            messages, lambda text: validate(parse_llm_json(text, expected_keys=expected_keys)), what=what, stage=stage
        )

    def call(
        self,
        messages: Sequence[dict[str, str]],
        parse: Callable[[str], T],
        *,
        what: str,
        stage: str,
        json_mode: bool = True,
        max_retries: int | None = None,
    ) -> CallOutcome[T]:
        """Call until `parse(reply_text)` returns without raising, or the retries (`max_retries`, default the
        endpoint's) are spent. Never raises for model or transport failures: they are on the outcome."""
        if stage not in STAGES:
            raise ValueError(f"unknown LLM stage {stage!r}; one of {', '.join(STAGES)}")
        outcome: CallOutcome[T] = CallOutcome(None)
        attempts = max(0, self.max_retries if max_retries is None else max_retries) + 1
        waiter = Waiter(self.sleep)
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_backoff_or_retry_after(self.backoff_base_s),
            retry=retry_if_exception(is_transient),
            sleep=waiter.sleep,  # the waiter remembers the backoff, so the throttle's pause is not waited twice
            reraise=True,
        )
        try:
            outcome.value = retrying(self._attempt, messages, parse, outcome, waiter, stage, json_mode, what, attempts)
        except Exception as exc:  # every attempt failed, or one failed for good: the outcome says why
            outcome.error = scrub_secret(f"{type(exc).__name__}: {exc}", self.api_key)[:500]
            outcome.failure = summarize_failure(exc)
        return outcome

    def _attempt(
        self,
        messages: Sequence[dict[str, str]],
        parse: Callable[[str], T],
        outcome: CallOutcome[T],
        waiter: Waiter,
        stage: str,
        json_mode: bool,
        what: str,
        attempts: int,
    ) -> T:
        outcome.calls += 1
        throttle = self.throttle
        prompt_tokens = completion_tokens = 0
        response = None
        failure: Exception | None
        with throttle.slot(estimate_tokens(messages), waiter):
            started_us, started = time.time_ns() // 1_000, time.perf_counter()
            try:
                response = complete_chat(
                    self.model,
                    messages,
                    api_base=self.api_base,
                    api_key=self.api_key,
                    timeout_s=self.timeout_s,
                    temperature=self.temperature,
                    json_mode=json_mode,
                    api_version=self.api_version,
                )
                prompt_tokens, completion_tokens = response_usage(response)
                outcome.prompt_tokens += prompt_tokens
                outcome.completion_tokens += completion_tokens
                value = parse(answer_text(response))  # raises for a cut-off or refused reply
            except Exception as exc:
                failure = exc
            else:
                failure = None
            latency_ms = round((time.perf_counter() - started) * 1000)
        if failure is not None and failure_outcome(failure) == "rate_limited":
            throttle.pause(min(MAX_BACKOFF_S, retry_after_s(failure) or 0.0))  # every caller waits, not only this one
        record(
            LLMCall(
                stage=stage,
                model=self.model,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=latency_ms,
                outcome="ok" if failure is None else failure_outcome(failure),
                error_class=None if failure is None else type(failure).__name__,
                cost_usd=cost_usd(self.model, 0, 0) if response is None else response_cost_usd(response),
                attempt=outcome.calls,
                started_at_us=started_us,
                user_id=current_user(),
            )
        )
        if failure is not None:
            # the summary, not the exception text: provider messages and replies can echo prompt content
            log.warning(
                "%s attempt %d/%d (%s) failed: %s",
                what,
                outcome.calls,
                attempts,
                self.model,
                summarize_failure(failure),
            )
            raise failure
        return value
