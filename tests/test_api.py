"""The HTTP contract: validation (422 with the field, nothing written), size limits, idempotency, search shape."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from serving.app import MAX_BODY_BYTES, create_app


@pytest.fixture
def client(settings, instance):
    with TestClient(create_app(settings)) as c:
        yield c


def _landed_files(lake: Lake) -> list:
    return lake.landing_files([p for _, _, p in lake.landing_hours()])


GOOD = {"user_id": "u1", "interaction_data_list": [{"role": "user", "content": "I prefer short answers."}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"interaction_data_list": GOOD["interaction_data_list"]}, "user_id"),
        ({"user_id": "u1", "interaction_data_list": []}, "interaction_data_list"),
        ({"user_id": "u1", "interaction_data_list": "hello"}, "interaction_data_list"),
        ({"user_id": 42, "interaction_data_list": GOOD["interaction_data_list"]}, "user_id"),
        ({"user_id": "   ", "interaction_data_list": GOOD["interaction_data_list"]}, "user_id"),
        ({"user_id": "u1", "interaction_data_list": [{"role": "user", "content": ""}]}, "interaction_data_list.0"),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "user_action": "click"}]}, "interaction_data_list.0"),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "user_action": "fly"}]}, "user_action"),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "created_at": "yesterday"}]}, "created_at"),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "tools_used": [{"tool_data": {}}]}]}, "tool_name"),
    ],
)
def test_invalid_publish_is_422_naming_the_field_and_writes_nothing(client, lake, body, field):
    reply = client.post("/api/publish_interaction", json=body)
    assert reply.status_code == 422
    payload = reply.json()
    assert payload["success"] is False and field in payload["message"]
    assert _landed_files(lake) == []


def test_malformed_json_is_422_and_oversize_is_413(client, lake):
    reply = client.post("/api/publish_interaction", content=b"{not json", headers={"content-type": "application/json"})
    assert reply.status_code == 422
    big = {"user_id": "u1", "interaction_data_list": [{"content": "x" * (MAX_BODY_BYTES + 10)}]}
    assert client.post("/api/publish_interaction", json=big).status_code == 413
    assert _landed_files(lake) == []


def test_publish_acknowledges_only_durable_turns_and_strips_control_characters(client, lake):
    body = {"user_id": "u1", "interaction_data_list": [{"role": "user", "content": "I prefer\x00 tea\x07."}]}
    reply = client.post("/api/publish_interaction", json=body)
    assert reply.status_code == 200
    payload = reply.json()
    assert payload["success"] is True and payload["request_id"]
    import pyarrow.parquet as pq

    rows = [r for f in _landed_files(lake) for r in pq.read_table(f).to_pylist()]
    assert [r["content"] for r in rows] == ["I prefer tea."]
    assert rows[0]["request_id"] == payload["request_id"] and rows[0]["agent_version"] == "agent-v0"


def test_publish_strips_c1_and_invisible_format_characters_but_keeps_emoji_joiners(client, lake):
    import pyarrow.parquet as pq

    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"  # one emoji: a ZWJ sequence
    hidden = ("De\u200bploy\u2060 to\u00ad us-\u202eeast\u202c-1\u2066\u2069 \x85\x9bnow\ufeff "
              f"{family} pay\u200dpal")  # fmt: skip
    body = {"user_id": "u\u200b1", "interaction_data_list": [
        {"role": "user", "content": hidden, "tools_used": [{"tool_name": "t", "tool_data": {"q": "x\u202ey"}}]}]}
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    (row,) = [r for f in _landed_files(lake) for r in pq.read_table(f).to_pylist()]
    assert row["content"] == f"Deploy to us-east-1 now {family} paypal"
    assert row["user_id"] == "u1" and '"q": "xy"' in row["tools_used"]


def test_idempotency_key_header_makes_a_retry_land_once(client, lake):
    headers = {"Idempotency-Key": "retry-me"}
    first = client.post("/api/publish_interaction", json=GOOD, headers=headers).json()
    second = client.post("/api/publish_interaction", json=GOOD, headers=headers).json()
    assert second["request_id"] == first["request_id"] and "duplicate" in second["message"]
    assert len(_landed_files(lake)) == 1


def test_search_before_any_index_is_empty_not_an_error(client):
    reply = client.post("/api/search", json={"query": "anything"})
    assert reply.status_code == 200
    body = reply.json()
    assert body["success"] is True and body["user_playbooks"] == [] and "no index" in body["msg"]


@pytest.mark.parametrize(
    "body", [{}, {"query": ""}, {"query": "  "}, {"query": "x", "top_k": 0}, {"query": "x", "search_mode": "magic"}]
)
def test_invalid_search_is_422(client, body):
    assert client.post("/api/search", json=body).status_code == 422


def test_wait_for_response_closes_the_loop_in_one_call(client):
    correction = {
        "user_id": "alice",
        "interaction_data_list": [
            {"role": "user", "content": "Please deploy the api to production."},
            {"role": "assistant", "content": "Deploying the api to us-east-1."},
            {"role": "user", "content": "No — we never deploy to us-east-1, always use us-west-2."},
        ],
    }
    reply = client.post("/api/publish_interaction?wait_for_response=true", json=correction)
    assert reply.status_code == 200
    body = reply.json()
    assert body["playbooks_added"] >= 1, body
    hits = client.post("/api/search", json={"query": "which region for deploys", "user_id": "alice"}).json()
    assert any("us-west-2" in p["content"] for p in hits["user_playbooks"])
    assert hits["index_version"]


class _OtherModel:
    """An embedder that is not the service's: the index must not be queried with mixed vectors."""

    model_id = "some-other-model"
    dim = 8

    def embed(self, texts):
        import numpy as np

        vectors = np.ones((len(texts), self.dim), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_index_from_another_embedding_model_is_searched_by_bm25_only(settings, instance, lake):
    from reflexio_pipelines.search.index import SearchDoc, publish_index

    doc = SearchDoc(entity_type="user_playbook", doc_id="1", text="always use us-west-2", user_id="u1",
                    payload={"content": "always use us-west-2"})
    publish_index(lake.index_root, [doc], _OtherModel())
    with TestClient(create_app(settings)) as c:
        body = c.post("/api/search", json={"query": "us-west-2", "user_id": "u1"}).json()
    assert body["success"] and [p["content"] for p in body["user_playbooks"]] == ["always use us-west-2"]
    assert "another embedding model" in body["msg"]
