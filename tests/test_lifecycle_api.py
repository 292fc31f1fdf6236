"""Rerun → pending, upgrade → current (old archived, kept), downgrade → restored: the original's REST paths,
executed as real Dagster jobs, with the served index following every step."""

from __future__ import annotations

import time

from reflexio_pipelines.lake.records import live_rows
from tests.support.learned import correction_turns


def _publish(client, user: str, text: str) -> None:
    body = {
        "user_id": user,
        "interaction_data_list": [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
    }
    assert client.post("/api/publish_interaction?wait_for_response=true", json=body).json()["success"]


def _wait_for(client, service: str) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = client.get(f"/api/get_operation_status?service_name={service}").json()["operation_status"]
        if status and status["status"] in {"completed", "failed"}:
            return status
        time.sleep(0.2)
    raise AssertionError("operation did not finish")


def _profiles(client, user: str) -> list[str]:
    hits = client.post(
        "/api/search", json={"query": "where does the user live", "user_id": user, "threshold": 0.0, "top_k": 20}
    ).json()
    return sorted(p["content"] for p in hits["profiles"])


def test_rerun_upgrade_downgrade_profiles(client, lake):
    _publish(client, "ana", "I live in London.")
    assert _profiles(client, "ana") == ["Lives in London"]

    started = client.post("/api/rerun_profile_generation", json={"user_id": "ana"}).json()
    assert started["success"] and started["operation_id"]
    status = _wait_for(client, "profile_generation")
    assert status["status"] == "completed" and status["progress_percentage"] == 100.0
    assert status["processed_user_ids"] == ["ana"] and status["stats"]["total_generated"] == 1
    pending = live_rows(lake, "profile", statuses=("pending",))
    assert [p["content"] for p in pending] == ["Lives in London"]
    assert _profiles(client, "ana") == ["Lives in London"]  # pending items are not served

    upgraded = client.post("/api/upgrade_all_profiles", json={"only_affected_users": True}).json()
    assert upgraded == {
        "success": True,
        "profiles_archived": 1,
        "profiles_promoted": 1,
        "profiles_deleted": 0,
        "message": "upgraded",
    }
    current = live_rows(lake, "profile")
    archived = live_rows(lake, "profile", statuses=("archived",))
    assert [p["operation_id"] for p in current] == [started["operation_id"]]
    assert len(archived) == 1 and archived[0]["operation_id"] is None  # the old version is kept, archived
    assert _profiles(client, "ana") == ["Lives in London"]

    downgraded = client.post("/api/downgrade_all_profiles", json={}).json()
    assert downgraded["success"] and downgraded["profiles_restored"] == 1 and downgraded["profiles_demoted"] == 1
    assert [p["operation_id"] for p in live_rows(lake, "profile")] == [None]
    assert client.post("/api/upgrade_all_profiles", json={}).json()["success"] is False  # nothing pending now


def test_rerun_and_upgrade_user_playbooks(client, lake):
    turns = correction_turns(
        "Deploy the api.", "Deploying the api to us-east-1.", "No, never deploy to us-east-1; always use us-west-2."
    )
    body = {"user_id": "bo", "agent_version": "v2", "interaction_data_list": turns}
    assert client.post("/api/publish_interaction?wait_for_response=true", json=body).json()["playbooks_added"] == 1
    assert client.post("/api/rerun_playbook_generation", json={"agent_version": "v2"}).json()["success"]
    assert _wait_for(client, "playbook_generation")["status"] == "completed"
    assert len(live_rows(lake, "user_playbook", statuses=("pending",))) == 1
    result = client.post("/api/upgrade_all_user_playbooks", json={"agent_version": "v2"}).json()
    assert result["user_playbooks_promoted"] == 1 and result["user_playbooks_archived"] == 1
    hits = client.post("/api/search", json={"query": "deploy region", "user_id": "bo"}).json()["user_playbooks"]
    assert len(hits) == 1 and "us-west-2" in hits[0]["content"]


def test_operation_status_validates_service_name(client):
    assert client.get("/api/get_operation_status?service_name=nope").status_code == 422
    assert client.get("/api/get_operation_status?service_name=profile_generation").json()["operation_status"] is None
