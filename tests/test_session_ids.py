"""A publish without a session id (the original's older clients, this project's CLI and SDK) is read back as the
session named by its request id — the key the pipeline groups it by — so reflexio-client 0.2.16, which requires a
session id on every request it parses, reads it, and the id addresses the session (get_requests, delete_session)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e


def publish(client, user: str, text: str, **fields) -> str:
    body = {"user_id": user, "interaction_data_list": [{"role": "user", "content": text}], **fields}
    reply = client.post("/api/publish_interaction", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["request_id"]


def sessions_of(client, **query) -> dict[str, list[str]]:
    """session id -> request ids, as get_requests answers."""
    answer = client.post("/api/get_requests", json=query).json()
    assert all(r["request"]["session_id"] == s["session_id"] for s in answer["sessions"] for r in s["requests"])
    return {s["session_id"]: sorted(r["request"]["request_id"] for r in s["requests"]) for s in answer["sessions"]}


def test_a_publish_without_a_session_id_is_its_own_session_named_by_its_request_id(client) -> None:
    first = publish(client, "dana", "I prefer metric units.")
    second = publish(client, "dana", "Call me Dana.", source="cli")
    named = publish(client, "dana", "Hello.", session_id="dana-s1")
    assert sessions_of(client, user_id="dana") == {first: [first], second: [second], "dana-s1": [named]}
    assert sessions_of(client, user_id="dana") == sessions_of(client, user_id="dana")  # stable across reads
    assert sessions_of(client, session_id=first) == {first: [first]}
    assert sessions_of(client, user_id="dana", source="cli") == {second: [second]}  # the source filter is honoured

    deleted = client.request("DELETE", "/api/delete_session", json={"session_id": first}).json()
    assert deleted["success"] and deleted["deleted_requests_count"] == 1
    assert sessions_of(client, user_id="dana") == {second: [second], "dana-s1": [named]}
