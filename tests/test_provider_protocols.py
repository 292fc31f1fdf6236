"""Every provider the project names, on its own wire protocol: the whole learning loop through LiteLLM with that
provider's model string, against a stub of the provider on 127.0.0.1 (tests/support/provider_stubs.py).

Per provider, real Dagster runs on a DAGSTER_HOME on disk: extraction of two hourly windows, the dedup judge (a
move supersedes the old city), the session judge and the shadow judge (evaluation run), consolidation (aggregation
run), embeddings where the provider has them (index build, dedup vectors, clustering, the service's query), and a
search through the service. The key must travel in the provider's own header on every request — and nowhere else:
not in the URL, another header or a body, not in a response, a log record, stdout/stderr, a byte of any file under
the lake root or DAGSTER_HOME, nor in Dagster's run records and event metadata.

THE MODEL IS FAKE: the stubs answer with `openai_stub.fake_llm_reply` (the built-in rules and judges replayed over
the prompt parsed back). These tests check plumbing and protocol, not extraction quality.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.aggregate import Member
from reflexio_pipelines.learning.llm_aggregate import LiteLLMConsolidator
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_dedup import LiteLLMDedupJudge
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, LiteLLMExtractor
from reflexio_pipelines.learning.llm_judge import LiteLLMJudge
from reflexio_pipelines.learning.llm_ledger import CallLedger, recording
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch, run_aggregation, run_evaluation
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.settings import load_settings
from serving.app import create_app
from tests.support.dagster_home import make_dagster_home
from tests.support.landing import land
from tests.support.openai_stub import fake_llm_reply, is_session_evaluation_prompt, is_shadow_comparison_prompt
from tests.support.provider_stubs import Reply, Seen, make_provider_stub, prompt_text
from tests.support.servers import serve_app
from tests.test_judge import GOOD, POOR, THANKS, shadow_session
from tests.test_llm_dedup import T0 as T_DEDUP
from tests.test_llm_dedup import profile
from tests.test_llm_extract import DEPLOY_WINDOW

pytestmark = pytest.mark.e2e

LLM_KEY = "sk-prov-LLM-4f1d9c2b7a6e"
EMBED_KEY = "sk-prov-EMB-8c3e5a0d2f91"
KEEP_ALIVE_S = 300.0  # providers keep idle connections open for minutes (see serve_app)
T0 = datetime(2026, 11, 3, 10, 5, tzinfo=timezone.utc)
AGENT = "ops-1"
REQUEST = "Please deploy the payments service to production."
ANSWER = "Deploying the payments service to us-east-1 now."
CORRECTION = "No — we never deploy to us-east-1, always use us-west-2."


def _extraction_as_tool_call(body: dict[str, Any]) -> Reply:
    """Anthropic answers in content blocks: extraction JSON as a `tool_use` block, judges' JSON as text after a
    `thinking` block."""
    text = fake_llm_reply(body)
    prompt = prompt_text(body)
    if (
        is_session_evaluation_prompt(prompt)
        or is_shadow_comparison_prompt(prompt)
        or "[NEW-" in prompt
        or "Members (one per user playbook):" in prompt
    ):
        return Reply(text=text, reasoning="The prompt asks for a verdict; answering in the contract.")
    return Reply(tool_json=text)


@dataclass(frozen=True)
class Provider:
    """A provider as the project configures it: model strings, where its api_base points, which header carries
    the key (and how), and the protocol its stub speaks."""

    name: str
    protocol: str
    model: str
    base: Callable[[str], str]
    header: str
    value: Callable[[str], str]
    embed_model: str = ""  # "" = the provider has no embeddings: the bundled local model embeds
    api_version: str = ""
    responder: Callable[[dict[str, Any]], Reply] | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)  # headers the provider requires besides the key

    def __str__(self) -> str:
        return self.name


def _bearer(key: str) -> str:
    return f"Bearer {key}"


def _plain(key: str) -> str:
    return key


def _compatible(name: str, model: str, prefix: str = "/v1") -> Provider:
    return Provider(name, "openai", model, lambda url: f"{url}{prefix}", "authorization", _bearer)


PROVIDERS = [
    Provider(
        "openai",
        "openai",
        "openai/gpt-4o-mini",
        lambda url: f"{url}/v1",
        "authorization",
        _bearer,
        embed_model="openai/text-embedding-3-small",
    ),
    Provider(
        "azure",
        "azure",
        "azure/reflexio-chat",
        lambda url: url,
        "api-key",
        _plain,
        embed_model="azure/reflexio-embed",
        api_version="2024-10-21",
    ),
    Provider(
        "anthropic",
        "anthropic",
        "anthropic/claude-haiku-4-5",
        lambda url: url,
        "x-api-key",
        _plain,
        responder=_extraction_as_tool_call,
        extra_headers={"anthropic-version": "2023-06-01"},
    ),
    Provider(
        "gemini",
        "gemini",
        "gemini/gemini-2.5-flash",
        lambda url: f"{url}/v1beta",
        "x-goog-api-key",
        _plain,
        embed_model="gemini/text-embedding-004",
    ),
    Provider(
        "ollama",
        "ollama",
        "ollama_chat/llama3.1",
        lambda url: url,
        "authorization",
        _bearer,
        embed_model="ollama/nomic-embed-text",
    ),
    # the OpenAI-compatible protocol, through OpenRouter's LiteLLM provider and its /api/v1 base
    _compatible("openrouter", "openrouter/meta-llama/llama-3.1-8b-instruct", "/api/v1"),
]
#: The other OpenAI-compatible providers the project names: each has its own LiteLLM provider (own headers and
#: parameter mapping) on the same protocol, so each gets every stage's call, without the Dagster runs around them.
COMPATIBLE = [
    _compatible("deepseek", "deepseek/deepseek-chat"),
    _compatible("xai", "xai/grok-3-mini"),
    _compatible("moonshot", "moonshot/kimi-k2-0711-preview"),
    _compatible("dashscope", "dashscope/qwen-turbo"),
    _compatible("zhipu", "zai/glm-4.5"),
    _compatible("minimax", "minimax/MiniMax-M2"),
    _compatible("vllm", "hosted_vllm/reflexio-local"),
]


def _conversation(user: str, session: str, at: datetime, *turns: tuple[str, str], shadow: str = "") -> dict:
    created = int(at.timestamp())
    interactions = [
        {"role": role, "content": content, "created_at": created + i} for i, (role, content) in enumerate(turns)
    ]
    if shadow:
        interactions[1]["shadow_content"] = shadow
    return {
        "id": session,
        "user_id": user,
        "session_id": session,
        "agent_version": AGENT,
        "source": "test",
        "interactions": interactions,
    }


HOUR_0 = [
    _conversation(
        "ann",
        "ann-s1",
        T0,
        ("user", REQUEST),
        ("assistant", ANSWER),
        ("user", CORRECTION),
        shadow="Deploying the payments service to us-west-2 now.",
    ),
    _conversation("bob", "bob-s1", T0, ("user", REQUEST), ("assistant", ANSWER), ("user", CORRECTION)),
    _conversation(
        "cat", "cat-s1", T0, ("user", "Hi, I live in London and I prefer short answers."), ("assistant", "Noted.")
    ),
]
HOUR_1 = [
    _conversation(
        "cat",
        "cat-s2",
        T0 + timedelta(hours=1),
        ("user", "Quick update: I live in Berlin now."),
        ("assistant", "Thanks, updated."),
    )
]


def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: Provider, url: str) -> Path:
    """Configure everything through the environment, as a deployment would (keys bound as Dagster EnvVars)."""
    config = tmp_path / "extraction.json"
    config.write_text(json.dumps({"agent_success_configs": [{"evaluation_name": "ok", "sampling_rate": 1.0}]}))
    monkeypatch.delenv("REFLEXIO_CONFIG", raising=False)
    env = {
        "REFLEXIO_LAKE": str(tmp_path / "lake"),
        "REFLEXIO_EXTRACTION_CONFIG": str(config),
        "REFLEXIO_LLM_MODEL": provider.model,
        "REFLEXIO_LLM_API_BASE": provider.base(url),
        "REFLEXIO_LLM_API_KEY": LLM_KEY,
        "REFLEXIO_LLM_BACKOFF_BASE": "0.01",
    }
    if provider.api_version:
        env["REFLEXIO_LLM_API_VERSION"] = provider.api_version
    if provider.embed_model:
        env.update(
            {
                "REFLEXIO_EMBEDDING_MODEL": provider.embed_model,
                "REFLEXIO_EMBEDDING_API_BASE": provider.base(url),
                "REFLEXIO_EMBEDDING_API_KEY": EMBED_KEY,
            }
        )
        if provider.api_version:
            env["REFLEXIO_EMBEDDING_API_VERSION"] = provider.api_version
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    home = make_dagster_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def assert_key_only_in_its_header(seen: list[Seen], key: str, header: str, value: str) -> None:
    """Every request carried `key` as `header: value`, and the key appears nowhere else in it or its response."""
    assert seen
    for request in seen:
        assert request.headers.get(header) == value, (request.url, header)
        where = {
            "url": request.url,
            "body": request.body.decode("utf-8", "replace"),
            "response": request.response.decode("utf-8", "replace"),
            **{f"header {k}": v for k, v in request.headers.items() if k != header},
        }
        leaks = [name for name, text in where.items() if key in text]
        assert not leaks, f"{key[:8]}… found in {leaks} of {request.method} {request.path}"


@pytest.fixture
def every_log_record(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog with records of every level from every logger, LiteLLM's own (which do not all propagate) included;
    the loggers' levels and handlers are put back afterwards (LiteLLM at DEBUG would slow every later test)."""
    caplog.set_level(logging.DEBUG)
    loggers = [
        logging.getLogger(name)
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "httpcore", "dagster")
    ]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(caplog.handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield caplog
    finally:
        for logger, level in zip(loggers, levels):
            logger.removeHandler(caplog.handler)
            logger.setLevel(level)


def _dagster_records(instance: dg.DagsterInstance) -> str:
    """Run configs, tags and every event (materialisation metadata included) of every run, serialised."""
    parts = []
    for run in instance.get_runs():
        parts.append(json.dumps({"config": run.run_config, "tags": run.tags}, default=str))
        parts += [dg.serialize_value(record) for record in instance.all_logs(run.run_id)]
    return "\n".join(parts)


def _bytes_under(*roots: Path) -> bytes:
    return b"".join(p.read_bytes() for root in roots for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize("provider", PROVIDERS, ids=str)
def test_the_whole_loop_runs_on_the_providers_protocol_and_the_key_stays_in_its_header(
    provider: Provider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    every_log_record: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog = every_log_record
    keys = {"llm": LLM_KEY, "embedding": EMBED_KEY}
    llm_stub = make_provider_stub(provider.protocol, LLM_KEY, responder=provider.responder)
    embed_stub = make_provider_stub(provider.protocol, EMBED_KEY) if provider.embed_model else None
    with (
        serve_app(llm_stub, keep_alive_s=KEEP_ALIVE_S) as llm_url,
        serve_app(embed_stub, keep_alive_s=KEEP_ALIVE_S) if embed_stub else nullcontext("") as embed_url,
    ):
        home = _environment(monkeypatch, tmp_path, provider, llm_url)
        if embed_stub is not None:  # the embedder has its own key, on its own server
            monkeypatch.setenv("REFLEXIO_EMBEDDING_API_BASE", provider.base(embed_url))
        settings = load_settings()
        lake = Lake.at(settings.lake)
        assert settings.llm.api_key.get_secret_value() == LLM_KEY and settings.llm.api_version == provider.api_version
        with dg.DagsterInstance.get() as instance:
            land(lake, HOUR_0, at=T0)
            land(lake, HOUR_1, at=T0 + timedelta(hours=1))
            windows = [key_of_moment(T0, GRANULARITY), key_of_moment(T0 + timedelta(hours=1), GRANULARITY)]
            learned = launch(windows, settings=settings, instance=instance)
            evaluated = run_evaluation(
                now=int((T0 + timedelta(hours=3)).timestamp()), settings=settings, instance=instance
            )
            # Two users (ann, bob) teach the rule here: the consolidation call is what this test needs, not support.
            aggregated = run_aggregation(
                {"agent_version": AGENT, "min_distinct_users": 2}, settings=settings, instance=instance
            )
            with TestClient(create_app(settings)) as client:
                search = client.post(  # as a user who taught it: a search without a user serves no user's items
                    "/api/search", json={"query": "which region to deploy to", "threshold": 0.0, "user_id": "ann"}
                )
            records = _dagster_records(instance)

    # --- the loop ran, every stage through this provider ---------------------------------------------------------
    assert evaluated["success"] and aggregated["success"] and learned.index_version
    calls = lake.read_table("llm_calls").to_pylist()
    assert {"extraction", "dedup", "session_judge", "shadow_judge", "consolidation"} <= {c["stage"] for c in calls}
    assert all(c["outcome"] == "ok" and c["model"] == provider.model for c in calls), calls
    assert lake.read_table("extraction_failures").num_rows == 0
    playbooks = lake.read_table("user_playbooks").to_pylist()
    assert {p["user_id"] for p in playbooks if "us-west-2" in p["content"]} == {"ann", "bob"}
    profiles = {p["content"]: p for p in lake.read_table("user_profiles").to_pylist() if p["user_id"] == "cat"}
    assert profiles["Lives in London"]["profile_id"] in profiles["Lives in Berlin"]["supersedes"]  # dedup judge
    assert lake.read_table("session_evaluations").num_rows == 4  # four closed sessions, all sampled
    agent_playbooks = lake.read_table("agent_playbooks").to_pylist()
    assert any("us-west-2" in a["content"] for a in agent_playbooks)
    assert search.status_code == 200 and "us-west-2" in search.text
    index = LoadedIndex.load(lake.index_root)
    assert index.embedder_model_id == (
        f"litellm:{provider.embed_model}" if provider.embed_model else "all-MiniLM-L6-v2-onnx-int8"
    )

    # --- the wire: each protocol's path, and the key only in its header ---------------------------------------
    chat = llm_stub.state.stub.seen
    assert {r.kind for r in chat} == {"chat"} and all(r.status == 200 for r in chat), [(r.url, r.status) for r in chat]
    assert len(chat) == len(calls)  # every call the ledger counts reached the provider, and nothing else did
    assert all(r.headers.get(h) == v for r in chat for h, v in provider.extra_headers.items())
    assert_key_only_in_its_header(chat, LLM_KEY, provider.header, provider.value(LLM_KEY))
    if embed_stub is not None:
        embeddings = embed_stub.state.stub.seen
        assert {r.kind for r in embeddings} == {"embeddings"} and all(r.status == 200 for r in embeddings)
        assert_key_only_in_its_header(embeddings, EMBED_KEY, provider.header, provider.value(EMBED_KEY))
    if provider.api_version:
        sent = chat + (embed_stub.state.stub.seen if embed_stub is not None else [])
        assert all(f"api-version={provider.api_version}" in r.query for r in sent)
    if provider.responder is _extraction_as_tool_call:  # content blocks really were read: tool_use and thinking
        assert any(b'"type":"tool_use"' in r.response for r in chat)
        assert any(b'"type":"thinking"' in r.response for r in chat)

    # --- and nowhere else --------------------------------------------------------------------------------------
    out, err = capfd.readouterr()
    places = {
        "results": repr((learned, evaluated, aggregated)),
        "search response": search.text,
        "log records": caplog.text + "".join(repr(r.__dict__) for r in caplog.records),
        "stdout": out,
        "stderr": err,
        "dagster run records": records,
    }
    files = _bytes_under(lake.root, home)
    for name, key in keys.items():
        assert not [place for place, text in places.items() if key in text], f"the {name} key leaked"
        assert key.encode() not in files, f"the {name} key is in a file under the lake or DAGSTER_HOME"


@pytest.mark.parametrize("provider", COMPATIBLE, ids=str)
def test_every_stage_calls_an_openai_compatible_provider_with_the_key_in_its_header(provider: Provider) -> None:
    """Extraction, dedup judge, session judge, shadow judge and consolidation through each provider's own LiteLLM
    client (the full loop with Dagster runs is the OpenRouter case above)."""
    stub = make_provider_stub(provider.protocol, LLM_KEY)
    with serve_app(stub, keep_alive_s=KEEP_ALIVE_S) as url:
        ep = LLMEndpoint(provider.model, api_base=provider.base(url), api_key=LLM_KEY, backoff_base_s=0.01)
        ledger = CallLedger()
        with recording(ledger):
            extracted = LiteLLMExtractor(endpoint=ep).extract(DEPLOY_WINDOW)
            judge = LiteLLMDedupJudge(endpoint=ep)
            groups = judge.judge([profile("n", "Lives in Berlin", T_DEDUP)], [profile("e", "Lives in London", 0)])[0]
            session_judge = LiteLLMJudge(endpoint=ep)
            verdict = session_judge.evaluate(THANKS)[0]
            shadow = shadow_session("compat", GOOD, POOR)
            comparison = session_judge.compare(shadow, shadow.turns[1])[0]
            rule = LiteLLMConsolidator(endpoint=ep).consolidate(
                [Member(1, "u1", "Use us-west-2."), Member(2, "u2", "Use us-west-2 always.")], []
            )[0]
    assert extracted.playbooks and extracted.profiles and groups and verdict is not None and comparison is not None
    assert rule is not None
    assert [c.stage for c in ledger.calls()] == [
        "extraction",
        "dedup",
        "session_judge",
        "shadow_judge",
        "consolidation",
    ]
    assert all(c.outcome == "ok" and c.model == provider.model for c in ledger.calls())
    seen = stub.state.stub.seen
    assert len(seen) == 5 and all(r.kind == "chat" and r.status == 200 for r in seen)
    assert {json.loads(r.body)["model"] for r in seen} == {provider.model.split("/", 1)[1]}
    assert_key_only_in_its_header(seen, LLM_KEY, provider.header, provider.value(LLM_KEY))


@pytest.mark.parametrize("provider", PROVIDERS[:5], ids=str)
def test_a_wrong_key_is_refused_by_the_provider_and_not_retried(provider: Provider) -> None:
    """The stubs check the key like the provider does: a wrong one is refused (401/403), the endpoint gives up at
    once (an authentication error cannot be fixed by retrying) and the key it sent is not in the error text."""
    stub = make_provider_stub(provider.protocol, LLM_KEY)
    wrong = "sk-prov-WRONG-0000000000"
    with serve_app(stub, keep_alive_s=KEEP_ALIVE_S) as url:
        ep = LLMEndpoint(
            provider.model,
            api_base=provider.base(url),
            api_key=wrong,
            api_version=provider.api_version,
            max_retries=3,
            backoff_base_s=0.01,
        )
        with pytest.raises(ExtractionFailed) as failed:
            LiteLLMExtractor(endpoint=ep).extract(DEPLOY_WINDOW)
    (seen,) = stub.state.stub.seen
    assert seen.status in (401, 403) and seen.headers.get(provider.header) == provider.value(wrong)
    assert failed.value.attempts == 1 and failed.value.summary.message.startswith("request refused (HTTP 40")
    assert wrong not in str(failed.value)
