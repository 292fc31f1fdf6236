"""The LangChain integration (reflexio_pipelines.integrations.langchain) with langchain-core's fake models and the
real Reflexio service on 127.0.0.1: the callback handler publishes finished turns, the retriever returns what the
pipeline learned from them, and `ReflexioChatModel` around a fake chat model puts the rule learned from one exchange
into the system prompt of the next call (invoke, stream, ainvoke, astream)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import FakeListLLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from reflexio_pipelines.integrations.langchain import ReflexioCallbackHandler, ReflexioChatModel, ReflexioRetriever
from reflexio_pipelines.runs import launch
from reflexio_pipelines.sdk import AsyncReflexioClient, ReflexioClient
from serving.app import create_app
from tests.support.landing import landed_turns
from tests.support.lessons import served_rule_lines
from tests.support.processes import free_port
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

TOOL_ERROR = "403 Forbidden: token lacks the issues:write scope for repo infra"


@pytest.fixture
def reflexio(settings, instance):
    app = create_app(settings)
    with serve_app(app) as url:
        yield app, ReflexioClient(base_url=url)


def landed(settings, user_id: str) -> list[tuple]:
    return landed_turns(settings.lake, user_id, "role, content, tools_used, agent_version, session_id, source")


def test_handler_publishes_turns_and_retriever_returns_what_was_learned(reflexio, settings, instance):
    service, client = reflexio
    handler = ReflexioCallbackHandler(client, agent_version="lc-agent")
    model = GenericFakeChatModel(
        messages=iter(
            [
                "Sure. I'll deploy the payments service to production in us-east-1 now.",
                "Understood. Deploying the payments service to us-west-2 instead.",
                AIMessage("", tool_calls=[{"name": "create_issue", "args": {"repo": "infra"}, "id": "call-1"}]),
                "I tried to open the ticket but the tracker rejected the request.",
            ]
        )
    )
    config = {"callbacks": [handler], "metadata": {"user_id": "dana-lc", "thread_id": "thread-1"}}
    history = [SystemMessage("You are a deployment assistant.")]
    for text in (
        "Please deploy the payments service to production.",
        "No — we never deploy to us-east-1, always use us-west-2.",
    ):
        history.append(HumanMessage(text))
        history.append(model.invoke(history, config=config))
    # a tool loop: the tool-call request is not the end of the turn; the final answer is
    history.append(HumanMessage("Open a ticket in the infra repo about the flaky backup job."))
    history.append(model.invoke(history, config=config))
    history.append(ToolMessage(TOOL_ERROR, tool_call_id="call-1", status="error"))
    model.invoke(history, config=config)

    rows = landed(settings, "dana-lc")
    assert [(r[0], r[1]) for r in rows] == [
        ("user", "Please deploy the payments service to production."),
        ("assistant", "Sure. I'll deploy the payments service to production in us-east-1 now."),
        ("user", "No — we never deploy to us-east-1, always use us-west-2."),
        ("assistant", "Understood. Deploying the payments service to us-west-2 instead."),
        ("user", "Open a ticket in the infra repo about the flaky backup job."),
        ("assistant", "I tried to open the ticket but the tracker rejected the request."),
    ]
    assert {(r[3], r[4], r[5]) for r in rows} == {("lc-agent", "thread-1", "langchain")}
    assert json.loads(rows[5][2]) == [
        {"tool_name": "create_issue", "tool_data": {"input": {"repo": "infra"}, "error": TOOL_ERROR}}
    ]
    assert not handler._runs  # nothing left pending

    launch(settings=settings, instance=instance)
    service.state.svc.index.refresh()
    retriever = ReflexioRetriever(client=client, user_id="dana-lc", agent_version="lc-agent")
    docs = retriever.invoke("Deploy the payments service to production")
    rules = [d for d in docs if d.metadata["entity_type"] == "user_playbook"]
    assert rules and "us-west-2" in rules[0].page_content, docs
    top = rules[0]
    assert top.id == f"user_playbook:{top.metadata['id']}" and int(top.metadata["id"])
    assert top.metadata["user_id"] == "dana-lc" and top.metadata["agent_version"] == "lc-agent"
    assert top.metadata["rank"] == 0 and top.metadata["trigger"]


def test_plain_llm_prompt_is_the_user_turn(reflexio, settings):
    _, client = reflexio
    handler = ReflexioCallbackHandler(client, user_id="erin-lc", agent_version="lc-agent", session_id="s-9")
    llm = FakeListLLM(responses=["Reports are scheduled for 08:00 CET."])
    assert (
        llm.invoke("My timezone is CET, so schedule reports for 8am my time.", config={"callbacks": [handler]})
        == "Reports are scheduled for 08:00 CET."
    )
    assert [(r[0], r[1], r[4]) for r in landed(settings, "erin-lc")] == [
        ("user", "My timezone is CET, so schedule reports for 8am my time.", "s-9"),
        ("assistant", "Reports are scheduled for 08:00 CET.", "s-9"),
    ]


def test_reflexio_failure_never_breaks_the_chain(caplog):
    down = ReflexioClient(base_url=f"http://127.0.0.1:{free_port()}", max_retries=0)  # nothing listens there
    model = GenericFakeChatModel(messages=iter(["Hello!"]))
    with caplog.at_level(logging.WARNING, logger="reflexio_pipelines.integrations"):
        reply = model.invoke([HumanMessage("Hi")], config={"callbacks": [ReflexioCallbackHandler(down, user_id="u")]})
    assert reply.content == "Hello!"
    assert "Reflexio publish failed" in caplog.text


def test_the_base_package_works_without_langchain():
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import reflexio_pipelines.integrations, reflexio_pipelines.integrations.wiring\n"
        "try:\n    import reflexio_pipelines.integrations.langchain\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "pip install 'reflexio-lake[langchain]'" in done.stdout


# --- ReflexioChatModel ---------------------------------------------------------------------------------------------

SYSTEM = "You are a deployment assistant."
REQUEST = "Please deploy the payments service to production."
WRONG = "Sure. I'll deploy the payments service to production in us-east-1 now."
CORRECTION = "No — we never deploy to us-east-1, always use us-west-2."
ACK = "Understood. Deploying the payments service to us-west-2 instead."
NEXT = "Deploy the billing service to production."
NEXT_REPLY = "Deploying the billing service to us-west-2 as usual."


class PromptRecorder(BaseCallbackHandler):
    """Records the messages each run of the wrapped model was called with."""

    def __init__(self) -> None:
        self.prompts: list[list[Any]] = []

    def on_chat_model_start(self, serialized, messages, **kwargs) -> None:
        self.prompts.extend(messages)


def system_prompt(messages: list[Any]) -> str:
    assert isinstance(messages[0], SystemMessage), messages
    return messages[0].content


def first_exchange() -> list[Any]:
    """The conversation of the first call: the agent answered (before the wrapper was used), the user corrects it."""
    return [SystemMessage(SYSTEM), HumanMessage(REQUEST), AIMessage(WRONG), HumanMessage(CORRECTION)]


def learn(service, settings, instance) -> None:
    launch(settings=settings, instance=instance)
    service.state.svc.index.refresh()


def test_chat_model_injects_what_the_first_exchange_taught_into_the_next_system_prompt(reflexio, settings, instance):
    service, client = reflexio
    recorder = PromptRecorder()
    llm = GenericFakeChatModel(
        messages=iter(
            [
                ACK,
                NEXT_REPLY,
                AIMessage("", tool_calls=[{"name": "create_issue", "args": {"repo": "infra"}, "id": "call-7"}]),
                "The tracker rejected the ticket.",
            ]
        ),
        callbacks=[recorder],
    )
    chat = ReflexioChatModel(llm, client, user_id="finn-lc", agent_version="lc-agent", session_id="conv-1")

    # call 1: nothing learned yet; the exchange, with the answer the user corrects, is published
    reply = chat.invoke(first_exchange())
    assert reply.content == ACK
    assert system_prompt(recorder.prompts[0]) == SYSTEM  # nothing to inject yet: the prompt is the caller's
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in landed(settings, "finn-lc")] == [
        (role, text, "lc-agent", "conv-1", "langchain")
        for role, text in (("user", REQUEST), ("assistant", WRONG), ("user", CORRECTION), ("assistant", ACK))
    ]

    learn(service, settings, instance)

    # call 2, streamed: the system prompt the wrapped model gets holds the rule learned from call 1
    history = [SystemMessage(SYSTEM), HumanMessage(NEXT)]
    chunks = list(chat.stream(history))
    assert len(chunks) > 1 and "".join(c.content for c in chunks) == NEXT_REPLY  # token by token
    prompt = system_prompt(recorder.prompts[1])
    assert prompt.startswith(SYSTEM + "\n\n<reflexio_context>") and served_rule_lines(prompt), prompt
    assert history[0].content == SYSTEM  # the caller's messages are not modified

    # a tool loop: the tool-call reply is not the end of the turn; the answer after the tool result is
    history += [AIMessage(NEXT_REPLY), HumanMessage("Open a ticket in the infra repo about it.")]
    request = chat.invoke(history)
    assert request.tool_calls
    history += [request, ToolMessage(TOOL_ERROR, tool_call_id="call-7", status="error")]
    assert chat.invoke(history).content == "The tracker rejected the ticket."

    rows = landed(settings, "finn-lc")[4:]
    assert [(r[0], r[1]) for r in rows] == [
        ("user", NEXT),
        ("assistant", NEXT_REPLY),  # the streamed reply, whole
        ("user", "Open a ticket in the infra repo about it."),
        ("assistant", "The tracker rejected the ticket."),
    ]
    assert json.loads(rows[3][2]) == [
        {"tool_name": "create_issue", "tool_data": {"input": {"repo": "infra"}, "error": TOOL_ERROR}}
    ]


def test_chat_model_async_with_an_async_client(reflexio, settings, instance):
    service, client = reflexio
    recorder = PromptRecorder()
    llm = GenericFakeChatModel(messages=iter([ACK, NEXT_REPLY]), callbacks=[recorder])

    async def run() -> tuple[Any, list[Any]]:
        async with AsyncReflexioClient(base_url=client.base_url) as publisher:
            chat = ReflexioChatModel(llm, client, async_client=publisher, user_id="gail-lc", agent_version="lc-agent")
            # the run metadata names the session (as for the callback handler)
            first = await chat.ainvoke(first_exchange(), config={"metadata": {"thread_id": "thread-a"}})
            await asyncio.to_thread(learn, service, settings, instance)
            return first, [chunk async for chunk in chat.astream([SystemMessage(SYSTEM), HumanMessage(NEXT)])]

    first, chunks = asyncio.run(run())
    assert first.content == ACK and len(chunks) > 1 and "".join(c.content for c in chunks) == NEXT_REPLY
    assert system_prompt(recorder.prompts[0]) == SYSTEM and served_rule_lines(system_prompt(recorder.prompts[1]))
    rows = landed(settings, "gail-lc")
    assert [(r[0], r[1]) for r in rows] == [
        ("user", REQUEST),
        ("assistant", WRONG),
        ("user", CORRECTION),
        ("assistant", ACK),
        ("user", NEXT),
        ("assistant", NEXT_REPLY),
    ]
    assert {r[4] for r in rows[:4]} == {"thread-a"} and rows[4][4] != "thread-a"


def test_chat_model_answers_when_reflexio_is_down(caplog):
    down = ReflexioClient(base_url=f"http://127.0.0.1:{free_port()}", max_retries=0)  # nothing listens there
    recorder = PromptRecorder()
    chat = ReflexioChatModel(
        GenericFakeChatModel(messages=iter(["Hello!", "Hi again!"]), callbacks=[recorder]), down, user_id="u"
    )
    with caplog.at_level(logging.WARNING, logger="reflexio_pipelines.integrations"):
        assert chat.invoke([HumanMessage("Hi")]).content == "Hello!"
        assert "".join(c.content for c in chat.stream("Hi")) == "Hi again!"
    assert [m.content for m in recorder.prompts[0]] == ["Hi"]  # no system message added when there is no context
    assert "Reflexio context unavailable" in caplog.text and "Reflexio publish failed" in caplog.text
