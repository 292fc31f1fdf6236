"""What the Python integrations share: chat messages -> Reflexio interactions, and SDK calls that fail open.

Reflexio is an add-on to the host framework's call (mem0's add, a LangChain model run, an agent's turn): when the
service is unreachable or rejects a publish, the integration logs a warning and the host's call goes on unchanged.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from reflexio_pipelines.sdk import AsyncReflexioClient, PublishResult, ReflexioClient

log = logging.getLogger("reflexio_pipelines.integrations")


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)  # dicts or SDK blocks
    return text if isinstance(text, str) else ""


def content_text(content: Any) -> str:
    """The text of a chat message's content: a string, or a list of content parts (plain strings, `{"type":
    "text", "text": …}` dicts or SDK block objects with `.text`) whose texts are joined by newlines; else ""."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text for text in map(_part_text, content) if text)
    return ""


def interactions_from_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style `{"role", "content"}` messages as Reflexio interactions. System messages are configuration, not
    conversation, and messages without text are skipped."""
    interactions = []
    for message in messages:
        role = str(message.get("role") or "user")
        text = content_text(message.get("content"))
        if role != "system" and text.strip():
            interactions.append({"role": role, "content": text})
    return interactions


class ConversationSessions:
    """Session ids for turns a host publishes without one: a user's turns belong to one session until they pause
    for longer than `gap_s` (default 600 s, the service's session quiet period).

    Reflexio reads a correction together with the answer it corrects only within one session (else one request),
    so hosts that publish turn by turn without a conversation id would otherwise never teach a correction.
    """

    def __init__(self, gap_s: float = 600.0) -> None:
        self.gap_s = gap_s
        self._current: dict[str, tuple[str, float]] = {}  # user id -> (session id, time of the user's last turn)
        self._lock = threading.Lock()  # hosts serve several users from threads

    def session_for(self, user_id: str) -> str:
        """The user's current session id; a new one after a pause longer than `gap_s`."""
        now = time.monotonic()
        with self._lock:
            session, last = self._current.get(user_id, ("", float("-inf")))
            if now - last > self.gap_s:
                session = uuid.uuid4().hex  # not derived from the user id, which may use the id's whole length
                # forget users whose sessions ended, so a long-running host does not accumulate them
                self._current = {u: v for u, v in self._current.items() if now - v[1] <= self.gap_s}
            self._current[user_id] = (session, now)
            return session


def _nothing_to_publish(user_id: str | None, interactions: list[dict[str, Any]]) -> bool:
    """True (and a debug line saying why) when a publish has no user or no turns: it is skipped, not sent."""
    reason = "no user id" if not user_id else "no conversation turns" if not interactions else None
    if reason:
        log.debug("Reflexio publish skipped: %s", reason)
    return reason is not None


@contextmanager
def _failing_open(consequence: str) -> Iterator[None]:
    """Any failure inside (SDK error, bad input, bug) is logged with its `consequence` and stays out of the host's
    call, which goes on without Reflexio."""
    try:
        yield
    except Exception as exc:
        log.warning("Reflexio %s: %s: %s", consequence, type(exc).__name__, exc)


PUBLISH_FAILED = "publish failed, the turn was not recorded"
#: An agent answers without learned context rather than not at all.
CONTEXT_FAILED = "context unavailable, answering without it"


def publish_quietly(
    client: ReflexioClient, user_id: str | None, interactions: list[dict[str, Any]], **options: Any
) -> PublishResult | None:
    """`client.publish(user_id, interactions, **options)`; None (and a log line) when skipped or failed."""
    if not _nothing_to_publish(user_id, interactions):
        with _failing_open(PUBLISH_FAILED):
            return client.publish(user_id, interactions, **options)
    return None


async def apublish_quietly(
    client: AsyncReflexioClient, user_id: str | None, interactions: list[dict[str, Any]], **options: Any
) -> PublishResult | None:
    """The asyncio twin of `publish_quietly`."""
    if not _nothing_to_publish(user_id, interactions):
        with _failing_open(PUBLISH_FAILED):
            return await client.publish(user_id, interactions, **options)
    return None


def context_quietly(client: ReflexioClient, query: str, **options: Any) -> str:
    """`client.context(query, **options)`: the prompt block of what was learned; "" when nothing or on failure."""
    if query.strip():
        with _failing_open(CONTEXT_FAILED):
            return client.context(query[:4096], **options)  # the service caps queries at 4096 characters
    return ""


async def acontext_quietly(client: AsyncReflexioClient, query: str, **options: Any) -> str:
    """The asyncio twin of `context_quietly`."""
    if query.strip():
        with _failing_open(CONTEXT_FAILED):
            return await client.context(query[:4096], **options)
    return ""
