"""The original's session lifecycle against the real service and real Dagster runs: a deferred publish is
`pending` in `GET /api/learning_status` until a run has learned from it, then `done`; `finalize_session` learns a
session's held-back turns now; client-reported outcomes replace the judge's verdict."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY

FACT = [
    {"role": "User", "content": "I am allergic to peanuts and I live in Lisbon."},
    {"role": "Agent", "content": "Noted, thanks."},
]


def _publish(client: Any, user: str, session: str, turns: list[dict] = FACT) -> str:
    answer = client.post(
        "/api/publish_interaction",
        json={"user_id": user, "session_id": session, "agent_version": "v1", "interaction_data_list": turns},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["request_id"]


def _status(client: Any, request_id: str) -> dict:
    answer = client.get("/api/learning_status", params={"request_id": request_id})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _hold_back_active_sessions(client: Any) -> None:
    """A quiet period, as an LLM extractor has by default (the built-in one learns every turn at once)."""
    config = client.get("/api/get_config").json()
    config["extraction_quiet_period_seconds"] = 600
    assert client.post("/api/set_config", json=config).status_code == 200


def test_deferred_publish_is_pending_until_a_run_learns_it_then_done(client: Any) -> None:
    _hold_back_active_sessions(client)
    request_id = _publish(client, "ana", "s-1")
    before = _status(client, request_id)
    assert before["status"] == "pending" and "waiting for a learning run" in before["reason"]

    # The sensor's kind of run ("due"): an open window of an active session is held back for a full batch.
    key = key_of_moment(datetime.now(timezone.utc), GRANULARITY)
    client.app.state.svc.launcher([key], flush="due")
    held = _status(client, request_id)
    assert held["status"] == "pending" and "held back" in held["reason"], held

    finalized = client.post("/api/finalize_session", json={"user_id": "ana", "session_id": "s-1"})
    assert finalized.status_code == 200 and finalized.json()["accepted"] is True
    done = _status(client, request_id)  # TestClient runs the background task before returning
    assert done["status"] == "done" and done["reason"].startswith("learned by run"), done
    profiles = client.post("/api/get_profiles", json={"user_id": "ana"}).json()["user_profiles"]
    assert any("peanut" in p["content"].lower() for p in profiles)


def test_learning_status_of_an_unknown_request_is_404_and_finalize_of_an_unknown_session_a_no_op(client: Any) -> None:
    assert client.get("/api/learning_status", params={"request_id": "nope"}).status_code == 404
    answer = client.post("/api/finalize_session", json={"user_id": "ana", "session_id": "never"})
    assert answer.status_code == 200 and answer.json() == {
        "success": True,
        "accepted": False,
        "message": "No saved session to finalize.",
    }
    assert client.post("/api/finalize_session", json={"user_id": "ana", "session_id": " "}).status_code == 422


def test_reported_outcome_is_final_and_read_back_with_its_identity(client: Any) -> None:
    _publish(client, "bo", "s-2")
    now = int(time.time())
    body = {"session_id": "s-2", "outcome": "success", "occurred_at": now, "label": "task done", "metadata": {"k": 1}}
    first = client.post("/api/session_outcome", json=body).json()
    assert first["success"] and first["recorded"] and first["user_id"] == "bo" and first["outcome_revision"] == 1
    assert len(first["outcome_contract_digest"]) == 64
    again = client.post("/api/session_outcome", json=body).json()
    assert again["success"] and not again["recorded"] and again["outcome_id"] == first["outcome_id"]
    other = client.post("/api/session_outcome", json=dict(body, outcome="failure")).json()
    assert not other["success"] and other["reason"] == "conflicting_finalization"

    unknown = client.post("/api/session_outcome", json=dict(body, session_id="nobody")).json()
    assert unknown == {"success": False, "recorded": False, "reason": "unknown_session", "message": unknown["message"]}
    early = client.post("/api/session_outcome", json=dict(body, session_id="s-2", occurred_at=1)).json()
    assert early["reason"] in ("occurred_before_session", "conflicting_finalization")

    read = client.post("/api/get_session_outcomes", json={"user_id": "bo"}).json()["session_outcomes"]
    assert [(r["session_id"], r["outcome"], r["is_inferred"], r["metadata"]) for r in read] == [
        ("s-2", "success", False, {"k": 1})
    ]
    assert client.post("/api/get_session_outcomes", json={"outcome": "failure"}).json()["session_outcomes"] == []
    assert client.post("/api/get_session_outcomes", json={"start_time": 5, "end_time": 1}).status_code == 422


def test_a_report_replaces_the_judges_verdict(client: Any) -> None:
    from reflexio_pipelines.lake.reported_outcomes import inferred

    _publish(client, "cy", "s-3", [{"role": "User", "content": "Book a table."}, {"role": "Agent", "content": "Done."}])
    lake = client.app.state.svc.lake
    closed = int(time.time()) - 3600
    _fake_evaluation(lake, "s-3", "cy", closed)
    assert inferred(lake, ["s-3"])["s-3"]["outcome"] == "success"
    read = client.post("/api/get_session_outcomes", json={"session_ids": ["s-3"]}).json()["session_outcomes"]
    assert read[0]["is_inferred"] is True and read[0]["outcome"] == "success"

    report = {"session_id": "s-3", "outcome": "failure", "occurred_at": int(time.time())}
    answer = client.post("/api/session_outcome", json=report).json()
    assert answer["recorded"] and answer["outcome_revision"] == 2
    read = client.post("/api/get_session_outcomes", json={"session_ids": ["s-3"]}).json()["session_outcomes"]
    assert [(r["outcome"], r["is_inferred"]) for r in read] == [("failure", False)]


def _fake_evaluation(lake: Any, session_id: str, user_id: str, closed: int) -> None:
    """A judge's verdict row as the evaluation asset writes it (the asset itself is tested in test_evaluation)."""
    import pyarrow as pa

    from reflexio_pipelines.lake.schemas import TABLES

    row = {name: None for name in TABLES["session_evaluations"].names}
    row.update(
        result_id=f"r-{session_id}",
        session_id=session_id,
        user_id=user_id,
        agent_version="v1",
        evaluation_name="default",
        is_success=True,
        judge="heuristic",
        session_closed_at=closed,
        created_at=closed,
        day="2026-01-01",
    )
    lake.append("session_evaluations", pa.Table.from_pylist([row], schema=TABLES["session_evaluations"]))
