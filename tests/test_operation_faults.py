"""A failing pipeline run behind an API call is a 503 with a message, never a 500, and changes nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

from serving.app import create_app


def _failing(*_args, **_kwargs):
    raise RuntimeError("run failed")


def test_failed_aggregation_and_lifecycle_runs_answer_503(settings, instance, lake):
    with TestClient(create_app(settings)) as client:
        state = client.app.state.svc
        state.aggregate, state.operate = _failing, _failing
        reply = client.post("/api/run_playbook_aggregation", json={})
        assert reply.status_code == 503 and "aggregation run failed" in reply.json()["message"]
        reply = client.post("/api/upgrade_all_profiles", json={})
        assert reply.status_code == 503 and "lifecycle run failed" in reply.json()["message"]
    assert lake.read_table("agent_playbooks").num_rows == 0
    assert lake.read_table("lifecycle_events").num_rows == 0
