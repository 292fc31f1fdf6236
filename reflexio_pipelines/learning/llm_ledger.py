"""The LLM call ledger: one record per provider call (every attempt, retries included), for cost accounting.

The endpoint (learning/llm_call.py) appends an `LLMCall` to the ledger of the current context after every attempt;
the assets open a ledger for their run with `recording()` and write what it collected to the `llm_calls` table.
Which user a call was about is context too (`about_user()`), set by the learning step around each user's batch, so
erasure can remove the user's rows. Context variables, not parameters, because the same endpoint serves five
callers (extraction, gate, dedup judge, session/shadow judge, consolidation) whose interfaces should not all grow a
ledger argument; worker threads receive the context explicitly (`contextvars.copy_context().run`).

A record holds no prompt or reply text and no secret: stage, model, token counts, latency, outcome and cost only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

#: Outcomes of one attempt.
OUTCOMES = ("ok", "timeout", "rate_limited", "server_error", "bad_output", "refused", "connection", "error")


@dataclass(frozen=True)
class LLMCall:
    """One attempt at one provider call."""

    stage: str  # extraction | gate | dedup | session_judge | shadow_judge | consolidation
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    outcome: str  # one of OUTCOMES
    error_class: str | None
    cost_usd: float | None  # from LiteLLM's bundled cost map; None when the model is not in it
    attempt: int  # 1-based attempt number within the logical call
    started_at_us: int
    user_id: str | None = None  # the user the call was about (None: a cross-user call, e.g. consolidation)

    def row(self) -> dict[str, Any]:
        """The record as an `llm_calls` row (without the table's run/window columns)."""
        return asdict(self)


class CallLedger:
    """A thread-safe collector of `LLMCall`s for one run."""

    def __init__(self) -> None:
        self._calls: list[LLMCall] = []
        self._lock = threading.Lock()

    def add(self, call: LLMCall) -> None:
        with self._lock:
            self._calls.append(call)

    def calls(self) -> list[LLMCall]:
        """Everything recorded so far, in a deterministic order (start time, then stage and user)."""
        with self._lock:
            return sorted(self._calls, key=lambda c: (c.started_at_us, c.stage, c.user_id or "", c.attempt))


_LEDGER: ContextVar[CallLedger | None] = ContextVar("reflexio_llm_ledger", default=None)
_USER: ContextVar[str | None] = ContextVar("reflexio_llm_user", default=None)


@contextmanager
def recording(ledger: CallLedger) -> Iterator[CallLedger]:
    """Calls made inside this block (and in threads started with a copy of this context) land in `ledger`."""
    token = _LEDGER.set(ledger)
    try:
        yield ledger
    finally:
        _LEDGER.reset(token)


@contextmanager
def about_user(user_id: str | None) -> Iterator[None]:
    """Calls made inside this block are attributed to `user_id` (erasable with the user)."""
    token = _USER.set(user_id)
    try:
        yield
    finally:
        _USER.reset(token)


def current_ledger() -> CallLedger | None:
    """The ledger of the current context, if a run opened one."""
    return _LEDGER.get()


def current_user() -> str | None:
    """The user the current call is about, if the caller said so."""
    return _USER.get()


def record(call: LLMCall) -> None:
    """Append `call` to the current ledger (a no-op outside `recording()`)."""
    ledger = _LEDGER.get()
    if ledger is not None:
        ledger.add(call)
