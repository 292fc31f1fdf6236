"""`ReflexioHooks`: the two calls the integrate-reflexio skill wires into an agent's turn.

    _reflexio = ReflexioHooks(agent_version="support-bot")
    ...
    messages = _reflexio.inject(messages, user_message, user_id=user_id)   # before the model call
    reply = llm(messages)               # Anthropic: system=_reflexio.system(system, user_message, user_id=user_id)
    return _reflexio.after_turn(user_id, user_message, reply)               # when the turn ends

Both fail open: without Reflexio the agent answers exactly as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from reflexio_pipelines.integrations.common import (
    ConversationSessions,
    content_text,
    context_quietly,
    publish_quietly,
)
from reflexio_pipelines.sdk import ReflexioClient

T = TypeVar("T")


def with_context(messages: str | Sequence[Any], context: str) -> str | list[Any]:
    """`messages` with `context` added, keeping their type so the model call accepts them as before:

    - a list of `{"role", "content"}` dicts or LangChain messages: a copy with `context` appended to the leading
      system message (one is added when there is none); the caller's list and messages are not modified;
    - a plain prompt string: the string with `context` in front.

    `messages` is returned as it is when `context` is empty.
    """
    if not context:
        return messages if isinstance(messages, str) else list(messages)
    if isinstance(messages, str):
        return f"{context}\n\n{messages}"
    out = list(messages)
    first = out[0] if out else None
    if isinstance(first, Mapping) and first.get("role") == "system":
        out[0] = {**first, "content": f"{content_text(first.get('content'))}\n\n{context}"}
    elif getattr(first, "type", None) == "system" and hasattr(first, "model_copy"):  # a LangChain SystemMessage
        out[0] = first.model_copy(update={"content": f"{content_text(first.content)}\n\n{context}"})
    else:
        out.insert(0, {"role": "system", "content": context})
    return out


def reply_text(reply: Any) -> str:
    """The assistant text of a model reply: a string; a `{"content": …}` mapping; an object with `.content`
    (LangChain and Anthropic messages); an OpenAI / LiteLLM completion (`.choices[0].message`); an OpenAI
    Responses result (`.output_text`); otherwise its `str()`."""
    if isinstance(reply, str):
        return reply
    if choices := getattr(reply, "choices", None):
        reply = choices[0].message
    content = reply.get("content") if isinstance(reply, Mapping) else getattr(reply, "content", None)
    if content is None:
        content = getattr(reply, "output_text", None)
    return content_text(content) if content is not None else str(reply)


class ReflexioHooks:
    """Search-and-inject before the model call, publish after the turn, for one agent.

    client: default `ReflexioClient()` ($REFLEXIO_API_URL / $REFLEXIO_API_KEY). agent_version: published with each
    turn and used to scope playbook search. default_user_id: used when the agent has no user id of its own (default
    $REFLEXIO_USER_ID, else "default-user"). session_gap_s: the pause after which a user's next turn starts a new
    session, when the agent passes no session id (default 600 s, the service's session quiet period).
    """

    def __init__(
        self,
        client: ReflexioClient | None = None,
        *,
        agent_version: str = "",
        source: str = "agent",
        default_user_id: str | None = None,
        top_k: int = 5,
        max_chars: int = 4000,
        session_gap_s: float = 600.0,
    ) -> None:
        self.client = client if client is not None else ReflexioClient()
        self.agent_version = agent_version
        self.source = source
        self.default_user_id = default_user_id or os.environ.get("REFLEXIO_USER_ID") or "default-user"
        self.top_k = top_k
        self.max_chars = max_chars
        self.sessions = ConversationSessions(session_gap_s)

    def context(self, query: str, *, user_id: str | None = None) -> str:
        """The prompt block of what Reflexio learned that is relevant to `query`; "" when nothing or unreachable."""
        return context_quietly(
            self.client,
            query,
            user_id=user_id or self.default_user_id,
            agent_version=self.agent_version or None,
            top_k=self.top_k,
            max_chars=self.max_chars,
        )

    def inject(self, messages: str | Sequence[Any], query: str, *, user_id: str | None = None) -> str | list[Any]:
        """`messages` with what Reflexio learned that is relevant to `query` added to the system prompt (see
        `with_context`)."""
        return with_context(messages, self.context(query, user_id=user_id))

    def system(self, system: Any, query: str, *, user_id: str | None = None) -> str:
        """A system prompt (text or content blocks, as Anthropic's `system=` takes) with what Reflexio learned that
        is relevant to `query` appended."""
        text = content_text(system)
        context = self.context(query, user_id=user_id)
        return f"{text}\n\n{context}" if text and context else text or context

    def after_turn(
        self,
        user_id: str | None,
        user_message: str,
        reply: T,
        *,
        tools_used: list[dict[str, Any]] | None = None,
        session_id: str | None = None,
    ) -> T:
        """Publish the finished turn (the user's message verbatim, the reply with the tools it used — keep each
        tool's exact error text in `tool_data["error"]`) and return `reply` unchanged. Without `session_id` the
        turn joins the user's current conversation (see `ConversationSessions`)."""
        turns: list[dict[str, Any]] = [{"role": "user", "content": user_message}] if user_message.strip() else []
        assistant: dict[str, Any] = {"role": "assistant", "content": reply_text(reply)}
        if tools_used:
            assistant["tools_used"] = tools_used
        if assistant["content"].strip() or tools_used:  # the service rejects a turn with neither
            turns.append(assistant)
        user = user_id or self.default_user_id
        publish_quietly(
            self.client,
            user,
            turns,
            agent_version=self.agent_version,
            session_id=session_id or self.sessions.session_for(user),
            source=self.source,
        )
        return reply
