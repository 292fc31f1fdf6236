"""What every LLM stage shares (extractor, dedup judge, session/shadow judge, consolidator): the one endpoint it
calls through (its settings are read there: `stage.endpoint.timeout_s`), the keyword constructor that builds one
from a model and its settings, a repr without the key, and the one failure type, `StageFailed`.

A stage itself is then only its prompt, the validation of its reply and its stage name (llm_call.STAGES). The
stages' own failure names (`ExtractionFailed`, `JudgeFailed`, `ConsolidationFailed`, learn.DedupFailed) are
subclasses of `StageFailed`, so a caller catching one stage's failure still catches that stage's only.
"""

from __future__ import annotations

from typing import Any, Self

from reflexio_pipelines.learning.llm_call import CallOutcome, LLMEndpoint
from reflexio_pipelines.learning.llm_failures import FailureSummary


class StageFailed(RuntimeError):
    """An LLM stage got no usable answer after its retries. Carries the stage (as the ledger names it), the cost
    spent (`calls` and tokens, which the caller counts: they were paid for), the attempts of the failed call and a
    storable `FailureSummary` of the last error. The message never holds the API key."""

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        calls: int,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        attempts: int | None = None,
        summary: FailureSummary | None = None,
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.calls, self.prompt_tokens, self.completion_tokens = calls, prompt_tokens, completion_tokens
        # a stage may spend calls besides the failed one (the extractor's gate): attempts counts the failed one's
        self.attempts = calls if attempts is None else attempts
        self.summary = summary or FailureSummary(type(self).__name__, f"{stage} failed")

    @classmethod
    def of(cls, message: str, outcome: CallOutcome[Any], *, stage: str) -> Self:
        """The failure of a stage whose one call ended as `outcome` (its cost and summary)."""
        return cls(
            message,
            stage=stage,
            calls=outcome.calls,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            summary=outcome.failure,
        )


class LLMStage:
    """An LLM stage on the shared `endpoint` (what the pipeline passes: resources/extractor.py), or on one built
    from a model and its settings as keywords (`settings`: any LLMEndpoint field, e.g. api_base, api_key,
    timeout_s, max_retries, temperature, backoff_base_s, sleep)."""

    def __init__(self, model: str = "", *, endpoint: LLMEndpoint | None = None, **settings: Any) -> None:
        if endpoint is not None and model:
            raise ValueError("pass either an LLMEndpoint or a model and its settings, not both")
        self.endpoint = endpoint if endpoint is not None else LLMEndpoint(model, **settings)

    @property
    def model(self) -> str:
        """The model the stage calls (the endpoint's)."""
        return self.endpoint.model

    def repr_fields(self) -> str:
        """What the repr shows after the model and api_base (a stage's prompt, its own settings)."""
        return ""

    def __repr__(self) -> str:  # the key is deliberately absent
        return f"{type(self).__name__}(model={self.model!r}, api_base={self.endpoint.api_base!r}{self.repr_fields()})"
