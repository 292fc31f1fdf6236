"""Evaluation results at the original's path from a real evaluation run's outcome events, and the original's
features that are not enabled here answered in its shapes."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from tests.support.learned import REGION, correction_turns

RESULTS = "/api/get_retrieved_learning_evaluation_results"


def test_retrieved_learning_results_are_the_serves_outcome_events(client: Any) -> None:
    from reflexio_pipelines.runs import run_evaluation

    user, request, answer, correction = REGION[0]
    learned = {"user_id": user, "agent_version": "v1", "session_id": "teach"}
    learned["interaction_data_list"] = correction_turns(request, answer, correction)
    assert client.post("/api/publish_interaction?wait_for_response=true", json=learned).json()["playbooks_added"] == 1
    search = {"query": "deploy the payments service", "user_id": user, "agent_version": "v1", "session_id": "later"}
    served = client.post("/api/search", json=search).json()["user_playbooks"]
    assert served, "the learned rule must be served for the later session"
    later = dict(learned, session_id="later")
    later["interaction_data_list"] = correction_turns(request, "Deploying to us-east-1.", correction)  # missed
    assert client.post("/api/publish_interaction", json=later).status_code == 200

    state = client.app.state.svc
    state.retrievals.flush()
    state.launcher([key_of_moment(datetime.now(timezone.utc), GRANULARITY)])
    assert run_evaluation(now=int(time.time()) + 3600, settings=state.settings)["success"]

    events = state.lake.read_table("item_outcome_events", filters=[("session_id", "=", "later")]).to_pylist()
    assert any(e["outcome"] == "missed" for e in events), events  # the correction came again
    results = client.post(RESULTS, json={"user_id": user, "session_id": "later"}).json()["results"]
    by_item = {(r["kind"], r["learning_id"]): r for r in results}
    for event in events:
        row = by_item[(event["entity"], event["item_id"])]
        expected = {"helpful": "positive", "harmful": "negative", "missed": "neutral"}.get(event["outcome"])
        assert (row["impact"], row["is_relevant"]) == (expected, None if event["outcome"] is None else True)
        assert row["created_at"] == event["served_at_us"] // 1_000_000
    assert client.post(RESULTS, json={"user_id": "nobody"}).json() == {"success": True, "results": [], "msg": None}
    future = client.post(RESULTS, json={"user_id": user, "start_time": int(time.time()) + 86_400}).json()
    assert future["results"] == []
    assert client.post(RESULTS, json={"limit": 0}).status_code == 422


def test_pending_tool_calls_and_braintrust_are_not_enabled(client: Any) -> None:
    assert client.get("/api/pending_tool_calls").json() == {"pending_tool_calls": []}
    for method, path in (
        ("GET", "/api/pending_tool_calls/p-1"),
        ("POST", "/api/pending_tool_calls/p-1/not_applicable"),
        ("POST", "/api/pending_tool_calls/p-1/cancel"),
    ):
        answer = client.request(method, path)
        assert answer.status_code == 404 and answer.json()["message"] == "Pending tool call not found"
    resolved = client.post("/api/pending_tool_calls/p-1/resolve", json={"result": {"answer": "yes"}})
    assert resolved.status_code == 404
    assert client.get("/api/braintrust/status").json()["connected"] is False
    refused = client.post("/api/braintrust/connect", json={"api_key": "k"})
    assert refused.status_code == 404 and "not enabled" in refused.json()["message"]
    assert client.delete("/api/braintrust/connection").json()["success"] is True
