"""The one LLM endpoint against the real OpenAI-compatible stub on 127.0.0.1: the process-wide throttle (calls in
flight, requests/min, tokens/min, a 429's Retry-After pausing every caller), parameters a model does not accept
dropped, every setting reaching the call through the resource, and one ledger row per attempt."""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
from fastapi.responses import JSONResponse
from litellm import cost_per_token as litellm_cost_per_token

from reflexio_pipelines.assets.aggregation import consolidator_for
from reflexio_pipelines.assets.evaluation import judge_for
from reflexio_pipelines.definitions import build_resources
from reflexio_pipelines.learning.aggregate import Member
from reflexio_pipelines.learning.llm_call import STAGES, LLMEndpoint
from reflexio_pipelines.learning.llm_extract import REPLY_KEYS, LiteLLMExtractor
from reflexio_pipelines.learning.llm_ledger import OUTCOMES, CallLedger, about_user, recording
from reflexio_pipelines.learning.llm_throttle import BURST_SECONDS, estimate_tokens
from reflexio_pipelines.learning.types import Window
from reflexio_pipelines.resources import ExtractorResource
from reflexio_pipelines.settings import Settings, SettingsError, load_settings
from tests.support.openai_stub import FaultPlan, StubBehaviour, fake_llm_reply, make_openai_stub
from tests.support.servers import serve_app
from tests.test_judge import GOOD, POOR, THANKS, shadow_session
from tests.test_llm_dedup import T0, profile
from tests.test_llm_extract import DEPLOY_WINDOW

pytestmark = pytest.mark.e2e

RATE_LIMIT_MARKER = "RATE-LIMIT-ME"


class Arrivals:
    """Stub-side observation: when each chat request arrived (monotonic seconds) and what it asked, and a 429 with
    Retry-After for the first request carrying RATE_LIMIT_MARKER (the stub's own FaultPlan picks calls by a hash,
    this test needs to pick one)."""

    def __init__(self, app, retry_after_s: float) -> None:
        self.times: list[tuple[float, str]] = []
        self.rate_limited_at: float | None = None

        @app.middleware("http")
        async def observe(request, call_next):
            if request.url.path.endswith("/chat/completions"):
                body = json.loads(await request.body())
                text = body["messages"][-1]["content"]
                self.times.append((time.monotonic(), text))
                if RATE_LIMIT_MARKER in text and self.rate_limited_at is None:
                    self.rate_limited_at = time.monotonic()
                    return JSONResponse(
                        {"error": {"message": "slow down", "type": "rate_limit_error"}},
                        status_code=429,
                        headers={"Retry-After": f"{retry_after_s:g}"},
                    )
            return await call_next(request)


@contextmanager
def observed_stub(behaviour: StubBehaviour | None = None, retry_after_s: float = 0) -> Iterator[tuple]:
    """The stub with `Arrivals` installed (middleware must be added before the server starts)."""
    app = make_openai_stub(behaviour)
    arrivals = Arrivals(app, retry_after_s)
    with serve_app(app) as base_url:
        yield app, base_url, arrivals


def endpoint(base_url: str, model: str = "openai/stub", **settings) -> LLMEndpoint:
    settings.setdefault("backoff_base_s", 0.01)
    return LLMEndpoint(model, api_base=f"{base_url}/v1", api_key="k", **settings)


def ask(ep: LLMEndpoint, text: str, stage: str = "extraction"):
    """One JSON call whose reply the stub answers with an (empty) extraction."""
    return ep.call_json([{"role": "user", "content": text}], REPLY_KEYS, lambda obj: obj, "test call", stage=stage)


def in_threads(n: int, fn: Callable[[int], object]) -> list:
    """`fn(i)` for i in range(n), each in its own thread started with a copy of this context (ledger, user)."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, i) for i in range(n)]
        return [f.result() for f in futures]


# --- the throttle -------------------------------------------------------------------------------------------------


def test_calls_in_flight_are_capped_across_endpoint_objects(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(delay_s=0.3)
    first, second = endpoint(base_url, concurrency=8), endpoint(base_url, concurrency=8)
    assert first.throttle is second.throttle  # one throttle per (model, api_base) in the process
    started = time.monotonic()
    outcomes = in_threads(40, lambda i: ask(first if i % 2 else second, f"call {i}"))
    elapsed = time.monotonic() - started
    assert all(o.ok and o.calls == 1 for o in outcomes) and app.state.calls == 40
    assert app.state.max_in_flight == 8  # 40 callers, never more than 8 at the endpoint, and the cap was reached
    assert elapsed >= 5 * 0.3 - 0.05  # five waves of eight
    assert first.throttle.in_flight == 0  # every slot was released


def test_a_429_with_retry_after_pauses_every_caller() -> None:
    ledger = CallLedger()

    def worker(w: int) -> list:
        return [
            ask(ep, f"worker {w} call {c}" + (f" {RATE_LIMIT_MARKER}" if (w, c) == (0, 1) else "")) for c in range(6)
        ]

    with observed_stub(StubBehaviour(delay_s=0.05), retry_after_s=1.0) as (app, base_url, arrivals):
        ep = endpoint(base_url, concurrency=8, max_retries=2)
        # LiteLLM's first calls in a process spend a while client-side before sending: a call let through just
        # before the pause would reach the stub late and look like one started during it
        in_threads(4, lambda i: ask(ep, f"warm-up {i}"))
        arrivals.times.clear()
        with recording(ledger):
            results = in_threads(4, worker)
    assert all(o.ok for calls in results for o in calls)
    hit = arrivals.rate_limited_at
    assert hit is not None
    # Calls already past the throttle when the 429 came back may still arrive a moment later; after that nobody
    # starts a call until the Retry-After is over, although three other workers had calls to make.
    during = [t - hit for t, _ in arrivals.times if hit + 0.25 < t < hit + 0.95]
    assert during == [], f"calls started during the pause: {during}"
    after = [text for t, text in arrivals.times if t >= hit + 0.95]
    assert {text.split()[1] for text in after} == {"0", "1", "2", "3"}, "every worker resumed after the pause"
    retry = next(t for t, text in arrivals.times if RATE_LIMIT_MARKER in text and t > hit)
    assert retry - hit >= 0.99  # the caller that got the 429 waited the Retry-After too
    rows = ledger.calls()
    assert len(rows) == 4 * 6 + 1 == len(arrivals.times)
    assert [(r.outcome, r.error_class, r.attempt) for r in rows if r.outcome != "ok"] == [
        ("rate_limited", "RateLimitError", 1)
    ]


def test_requests_per_minute_limit_slows_calls() -> None:
    burst = 120 * BURST_SECONDS // 60
    with observed_stub() as (app, base_url, arrivals):
        unlimited = endpoint(base_url, model="openai/stub-free")  # its own throttle, no limit: the baseline
        assert ask(unlimited, "warm-up").ok  # LiteLLM's first call in a process is slow
        started = time.monotonic()
        assert all(o.ok for o in in_threads(burst + 5, lambda i: ask(unlimited, f"free {i}")))
        baseline = time.monotonic() - started
        limited = endpoint(base_url, model="openai/stub-rpm", rpm=120)  # a bucket of 20 calls, refilling 2 per s
        arrivals.times.clear()
        started = time.monotonic()
        assert all(o.ok for o in in_threads(burst + 5, lambda i: ask(limited, f"limited {i}")))
    times = sorted(t - started for t, _ in arrivals.times)
    # the burst goes at once, then one call per half second: call burst + k arrives no sooner than k/2 s after the
    # start. Machine load only delays arrivals, so this bound holds however loaded the machine is; what load can do
    # is make an unlimited run as slow as the limit, and then this machine cannot tell the two apart.
    assert all(t >= (n - burst) / 2 - 0.05 for n, t in enumerate(times, start=1)), (baseline, times)
    if baseline > 2.0:
        pytest.skip(f"the unlimited baseline took {baseline:.1f} s, as long as the limit: too loaded to compare")


def test_tokens_per_minute_limit_slows_calls() -> None:
    text = "x" * 797  # after the call's number padded to 3: 800 characters, 200 tokens by the chars/4 estimate
    assert estimate_tokens([{"role": "user", "content": f"{10:<3}{text}"}]) == 200
    with observed_stub() as (app, base_url, arrivals):
        ep = endpoint(base_url, model="openai/stub-tpm", tpm=12_000)  # a bucket of 2,000 tokens, 200 per second
        started = time.monotonic()
        assert all(o.ok for o in in_threads(12, lambda i: ask(ep, f"{i:<3}{text}")))
    times = sorted(t - started for t, _ in arrivals.times)
    # Ten calls empty the bucket at once; the eleventh and twelfth wait for 200 tokens each, 1 s apiece. Bounded from
    # the start, as in the RPM test: measured from the first arrival instead, a slow first call (LiteLLM's first in
    # the process arrived 0.83 s late on a loaded machine) ate into the gap and failed a limiter that worked.
    assert len(times) == 12 and times[10] >= 1.0 - 0.05 and times[11] >= 2.0 - 0.05, times


def test_many_threads_under_faults_release_every_slot_and_record_every_attempt(stub) -> None:
    app, base_url = stub
    plan = FaultPlan(rate=0.3, seed=5, kinds=("rate_limit", "server_error", "malformed_json"), retry_after_s=0.05)
    app.state.behaviour = StubBehaviour(delay_s=0.05, faults=plan)
    ep = endpoint(base_url, concurrency=16, max_retries=4)
    ledger = CallLedger()

    def user_call(i: int):
        with about_user(f"user-{i}"):
            return ask(ep, f"window of user {i}")

    with recording(ledger):
        outcomes = in_threads(64, user_call)
    assert app.state.max_in_flight <= 16 and ep.throttle.in_flight == 0
    assert sum(o.ok for o in outcomes) >= 60 and app.state.faults  # faults were met and mostly retried away
    rows = ledger.calls()
    assert len(rows) == app.state.calls == sum(o.calls for o in outcomes)  # one row per attempt, none lost
    for i, outcome in enumerate(outcomes):
        mine = [r for r in rows if r.user_id == f"user-{i}"]
        assert [r.attempt for r in sorted(mine, key=lambda r: r.attempt)] == list(range(1, outcome.calls + 1))
        assert sum(r.prompt_tokens for r in mine) == outcome.prompt_tokens
    assert {r.outcome for r in rows} <= set(OUTCOMES) and {"ok", "rate_limited", "server_error"} <= {
        r.outcome for r in rows
    }


# --- parameters and settings --------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["openai/gpt-5-mini", "openai/o3-mini"])
def test_reasoning_models_get_no_temperature_and_succeed(stub, model: str) -> None:
    app, base_url = stub
    resource = ExtractorResource(model=model, api_base=f"{base_url}/v1", api_key="k", temperature=0.0)
    ledger = CallLedger()
    with recording(ledger):
        result = resource.get().extract(DEPLOY_WINDOW)
    assert result.profiles and result.playbooks and result.llm_calls == 1
    (request,) = app.state.requests
    assert "temperature" not in request["body"] and request["body"]["model"] == model.split("/", 1)[1]
    (row,) = ledger.calls()
    assert row.outcome == "ok" and row.cost_usd is not None and row.cost_usd > 0  # a model in the bundled cost map
    # the price LiteLLM put on the response is the cost map's price of the tokens the provider reported
    assert row.cost_usd == pytest.approx(
        sum(
            litellm_cost_per_token(
                model=model, prompt_tokens=row.prompt_tokens, completion_tokens=row.completion_tokens
            )
        )
    )


def test_temperature_from_settings_reaches_every_stage(stub, tmp_path, monkeypatch) -> None:
    app, base_url = stub
    monkeypatch.setenv("REFLEXIO_LLM_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("REFLEXIO_LLM_API_BASE", f"{base_url}/v1")
    monkeypatch.setenv("REFLEXIO_LLM_API_KEY", "k")
    monkeypatch.setenv("REFLEXIO_LLM_TEMPERATURE", "0.7")
    monkeypatch.delenv("REFLEXIO_CONFIG", raising=False)
    settings = load_settings({"lake": str(tmp_path / "lake")})
    assert settings.llm.temperature == 0.7
    resource = build_resources(settings)["extractor"]
    resource.get().extract(DEPLOY_WINDOW)
    judge = resource.dedup_judge_factory()("profile", None)
    judge.judge([profile("n", "Lives in Berlin", T0)], [profile("e", "Lives in London", 0)])
    judge_for(resource).evaluate(THANKS)
    consolidator_for(resource, {}, "v1").consolidate(
        [Member(1, "u1", "Use us-west-2."), Member(2, "u2", "Use us-west-2 always.")], []
    )
    bodies = [r["body"] for r in app.state.requests]
    assert len(bodies) == 4 and [b["temperature"] for b in bodies] == [0.7] * 4
    assert {b["model"] for b in bodies} == {"gpt-4o-mini"}


def test_every_llm_setting_reaches_the_resource_and_the_endpoint(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("REFLEXIO_CONFIG", raising=False)
    env = {
        "REFLEXIO_LLM_MODEL": "openai/gpt-4o-mini",
        "REFLEXIO_LLM_API_BASE": "http://127.0.0.1:9/v1",
        "REFLEXIO_LLM_TIMEOUT": "7",
        "REFLEXIO_LLM_MAX_RETRIES": "5",
        "REFLEXIO_LLM_BACKOFF_BASE": "0.5",
        "REFLEXIO_LLM_TEMPERATURE": "0.3",
        "REFLEXIO_LLM_GATE_MODEL": "openai/gpt-4.1-nano",
        "REFLEXIO_LLM_CONCURRENCY": "8",
        "REFLEXIO_LLM_RPM": "500",
        "REFLEXIO_LLM_TPM": "200000",
        "REFLEXIO_LLM_API_VERSION": "2024-10-21",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings({"lake": str(tmp_path / "lake")})
    resource = build_resources(settings)["extractor"]
    assert resource.llm_settings().model_dump(exclude={"api_key"}) == settings.llm.model_dump(exclude={"api_key"})
    assert resource.concurrency == 8
    ep = resource.endpoint()
    assert (ep.model, ep.api_base, ep.timeout_s, ep.max_retries, ep.backoff_base_s, ep.temperature) == (
        "openai/gpt-4o-mini",
        "http://127.0.0.1:9/v1",
        7.0,
        5,
        0.5,
        0.3,
    )
    assert (ep.limits.concurrency, ep.limits.rpm, ep.limits.tpm) == (8, 500, 200_000)
    assert ep.api_version == "2024-10-21"  # Azure's api-version (tests/test_provider_protocols.py sends it)
    extractor = resource.get()
    assert isinstance(extractor, LiteLLMExtractor) and extractor.endpoint == ep
    assert extractor.gate_endpoint is not None and extractor.gate_endpoint.model == "openai/gpt-4.1-nano"
    assert extractor.gate_endpoint.limits == ep.limits and extractor.gate_endpoint.temperature == 0.3
    # the built-in extractor makes no remote calls: one worker
    assert build_resources(Settings(lake=str(tmp_path / "lake")))["extractor"].concurrency == 1
    monkeypatch.setenv("REFLEXIO_LLM_CONCURRENCY", "0")
    with pytest.raises(SettingsError, match="llm.concurrency"):
        load_settings()


# --- the ledger ---------------------------------------------------------------------------------------------------


def test_every_attempt_lands_in_the_ledger_with_its_stage(stub) -> None:
    app, base_url = stub
    gate_model = "stub-gate"

    def responder(body: dict) -> str:
        return "true" if body["model"] == gate_model else fake_llm_reply(body)

    # call 1 (the gate) answers 503 — the window is extracted anyway —; call 2 garbage; call 3 a good extraction
    app.state.behaviour = StubBehaviour(error_first=1, error_status=503, garbage_first=2, responder=responder)
    extractor = LiteLLMExtractor(endpoint=endpoint(base_url), gate_model=f"openai/{gate_model}")
    window = Window("u-42", DEPLOY_WINDOW.turns[:3])  # no expert answer: the gate is asked
    ledger = CallLedger()
    with recording(ledger), about_user("u-42"):
        result = extractor.extract(window)
    rows = ledger.calls()
    assert [(r.stage, r.model, r.attempt, r.outcome, r.error_class) for r in rows] == [
        ("gate", "openai/stub-gate", 1, "server_error", "ServiceUnavailableError"),
        ("extraction", "openai/stub", 1, "bad_output", "LLMOutputError"),
        ("extraction", "openai/stub", 2, "ok", None),
    ]
    assert {r.user_id for r in rows} == {"u-42"} and all(r.cost_usd is None for r in rows)  # the stub is unmapped
    assert rows[0].prompt_tokens == 0 and all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in rows[1:])
    assert sum(r.prompt_tokens for r in rows) == result.prompt_tokens and len(rows) == result.llm_calls == 3
    assert (
        all(r.latency_ms >= 0 for r in rows) and rows[0].started_at_us < rows[1].started_at_us < rows[2].started_at_us
    )
    assert abs(rows[-1].started_at_us / 1e6 - time.time()) < 60  # wall-clock microseconds

    ledger = CallLedger()
    app.state.behaviour = StubBehaviour()
    ep = endpoint(base_url)
    with recording(ledger):
        from reflexio_pipelines.learning.llm_aggregate import LiteLLMConsolidator
        from reflexio_pipelines.learning.llm_dedup import LiteLLMDedupJudge
        from reflexio_pipelines.learning.llm_judge import LiteLLMJudge

        LiteLLMDedupJudge(endpoint=ep).judge([profile("n", "Lives in Berlin", T0)], [])
        judge = LiteLLMJudge(endpoint=ep)
        judge.evaluate(THANKS)
        s = shadow_session("ledger", GOOD, POOR)
        judge.compare(s, s.turns[1])
        LiteLLMConsolidator(endpoint=ep).consolidate([Member(1, "u1", "Use us-west-2.")], [])
    assert [r.stage for r in ledger.calls()] == ["dedup", "session_judge", "shadow_judge", "consolidation"]
    assert set(STAGES) == {"extraction", "gate", "dedup", "session_judge", "shadow_judge", "consolidation"}


def test_refused_calls_are_recorded_once_and_an_unknown_stage_is_an_error(stub) -> None:
    app, base_url = stub
    app.state.behaviour = StubBehaviour(error_first=10**6, error_status=401)
    ledger = CallLedger()
    with recording(ledger):
        outcome = ask(endpoint(base_url, max_retries=3), "hello", stage="dedup")
    assert (
        not outcome.ok
        and outcome.calls == 1
        and str(outcome.failure) == "AuthenticationError: request refused (HTTP 401)"
    )
    assert [(r.outcome, r.attempt) for r in ledger.calls()] == [("refused", 1)]
    with pytest.raises(ValueError, match="unknown LLM stage"):
        ask(endpoint(base_url), "hello", stage="chat")
    assert app.state.calls == 1  # the stage is checked before anything is sent


def test_the_litellm_warm_up_sends_nothing_and_records_nothing(stub) -> None:
    """A run's resources warm LiteLLM up before its first wave of calls (llm_call.preload_litellm): through LiteLLM's
    mock response, so the endpoint sees no request and the ledger no call; the calls after it work as before."""
    from reflexio_pipelines.learning.llm_call import preload_litellm

    app, base_url = stub
    ledger = CallLedger()
    with recording(ledger):
        preload_litellm("openai/stub", api_base=f"{base_url}/v1").join(timeout=120)
    assert app.state.calls == 0 and not ledger.calls()
    with recording(ledger):
        ask(endpoint(base_url), "after the warm-up")
    assert app.state.calls == 1 and [c.outcome for c in ledger.calls()] == ["ok"]


def test_every_stage_fails_with_the_one_stage_failure_naming_its_stage() -> None:
    """One failure type for the LLM stages (stage, cost, attempts, summary); each stage's own name is a subclass,
    so a caller catching one stage's failure still catches only that one."""
    from reflexio_pipelines.learning.learn import DedupFailed
    from reflexio_pipelines.learning.llm_aggregate import ConsolidationFailed
    from reflexio_pipelines.learning.llm_extract import ExtractionFailed
    from reflexio_pipelines.learning.llm_judge import JudgeFailed
    from reflexio_pipelines.learning.llm_stage import StageFailed

    assert all(issubclass(f, StageFailed) for f in (ExtractionFailed, JudgeFailed, ConsolidationFailed, DedupFailed))
    failed = JudgeFailed("no usable evaluation", stage="session_judge", calls=3, prompt_tokens=7)
    assert (failed.stage, failed.calls, failed.attempts, failed.prompt_tokens, failed.completion_tokens) == (
        "session_judge",
        3,
        3,
        7,
        0,
    )
    assert str(failed.summary) == "JudgeFailed: session_judge failed" and not isinstance(failed, ConsolidationFailed)
