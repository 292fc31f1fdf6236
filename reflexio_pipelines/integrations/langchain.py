"""LangChain integration: a chat-model wrapper that puts what Reflexio learned into the system prompt and publishes
each exchange; a callback handler that only publishes; a retriever for what was learned. Needs the `langchain` extra:
`pip install 'reflexio-lake[langchain]'`.

    from reflexio_pipelines.integrations.langchain import ReflexioCallbackHandler, ReflexioChatModel, ReflexioRetriever

    chat = ReflexioChatModel(ChatOpenAI(model="gpt-4o-mini"), ReflexioClient(), user_id="alice")
    chat.invoke(messages)                    # learned context in the system prompt, the exchange published after

    handler = ReflexioCallbackHandler(agent_version="support-bot")
    chat.invoke(messages, config={"callbacks": [handler], "metadata": {"user_id": "alice"}})

    retriever = ReflexioRetriever(user_id="alice", agent_version="support-bot")
    docs = retriever.invoke("deploy the payments service")      # Documents for profiles and playbooks
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        BaseCallbackHandler,
        CallbackManagerForLLMRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult, LLMResult
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import Runnable
except ImportError as exc:  # the base package works without the extra; only this module needs langchain-core
    raise ImportError(
        "reflexio_pipelines.integrations.langchain needs langchain-core: pip install 'reflexio-lake[langchain]'"
    ) from exc

from pydantic import ConfigDict, Field, PrivateAttr

from reflexio_pipelines.integrations.common import (
    ConversationSessions,
    acontext_quietly,
    apublish_quietly,
    content_text,
    context_quietly,
    publish_quietly,
)
from reflexio_pipelines.sdk import AsyncReflexioClient, ReflexioClient, SearchResult

__all__ = ["ReflexioCallbackHandler", "ReflexioChatModel", "ReflexioRetriever", "search_documents"]

#: Run-metadata keys read by the handler, first match wins (LangGraph puts `thread_id` into run metadata).
USER_KEYS = ("reflexio_user_id", "user_id")
AGENT_VERSION_KEYS = ("reflexio_agent_version", "agent_version")
SESSION_KEYS = ("reflexio_session_id", "session_id", "thread_id")


def _first(metadata: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((str(metadata[k]) for k in keys if metadata.get(k)), None)


def _open_turn(messages: Sequence[BaseMessage]) -> tuple[str, list[dict[str, Any]]]:
    """(the last user message, the tool calls made since it) of a model input. Tool calls carry their arguments
    as `input` and their result as `output`, or — for a ToolMessage with status "error" — as `error`, verbatim."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=None)
    if start is None:
        return "", []
    tools: dict[str, dict[str, Any]] = {}
    for message in messages[start + 1 :]:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                tool = {"tool_name": call["name"], "tool_data": {"input": call["args"]}}
                tools[call.get("id") or call["name"]] = tool
        elif isinstance(message, ToolMessage):
            tool = tools.setdefault(message.tool_call_id, {"tool_name": message.name or "tool", "tool_data": {}})
            tool["tool_data"]["error" if message.status == "error" else "output"] = content_text(message.content)
    return content_text(messages[start].content), list(tools.values())


class ReflexioCallbackHandler(BaseCallbackHandler):
    """Publishes every finished chat-model (or LLM) run to Reflexio as one batch: the user's last message and the
    model's reply, the reply carrying the tool calls made since that message.

    A reply that requests tool calls is not the end of the turn and is not published; the final answer of the
    tool loop is. For plain LLMs the prompt string is the user turn. The user id, agent version and session come
    from the run metadata (`reflexio_user_id` / `user_id`, `reflexio_agent_version` / `agent_version`,
    `reflexio_session_id` / `session_id` / `thread_id`), else from the constructor; without a session id a user's
    turns form one session until a 10-minute pause (`ConversationSessions`); without a user id nothing is
    published. A Reflexio failure is logged and never reaches the chain.
    """

    def __init__(
        self,
        client: ReflexioClient | None = None,
        *,
        user_id: str | None = None,
        agent_version: str = "",
        session_id: str | None = None,
        source: str = "langchain",
    ) -> None:
        self.client = client if client is not None else ReflexioClient()
        self.user_id = user_id
        self.agent_version = agent_version
        self.session_id = session_id
        self.source = source
        self.sessions = ConversationSessions()
        # run id -> (per prompt: user message and tool calls, run metadata), from *_start until *_end / *_error
        self._runs: dict[UUID, tuple[list[tuple[str, list[dict[str, Any]]]], dict[str, Any]]] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember each prompt's open turn until the run ends."""
        self._runs[run_id] = ([_open_turn(batch) for batch in messages], dict(metadata or {}))

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember each prompt (as the user turn) until the run ends."""
        self._runs[run_id] = ([(prompt, []) for prompt in prompts], dict(metadata or {}))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Publish each prompt's user turn with its reply, unless the reply asks for tools."""
        pending = self._runs.pop(run_id, None)
        if pending is None:
            return
        turns, metadata = pending
        user_id = _first(metadata, USER_KEYS) or self.user_id
        session_id = _first(metadata, SESSION_KEYS) or self.session_id
        if user_id and not session_id:
            session_id = self.sessions.session_for(user_id)
        options = {
            "agent_version": _first(metadata, AGENT_VERSION_KEYS) or self.agent_version,
            "session_id": session_id,
            "source": self.source,
        }
        for (user_text, tools), generations in zip(turns, response.generations):
            if not generations:
                continue
            reply = getattr(generations[0], "message", None)
            if isinstance(reply, AIMessage) and reply.tool_calls:
                continue  # the model asked for tools: the turn goes on
            interactions: list[dict[str, Any]] = [{"role": "user", "content": user_text}] if user_text else []
            assistant: dict[str, Any] = {"role": "assistant", "content": generations[0].text}
            if tools:
                assistant["tools_used"] = tools
            if assistant["content"] or tools:
                interactions.append(assistant)
            publish_quietly(self.client, user_id, interactions, **options)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the failed run (nothing is published)."""
        self._runs.pop(run_id, None)


_ENTITIES = (
    ("profile", "profiles", "profile_id"),
    ("user_playbook", "user_playbooks", "user_playbook_id"),
    ("agent_playbook", "agent_playbooks", "agent_playbook_id"),
)


def search_documents(result: SearchResult) -> list[Document]:
    """A search result as Documents: profiles, then user playbooks, then agent playbooks, each in rank order.
    `page_content` is the item's content; metadata has `entity_type`, `id`, `rank` and the item's scalar fields
    (trigger, rationale, user_id, agent_version, playbook_name, status, playbook_status, …)."""
    documents = []
    for entity, field, id_key in _ENTITIES:
        for rank, item in enumerate(getattr(result, field)):
            data = item.model_dump()
            metadata = {k: v for k, v in data.items() if k != "content" and isinstance(v, str | int | float | bool)}
            metadata.update(entity_type=entity, id=str(data[id_key]), rank=rank)
            documents.append(Document(page_content=item.content, metadata=metadata, id=f"{entity}:{data[id_key]}"))
    return documents


#: The retriever's fields that are `ReflexioClient.search` arguments.
SEARCH_OPTIONS = {"user_id", "agent_version", "playbook_name", "top_k", "threshold", "search_mode"}


class ReflexioRetriever(BaseRetriever):
    """Retrieves what Reflexio learned (profiles only with a `user_id`, user playbooks, agent playbooks) for a
    query, through the SDK's hybrid search. Errors are raised, as from any retriever (use `with_fallbacks` to
    tolerate an unreachable service)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: ReflexioClient = Field(default_factory=ReflexioClient, exclude=True)
    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    top_k: int = 5
    threshold: float = 0.3
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return search_documents(self.client.search(query, **self.model_dump(include=SEARCH_OPTIONS)))


# --- the chat-model wrapper ---------------------------------------------------------------------------------------


def _last_human_text(messages: Sequence[BaseMessage]) -> str:
    return next((content_text(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def with_system_context(messages: Sequence[BaseMessage], context: str) -> list[BaseMessage]:
    """A copy of `messages` with `context` appended to the leading system message (a text block is added to a
    system message made of content blocks), or with a system message of its own in front when there is none."""
    out = list(messages)
    if not context:
        return out
    if out and isinstance(out[0], SystemMessage):
        content = out[0].content
        block = {"type": "text", "text": context}
        merged = f"{content}\n\n{context}" if isinstance(content, str) else [*content, block]
        out[0] = out[0].model_copy(update={"content": merged})
    else:
        out.insert(0, SystemMessage(context))
    return out


def exchange_interactions(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Chat messages as Reflexio interactions: user messages as they are; each assistant answer that ends a turn
    (one without tool calls) with the tool calls made since the previous user message as `tools_used` (arguments as
    `input`, the result as `output`, or — a ToolMessage with status "error" — as `error`, verbatim). System messages
    and the text of assistant messages that request tools are left out."""
    interactions: list[dict[str, Any]] = []
    tools: dict[str, dict[str, Any]] = {}

    def answer(text: str) -> None:
        entry: dict[str, Any] = {"role": "assistant", "content": text}
        if tools:
            entry["tools_used"] = list(tools.values())
            tools.clear()
        if text.strip() or entry.get("tools_used"):
            interactions.append(entry)

    for message in messages:
        if isinstance(message, HumanMessage):
            if tools:  # the user spoke before the tool loop produced an answer
                answer("")
            if text := content_text(message.content).strip():
                interactions.append({"role": "user", "content": text})
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:
                tools[call.get("id") or call["name"]] = {
                    "tool_name": call["name"],
                    "tool_data": {"input": call["args"]},
                }
            if not message.tool_calls:
                answer(content_text(message.content))
        elif isinstance(message, ToolMessage):
            tool = tools.setdefault(message.tool_call_id, {"tool_name": message.name or "tool", "tool_data": {}})
            tool["tool_data"]["error" if message.status == "error" else "output"] = content_text(message.content)
    if tools:
        answer("")
    return interactions


class ReflexioChatModel(BaseChatModel):
    """Any LangChain chat model, with what Reflexio learned in its system prompt and every exchange published.

        chat = ReflexioChatModel(llm, client, user_id="alice", agent_version="support-bot")
        chat.invoke([SystemMessage("You are ..."), HumanMessage("Deploy the billing service")])

    Before each call it searches Reflexio with the last user message (`client.context()`: the user's corrections,
    facts about them, rules shared across users) and appends the block to the leading system message (or adds one);
    then it calls `llm` — `invoke`, `stream`, `ainvoke`, `astream`, `batch` all work, streaming token by token.
    After the reply it publishes the exchange: the part of the conversation it has not published yet (the user's
    message and the reply; the first time, or when the history comes from elsewhere, from the user message before
    the last assistant message on, so a correction is read together with the answer it corrects), with tool calls and
    their exact error strings as `tools_used`. A reply that requests tools is not the end of the turn and is not
    published; the answer after the tool results is.

    `user_id`, `agent_version` and `session_id` come from the constructor; on `invoke` / `ainvoke` / `batch` the run
    metadata keys the callback handler reads (`user_id`, `thread_id`, …) override them. Without a session id a user's
    exchanges form one session until a 10-minute pause. Without a user id the context holds only rules shared across
    users and nothing is published. `client` (default `ReflexioClient()`) serves the sync calls; `async_client`, an
    `AsyncReflexioClient`, the async ones (without it they use `client` in a worker thread). Reflexio being down or
    rejecting a call never changes the model's answer: the failure is logged and the call goes on without it.
    `bind_tools()` binds the tools to the wrapped model and keeps the wrapper around it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Runnable
    client: ReflexioClient = Field(default_factory=ReflexioClient, exclude=True)
    async_client: AsyncReflexioClient | None = Field(default=None, exclude=True)
    user_id: str | None = None
    agent_version: str = ""
    session_id: str | None = None
    source: str = "langchain"
    top_k: int = 5
    max_chars: int = 4000

    _sessions: ConversationSessions = PrivateAttr(default_factory=ConversationSessions)
    # session id -> the text of the last reply this model published in it (where the unpublished part starts)
    _published: dict[str, str] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, llm: Runnable | None = None, client: ReflexioClient | None = None, **kwargs: Any) -> None:
        if llm is not None:
            kwargs["llm"] = llm
        if client is not None:
            kwargs["client"] = client
        super().__init__(**kwargs)

    @property
    def _llm_type(self) -> str:
        return "reflexio-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        inner = getattr(self.llm, "_identifying_params", None)
        return {"llm": inner if isinstance(inner, dict) else repr(self.llm), "agent_version": self.agent_version}

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ReflexioChatModel:
        """The wrapper around `llm.bind_tools(tools, **kwargs)`."""
        return self.model_copy(update={"llm": self.llm.bind_tools(tools, **kwargs)})

    # -- per call ---------------------------------------------------------------------------------------------------

    def _scope(self, run_manager: Any) -> tuple[str | None, str, str | None]:
        """(user id, agent version, session id) of this call: run metadata first, then the constructor."""
        metadata = getattr(run_manager, "metadata", None) or {}
        user_id = _first(metadata, USER_KEYS) or self.user_id
        agent_version = _first(metadata, AGENT_VERSION_KEYS) or self.agent_version
        session_id = _first(metadata, SESSION_KEYS) or self.session_id
        if user_id and not session_id:
            session_id = self._sessions.session_for(user_id)
        return user_id, agent_version, session_id

    def _context_options(self, user_id: str | None, agent_version: str) -> dict[str, Any]:
        return {
            "user_id": user_id,
            "agent_version": agent_version or None,
            "top_k": self.top_k,
            "max_chars": self.max_chars,
        }

    def _exchange(self, session_id: str | None, messages: Sequence[BaseMessage], reply: AIMessage) -> list[dict]:
        """The interactions to publish for `reply` to `messages`, or [] when the reply requests tools."""
        if reply.tool_calls:
            return []
        key = session_id or ""
        with self._lock:
            last = self._published.get(key)
            self._published[key] = content_text(reply.content)
        assistant = [i for i, m in enumerate(messages) if isinstance(m, AIMessage)]
        start = None
        if last is not None:  # after the last reply this model published in the session
            start = next((i + 1 for i in reversed(assistant) if content_text(messages[i].content) == last), None)
        if start is None:  # from the user message before the last assistant message, else the last user message
            humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
            before = [i for i in humans if assistant and i < assistant[-1]]
            start = before[-1] if before else (humans[-1] if humans else len(messages))
        return exchange_interactions([*messages[start:], reply])

    def _publish_options(self, agent_version: str, session_id: str | None) -> dict[str, Any]:
        return {"agent_version": agent_version, "session_id": session_id, "source": self.source}

    def _publish(
        self, scope: tuple[str | None, str, str | None], messages: Sequence[BaseMessage], reply: AIMessage
    ) -> None:
        user_id, agent_version, session_id = scope
        if user_id and (interactions := self._exchange(session_id, messages, reply)):
            publish_quietly(self.client, user_id, interactions, **self._publish_options(agent_version, session_id))

    async def _apublish(
        self, scope: tuple[str | None, str, str | None], messages: Sequence[BaseMessage], reply: AIMessage
    ) -> None:
        user_id, agent_version, session_id = scope
        if not user_id or not (interactions := self._exchange(session_id, messages, reply)):
            return
        options = self._publish_options(agent_version, session_id)
        if self.async_client is not None:
            await apublish_quietly(self.async_client, user_id, interactions, **options)
        else:
            await asyncio.to_thread(publish_quietly, self.client, user_id, interactions, **options)

    def _prepare(self, messages: list[BaseMessage], run_manager: Any) -> tuple[tuple, list[BaseMessage]]:
        scope = self._scope(run_manager)
        context = context_quietly(self.client, _last_human_text(messages), **self._context_options(*scope[:2]))
        return scope, with_system_context(messages, context)

    async def _aprepare(self, messages: list[BaseMessage], run_manager: Any) -> tuple[tuple, list[BaseMessage]]:
        scope = self._scope(run_manager)
        query, options = _last_human_text(messages), self._context_options(*scope[:2])
        if self.async_client is not None:
            context = await acontext_quietly(self.async_client, query, **options)
        else:
            context = await asyncio.to_thread(context_quietly, self.client, query, **options)
        return scope, with_system_context(messages, context)

    # -- BaseChatModel ----------------------------------------------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        scope, prompt = self._prepare(messages, run_manager)
        reply = self.llm.invoke(prompt, stop=stop, **kwargs)
        self._publish(scope, messages, reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        scope, prompt = await self._aprepare(messages, run_manager)
        reply = await self.llm.ainvoke(prompt, stop=stop, **kwargs)
        await self._apublish(scope, messages, reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        scope, prompt = self._prepare(messages, run_manager)
        reply: AIMessageChunk | None = None
        for chunk in self.llm.stream(prompt, stop=stop, **kwargs):
            reply = chunk if reply is None else reply + chunk
            generation = ChatGenerationChunk(message=chunk)
            if run_manager is not None:
                run_manager.on_llm_new_token(chunk.text, chunk=generation)
            yield generation
        if reply is not None:
            self._publish(scope, messages, reply)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        scope, prompt = await self._aprepare(messages, run_manager)
        reply: AIMessageChunk | None = None
        async for chunk in self.llm.astream(prompt, stop=stop, **kwargs):
            reply = chunk if reply is None else reply + chunk
            generation = ChatGenerationChunk(message=chunk)
            if run_manager is not None:
                await run_manager.on_llm_new_token(chunk.text, chunk=generation)
            yield generation
        if reply is not None:
            await self._apublish(scope, messages, reply)
