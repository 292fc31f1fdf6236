"""The LLM call ledger table `llm_calls`: written from real `CallLedger`s into a real Delta lake, summed per day and
per 1,000 turns, served by GET /api/llm_usage (open and keyed mode), erased with the user it was about, and filled
by real evaluation and aggregation runs whose LiteLLM calls go over HTTP to the OpenAI-compatible stub."""

from __future__ import annotations

import json
import threading
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.llm_calls import ledger_rows, llm_usage, window_of_call, write_llm_calls
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.clauses.head import ClauseHead
from reflexio_pipelines.learning.llm_ledger import CallLedger, LLMCall
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch, run_evaluation
from reflexio_pipelines.settings import LLMSettings, Settings
from serving.app import create_app
from serving.tenancy import KeyStore
from tests.support.landing import land
from tests.support.learned import REGION, correction_turns
from tests.support.openai_stub import make_openai_stub
from tests.support.servers import serve_app

PRICED, UNPRICED = "openai/gpt-4o-mini", "openai/stub"  # the stub's model is in no cost map


def at_us(day: date, hour: int, minute: int = 0) -> int:
    """Unix microseconds of `day` at hour:minute UTC."""
    return int(datetime(day.year, day.month, day.day, hour, minute, tzinfo=timezone.utc).timestamp() * 1_000_000)


def call(
    stage: str,
    model: str,
    prompt: int,
    completion: int,
    cost: float | None,
    started_at_us: int,
    user_id: str | None,
    outcome: str = "ok",
    attempt: int = 1,
) -> LLMCall:
    """One ledger record (error class derived from the outcome, latency fixed)."""
    error = None if outcome == "ok" else {"timeout": "Timeout", "rate_limited": "RateLimitError"}.get(outcome, "Error")
    return LLMCall(
        stage=stage,
        model=model,
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_ms=850,
        outcome=outcome,
        error_class=error,
        cost_usd=cost,
        attempt=attempt,
        started_at_us=started_at_us,
        user_id=user_id,
    )


def ledger(*calls: LLMCall) -> CallLedger:
    out = CallLedger()
    for c in calls:
        out.add(c)
    return out


def seed_turns(lake: Lake, counts: dict[str, int]) -> None:
    """`counts[window]` turns in the real `turns` table, one window per Delta commit."""
    for window, n in counts.items():
        rows = [
            {
                "turn_id": f"{window}-r{i}:0",
                "interaction_id": i,
                "request_id": f"{window}-r{i}",
                "turn_index": 0,
                "user_id": f"user-{i % 7}",
                "role": "user",
                "content": "hello",
                "created_at": 0,
                "ingested_at_us": 0,
                "window": window,
            }
            for i in range(n)
        ]
        lake.replace_window("turns", window, pa.Table.from_pylist(rows, schema=TABLES["turns"]))


def seed_usage(lake: Lake, d1: date, d2: date, d3: date) -> None:
    """Three days of LLM use, written the way the assets write it (`write_llm_calls` from ledgers):

    - d1: 400 turns (250 + 150 in two hourly windows). A learning run of d1's 04:00 window — one of its calls
      started on d2 (a backfill), still counted on d1 — with a timeout retried; an evaluation run at d1 09:00 with
      an unpriced session judge and a shadow judge rate-limited once. 7 calls, 2 failed, 3,200 + 480 tokens,
      $0.0008 from priced calls and 1 unpriced call.
    - d2: 200 turns; two unpriced consolidation calls (cross-user) — cost n/a.
    - d3: no turns; one priced judge call.
    """
    seed_turns(
        lake,
        {window_of_call(at_us(d1, 4)): 250, window_of_call(at_us(d1, 9)): 150, window_of_call(at_us(d2, 10)): 200}
        if GRANULARITY == "hourly"
        else {window_of_call(at_us(d1, 4)): 400, window_of_call(at_us(d2, 10)): 200},
    )
    learning = ledger(
        call("extraction", PRICED, 1000, 200, 0.0003, at_us(d1, 4, 5), "u1"),
        call("extraction", PRICED, 0, 0, 0.0, at_us(d1, 4, 6), "u1", outcome="timeout"),
        call("extraction", PRICED, 1000, 200, 0.0003, at_us(d1, 4, 7), "u1", attempt=2),
        call("dedup", PRICED, 400, 50, 0.0001, at_us(d2, 1), "u2"),  # a backfill of d1's window, run on d2
    )
    write_llm_calls(lake, learning, run_id="learn-1", asset="user_learning", window=window_of_call(at_us(d1, 4)))
    evaluation = ledger(
        call("session_judge", UNPRICED, 500, 20, None, at_us(d1, 9, 1), "u1"),
        call("shadow_judge", PRICED, 0, 0, 0.0, at_us(d1, 9, 2), "u2", outcome="rate_limited"),
        call("shadow_judge", PRICED, 300, 10, 0.0001, at_us(d1, 9, 3), "u2", attempt=2),
    )
    write_llm_calls(lake, evaluation, run_id="eval-1", asset="session_evaluation", window=None)
    aggregation = ledger(
        call("consolidation", UNPRICED, 800, 100, None, at_us(d2, 12), None),
        call("consolidation", UNPRICED, 800, 100, None, at_us(d2, 12, 1), None),
    )
    write_llm_calls(lake, aggregation, run_id="agg-1", asset="agent_playbook_aggregation", window=None)
    write_llm_calls(
        lake,
        ledger(call("session_judge", PRICED, 700, 30, 0.0002, at_us(d3, 8), "u3")),
        run_id="eval-2",
        asset="session_evaluation",
        window=None,
    )


D1, D2, D3 = date(2026, 3, 2), date(2026, 3, 3), date(2026, 3, 4)


# -- writing ---------------------------------------------------------------------------------------------------


def test_round_trip_keeps_every_field_and_places_rows_in_windows(lake: Lake):
    partitioned = window_of_call(at_us(D1, 4))
    records = [
        call("extraction", PRICED, 1200, 300, 0.00042, at_us(D1, 4, 30), "u1"),
        call("consolidation", UNPRICED, 50, 5, None, at_us(D1, 23, 59), None, outcome="bad_output"),
    ]
    assert write_llm_calls(lake, ledger(*records), run_id="r1", asset="user_learning", window=partitioned) == 2
    assert write_llm_calls(lake, ledger(*records), run_id="r2", asset="session_evaluation", window=None) == 2
    rows = sorted(lake.read_table("llm_calls").to_pylist(), key=lambda r: (r["run_id"], r["started_at_us"]))
    assert [r["window"] for r in rows] == [
        partitioned,
        partitioned,  # the partition's window, whatever the time
        partitioned,
        window_of_call(at_us(D1, 23)),
    ]  # else the start's window
    for row, record in zip(rows, records * 2):
        assert {k: row[k] for k in record.row()} == record.row()  # nothing lost or retyped on the way
    assert {r["asset"] for r in rows} == {"user_learning", "session_evaluation"}
    assert rows[1]["cost_usd"] is None and rows[1]["user_id"] is None  # nulls stay nulls
    # The id is deterministic: the same records of the same run give the same ids.
    again = ledger_rows(ledger(*records).calls(), run_id="r1", asset="user_learning", window=partitioned)
    assert sorted(r["call_id"] for r in again) == sorted(r["call_id"] for r in rows if r["run_id"] == "r1")


def test_runs_append_and_a_ledger_written_twice_lands_once(lake: Lake):
    assert write_llm_calls(lake, CallLedger(), run_id="r0", asset="a", window=None) == 0
    assert lake.table_version("llm_calls") is None  # an empty ledger commits nothing
    same = call("extraction", PRICED, 10, 1, 0.00001, at_us(D1, 4), "u1")
    first = ledger(same, same)  # two identical attempts (same microsecond): both are real calls
    assert write_llm_calls(lake, first, run_id="r1", asset="a", window=None) == 2
    version = lake.table_version("llm_calls")
    assert write_llm_calls(lake, first, run_id="r1", asset="a", window=None) == 0
    assert lake.table_version("llm_calls") == version  # nothing new: no commit either
    # A re-run of the same work makes the same calls again: they cost money again and are new rows.
    assert write_llm_calls(lake, ledger(same, same), run_id="r2", asset="a", window=None) == 2
    rows = lake.read_table("llm_calls").to_pylist()
    assert len(rows) == 4 and len({r["call_id"] for r in rows}) == 4
    assert sorted(r["run_id"] for r in rows) == ["r1", "r1", "r2", "r2"]


def test_writing_does_not_wait_behind_a_window_lock(lake: Lake):
    """A learning step holds its window's lock for its whole run; an evaluation's ledger for that hour is written
    meanwhile (it holds the table's own lock, which erasure takes too)."""
    window = window_of_call(at_us(D1, 4))
    written: list[int] = []
    with lake.lock(f"window-{window}"):
        writer = threading.Thread(
            target=lambda: written.append(
                write_llm_calls(
                    lake,
                    ledger(call("session_judge", PRICED, 10, 1, 0.00001, at_us(D1, 4), "u1")),
                    run_id="eval-1",
                    asset="session_evaluation",
                    window=None,
                )
            )
        )
        writer.start()
        writer.join(timeout=30)
    assert written == [1] and not writer.is_alive()


# -- the summary -----------------------------------------------------------------------------------------------


def test_usage_per_day_and_per_thousand_turns(lake: Lake):
    seed_usage(lake, D1, D2, D3)
    day1, day2, day3 = llm_usage(lake)
    assert (day1.day, day2.day, day3.day) == (D1.isoformat(), D2.isoformat(), D3.isoformat())

    assert (day1.turns, day1.calls, day1.failed_calls) == (400, 7, 2)
    assert (day1.prompt_tokens, day1.completion_tokens) == (3200, 480)
    assert day1.cost_usd == pytest.approx(0.0008) and day1.calls_without_cost == 1
    assert day1.models_without_cost == [UNPRICED]
    assert day1.calls_by_stage == {"dedup": 1, "extraction": 3, "session_judge": 1, "shadow_judge": 2}
    assert day1.calls_per_1k_turns == 17.5
    assert (day1.prompt_tokens_per_1k_turns, day1.completion_tokens_per_1k_turns) == (8000.0, 1200.0)
    assert day1.tokens_per_1k_turns == 9200.0
    assert day1.cost_usd_per_1k_turns == pytest.approx(0.002)

    # Only unpriced calls: the cost is unknown, not zero.
    assert (day2.turns, day2.calls, day2.failed_calls, day2.calls_without_cost) == (200, 2, 0, 2)
    assert day2.cost_usd is None and day2.cost_usd_per_1k_turns is None
    assert (day2.calls_per_1k_turns, day2.tokens_per_1k_turns) == (10.0, 9000.0)

    # Calls but no turns: totals, and no per-1k figure rather than a division by zero.
    assert (day3.turns, day3.calls, day3.cost_usd) == (0, 1, pytest.approx(0.0002))
    assert day3.calls_per_1k_turns is None and day3.cost_usd_per_1k_turns is None

    # The last N days up to `today`.
    assert [d.day for d in llm_usage(lake, days=2, today=D3)] == [D2.isoformat(), D3.isoformat()]
    assert [d.day for d in llm_usage(lake, days=1, today=D2)] == [D2.isoformat()]
    assert llm_usage(lake, days=5, today=D1 - timedelta(days=1)) == []


def test_usage_of_an_empty_lake_is_empty(lake: Lake):
    assert llm_usage(lake) == [] and llm_usage(lake, days=7) == []


# -- the API ---------------------------------------------------------------------------------------------------


def recent_days() -> tuple[date, date, date]:
    """Three, two and one day(s) before today (UTC): inside the API's and the dashboard's default period."""
    today = datetime.now(timezone.utc).date()
    return today - timedelta(days=3), today - timedelta(days=2), today - timedelta(days=1)


def test_llm_usage_endpoint(settings, lake: Lake, instance):
    d1, d2, d3 = recent_days()
    seed_usage(lake, d1, d2, d3)
    with TestClient(create_app(settings)) as client:
        reply = client.get("/api/llm_usage", params={"days": 7})
        assert reply.status_code == 200
        body = reply.json()
        assert body["success"] and body["msg"] == ""
        assert [d["day"] for d in body["days"]] == [d1.isoformat(), d2.isoformat(), d3.isoformat()]
        first = body["days"][0]
        assert (first["calls"], first["failed_calls"], first["turns"]) == (7, 2, 400)
        assert first["calls_per_1k_turns"] == 17.5 and first["tokens_per_1k_turns"] == 9200.0
        assert first["cost_usd_per_1k_turns"] == pytest.approx(0.002)
        assert body["days"][1]["cost_usd"] is None and body["days"][1]["models_without_cost"] == [UNPRICED]
        # `days` narrows to the most recent days; bad values are a 422 naming the field.
        assert [d["day"] for d in client.get("/api/llm_usage?days=2").json()["days"]] == [d3.isoformat()]
        bad = client.get("/api/llm_usage?days=0")
        assert bad.status_code == 422 and "days" in bad.text
        schema = client.get("/openapi.json").json()["paths"]["/api/llm_usage"]["get"]["responses"]["200"]
        assert schema["content"]["application/json"]["schema"]["$ref"].endswith("/LLMUsageResponse")


def test_llm_usage_endpoint_on_an_empty_lake_says_so(settings, instance):
    with TestClient(create_app(settings)) as client:
        body = client.get("/api/llm_usage").json()
    extractor = body.pop("extractor")
    assert body == {"success": True, "days": [], "msg": "no LLM calls recorded yet"}
    # the dashboard names what learns without a model: the learned built-in, with its measured dev figures
    assert extractor["name"] == "builtin-learned" and extractor["kind"] == "learned heuristic"
    measured = ClauseHead.load().meta["dev"]["lasting"]  # the shipped head's dev split figures, as recorded
    assert (extractor["precision"], extractor["recall"]) == (measured["precision"], measured["recall"])
    assert 0.85 <= extractor["precision"] <= 1 and 0.8 <= extractor["recall"] <= 1


def test_llm_usage_in_keyed_mode_reads_each_organisations_own_lake(tmp_path: Path, instance):
    keys = tmp_path / "keys.json"
    acme, beta = KeyStore(keys).create("acme"), KeyStore(keys).create("beta")
    d1, d2, d3 = recent_days()
    seed_usage(Lake.at(tmp_path / "lake" / "orgs" / "acme"), d1, d2, d3)
    write_llm_calls(
        Lake.at(tmp_path / "lake" / "orgs" / "beta"),
        ledger(call("extraction", PRICED, 5, 1, 0.00001, at_us(d3, 1), "b1")),
        run_id="beta-1",
        asset="user_learning",
        window=window_of_call(at_us(d3, 1)),
    )
    app = create_app(Settings(lake=str(tmp_path / "lake"), api_keys_file=str(keys)))
    with TestClient(app) as client:
        assert client.get("/api/llm_usage").status_code == 401
        mine = client.get("/api/llm_usage", headers={"Authorization": f"Bearer {acme}"}).json()["days"]
        theirs = client.get("/api/llm_usage", headers={"Authorization": f"Bearer {beta}"}).json()["days"]
    assert [d["calls"] for d in mine] == [7, 2, 1]
    assert [(d["day"], d["calls"], d["turns"]) for d in theirs] == [(d3.isoformat(), 1, 0)]


# -- erasure ---------------------------------------------------------------------------------------------------


def _files_mentioning(lake: Lake, needle: bytes) -> list[str]:
    """Every file of the table (data files and the Delta log, whose statistics hold column values) naming `needle`."""
    root = Path(str(lake.table_path("llm_calls")))
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_erasing_a_user_removes_their_ledger_rows_and_keeps_everyone_elses(settings, lake: Lake, instance):
    gone, kept = "erase-me-7Q4Z", "keep-me-2B"
    window = window_of_call(at_us(D1, 4))
    write_llm_calls(
        lake,
        ledger(
            call("extraction", PRICED, 100, 10, 0.0001, at_us(D1, 4), gone),
            call("dedup", PRICED, 50, 5, 0.00005, at_us(D1, 4, 1), gone),
            call("extraction", PRICED, 90, 9, 0.00009, at_us(D1, 4, 2), kept),
        ),
        run_id="learn-1",
        asset="user_learning",
        window=window,
    )
    write_llm_calls(
        lake,
        ledger(
            call("consolidation", UNPRICED, 800, 80, None, at_us(D1, 5), None),
            call("session_judge", PRICED, 70, 7, 0.00007, at_us(D2, 5), gone),
        ),
        run_id="agg-1",
        asset="agent_playbook_aggregation",
        window=None,
    )
    assert _files_mentioning(lake, gone.encode())  # the check below could fail: the id is in the files now
    with TestClient(create_app(settings)) as client:
        reply = client.request("DELETE", "/api/erase_user_data", json={"user_id": gone})
        assert reply.status_code == 200 and reply.json()["success"], reply.text
    rows = lake.read_table("llm_calls").to_pylist()
    assert sorted((r["user_id"] or "-", r["stage"]) for r in rows) == [("-", "consolidation"), (kept, "extraction")]
    assert _files_mentioning(lake, gone.encode()) == []  # history purged too, not only the current version
    assert llm_usage(lake)[0].calls == 2


# -- real runs through the OpenAI-compatible stub ----------------------------------------------------------------


T0 = datetime(2026, 11, 3, 10, 0, tzinfo=timezone.utc)


def _session(i: int, shadow: bool) -> dict:
    created = int((T0 + timedelta(minutes=i)).timestamp())
    turns = [
        {"role": "user", "content": "Please rotate the reporting credentials.", "created_at": created},
        {"role": "assistant", "content": "Done: new credential issued.", "created_at": created},
        {"role": "user", "content": "Perfect, thanks!", "created_at": created},
    ]
    if shadow:
        turns[1]["shadow_content"] = "I restarted the database."
    return {
        "id": f"s{i}",
        "user_id": f"judge-u{i}",
        "session_id": f"judge-s{i}",
        "agent_version": "v1",
        "source": "test",
        "interactions": turns,
    }


def test_an_evaluation_run_with_the_litellm_judge_lands_its_calls(lake: Lake, instance, tmp_path: Path):
    config = tmp_path / "extraction.json"
    config.write_text(json.dumps({"agent_success_configs": [{"evaluation_name": "ok", "sampling_rate": 1.0}]}))
    stub = make_openai_stub()
    with serve_app(stub) as base_url:
        settings = Settings(
            lake=str(lake.root),
            extraction_config=str(config),
            llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k"),
        )
        land(lake, [_session(i, shadow=i % 2 == 0) for i in range(4)], at=T0)
        launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
        before = len(stub.state.requests)
        result = run_evaluation(now=int((T0 + timedelta(hours=1)).timestamp()), settings=settings, instance=instance)
        requests = len(stub.state.requests) - before
    assert result["success"] and result["evaluated_now"] == 4
    rows = [r for r in lake.read_table("llm_calls").to_pylist() if r["asset"] == "session_evaluation"]
    assert len(rows) == requests == 4 + 2  # one verdict per session, one comparison per shadow turn; every one
    assert result["llm_calls_recorded"] == len(rows)
    assert {r["run_id"] for r in rows} == {result["run_id"]}
    assert sorted(r["stage"] for r in rows) == ["session_judge"] * 4 + ["shadow_judge"] * 2
    assert {r["user_id"] for r in rows} == {f"judge-u{i}" for i in range(4)}  # about the session's user
    assert all(r["outcome"] == "ok" and r["model"] == "openai/stub" and r["prompt_tokens"] > 0 for r in rows)
    assert all(r["window"] == window_of_call(r["started_at_us"]) for r in rows)  # unpartitioned: the call's window
    assert all(r["cost_usd"] is None for r in rows)  # the stub's model is in no cost map: unknown, not free


def test_an_aggregation_run_lands_its_consolidation_calls_without_a_user(lake: Lake, instance):
    stub = make_openai_stub()
    with serve_app(stub) as base_url:
        settings = Settings(
            lake=str(lake.root), llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k")
        )
        with TestClient(create_app(settings)) as client:
            for user, request, answer, correction in REGION:
                body = {
                    "user_id": user,
                    "agent_version": "ops-1",
                    "session_id": f"{user}-s",
                    "interaction_data_list": correction_turns(request, answer, correction),
                }
                reply = client.post("/api/publish_interaction?wait_for_response=true", json=body)
                assert reply.status_code == 200 and reply.json()["playbooks_added"] == 1, reply.text
            before = len(stub.state.requests)
            result = client.post("/api/run_playbook_aggregation", json={"agent_version": "ops-1"}).json()
            requests = len(stub.state.requests) - before
    assert result["success"]
    rows = [r for r in lake.read_table("llm_calls").to_pylist() if r["asset"] == "agent_playbook_aggregation"]
    assert len(rows) == requests == 1  # one cluster, one consolidation call
    (row,) = rows
    assert row["stage"] == "consolidation" and row["user_id"] is None and row["run_id"] == result["run_id"]
