"""LangChain integration: publish model turns to Reflexio with a callback handler, retrieve what it learned with a
retriever. Needs the `langchain` extra: `pip install 'reflexio-lake[langchain]'`.

    from reflexio_pipelines.integrations.langchain import ReflexioCallbackHandler, ReflexioRetriever

    handler = ReflexioCallbackHandler(agent_version="support-bot")
    chat.invoke(messages, config={"callbacks": [handler], "metadata": {"user_id": "alice"}})

    retriever = ReflexioRetriever(user_id="alice", agent_version="support-bot")
    docs = retriever.invoke("deploy the payments service")      # Documents for profiles and playbooks
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

try:
    from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import LLMResult
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # the base package works without the extra; only this module needs langchain-core
    raise ImportError(
        "reflexio_pipelines.integrations.langchain needs langchain-core: pip install 'reflexio-lake[langchain]'"
    ) from exc

from pydantic import ConfigDict, Field

from reflexio_pipelines.integrations.common import ConversationSessions, content_text, publish_quietly
from reflexio_pipelines.sdk import ReflexioClient, SearchResult

__all__ = ["ReflexioCallbackHandler", "ReflexioRetriever", "search_documents"]

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

    def __init__(self, client: ReflexioClient | None = None, *, user_id: str | None = None, agent_version: str = "",
                 session_id: str | None = None, source: str = "langchain") -> None:  # fmt: skip
        self.client = client if client is not None else ReflexioClient()
        self.user_id = user_id
        self.agent_version = agent_version
        self.session_id = session_id
        self.source = source
        self.sessions = ConversationSessions()
        # run id -> (per prompt: user message and tool calls, run metadata), from *_start until *_end / *_error
        self._runs: dict[UUID, tuple[list[tuple[str, list[dict[str, Any]]]], dict[str, Any]]] = {}

    def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
        """Remember each prompt's open turn until the run ends."""
        self._runs[run_id] = ([_open_turn(batch) for batch in messages], dict(metadata or {}))

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], *, run_id: UUID,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
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
        options = {"agent_version": _first(metadata, AGENT_VERSION_KEYS) or self.agent_version,
                   "session_id": session_id, "source": self.source}  # fmt: skip
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


_ENTITIES = (("profile", "profiles", "profile_id"), ("user_playbook", "user_playbooks", "user_playbook_id"),
             ("agent_playbook", "agent_playbooks", "agent_playbook_id"))  # fmt: skip


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
        result = self.client.search(query, user_id=self.user_id, agent_version=self.agent_version,
                                    playbook_name=self.playbook_name, top_k=self.top_k, threshold=self.threshold,
                                    search_mode=self.search_mode)  # fmt: skip
        return search_documents(result)
