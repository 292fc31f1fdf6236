"""The LLM judge: `Judge` backed by any LiteLLM chat model, one JSON call per question (via `LLMEndpoint`).

- `evaluate`: prompt `session_evaluation`, the session rendered like an extraction window (`render_window`: [T{n}]
  labels, tool calls) — the regular agent's turns only, `shadow_content` is never shown.
- `compare`: prompt `shadow_comparison`, one call per turn carrying `shadow_content`: the user's question and the
  two answers as "Answer A" / "Answer B". Which side is A comes from `judge.presentation_order` (random per pair,
  reproducible); the reply's A/B is mapped back to regular/shadow through that same order. The original judged
  "Request 1" and stored it as the regular agent's result whatever Request 1 was — here the comparison can
  only produce a `regular_vs_shadow` label, never a success flag.

Replies are validated strictly; a bad reply is retried (with backoff, counted), and a question still unanswered after
the retries raises `JudgeFailed` carrying the cost, so the caller records the session as not evaluated and tries again
on the next run. The API key never reaches logs, results or exception text (`LLMEndpoint` scrubs it).
"""

from __future__ import annotations

from typing import Any, NoReturn

from reflexio_pipelines.learning.jsonparse import LLMOutputError, clean_text
from reflexio_pipelines.learning.judge import (
    FAILURE_TYPES,
    ShadowVerdict,
    Side,
    Verdict,
    presentation_order,
    question_for,
    require_shadow,
    side_verdict,
)
from reflexio_pipelines.learning.llm_call import CallOutcome, LLMEndpoint
from reflexio_pipelines.learning.llm_failures import scrub_secret
from reflexio_pipelines.learning.llm_stage import LLMStage, StageFailed
from reflexio_pipelines.learning.prompts import load_prompt
from reflexio_pipelines.learning.sessions import Session
from reflexio_pipelines.learning.transcript import indent_continuation, render_window
from reflexio_pipelines.learning.types import Turn

JUDGE_NAME = "litellm"
EVALUATION_PROMPT_ID = "session_evaluation"
COMPARISON_PROMPT_ID = "shadow_comparison"
PROMPT_VERSION = "1.0.0"
EVALUATION_KEYS = ("is_success", "failure_type", "failure_reason", "is_escalated")
COMPARISON_KEYS = ("better", "significantly", "reason")
NO_DEFINITION = "(not given: success means the user's request was resolved)"
NO_QUESTION = "(no user message precedes this answer)"
MAX_REASON_CHARS = 500
MAX_DEFINITION_CHARS = 2_000
_NULLS = {"", "null", "none", "n/a"}


class JudgeFailed(StageFailed):
    """No usable verdict after the retries (stage `session_judge` or `shadow_judge`; the message is scrubbed of
    the key); carries the cost spent."""


def _optional_text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise LLMOutputError(f"{key} must be a string or null, got {type(value).__name__}")
    text = clean_text(" ".join(value.split()), MAX_REASON_CHARS)
    return None if text.casefold() in _NULLS else text


def parse_verdict(obj: dict[str, Any]) -> Verdict:
    """A session verdict from a reply; raises LLMOutputError (retried) for anything ill-typed or contradictory.

    `is_success` must be a JSON boolean; `failure_type` one of FAILURE_TYPES or null (""/"none" read as null);
    a successful session must not name a failure type; a missing `is_escalated` means false (the original's default).
    """
    success = obj.get("is_success")
    if not isinstance(success, bool):
        raise LLMOutputError(f"is_success must be true or false, got {success!r}")
    escalated = obj.get("is_escalated", False)
    if not isinstance(escalated, bool):
        raise LLMOutputError(f"is_escalated must be true or false, got {escalated!r}")
    raw_type = _optional_text(obj, "failure_type")
    failure_type = raw_type.casefold() if raw_type else None
    if failure_type is not None and failure_type not in FAILURE_TYPES:
        raise LLMOutputError(f"failure_type must be one of {', '.join(FAILURE_TYPES)} or null, got {raw_type!r}")
    if success and failure_type is not None:
        raise LLMOutputError(f"a successful session cannot have failure_type {failure_type!r}")
    reason = None if success else _optional_text(obj, "failure_reason")
    return Verdict(is_success=success, failure_type=failure_type, failure_reason=reason, is_escalated=escalated)


def parse_comparison(obj: dict[str, Any]) -> tuple[str | None, bool, str]:
    """(`"A"` | `"B"` | None for a tie, significantly, reason) from a reply; raises LLMOutputError when unusable."""
    better = obj.get("better")
    label = better.strip().strip('"').upper() if isinstance(better, str) else None
    if label in {"ANSWER A", "ANSWER B"}:
        label = label[-1]
    if label not in {"A", "B", "TIE"}:
        raise LLMOutputError(f'better must be "A", "B" or "tie", got {better!r}')
    significantly = obj.get("significantly", False)
    if not isinstance(significantly, bool):
        raise LLMOutputError(f"significantly must be true or false, got {significantly!r}")
    reason = obj.get("reason")
    reason_text = clean_text(" ".join(reason.split()), MAX_REASON_CHARS) if isinstance(reason, str) else ""
    return (None if label == "TIE" else label), significantly and label != "TIE", reason_text


def map_back(better: str | None, significantly: bool, order: tuple[Side, Side]) -> str:
    """The judge's A/B verdict as regular/shadow, given the order the answers were shown in (A = order[0])."""
    if better is None:
        return "tied"
    return side_verdict(order[0] if better == "A" else order[1], significantly)


class LiteLLMJudge(LLMStage):
    """A `Judge` backed by a LiteLLM chat model (see the module docstring), on the shared `endpoint` or on one built
    from a model and its settings as keywords (see `LLMStage`)."""

    name = JUDGE_NAME

    def __init__(self, model: str = "", *, endpoint: LLMEndpoint | None = None, **settings: Any) -> None:
        super().__init__(model, endpoint=endpoint, **settings)
        self.evaluation_prompt = load_prompt(EVALUATION_PROMPT_ID, PROMPT_VERSION)
        self.comparison_prompt = load_prompt(COMPARISON_PROMPT_ID, PROMPT_VERSION)
        self.prompt_version = self.evaluation_prompt.ref
        self.comparison_prompt_version = self.comparison_prompt.ref

    # --- messages ------------------------------------------------------------------------------------------------

    def evaluation_messages(self, session: Session, success_definition: str = "") -> list[dict[str, str]]:
        definition = clean_text(" ".join(success_definition.split()), MAX_DEFINITION_CHARS) or NO_DEFINITION
        return self.evaluation_prompt.render_messages(
            success_definition=definition, transcript=render_window(session.window)
        )

    def comparison_messages(self, session: Session, turn: Turn, order: tuple[Side, Side]) -> list[dict[str, str]]:
        answers = {"regular": turn.content, "shadow": turn.shadow_content}
        question = question_for(session, turn).strip() or NO_QUESTION
        first, second = (indent_continuation(answers[side].strip()) for side in order)
        return self.comparison_prompt.render_messages(
            question=indent_continuation(question), answer_a=first, answer_b=second
        )

    # --- the Judge protocol ---------------------------------------------------------------------------------------

    def evaluate(self, session: Session, success_definition: str = "") -> tuple[Verdict, int, int, int]:
        messages = self.evaluation_messages(session, success_definition)
        outcome = self.endpoint.call_json(
            messages, EVALUATION_KEYS, parse_verdict, "session evaluation", stage="session_judge"
        )
        if not outcome.ok or outcome.value is None:
            self._fail(f"session {session.session_id}: no usable evaluation", outcome, "session_judge")
        return outcome.value, outcome.calls, outcome.prompt_tokens, outcome.completion_tokens

    def compare(self, session: Session, turn: Turn, rng_seed: int | str = 0) -> tuple[ShadowVerdict, int, int, int]:
        require_shadow(session, turn)
        order = presentation_order(session.session_id, turn.turn_id, rng_seed)
        messages = self.comparison_messages(session, turn, order)
        outcome = self.endpoint.call_json(
            messages, COMPARISON_KEYS, parse_comparison, "shadow comparison", stage="shadow_judge"
        )
        if not outcome.ok or outcome.value is None:
            self._fail(
                f"session {session.session_id} turn {turn.turn_id}: no usable comparison", outcome, "shadow_judge"
            )
        better, significantly, reason = outcome.value
        verdict = ShadowVerdict(turn.turn_id, order[0], map_back(better, significantly, order), reason)
        return verdict, outcome.calls, outcome.prompt_tokens, outcome.completion_tokens

    def _fail(self, what: str, outcome: CallOutcome[Any], stage: str) -> NoReturn:
        message = scrub_secret(
            f"{what} after {outcome.calls} call(s): {outcome.error or 'empty reply'}", self.endpoint.api_key
        )
        raise JudgeFailed.of(message, outcome, stage=stage)
