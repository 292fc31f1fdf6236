"""The LiteLLM extractor against a real OpenAI-compatible stub over HTTP on 127.0.0.1 (uvicorn), and the factory."""

from __future__ import annotations

import json
import logging
import traceback
from dataclasses import asdict

import pytest
from pydantic import SecretStr

from reflexio_pipelines.learning.builtin import BuiltinExtractor
from reflexio_pipelines.learning.config_loading import parse_extraction_config
from reflexio_pipelines.learning.extract import Extractor, make_extractor
from reflexio_pipelines.learning.jsonparse import LLMOutputError
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, LiteLLMExtractor
from reflexio_pipelines.learning.llm_failures import is_transient
from reflexio_pipelines.learning.rules.extractor import RuleExtractor
from reflexio_pipelines.learning.types import ToolCall, Turn, Window
from reflexio_pipelines.settings import LLMSettings
from tests.support.llm_stages import stage_on_stub
from tests.support.openai_stub import StubBehaviour

pytestmark = pytest.mark.e2e

API_KEY = "sk-test-secret"


def _turn(i: int, role: str, content: str, session: str = "sess-1", **extra) -> Turn:
    return Turn(
        turn_id=f"turn-{i:02d}-{session}",  # deliberately not the T{n} labels: the mapping back is under test
        interaction_id=100 + i,
        request_id=f"req-{session}",
        user_id="u-42",
        role=role,
        content=content,
        created_at=1_767_225_600 + i,
        session_id=session,
        **extra,
    )


DEPLOY_WINDOW = Window(
    "u-42",
    (
        _turn(1, "user", "Hi! I'm Dana, I work as an SRE at Acme. Deploy the billing service to production."),
        _turn(
            2,
            "assistant",
            "Deploying billing-service to us-east-1 now.",
            tools_used=(
                ToolCall(
                    "github.deploy",
                    {"input": {"region": "us-east-1"}, "error": "403 Forbidden: token lacks repo scope"},
                ),
            ),
        ),
        _turn(3, "user", "No — we never deploy to us-east-1, always use us-west-2"),
        _turn(4, "user", "Also, what is our refund window?", session="sess-2"),
        _turn(
            5,
            "assistant",
            "Refunds are possible.\nAsk support.",
            session="sess-2",
            expert_content="Refunds are accepted within 30 days of delivery with the order number.",
        ),
        _turn(
            6,
            "assistant",
            "Deployed to us-west-2.",
            tools_used=(ToolCall("github.deploy", {"input": {"region": "us-west-2"}, "output": "ok"}),),
        ),
    ),
)


def extractor(base_url: str, **kwargs) -> LiteLLMExtractor:
    return stage_on_stub(LiteLLMExtractor, base_url, API_KEY, **kwargs)


def test_same_items_as_builtin_over_real_http(stub, caplog) -> None:
    app, base_url = stub
    caplog.set_level(logging.INFO)  # LiteLLM's DEBUG output bypasses capture; INFO and up is checked
    caplog.set_level(logging.DEBUG, logger="reflexio_pipelines")
    ex = extractor(base_url)
    assert isinstance(ex, Extractor)
    config = parse_extraction_config(
        {
            "agent_context_prompt": "a deployment assistant",
            "tool_can_use": [{"tool_name": "github.deploy", "tool_description": "deploys a service to a region"}],
        }
    )
    result = ex.extract(DEPLOY_WINDOW, config.groups()[0])
    expected = RuleExtractor().extract(DEPLOY_WINDOW)
    assert expected.playbooks and expected.profiles  # the window exercises every rule family
    assert result.profiles == expected.profiles
    assert result.playbooks == expected.playbooks
    correction = next(p for p in result.playbooks if p.kind == "correction")
    assert correction.source_turn_ids == ["turn-01-sess-1", "turn-02-sess-1", "turn-03-sess-1"]
    assert "us-east-1" in correction.content and "us-west-2" in correction.content
    assert (result.extractor, result.model, result.prompt_version, result.llm_calls) == (
        "litellm",
        "openai/stub",
        "extraction@1.2.0",
        1,
    )
    assert {p.extractor_name for p in result.profiles} == {"default_profile_extractor"}
    assert {p.extractor_name for p in result.playbooks} == {"default_playbook_extractor"}

    (request,) = app.state.requests
    body = request["body"]
    assert request["authorization"] == f"Bearer {API_KEY}"  # the key is used…
    assert body["model"] == "stub" and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    system = body["messages"][0]["content"]
    assert "a deployment assistant" in system and "Agent tools: github.deploy: deploys a service to a region" in system
    assert "- default_profile_extractor: The user and their working environment" in system
    assert "- default_playbook_extractor: How the agent performed" in system
    user = body["messages"][1]["content"]
    assert "[T3] user: No — we never deploy to us-east-1, always use us-west-2" in user
    assert "=== Session: sess-2 ===" in user and "Expert Response [T5]: Refunds are accepted" in user
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    assert result.prompt_tokens == prompt_chars // 4 > 0  # the stub's usage block, recorded as reported
    assert result.completion_tokens > 0
    assert API_KEY not in repr(result) and API_KEY not in json.dumps(asdict(result))  # …but never recorded
    assert API_KEY not in repr(ex) and API_KEY not in caplog.text


def test_garbage_first_reply_is_retried(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(garbage_first=1)
    ex = extractor(base_url, backoff_base_s=0.5)
    result = ex.extract(DEPLOY_WINDOW)
    assert app.state.calls == 2 and result.llm_calls == 2
    assert result.playbooks == RuleExtractor().extract(DEPLOY_WINDOW).playbooks
    assert len(ex.delays) == 1 and 0.5 <= ex.delays[0] <= 1.0  # exponential base plus jitter
    # tokens of the wasted call count too: they were paid for
    assert result.completion_tokens > len(json.dumps([asdict(p) for p in result.playbooks])) // 8


def test_server_errors_are_retried_then_succeed(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(error_first=2, error_status=503)
    ex = extractor(base_url, backoff_base_s=1.0, max_retries=2)
    result = ex.extract(DEPLOY_WINDOW)
    assert app.state.calls == 3 and result.llm_calls == 3
    assert 1.0 <= ex.delays[0] <= 2.0 and 2.0 <= ex.delays[1] <= 4.0


def test_persistent_failure_raises_without_leaking_the_key(stub, caplog) -> None:
    app, base_url = stub
    caplog.set_level(logging.INFO)  # LiteLLM's DEBUG output bypasses capture; INFO and up is checked
    caplog.set_level(logging.DEBUG, logger="reflexio_pipelines")
    app.state.behaviour = StubBehaviour(error_first=10**6, error_status=500)
    ex = extractor(base_url, max_retries=2)
    with pytest.raises(ExtractionFailed) as info:
        ex.extract(DEPLOY_WINDOW)
    assert app.state.calls == 3
    exc = info.value
    assert (exc.attempts, exc.calls, exc.stage) == (3, 3, "extraction")
    assert DEPLOY_WINDOW.window_id in str(exc) and "InternalServerError" in str(exc)
    text = "".join(traceback.format_exception(exc)) + repr(exc) + caplog.text
    assert API_KEY not in text
    assert exc.__cause__ is None and exc.__suppress_context__


def test_provider_text_never_reaches_the_error(stub, caplog) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(error_first=10**6, error_status=400)
    # a "key" that the stub's error message happens to contain
    ex = LiteLLMExtractor(model="openai/stub", api_base=f"{base_url}/v1", api_key="stub failure", max_retries=0)
    with pytest.raises(ExtractionFailed) as info:
        ex.extract(DEPLOY_WINDOW)
    # the failure is summarised (class and kind): a provider's message could echo the key or the prompt
    assert "BadRequestError: request refused (HTTP 400)" in str(info.value)
    assert (info.value.summary.error_class, info.value.summary.message) == (
        "BadRequestError",
        "request refused (HTTP 400)",
    )
    assert "stub failure" not in str(info.value) and "stub failure" not in caplog.text


def test_non_transient_errors_are_not_retried(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(error_first=10**6, error_status=401)
    with pytest.raises(ExtractionFailed, match="AuthenticationError"):
        extractor(base_url, max_retries=3).extract(DEPLOY_WINDOW)
    assert app.state.calls == 1


def test_timeouts_are_retried_then_fail(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(delay_s=1.0)
    with pytest.raises(ExtractionFailed, match=r"(?i)timeout"):
        extractor(base_url, timeout_s=0.2, max_retries=1).extract(DEPLOY_WINDOW)
    assert app.state.calls == 2


def test_unusable_json_after_all_retries_fails(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(responder=lambda body: '{"answer": "not the contract"}')
    with pytest.raises(ExtractionFailed, match="LLMOutputError"):
        extractor(base_url, max_retries=1).extract(DEPLOY_WINDOW)
    assert app.state.calls == 2


def test_bad_items_are_dropped_not_fatal(stub) -> None:
    app, base_url = stub
    reply = {
        "profiles": [{"content": ""}, {"content": "Prefers Go", "time_to_live": "eternal", "evidence": ["T1"]}],
        "playbooks": [{"content": "Use us-west-2.", "kind": "??", "evidence": ["T99"]}, 7],
    }
    app.state.behaviour = StubBehaviour(responder=lambda body: json.dumps(reply))
    result = extractor(base_url).extract(DEPLOY_WINDOW)
    assert [(p.content, p.time_to_live, p.source_turn_ids) for p in result.profiles] == [
        ("Prefers Go", "infinity", ["turn-01-sess-1"])
    ]
    (playbook,) = result.playbooks
    assert playbook.kind == "correction"
    assert playbook.source_turn_ids == [t.turn_id for t in DEPLOY_WINDOW.turns]


def test_empty_window_content_still_gets_a_valid_reply(stub) -> None:
    _, base_url = stub
    window = Window("u-42", (_turn(1, "user", "Hello!"), _turn(2, "assistant", "Hi, how can I help?")))
    result = extractor(base_url).extract(window)
    assert result.profiles == [] and result.playbooks == [] and result.llm_calls == 1


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (LLMOutputError("bad"), True),
        (TimeoutError(), True),
        (type("RateLimitError", (Exception,), {"status_code": 429})(), True),
        (type("InternalServerError", (Exception,), {"status_code": 502})(), True),
        (type("AuthenticationError", (Exception,), {"status_code": 401})(), False),
        (type("BadRequestError", (Exception,), {"status_code": 400})(), False),
        (type("APIConnectionError", (Exception,), {})(), True),
        (ValueError("bug"), False),
    ],
)
def test_is_transient(exc: BaseException, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_make_extractor() -> None:
    assert isinstance(make_extractor(LLMSettings()), BuiltinExtractor)
    assert isinstance(make_extractor(LLMSettings(model="  ")), BuiltinExtractor)
    ex = make_extractor(
        LLMSettings(
            model="openai/gpt-x", api_base="http://h/v1", api_key=SecretStr(API_KEY), timeout_s=9, max_retries=4
        )
    )
    assert isinstance(ex, LiteLLMExtractor)
    assert (
        ex.model,
        ex.endpoint.api_base,
        ex.endpoint.timeout_s,
        ex.endpoint.max_retries,
        ex.endpoint.temperature,
    ) == (
        "openai/gpt-x",
        "http://h/v1",
        9,
        4,
        0.0,
    )
    assert API_KEY not in repr(ex)
    with pytest.raises(ValueError):
        LiteLLMExtractor(model="")
