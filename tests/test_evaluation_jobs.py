"""Grading on demand and evaluation regeneration at the original's paths (real evaluation runs over a real lake),
the review of user playbooks by their outcome counters, stall state, cache invalidation and the original's
liveness aliases."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reflexio_pipelines.learning.config import DEFAULT_EVALUATION
from reflexio_pipelines.learning.sessions import is_sampled
from reflexio_pipelines.learning.types import stable_int_id, stable_uuid
from serving.regeneration import JobRunning, RegenerationJobs
from tests.support.learned import REGION, correction_turns

GRADE = "/api/evaluations/grade_on_demand"
REGENERATE = "/api/evaluations/regenerate"


def _unsampled(prefix: str) -> str:
    """A session id the 5 % sampler does not pick (so only an on-demand grade judges it)."""
    return next(f"{prefix}-{i}" for i in range(100) if not is_sampled(f"{prefix}-{i}", DEFAULT_EVALUATION, 0.05))


def _publish(client: Any, session_id: str, user: int = 0) -> None:
    user_id, request, answer, correction = REGION[user]
    body = {"user_id": user_id, "agent_version": "v1", "session_id": session_id}
    body["interaction_data_list"] = correction_turns(request, answer, correction)
    assert client.post("/api/publish_interaction?wait_for_response=true", json=body).status_code == 200


def _evaluated(client: Any) -> dict[str, dict]:
    rows = client.app.state.svc.lake.read_table("session_evaluations").to_pylist()
    return {r["session_id"]: r for r in rows}


def test_grade_on_demand_judges_an_unsampled_open_session_once(client: Any) -> None:
    session = _unsampled("grade")
    _publish(client, session)
    assert session not in _evaluated(client)  # open (quiet period not over) and not sampled

    graded = client.post(GRADE, json={"session_id": session, "agent_version": "v1"}).json()
    row = _evaluated(client)[session]
    assert row["result_id"] == stable_uuid(DEFAULT_EVALUATION, session)
    assert graded == {
        "session_id": session,
        "result_id": stable_int_id(row["result_id"]),
        "cached": False,
        "skipped_reason": None,
        "retrieved_learning_status": None,
    }
    listed = client.post("/api/get_agent_success_evaluation_results", json={"agent_version": "v1"}).json()
    assert [r["result_id"] for r in listed["agent_success_evaluation_results"]] == [graded["result_id"]]

    again = client.post(GRADE, json={"session_id": session, "agent_version": "v1"}).json()
    assert (again["result_id"], again["cached"]) == (graded["result_id"], True)
    assert len(client.app.state.svc.lake.read_table("session_evaluations")) == 1  # judged once


def test_grade_on_demand_skips_unknown_sessions_and_refuses_bad_input(client: Any) -> None:
    _publish(client, "known")
    for body in ({"session_id": "nobody", "agent_version": "v1"}, {"session_id": "known", "agent_version": "v9"}):
        assert client.post(GRADE, json=body).json()["skipped_reason"] == "NO_REQUESTS"
    assert _evaluated(client) == {}
    refused = client.post(GRADE, json={"session_id": "known"})
    assert refused.status_code == 422 and "agent_version" in refused.text


def test_regenerate_grades_every_session_of_the_window(client: Any) -> None:
    sessions = [_unsampled("regen-a"), _unsampled("regen-b")]
    for user, session in enumerate(sessions):
        _publish(client, session, user)
    now = int(time.time())
    assert client.post(REGENERATE, json={"from_ts": now + 60, "to_ts": now + 120}).json()["total"] == 0
    started = client.post(REGENERATE, json={"from_ts": now - 3600, "to_ts": now + 60}).json()
    assert started["total"] == 2
    deadline = time.monotonic() + 120
    while (status := client.get(f"{REGENERATE}/{started['job_id']}").json())["status"] == "running":
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert (status["status"], status["completed"], status["failed"]) == ("completed", 2, 0), status
    assert set(_evaluated(client)) == set(sessions)
    cancelled = client.delete(f"{REGENERATE}/{started['job_id']}").json()
    assert cancelled == {"status": "completed", "job_id": started["job_id"]}  # finished before the cancel
    assert client.get(f"{REGENERATE}/nope").status_code == 404
    bad = client.post(REGENERATE, json={"from_ts": now, "to_ts": now})
    assert bad.status_code == 422 and "from_ts" in bad.text


def test_review_user_playbooks_reports_decisions_by_outcome_counters(client: Any) -> None:
    _publish(client, "review")
    window = {"start_time": (datetime.now(UTC) - timedelta(hours=1)).isoformat(), "end_time": datetime.now(UTC)}
    window["end_time"] = (window["end_time"] + timedelta(minutes=1)).isoformat()
    report = client.post("/api/review_user_playbooks", json=window).json()
    (result,) = report["results"]
    # Never served yet: nothing shows whether it helps, so the reviewer cannot judge it.
    assert (result["decision"], result["reason_code"]) == ("skip", "evidence_unavailable")
    assert (report["selected_count"], report["skipped_count"], report["accepted_count"]) == (1, 1, 0)
    (playbook,) = client.post("/api/get_user_playbooks", json={"user_id": REGION[0][0]}).json()["user_playbooks"]
    assert result["user_playbook_id"] == playbook["user_playbook_id"]
    applied = client.post("/api/review_user_playbooks", json=window | {"report_only": False})
    assert applied.status_code == 422 and "report_only" in applied.text


def test_stall_state_cache_invalidation_and_liveness_aliases(client: Any) -> None:
    assert client.get("/stall_state").json()["stalled"] is False
    assert client.post("/stall_state/notified").json() == {"notified_in_cc": False}
    assert client.post("/api/admin/cache/invalidate", json={}).json() == {"invalidated": True, "org_id": "default"}
    other = client.post("/api/admin/cache/invalidate", json={"org_id": "acme"})
    assert other.status_code == 403 and "org_id" in other.text
    assert client.get("/health/live").json() == {"status": "alive"}
    assert client.get("/health/ready").json() == client.get("/health").json()
    process = client.get("/healthz").json()
    assert process["pid"] > 0 and process["uptime_sec"] >= 0 and process["rss_mb"] > 1


def test_recent_shadow_comparisons_are_the_judged_pairs(client: Any) -> None:
    session = _unsampled("shadow")
    turns = [
        {"role": "user", "content": "How do I restart the payments service?"},
        {
            "role": "assistant",
            "content": "Run `systemctl restart payments` on the payments host, then check its health endpoint.",
            "shadow_content": "Restart it.",
        },
        {"role": "user", "content": "Thanks, that worked."},
    ]
    body = {"user_id": "sam", "agent_version": "v1", "session_id": session, "interaction_data_list": turns}
    assert client.post("/api/publish_interaction?wait_for_response=true", json=body).status_code == 200
    assert client.get("/api/evaluations/shadow_comparisons/recent").json() == {"verdicts": []}
    assert client.post(GRADE, json={"session_id": session, "agent_version": "v1"}).json()["result_id"]

    (pair,) = client.app.state.svc.lake.read_table("shadow_comparisons").to_pylist()
    (verdict,) = client.get("/api/evaluations/shadow_comparisons/recent", params={"limit": 500}).json()["verdicts"]
    interactions = client.post("/api/get_interactions", json={"user_id": "sam"}).json()["interactions"]
    (shadowed,) = [i for i in interactions if i["shadow_content"]]
    assert (verdict["session_id"], verdict["interaction_id"]) == (session, str(shadowed["interaction_id"]))
    assert verdict["reflexio_is_request_1"] == (pair["presented_first"] == "regular")
    regular_won = pair["regular_vs_shadow"].startswith("regular")
    expected = (
        "tie"
        if pair["regular_vs_shadow"] == "tied"
        else ("1" if regular_won == verdict["reflexio_is_request_1"] else "2")
    )
    assert verdict["output"]["better_request"] == expected
    assert client.get("/api/evaluations/shadow_comparisons/recent", params={"limit": "x"}).status_code == 422


def test_one_regeneration_at_a_time_and_a_cancel_while_running() -> None:
    release, graded = threading.Event(), []

    def evaluate(sessions: list[str]) -> dict:
        release.wait(30)
        graded.extend(sessions)
        return {"success": True}

    jobs = RegenerationJobs()
    job = jobs.start(["s1", "s2"], evaluate)
    with pytest.raises(JobRunning):
        jobs.start(["s3"], evaluate)
    jobs.cancel(job)
    assert job.status == "cancelled"
    release.set()
    deadline = time.monotonic() + 30
    while job.finished_at is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    # The run had started: it finished its sessions (durable), the job stays cancelled, a new one may start.
    assert (job.status, graded) == ("cancelled", ["s1", "s2"])
    assert jobs.start([], evaluate).status in ("running", "completed")
