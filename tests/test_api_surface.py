"""The rest of the original's REST surface against real Dagster runs: reads, per-entity search, manual adds,
edits that re-index, cascading deletes, config without secrets, whoami."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.demo.run import publish_payload
from serving.app import create_app


@pytest.fixture
def learned(client, samples):
    """Every sample published and learned (the last publish waits for the loop and the new index)."""
    for i, conversation in enumerate(samples):
        wait = "?wait_for_response=true" if i == len(samples) - 1 else ""
        reply = client.post(f"/api/publish_interaction{wait}", json=publish_payload(conversation))
        assert reply.status_code == 200, reply.text
    return client


def _search_user_playbooks(client, query: str, **extra) -> list[dict]:
    body = {"query": query, "threshold": 0.0, "top_k": 10, **extra}
    reply = client.post("/api/search_user_playbooks", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["user_playbooks"]


def test_reads_return_the_originals_shapes(learned):
    client = learned
    profiles = client.post("/api/get_profiles", json={"user_id": "bob"}).json()
    assert profiles["success"] and profiles["user_profiles"]
    assert {"profile_id", "user_id", "content", "last_modified_timestamp", "status"} <= set(
        profiles["user_profiles"][0]
    )
    assert all(p["user_id"] == "bob" for p in profiles["user_profiles"])
    everyone = client.get("/api/get_all_profiles?limit=1000").json()["user_profiles"]
    assert {p["user_id"] for p in everyone} >= {"bob"} and len(everyone) >= len(profiles["user_profiles"])

    playbooks = client.post("/api/get_user_playbooks", json={"user_id": "alice"}).json()["user_playbooks"]
    assert any("us-west-2" in p["content"] for p in playbooks)
    assert all({"user_playbook_id", "trigger", "structured_data", "provenance"} <= set(p) for p in playbooks)

    turns = client.post("/api/get_interactions", json={"user_id": "alice", "top_k": 3}).json()["interactions"]
    assert len(turns) == 3 and all(t["user_id"] == "alice" for t in turns)
    assert [t["created_at"] for t in turns] == sorted((t["created_at"] for t in turns), reverse=True)
    assert len(client.get("/api/get_all_interactions?limit=2").json()["interactions"]) == 2

    sessions = client.post("/api/get_requests", json={"user_id": "alice", "top_k": 1}).json()
    assert sessions["success"] and len(sessions["sessions"]) == 1
    request_data = sessions["sessions"][0]["requests"][0]
    assert request_data["request"]["user_id"] == "alice" and request_data["interactions"]
    assert sessions["has_more"] is True  # alice has more than one request in the samples

    hits = client.post("/api/search_interactions", json={"user_id": "alice", "query": "us-west-2"}).json()
    assert hits["interactions"] and "us-west-2" in hits["interactions"][0]["content"]

    stats = client.get("/api/get_profile_statistics").json()
    assert stats["success"] and stats["current_count"] == len(everyone)
    change_log = client.get("/api/profile_change_log").json()["profile_change_logs"]
    assert change_log and change_log[0]["added_profiles"]


def test_interactions_are_readable_before_any_pipeline_run(client):
    body = {"user_id": "dora", "interaction_data_list": [{"role": "user", "content": "My cat is called Miso."}]}
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    turns = client.post("/api/get_interactions", json={"user_id": "dora"}).json()["interactions"]
    assert [t["content"] for t in turns] == ["My cat is called Miso."]


def test_manual_generation_learns_from_pending_windows_now(client, samples):
    for conversation in samples:
        assert client.post("/api/publish_interaction", json=publish_payload(conversation)).status_code == 200
    assert client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"] == []
    reply = client.post("/api/manual_profile_generation", json={}).json()
    assert reply["success"] and reply["profiles_generated"] > 0
    assert client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"]
    again = client.post("/api/manual_playbook_generation", json={"agent_version": "x"}).json()
    assert again["success"] and again["playbooks_generated"] == 0  # nothing new was published
    noted = client.post("/api/search", json={"query": "timezone", "user_id": "bob", "enable_reformulation": True})
    assert noted.json()["profiles"] and "enable_reformulation ignored" in noted.json()["msg"]


def test_per_entity_search_honours_filters(learned):
    client = learned
    mine = client.post("/api/search_profiles", json={"user_id": "bob", "query": "timezone", "threshold": 0.0}).json()
    assert mine["user_profiles"] and all(p["user_id"] == "bob" for p in mine["user_profiles"])
    none = client.post("/api/search_profiles", json={"user_id": "bob", "query": "timezone", "source": "nowhere"}).json()
    assert none["user_profiles"] == []
    assert _search_user_playbooks(client, "deploy region", user_id="alice")
    assert _search_user_playbooks(client, "deploy region", user_id="nobody") == []
    assert _search_user_playbooks(client, "deploy region", user_id="alice", status_filter=["archived"]) == []
    fts = _search_user_playbooks(client, "us-west-2", user_id="alice", search_mode="fts")
    assert fts and "us-west-2" in fts[0]["content"]
    # a search serves one user's items only: profiles need the user (422), user playbooks without one are none
    refused = client.post("/api/search_profiles", json={"query": "x"})
    assert refused.status_code == 422 and "user_id" in refused.json()["message"]
    anonymous = client.post("/api/search_user_playbooks", json={"query": "deploy region"}).json()
    assert anonymous["user_playbooks"] == [] and "no user_id" in anonymous["msg"]


def test_manual_adds_are_readable_at_once_and_searchable_after_the_reindex(client):
    added = client.post(
        "/api/add_user_profile?wait_for_response=true",
        json={"user_profiles": [{"user_id": "erin", "content": "Erin's favourite database is PostgreSQL"}]},
    ).json()
    assert added["success"] and added["added_count"] == 1
    assert [
        p["content"] for p in client.post("/api/get_profiles", json={"user_id": "erin"}).json()["user_profiles"]
    ] == ["Erin's favourite database is PostgreSQL"]
    hits = client.post("/api/search", json={"query": "favourite database", "user_id": "erin"}).json()
    assert [p["content"] for p in hits["profiles"]] == ["Erin's favourite database is PostgreSQL"]

    client.post(
        "/api/add_user_playbook?wait_for_response=true",
        json={
            "user_playbooks": [
                {
                    "user_id": "erin",
                    "agent_version": "v9",
                    "structured_data": {"trigger": "user asks for a query plan"},
                    "content": "Always show EXPLAIN ANALYZE output.",
                }
            ]
        },
    )
    found = _search_user_playbooks(client, "query plan", user_id="erin")
    assert found and found[0]["trigger"] == "user asks for a query plan"
    assert client.post("/api/add_user_playbook", json={"user_playbooks": [{"user_id": "erin"}]}).status_code == 422

    agent = client.post(
        "/api/add_agent_playbook?wait_for_response=true",
        json={
            "agent_playbooks": [
                {"agent_version": "v9", "content": "Never drop production tables.", "playbook_status": "approved"}
            ]
        },
    ).json()
    assert agent["added_count"] == 1
    served = client.post("/api/search", json={"query": "drop production tables", "agent_version": "v9"}).json()
    assert [p["content"] for p in served["agent_playbooks"]] == ["Never drop production tables."]


def test_edits_are_served_at_once_and_re_indexed(learned):
    client = learned
    (rule,) = [p for p in _search_user_playbooks(client, "us-west-2", user_id="alice") if "us-west-2" in p["content"]][
        :1
    ]
    reply = client.put(
        "/api/update_user_playbook",
        json={"user_playbook_id": rule["user_playbook_id"], "content": "Deploy only to eu-central-1."},
    )
    assert reply.json()["success"]
    # Before the rebuild lands, the old text still matches but the hit already shows the edit.
    hit = next(
        p
        for p in _search_user_playbooks(client, "us-west-2 us-east-1 deploy", user_id="alice")
        if p["user_playbook_id"] == rule["user_playbook_id"]
    )
    assert hit["content"] == "Deploy only to eu-central-1."
    client.put(
        "/api/update_user_playbook?wait_for_response=true",
        json={"user_playbook_id": rule["user_playbook_id"], "content": "Deploy only to eu-central-1."},
    )
    found = _search_user_playbooks(client, "eu-central-1", user_id="alice", search_mode="fts")
    assert [p["user_playbook_id"] for p in found] == [rule["user_playbook_id"]]
    assert client.put("/api/update_user_playbook", json={"user_playbook_id": 1, "content": "x"}).status_code == 404

    profile = client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"][0]
    client.put(
        "/api/update_user_profile?wait_for_response=true",
        json={"user_id": "bob", "profile_id": profile["profile_id"], "content": "Works from the Lisbon office"},
    )
    found = client.post(
        "/api/search_profiles", json={"user_id": "bob", "query": "Lisbon office", "search_mode": "fts"}
    ).json()["user_profiles"]
    assert [p["profile_id"] for p in found] == [profile["profile_id"]]
    wrong_user = {"user_id": "alice", "profile_id": profile["profile_id"], "content": "x"}
    assert client.put("/api/update_user_profile", json=wrong_user).status_code == 404


def test_deleting_a_request_cascades_to_what_was_learned_from_it(learned, samples):
    client = learned
    assert _search_user_playbooks(client, "us-west-2", user_id="alice")
    sessions = client.post("/api/get_requests", json={"session_id": "alice-s1"}).json()["sessions"]
    (request_id,) = {r["request"]["request_id"] for s in sessions for r in s["requests"]}
    reply = client.request("DELETE", "/api/delete_request", json={"request_id": request_id}).json()
    assert reply["success"]
    # Gone from search in the same cycle (before any rebuild) and from reads.
    assert not [p for p in _search_user_playbooks(client, "us-west-2", user_id="alice") if "us-west-2" in p["content"]]
    assert not [
        p
        for p in client.post("/api/get_user_playbooks", json={"user_id": "alice"}).json()["user_playbooks"]
        if "us-west-2" in p["content"]
    ]
    assert not client.post("/api/get_requests", json={"session_id": "alice-s1"}).json()["sessions"]
    # A later pipeline run over the same window does not relearn from the deleted turns.
    from reflexio_pipelines.runs import launch

    launch(settings=client.app.state.svc.settings)
    assert not [
        p
        for p in client.post("/api/get_user_playbooks", json={"user_id": "alice"}).json()["user_playbooks"]
        if "us-west-2" in p["content"]
    ]
    assert client.request("DELETE", "/api/delete_request", json={"request_id": "nope"}).status_code == 404


def test_bulk_and_single_deletes(learned):
    client = learned
    profiles = client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"]
    ids = [p["profile_id"] for p in profiles]
    reply = client.request("DELETE", "/api/delete_profiles_by_ids", json={"profile_ids": [*ids, "unknown"]}).json()
    assert reply == {"success": True, "deleted_count": len(ids), "message": reply["message"]}
    assert client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"] == []
    hits = client.post("/api/search", json={"query": "timezone SQL", "user_id": "bob", "threshold": 0.0}).json()
    assert hits["profiles"] == []

    everything = client.request("DELETE", "/api/delete_all_user_playbooks").json()
    assert everything["deleted_count"] > 0
    assert client.post("/api/get_user_playbooks", json={}).json()["user_playbooks"] == []
    assert client.request("DELETE", "/api/delete_profiles_by_ids", json={"profile_ids": []}).status_code == 422


def test_delete_profile_by_search_query(learned):
    client = learned
    before = client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"]
    tz = [p for p in before if "CET" in p["content"]]
    assert tz
    reply = client.request(
        "DELETE", "/api/delete_profile", json={"user_id": "bob", "search_query": "bob's timezone CET"}
    )
    assert reply.json()["success"]
    after = client.post("/api/get_profiles", json={"user_id": "bob"}).json()["user_profiles"]
    assert not [p for p in after if "CET" in p["content"]]
    bad = client.request("DELETE", "/api/delete_profile", json={"user_id": "bob"})
    assert bad.status_code == 422 and "profile_id or search_query" in bad.json()["message"]


def test_config_round_trip_never_returns_secrets(tmp_path, instance, monkeypatch):
    from reflexio_pipelines.settings import LLMSettings, Settings

    secret = "sk-test-very-secret-123"
    settings = Settings(lake=str(tmp_path / "lake"), llm=LLMSettings(model="openai/gpt-x", api_key=secret))
    with TestClient(create_app(settings)) as client:
        config = client.get("/api/get_config").json()
        assert config["batch_size"] > 0 and config["llm_config"]["generation_model_name"] == "openai/gpt-x"
        assert secret not in client.get("/api/get_config").text
        saved = client.post(
            "/api/set_config",
            json={"batch_size": 7, "batch_interval": 3, "api_key_config": {"openai": {"api_key": "sk-new-secret"}}},
        )
        assert saved.json()["success"] and "api_key_config" in saved.json()["msg"]
        text = client.get("/api/get_config").text
        assert '"batch_size":7' in text and "sk-new-secret" not in text
        stored = (tmp_path / "lake" / "state" / "extraction_config.json").read_text()
        assert "sk-new-secret" not in stored
        bad = client.post("/api/set_config", json={"batch_size": -1})
        assert bad.status_code == 422 and "batch_size" in bad.json()["msg"]
        assert '"batch_size":7' in client.get("/api/get_config").text  # the bad call changed nothing
        who = client.get("/api/whoami").json()
        assert who["success"] and who["org_id"] == "default" and str(tmp_path) not in who["storage_label"]
        assert client.get("/meta/version").json()["api_version"] == "v1"
