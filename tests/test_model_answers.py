"""Answers shaped like real models', not the built-in rules replayed (tests/support/model_answers.py): every case
either yields exactly its items or fails with its reason, and no case stores anything else.

- Through the pipeline: one user per case publishes the case's conversation, one Dagster run extracts them all
  through LiteLLM against the OpenAI protocol stub, which answers each extraction prompt with the case's answer.
  Successes must store exactly the expected profiles and playbooks (content, kind, trigger, TTL, cited turns);
  failures must leave an `extraction_failures` row with the fixed reason and store nothing for that user.
- On every provider protocol (OpenAI, Azure, Anthropic, Gemini, Ollama): the same answers rendered natively (tool
  calls as `tool_calls` / `tool_use` / `functionCall`, reasoning in the provider's channel, cut-off as
  `length` / `max_tokens` / `MAX_TOKENS`, refusals as the refusal field / content filter / `stop_reason: refusal` /
  `SAFETY` / prose) through the extractor, which must return the same items or raise with the same reason.

The answers are hand-written for the project's conversations: this tests parsing, validation and the protocols,
not what any real model would extract.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timezone
from typing import Any

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.llm_call import LLMEndpoint
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, LiteLLMExtractor
from reflexio_pipelines.learning.types import ToolCall, Turn, Window
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import LLMSettings, Settings
from tests.support.landing import land
from tests.support.model_answers import ALL, CASES, CONVERSATIONS, AnswerCase, case_by_session
from tests.support.openai_stub import is_aggregation_prompt, is_dedup_prompt, is_session_evaluation_prompt
from tests.support.provider_stubs import PROTOCOLS, Reply, fake_model, make_provider_stub, prompt_text
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

KEY = "sk-corpus-key-5b0e"
KEEP_ALIVE_S = 300.0  # providers keep idle connections open for minutes (see serve_app)
T0 = datetime(2026, 11, 5, 9, 15, tzinfo=timezone.utc)
_SESSION_RE = re.compile(r"^=== Session: (.*) ===$", re.M)
PROTOCOL_SETUP = {  # protocol -> (model string, api_base from the stub's URL, api_version)
    "openai": ("openai/gpt-4o-mini", "{url}/v1", ""),
    "azure": ("azure/reflexio-chat", "{url}", "2024-10-21"),
    "anthropic": ("anthropic/claude-haiku-4-5", "{url}", ""),
    "gemini": ("gemini/gemini-2.5-flash", "{url}/v1beta", ""),
    "ollama": ("ollama_chat/llama3.1", "{url}", ""),
}


def corpus_responder(body: dict[str, Any]) -> Reply:
    """The case's answer for an extraction prompt (found by the session label, which is the case id); the fake
    model for the other stages (a dedup or judge prompt of the same run)."""
    prompt = prompt_text(body)
    if not (is_dedup_prompt(prompt) or is_session_evaluation_prompt(prompt) or is_aggregation_prompt(prompt)):
        match = _SESSION_RE.search(prompt)
        case = case_by_session(match.group(1)) if match else None
        if case is not None:
            return case.reply
    return fake_model(body)


def _conversation(case: AnswerCase) -> dict:
    """The case's conversation, published by a user of its own under a session named after the case."""
    return {**CONVERSATIONS[case.conversation], "user_id": case.id, "session_id": case.id}


def _texts(case: AnswerCase, evidence: tuple[str, ...]) -> frozenset[str]:
    turns = [i["content"] for i in CONVERSATIONS[case.conversation]["interactions"]]
    return frozenset(turns if evidence == ALL else [turns[int(label[1:]) - 1] for label in evidence])


def expected_items(case: AnswerCase) -> set[tuple]:
    """What the case must store, comparable with `stored_items`: profiles by content, TTL and cited turn texts,
    playbooks by kind, trigger, content, blocking issue and cited turn texts."""
    return {("profile", p.content, p.time_to_live, _texts(case, p.evidence)) for p in case.profiles} | {
        ("playbook", p.kind, p.trigger, p.content, p.blocking_issue_kind, _texts(case, p.evidence))
        for p in case.playbooks
    }


def test_every_answer_yields_its_items_or_an_extraction_failure_and_nothing_wrong_is_stored(lake: Lake, instance):
    stub = make_provider_stub("openai", KEY, responder=corpus_responder)
    land(lake, [_conversation(case) for case in CASES], at=T0)
    with serve_app(stub, keep_alive_s=KEEP_ALIVE_S) as url:
        settings = Settings(
            lake=str(lake.root),
            llm=LLMSettings(
                model="openai/gpt-4o-mini", api_base=f"{url}/v1", api_key=KEY, max_retries=1, backoff_base_s=0.01
            ),
        )
        launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)

    turn_text = {t["turn_id"]: t["content"] for t in lake.read_table("turns").to_pylist()}
    stored: dict[str, set[tuple]] = {case.id: set() for case in CASES}
    for p in lake.read_table("user_profiles").to_pylist():
        stored[p["user_id"]].add(
            ("profile", p["content"], p["profile_time_to_live"], frozenset(turn_text[t] for t in p["source_turn_ids"]))
        )
    for p in lake.read_table("user_playbooks").to_pylist():
        stored[p["user_id"]].add(
            (
                "playbook",
                p["kind"],
                p["trigger"],
                p["content"],
                p["blocking_issue_kind"],
                frozenset(turn_text[t] for t in p["source_turn_ids"]),
            )
        )
    failures = {f["user_id"]: f for f in lake.read_table("extraction_failures").to_pylist()}

    outcome: Counter[str] = Counter()
    problems = []
    for case in CASES:
        wanted, got = expected_items(case), stored[case.id]
        wrong, missing = got - wanted, wanted - got
        outcome["wrong items"] += len(wrong)
        failure = failures.get(case.id)
        if case.failure is None:
            outcome["yielded its items" if not missing and failure is None else "MISMATCH"] += 1
            if missing or wrong or failure is not None:
                problems.append((case.id, "missing", missing, "wrong", wrong, "failure", failure))
        else:
            ok = failure is not None and (failure["stage"], failure["error_message"], failure["attempts"]) == (
                "extract",
                case.failure,
                2,
            )  # two attempts (max_retries=1), then recorded
            outcome["failed with its reason" if ok and not got else "MISMATCH"] += 1
            if not ok or got:
                problems.append((case.id, "expected failure", case.failure, "got", failure, "stored", got))
    print(f"\n{len(CASES)} model-shaped answers: {dict(outcome)}")
    assert not problems, problems
    assert outcome["wrong items"] == 0
    assert set(failures) == {case.id for case in CASES if case.failure}  # no other user failed
    assert lake.read_table("extraction_bookmarks").num_rows == sum(1 for case in CASES if not case.failure)


def _window(case: AnswerCase) -> Window:
    turns = []
    for i, turn in enumerate(CONVERSATIONS[case.conversation]["interactions"], start=1):
        tools = tuple(ToolCall(t["tool_name"], t["tool_data"]) for t in turn.get("tools_used", []))
        turns.append(
            Turn(
                turn_id=f"{case.id}:{i}",
                interaction_id=i,
                request_id=case.id,
                user_id=case.id,
                role=turn["role"],
                content=turn["content"],
                created_at=1_767_225_600 + i,
                session_id=case.id,
                tools_used=tools,
                expert_content=turn.get("expert_content", ""),
            )
        )
    return Window(case.id, tuple(turns))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_answer_means_the_same_on_every_provider_protocol(protocol: str) -> None:
    model, base, api_version = PROTOCOL_SETUP[protocol]
    stub = make_provider_stub(protocol, KEY, responder=corpus_responder)
    results = {}
    with serve_app(stub, keep_alive_s=KEEP_ALIVE_S) as url:
        endpoint = LLMEndpoint(
            model, api_base=base.format(url=url), api_key=KEY, api_version=api_version, max_retries=0
        )
        extractor = LiteLLMExtractor(endpoint=endpoint)
        for case in CASES:
            window = _window(case)
            label = {turn.turn_id: f"T{i}" for i, turn in enumerate(window.turns, start=1)}
            cited = lambda ids, window=window, label=label: (  # noqa: E731
                ALL if len(ids) == len(window.turns) > 1 else tuple(label[t] for t in ids)
            )
            try:
                result = extractor.extract(window)
            except ExtractionFailed as failed:
                results[case.id] = failed.summary.message
                continue
            results[case.id] = (
                {(p.content, p.time_to_live, cited(p.source_turn_ids)) for p in result.profiles},
                {
                    (p.content, p.kind, p.trigger, p.blocking_issue_kind, cited(p.source_turn_ids))
                    for p in result.playbooks
                },
                {(f.target, cited(f.source_turn_ids)) for f in result.forget},
            )
    expected = {
        case.id: case.failure
        or (
            {(p.content, p.time_to_live, p.evidence) for p in case.profiles},
            {(p.content, p.kind, p.trigger, p.blocking_issue_kind, p.evidence) for p in case.playbooks},
            {(f.target, f.evidence) for f in case.forget},
        )
        for case in CASES
    }
    assert {k: v for k, v in results.items() if v != expected[k]} == {}
    assert all(r.status == 200 for r in stub.state.stub.seen) and len(stub.state.stub.seen) == len(CASES)
