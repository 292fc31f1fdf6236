"""Drop-in replacements for mem0's classes that also publish every `add()` to Reflexio: the self-hosted `Memory` /
`AsyncMemory` (mem0's own LLM, embedder and vector store) and the platform clients `MemoryClient` /
`AsyncMemoryClient`.

    from reflexio_pipelines.integrations.mem0 import Memory         # instead of: from mem0 import Memory

    memory = Memory.from_config(config)                              # mem0's config; + reflexio=ReflexioClient(...)
    memory.add(messages, user_id="alice", agent_id="support-bot")   # mem0 as before, and Reflexio learns from it

They are subclasses of mem0's classes: every method, argument, return value and exception is mem0's own, and mem0
stores its memories as it always does. `add()` additionally publishes the conversation (system messages left out)
after mem0 accepted it: `user_id` → the Reflexio user, `agent_id` → agent version, `run_id` → session (without
one, a user's adds form one session until a 10-minute pause); they are read from the keyword arguments or (platform
clients) from `filters` / `options.filters`, as mem0 accepts them. Without a user id nothing is published. A
Reflexio failure is logged as a warning and never changes the result of the mem0 call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

try:
    from mem0 import AsyncMemory as _Mem0AsyncMemory
    from mem0 import AsyncMemoryClient as _Mem0AsyncMemoryClient
    from mem0 import Memory as _Mem0Memory
    from mem0 import MemoryClient as _Mem0MemoryClient
    from mem0.configs.base import MemoryConfig
except ImportError as exc:  # the base package works without the extra; only this module needs mem0ai
    raise ImportError("reflexio_pipelines.integrations.mem0 needs mem0ai: pip install 'reflexio-lake[mem0]'") from exc

import httpx

from reflexio_pipelines.integrations.common import (
    ConversationSessions,
    apublish_quietly,
    interactions_from_messages,
    publish_quietly,
)
from reflexio_pipelines.sdk import AsyncReflexioClient, ReflexioClient

__all__ = ["AsyncMemory", "AsyncMemoryClient", "Memory", "MemoryClient"]

SOURCE = "mem0"


def _as_message_list(messages: Any) -> list[Mapping[str, Any]]:
    """mem0's accepted forms (a string, one message dict, a list of them) as a list of message dicts."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping):
        return [messages]
    return [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []


def _publish_options(
    options: Any, kwargs: Mapping[str, Any], sessions: ConversationSessions
) -> tuple[str | None, dict[str, Any]]:
    """(user id, publish keyword arguments) from an `add()` call's `options` and keyword arguments; without a
    `run_id` the user's current conversation is the session."""
    merged = {**(options.model_dump(exclude_unset=True) if options is not None else {}), **kwargs}
    filters = merged.get("filters") or {}

    def entity(key: str) -> str | None:
        value = merged.get(key) or filters.get(key)
        return str(value) if value else None

    user_id = entity("user_id")
    session_id = entity("run_id") or (sessions.session_for(user_id) if user_id else None)
    return user_id, {"agent_version": entity("agent_id") or "", "session_id": session_id, "source": SOURCE}


class _Publishing:
    """What the four classes add to mem0's: the Reflexio client they publish with (closed with them when they made
    it) and the sessions of the turns they publish without a `run_id`."""

    def _attach_reflexio(self, reflexio: Any, make: Callable[[], Any]) -> None:
        self._owns_reflexio = reflexio is None
        self.reflexio = reflexio if reflexio is not None else make()
        self.reflexio_sessions = ConversationSessions()

    def _publication(
        self, messages: Any, options: Any, kwargs: Mapping[str, Any]
    ) -> tuple[str | None, list[dict[str, Any]], dict[str, Any]]:
        """(user id, turns, publish keyword arguments) of an `add()` call."""
        user_id, publish_kwargs = _publish_options(options, kwargs, self.reflexio_sessions)
        return user_id, interactions_from_messages(_as_message_list(messages)), publish_kwargs


class MemoryClient(_Mem0MemoryClient, _Publishing):
    """mem0's `MemoryClient`, whose `add()` also publishes the conversation to Reflexio.

    Arguments are mem0's, plus `reflexio`: the Reflexio client to publish with (default `ReflexioClient()`, i.e.
    $REFLEXIO_API_URL / $REFLEXIO_API_KEY).
    """

    def __init__(
        self,
        api_key: str | None = None,
        host: str | None = None,
        client: httpx.Client | None = None,
        *,
        reflexio: ReflexioClient | None = None,
    ) -> None:
        super().__init__(api_key=api_key, host=host, client=client)
        self._attach_reflexio(reflexio, ReflexioClient)

    @functools.wraps(_Mem0MemoryClient.add)
    def add(self, messages: Any, options: Any = None, **kwargs: Any) -> dict[str, Any]:
        result = super().add(messages, options, **kwargs)
        user_id, turns, publish_kwargs = self._publication(messages, options, kwargs)
        publish_quietly(self.reflexio, user_id, turns, **publish_kwargs)
        return result


class AsyncMemoryClient(_Mem0AsyncMemoryClient, _Publishing):
    """mem0's `AsyncMemoryClient`, whose `add()` also publishes the conversation to Reflexio.

    Arguments are mem0's, plus `reflexio`: an `AsyncReflexioClient` (default `AsyncReflexioClient()`). Leaving
    `async with` closes mem0's connection pool and the Reflexio client this object created (not one passed in).
    """

    def __init__(
        self,
        api_key: str | None = None,
        host: str | None = None,
        client: httpx.AsyncClient | None = None,
        *,
        reflexio: AsyncReflexioClient | None = None,
    ) -> None:
        super().__init__(api_key=api_key, host=host, client=client)
        self._attach_reflexio(reflexio, AsyncReflexioClient)

    @functools.wraps(_Mem0AsyncMemoryClient.add)
    async def add(self, messages: Any, options: Any = None, **kwargs: Any) -> dict[str, Any]:
        result = await super().add(messages, options, **kwargs)
        user_id, turns, publish_kwargs = self._publication(messages, options, kwargs)
        await apublish_quietly(self.reflexio, user_id, turns, **publish_kwargs)
        return result

    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        await super().__aexit__(exc_type, exc_val, exc_tb)
        if self._owns_reflexio:
            await self.reflexio.aclose()


class Memory(_Mem0Memory, _Publishing):
    """mem0's self-hosted `Memory` (its own LLM, embedder, vector store and history database), whose `add()` also
    publishes the conversation to Reflexio once mem0 stored it.

    Arguments are mem0's (`Memory(config)`, `Memory.from_config(config_dict)`), plus `reflexio`: the Reflexio client
    to publish with (default `ReflexioClient()`, i.e. $REFLEXIO_API_URL / $REFLEXIO_API_KEY). `close()` (and leaving
    `with`) also closes the Reflexio client this object created (not one passed in).
    """

    def __init__(self, config: MemoryConfig | None = None, *, reflexio: ReflexioClient | None = None) -> None:
        super().__init__(config if config is not None else MemoryConfig())
        self._attach_reflexio(reflexio, ReflexioClient)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any], *, reflexio: ReflexioClient | None = None) -> Memory:
        """mem0's `Memory.from_config` (the same validation errors), plus `reflexio` (see the class)."""
        return cls(MemoryConfig(**config_dict), reflexio=reflexio)

    @functools.wraps(_Mem0Memory.add)
    def add(self, messages: Any, **kwargs: Any) -> dict[str, Any]:
        result = super().add(messages, **kwargs)
        user_id, turns, publish_kwargs = self._publication(messages, None, kwargs)
        publish_quietly(self.reflexio, user_id, turns, **publish_kwargs)
        return result

    def close(self) -> None:
        super().close()
        if getattr(self, "_owns_reflexio", False):
            self.reflexio.close()


class AsyncMemory(_Mem0AsyncMemory, _Publishing):
    """mem0's self-hosted `AsyncMemory`, whose `add()` also publishes the conversation to Reflexio once mem0 stored it.

    Arguments are mem0's, plus `reflexio`: an `AsyncReflexioClient` (default `AsyncReflexioClient()`). Leaving
    `async with` also closes the Reflexio client this object created (not one passed in).
    """

    def __init__(self, config: MemoryConfig | None = None, *, reflexio: AsyncReflexioClient | None = None) -> None:
        super().__init__(config if config is not None else MemoryConfig())
        self._attach_reflexio(reflexio, AsyncReflexioClient)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any], *, reflexio: AsyncReflexioClient | None = None) -> AsyncMemory:
        """mem0's `AsyncMemory.from_config` (the same validation errors), plus `reflexio` (see the class)."""
        return cls(MemoryConfig(**config_dict), reflexio=reflexio)

    @functools.wraps(_Mem0AsyncMemory.add)
    async def add(self, messages: Any, **kwargs: Any) -> dict[str, Any]:
        result = await super().add(messages, **kwargs)
        user_id, turns, publish_kwargs = self._publication(messages, None, kwargs)
        await apublish_quietly(self.reflexio, user_id, turns, **publish_kwargs)
        return result

    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        result = await super().__aexit__(exc_type, exc_val, exc_tb)
        if self._owns_reflexio:
            await self.reflexio.aclose()
        return result
