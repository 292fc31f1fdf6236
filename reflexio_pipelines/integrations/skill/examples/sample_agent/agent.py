"""A tiny deployment assistant: answers one user message per call through an injected `llm` callable.

The worked example of the integrate-reflexio skill: `inspect_agent.py` finds the model call and the turn handler
here, `wire_reflexio.py` wires Reflexio into a copy. `llm` takes OpenAI-style messages and returns the reply text,
so the agent runs with any model client, or with a stub in tests (no network).
"""

from __future__ import annotations

from collections.abc import Callable

SYSTEM_PROMPT = "You are a careful deployment assistant for the platform team. Answer briefly."


def answer(user_id: str, message: str, llm: Callable[[list[dict[str, str]]], str]) -> str:
    """Answer `message` from `user_id` with one model call and return the reply."""
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": message},
    ]
    reply = llm(messages)
    return reply.strip()
