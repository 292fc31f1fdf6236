"""LLM faults end to end: real Dagster runs, the real LiteLLM client, an OpenAI-compatible stub on 127.0.0.1 that
times out, rate-limits (429 + Retry-After), fails (500), replies malformed JSON or schema-violating JSON on a
seeded 30 % of calls. Failed user batches are recorded and retried; at the end nothing is lost or duplicated
compared with a fault-free run over the same landing files."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

import dagster as dg
import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import window_of_key
from reflexio_pipelines.learning.llm_extract import ExtractionFailed, LiteLLMExtractor
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, windows_to_retry
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import LLMSettings, Settings
from serving.app import create_app
from tests.support.conversations import conversation
from tests.support.landing import land_hourly
from tests.support.openai_stub import FAULT_KINDS, FaultPlan, StubBehaviour, make_openai_stub
from tests.support.servers import serve_app
from tests.test_llm_extract import DEPLOY_WINDOW

T0 = datetime(2026, 11, 3, 10, 5, tzinfo=timezone.utc)
FAULT_RATE = 0.3
#: with this seed the first run leaves failed windows and blocks later windows of the same user behind them
SEED = 11
#: run-scoped columns: everything else must be identical between the faulty and the fault-free lake
RUN_COLUMNS = {"run_id"}
LEARNED_TABLES = {
    "user_profiles": "profile_id",
    "user_playbooks": "user_playbook_id",
    "change_log": "item_id",
    "extraction_bookmarks": "user_id",
}
SAFE_MESSAGES = {
    "the call timed out",
    "rate limited (HTTP 429)",
    "server error (HTTP 500)",
    "the reply holds no usable JSON object",
    "the reply is JSON but violates the extraction schema",
}


HOUR_0 = [
    conversation("erin", "e1", ("user", "Hi, I live in London and I prefer short answers."), ("assistant", "Noted.")),
    conversation("erin", "e2", ("user", "My phone number is 555-0100."), ("assistant", "Saved.")),
    conversation(
        "frank",
        "f1",
        ("user", "Summarise the incident report."),
        ("assistant", "Here is a long essay."),
        ("user", "No — never write essays, always use three bullet points."),
    ),
    conversation("gina", "g1", ("user", "I work as a nurse and I speak Portuguese."), ("assistant", "Obrigada!")),
]
HOUR_1 = [
    conversation("erin", "e3", ("user", "Quick update: I moved to Berlin last month."), ("assistant", "Thanks!")),
    conversation("bob", "b2", ("user", "My timezone is PST now."), ("assistant", "Updated.")),
    conversation(
        "frank",
        "f2",
        ("user", "Draft the release notes."),
        ("assistant", "Release notes: a long essay."),
        ("user", "No — never write essays, always use three bullet points."),
    ),
    conversation("gina", "g2", ("user", "I prefer answers in Portuguese."), ("assistant", "Claro.")),
]


def _settings(lake: Lake, base_url: str, **llm) -> Settings:
    llm.setdefault("backoff_base_s", 0.01)  # retries in milliseconds: the delay shape is asserted separately below
    return Settings(
        lake=str(lake.root), llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k", **llm)
    )


def _rows(lake: Lake, name: str) -> list[dict]:
    rows = [{k: v for k, v in r.items() if k not in RUN_COLUMNS} for r in lake.read_table(name).to_pylist()]
    return sorted(rows, key=repr)


def _item_keys(lake: Lake) -> set[tuple]:
    profiles = {
        ("profile", r["user_id"], r["content"], r["status"]) for r in lake.read_table("user_profiles").to_pylist()
    }
    playbooks = {
        ("playbook", r["user_id"], r["trigger"], r["content"]) for r in lake.read_table("user_playbooks").to_pylist()
    }
    return profiles | playbooks


def test_faulty_runs_lose_nothing_and_duplicate_nothing(lake: Lake, tmp_path, instance, samples):
    keys = land_hourly(lake, [samples + HOUR_0, HOUR_1], T0)
    reference = Lake.at(tmp_path / "reference")
    shutil.copytree(lake.landing_turns, reference.landing_turns)  # the same landing files, so the same turn ids

    clean = make_openai_stub()
    with serve_app(clean) as base_url:
        launch(keys, settings=_settings(reference, base_url), instance=instance)
    assert windows_to_retry(reference) == {} and reference.read_table("extraction_failures").num_rows == 0

    plan = FaultPlan(rate=FAULT_RATE, seed=SEED, timeout_sleep_s=3.0, retry_after_s=0.01)
    faulty = make_openai_stub(StubBehaviour(faults=plan))
    rounds: list[dict] = []
    with serve_app(faulty) as base_url:
        settings = _settings(lake, base_url, max_retries=1, timeout_s=1.5)
        pending = keys
        run_ids: list[set[str]] = []
        while pending and len(rounds) < 8:  # keep the faults on and run until every window is learned
            calls_before = faulty.state.calls
            result = launch(pending, settings=settings, instance=instance)
            assert result.index_version
            unresolved = windows_to_retry(lake)
            rounds.append(
                {
                    "windows": len(pending),
                    "calls": faulty.state.calls - calls_before,
                    "unresolved_windows": len(unresolved),
                }
            )
            run_ids.append(set(result.run_ids))
            pending = [key for key in keys if window_of_key(key, GRANULARITY) in unresolved]
    assert not pending, f"still failing after {len(rounds)} rounds: {rounds}"
    # users were extracted concurrently, never beyond the configured limit (the default, 32)
    assert 1 < faulty.state.max_in_flight <= settings.llm.concurrency, faulty.state.max_in_flight

    failures = lake.read_table("extraction_failures").to_pylist()
    kinds = [kind for _, kind in faulty.state.faults]
    # which faults a run meets depends on the calls it makes (a real timeout under load adds one); every kind is
    # drawn (test_fault_plan_is_deterministic_per_body_and_occurrence), and a run meets several
    assert len(set(kinds)) >= 3, kinds
    assert failures and rounds[0]["unresolved_windows"] > 0, "the first run left failed windows to retry"
    assert all(f["resolved_by_run"] and f["resolved_by_run"] != f["run_id"] for f in failures), "resolved later"
    for f in failures:  # fixed descriptions only: never a provider's message or a model's reply
        assert f["error_message"] in SAFE_MESSAGES or (
            f["stage"] == "blocked" and f["error_message"].startswith("waiting for unresolved window")
        ), f
    # the materialisation metadata of the first round names the windows that failed in it
    metadata = [
        r.asset_materialization.metadata
        for r in instance.fetch_materializations(dg.AssetKey("user_profiles"), limit=100).records
        if r.run_id in run_ids[0]
    ]
    first = [f for f in failures if f["run_id"] in run_ids[0] and f["stage"] != "blocked"]
    assert sum(m["failed_windows"].value for m in metadata) == len(first) > 0
    named = ", ".join(m["failed_window_ids"].value for m in metadata)
    assert all((f["extraction_window_id"] or f"{f['user_id']}:{f['stage']}") in named for f in first)
    texts = [i["content"] for c in samples + HOUR_0 + HOUR_1 for i in c["interactions"]]
    stored = repr(failures)
    assert not any(text[:30] in stored for text in texts), "no conversation text in the failures table"

    expected, got = _item_keys(reference), _item_keys(lake)
    lost, extra = expected - got, got - expected
    for name, id_column in LEARNED_TABLES.items():
        rows = lake.read_table(name).to_pylist()
        if name != "change_log":
            ids = [(r["window"], r[id_column], r.get("extractor")) for r in rows]
            assert len(ids) == len(set(ids)), f"duplicate rows in {name}"
        assert _rows(lake, name) == _rows(reference, name), f"{name} differs from the fault-free run"
    calls, retried = faulty.state.calls, len(faulty.state.faults)
    print(
        f"\nfault rate {FAULT_RATE:.0%}, seed {plan.seed}: {calls} LLM calls, {retried} faults injected "
        f"({', '.join(f'{k} {kinds.count(k)}' for k in FAULT_KINDS)}), rounds {rounds}, "
        f"failed batches recorded {len(failures)} (all resolved), items {len(expected)} expected / {len(got)} "
        f"learned, items lost: {len(lost)}, extra: {len(extra)}"
    )
    assert not lost and not extra


def test_schema_violating_answers_are_rejected_and_never_stored(lake: Lake, instance, landed):
    """A reply that is JSON with the right keys but the wrong shape is retried like garbage, and a window that
    only ever gets such replies is recorded as failed: nothing of its user is stored."""
    stub = make_openai_stub(StubBehaviour(faults=FaultPlan(rate=1.0, kinds=("schema_violation",))))
    with serve_app(stub) as base_url:
        launch(settings=_settings(lake, base_url, max_retries=2), instance=instance)
    assert lake.read_table("user_profiles").num_rows == 0 and lake.read_table("user_playbooks").num_rows == 0
    assert lake.read_table("extraction_bookmarks").num_rows == 0, "no bookmark advanced past the failed windows"
    failures = lake.read_table("extraction_failures").to_pylist()
    assert {f["user_id"] for f in failures} == {"alice", "bob", "carol", "dmitri"}
    assert {(f["stage"], f["error_class"], f["attempts"]) for f in failures} == {("extract", "SchemaViolation", 3)}
    assert all(f["resolved_by_run"] is None for f in failures)
    assert len(stub.state.requests) == 4 * 3  # four users' windows, each tried three times
    assert sorted(windows_to_retry(lake)) == sorted({f["window"] for f in failures})
    # The sensor and launch() request exactly those windows again, each under a run key of its own.
    retries = [p for p in pending_windows(lake, GRANULARITY) if p.retry_of]
    assert {p.window for p in retries} == {f["window"] for f in failures}
    assert {i for p in retries for i in p.retry_of} == {f["failure_id"] for f in failures}
    assert len({p.digest for p in retries}) == len(retries)


@pytest.mark.e2e
def test_schema_violation_then_a_good_answer():
    app = make_openai_stub(StubBehaviour(responder=lambda body: '{"profiles": {"fact": 1}, "playbooks": "none"}'))
    with serve_app(app) as base_url:
        extractor = LiteLLMExtractor(
            model="openai/stub", api_base=f"{base_url}/v1", api_key="k", max_retries=1, backoff_base_s=0.01
        )
        with pytest.raises(ExtractionFailed, match="SchemaViolation: the reply is JSON but violates") as info:
            extractor.extract(DEPLOY_WINDOW)
        assert info.value.attempts == 2
        app.state.behaviour = StubBehaviour()
        result = extractor.extract(DEPLOY_WINDOW)
    assert result.profiles and result.playbooks and result.llm_calls == 1


@pytest.mark.e2e
def test_rate_limit_waits_for_retry_after_and_backoff_is_jittered_exponential():
    delays: list[float] = []
    plan = FaultPlan(rate=1.0, kinds=("rate_limit",), retry_after_s=2.5)
    app = make_openai_stub(StubBehaviour(faults=plan))
    with serve_app(app) as base_url:
        extractor = LiteLLMExtractor(
            model="openai/stub",
            api_base=f"{base_url}/v1",
            api_key="k",
            max_retries=3,
            backoff_base_s=1.0,
            sleep=delays.append,
        )
        with pytest.raises(ExtractionFailed, match=r"RateLimitError: rate limited \(HTTP 429\)"):
            extractor.extract(DEPLOY_WINDOW)
    assert app.state.calls == 4 and len(delays) == 3
    # retry k waits the longer of the Retry-After (2.5 s) and the backoff, uniform in [2^k, 2^(k+1)) seconds
    assert 2.5 <= delays[0] <= 2.5 and 2.5 <= delays[1] <= 4.0 and 4.0 <= delays[2] <= 8.0


def test_fault_plan_is_deterministic_per_body_and_occurrence():
    plan = FaultPlan(rate=FAULT_RATE, seed=3)
    bodies = [{"messages": [{"role": "user", "content": f"window {i}"}]} for i in range(400)]
    draws = [plan.draw(body, 1) for body in bodies]
    assert draws == [plan.draw(body, 1) for body in bodies]  # same inputs, same faults
    assert draws != [plan.draw(body, 2) for body in bodies]  # a retry of the same request draws again
    faulted = sum(d is not None for d in draws) / len(draws)
    assert abs(faulted - FAULT_RATE) < 0.07 and {d for d in draws if d} == set(FAULT_KINDS)


def test_a_waiting_publish_says_learning_failed_when_the_llm_is_down(lake: Lake, instance):
    """`wait_for_response=true` while every LLM call fails: the publish is accepted (200, stored), but the answer
    says learning failed and why — never "learned and indexed" — and carries no provider text or key. Once the LLM
    is back, the same window is learned and the next waiting publish says so."""
    body = {
        "user_id": "lia",
        "interaction_data_list": [
            {"role": "user", "content": "I live in Porto."},
            {"role": "assistant", "content": "Noted."},
        ],
    }
    down = make_openai_stub(StubBehaviour(error_first=10**6, error_status=500))
    with serve_app(down) as base_url:
        settings = Settings(
            lake=str(lake.root),
            llm=LLMSettings(
                model="openai/stub",
                api_base=f"{base_url}/v1",
                api_key="sk-secret-value-42",
                max_retries=0,
                backoff_base_s=0.01,
            ),
        )
        with TestClient(create_app(settings)) as client:
            reply = client.post("/api/publish_interaction?wait_for_response=true", json=body)
    assert down.state.calls > 0  # the LLM really was asked, and failed
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["success"] is True and answer["request_id"]  # stored: the publish itself was accepted
    assert "learned and indexed" not in answer["message"] and answer.get("learned") is False
    assert answer["message"].startswith("stored; learning failed (") and "server error (HTTP 500)" in answer["message"]
    assert any("server error (HTTP 500)" in w for w in answer["warnings"])
    assert "sk-secret-value-42" not in reply.text and answer["profiles_added"] == 0

    with serve_app(make_openai_stub()) as base_url:  # the LLM is back: the retry learns the window
        with TestClient(create_app(_settings(lake, base_url))) as client:
            again = client.post(
                "/api/publish_interaction?wait_for_response=true",
                json={**body, "interaction_data_list": body["interaction_data_list"][:1]},
            ).json()
    assert again["learned"] is True and again["message"] == "stored, learned and indexed", again
