"""LLM stages pointed at the OpenAI-compatible stub (the `stub` fixture), for the tests that call them over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Stage = TypeVar("Stage")


def stage_on_stub(stage: Callable[..., Stage], base_url: str, api_key: str, **settings: Any) -> Stage:
    """`stage` (a LiteLLM stage class: extractor, dedup judge, session judge) on the stub served at `base_url`, with
    its backoff waits appended to `.delays` instead of slept: a test asserts the retry schedule without waiting it
    out. `api_key` is each test module's own, so a test can check that this secret never leaks into a repr or log."""
    delays: list[float] = []
    built = stage(model="openai/stub", api_base=f"{base_url}/v1", api_key=api_key, sleep=delays.append, **settings)
    built.delays = delays  # type: ignore[attr-defined]
    return built
