"""The original's per-user routes through the live app on a real lake: storage_stats, rerank_user_profiles,
clear_user_data (the erasure: the user's rows go, other users' and agent playbooks stay)."""

from __future__ import annotations

from typing import Any

PROFILES = ["Lives in Lisbon.", "Is allergic to peanuts.", "Prefers window seats on flights."]


def _seed(client: Any, user: str) -> list[str]:
    body = {"user_profiles": [{"user_id": user, "content": text} for text in PROFILES]}
    assert client.post("/api/add_user_profile", json=body).json()["added_count"] == 3
    playbook = {"user_playbooks": [{"user_id": user, "agent_version": "v1", "content": "Answer in French."}]}
    assert client.post("/api/add_user_playbook", json=playbook).json()["added_count"] == 1
    profiles = client.post("/api/get_profiles", json={"user_id": user}).json()["user_profiles"]
    return [p["profile_id"] for p in profiles]


def test_storage_stats_counts_the_users_items(client: Any) -> None:
    _seed(client, "ana")
    stats = client.get("/api/storage_stats", params={"user_id": "ana"}).json()
    assert (stats["success"], stats["profile_count"], stats["playbook_count"]) == (True, 3, 1)
    assert stats["oldest_profile_modified"] <= stats["newest_profile_modified"]
    empty = client.get("/api/storage_stats", params={"user_id": "nobody"}).json()
    assert (empty["profile_count"], empty["playbook_count"], empty["oldest_profile_modified"]) == (0, 0, None)
    missing = client.get("/api/storage_stats")
    assert missing.status_code == 422 and "user_id" in missing.json()["message"]


def test_rerank_orders_the_given_profiles_by_the_query(client: Any) -> None:
    ids = _seed(client, "ana")
    _seed(client, "bo")
    others = client.post("/api/get_profiles", json={"user_id": "bo"}).json()["user_profiles"]
    body = {"user_id": "ana", "query": "food allergy", "profile_ids": [*ids, others[0]["profile_id"]], "top_k": 2}
    answer = client.post("/api/rerank_user_profiles", json=body).json()
    assert answer["success"] and len(answer["user_profiles"]) == 2
    assert "peanut" in answer["user_profiles"][0]["content"]
    assert answer["msg"].startswith("1 id(s) dropped")  # bo's profile is not ana's
    seats = client.post("/api/rerank_user_profiles", json=dict(body, query="airplane seat")).json()
    assert "window seats" in seats["user_profiles"][0]["content"]
    assert client.post("/api/rerank_user_profiles", json=dict(body, query=" ")).status_code == 422


def test_clear_user_data_wipes_the_user_and_keeps_the_rest(client: Any) -> None:
    _seed(client, "ana")
    _seed(client, "bo")
    agent = {"agent_playbooks": [{"agent_version": "v1", "content": "Confirm the region before deploying."}]}
    assert client.post("/api/add_agent_playbook", json=agent).json()["added_count"] == 1

    answer = client.post("/api/clear_user_data", json={"user_id": "ana"}).json()
    assert answer["success"] and answer["deleted_counts"].get("curation_log", 0) >= 4, answer
    assert client.get("/api/storage_stats", params={"user_id": "ana"}).json()["profile_count"] == 0
    assert client.get("/api/storage_stats", params={"user_id": "bo"}).json()["profile_count"] == 3
    kept = client.post("/api/get_agent_playbooks", json={}).json()["agent_playbooks"]
    assert [p["content"] for p in kept] == ["Confirm the region before deploying."]
    assert client.post("/api/clear_user_data", json={"user_id": ""}).status_code == 422
