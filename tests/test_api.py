"""The HTTP contract: validation (422 with the field, nothing written), size limits, idempotency, search shape."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.settings import Settings, load_settings
from serving.app import MAX_BODY_BYTES, create_app
from serving.tenancy import KeyStore
from tests.support.routes import api_routes
from tests.support.servers import serve_app


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
        (
            {"user_id": "u1", "interaction_data_list": [{"content": "x", "user_action": "click"}]},
            "interaction_data_list.0",
        ),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "user_action": "fly"}]}, "user_action"),
        ({"user_id": "u1", "interaction_data_list": [{"content": "x", "created_at": "yesterday"}]}, "created_at"),
        (
            {"user_id": "u1", "interaction_data_list": [{"content": "x", "tools_used": [{"tool_data": {}}]}]},
            "tool_name",
        ),
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

    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji: a ZWJ sequence
    hidden = f"De\u200bploy\u2060 to\u00ad us-\u202eeast\u202c-1\u2066\u2069 \x85\x9bnow\ufeff {family} pay\u200dpal"
    body = {
        "user_id": "u1",
        "interaction_data_list": [
            {"role": "user", "content": hidden, "tools_used": [{"tool_name": "t", "tool_data": {"q": "x\u202ey"}}]}
        ],
    }
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    (row,) = [r for f in _landed_files(lake) for r in pq.read_table(f).to_pylist()]
    assert row["content"] == f"Deploy to us-east-1 now {family} paypal"
    assert row["user_id"] == "u1" and '"q": "xy"' in row["tools_used"]


@pytest.mark.parametrize("user_id", ["vic\u200btim", "vic\u2028tim", "victim\u202e", "\u2060victim", "vic\x00tim"])
def test_a_user_id_with_an_invisible_character_is_refused_not_cleaned(client, lake, user_id):
    """Cleaning would make `vic\u200btim` the user `victim`: two ids one. Refused on writes and reads alike."""
    body = {**GOOD, "user_id": user_id}
    reply = client.post("/api/publish_interaction", json=body)
    assert reply.status_code == 422 and "user_id" in reply.json()["message"], reply.text
    assert "invisible" in reply.json()["message"]
    assert _landed_files(lake) == []
    for path in ("/api/get_interactions", "/api/get_profiles", "/api/export_user_data"):
        refused = client.post(path, json={"user_id": user_id})
        assert refused.status_code == 422 and "user_id" in refused.json()["message"], (path, refused.text)
    search = client.post("/api/search", json={"query": "answers", "user_id": user_id})
    assert search.status_code == 422 and "user_id" in search.json()["message"]


def test_line_and_paragraph_separators_are_stripped_from_text_like_other_invisible_separators(client, lake):
    import pyarrow.parquet as pq

    body = {"user_id": "u1", "interaction_data_list": [{"role": "user", "content": "one\u2028two\u2029three\x0bfour"}]}
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    (row,) = [r for f in _landed_files(lake) for r in pq.read_table(f).to_pylist()]
    assert row["content"] == "onetwothreefour"


def test_idempotency_key_header_makes_a_retry_land_once(client, lake):
    headers = {"Idempotency-Key": "retry-me"}
    first = client.post("/api/publish_interaction", json=GOOD, headers=headers).json()
    second = client.post("/api/publish_interaction", json=GOOD, headers=headers).json()
    assert second["request_id"] == first["request_id"] and "duplicate" in second["message"]
    assert len(_landed_files(lake)) == 1


def test_one_idempotency_key_from_two_users_stores_both_publishes(client, lake):
    """A key belongs to one user: another user's publish under the same key is their own, stored and readable."""
    headers = {"Idempotency-Key": "turn-1"}
    bodies = {
        user: {"user_id": user, "interaction_data_list": [{"role": "user", "content": f"{user} prefers tea."}]}
        for user in ("ann", "bob")
    }
    replies = {
        user: client.post("/api/publish_interaction", json=body, headers=headers) for user, body in bodies.items()
    }
    assert all(r.status_code == 200 and r.json()["message"] == "stored" for r in replies.values()), replies
    assert replies["ann"].json()["request_id"] != replies["bob"].json()["request_id"]
    for user in bodies:
        read = client.post("/api/get_interactions", json={"user_id": user}).json()["interactions"]
        assert [i["content"] for i in read] == [f"{user} prefers tea."]
    # each one's retry is still a duplicate of their own publish
    again = client.post("/api/publish_interaction", json=bodies["bob"], headers=headers).json()
    assert "duplicate" in again["message"] and again["request_id"] == replies["bob"].json()["request_id"]


def test_the_same_key_with_another_body_is_a_409_naming_the_key_and_stores_nothing(client, lake):
    headers = {"Idempotency-Key": "turn-7"}
    assert client.post("/api/publish_interaction", json=GOOD, headers=headers).status_code == 200
    other = {**GOOD, "interaction_data_list": [{"role": "user", "content": "Actually I prefer long answers."}]}
    reply = client.post("/api/publish_interaction", json=other, headers=headers)
    assert reply.status_code == 409 and "turn-7" in reply.json()["message"], reply.text
    in_body = client.post("/api/publish_interaction", json={**other, "idempotency_key": "turn-7"})
    assert in_body.status_code == 409 and "turn-7" in in_body.json()["message"]
    read = client.post("/api/get_interactions", json={"user_id": "u1"}).json()["interactions"]
    assert [i["content"] for i in read] == ["I prefer short answers."]
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
    from reflexio_pipelines.search.types import SearchDoc
    from reflexio_pipelines.search.versions import publish_index

    rule = "always use us-west-2"
    doc = SearchDoc("user_playbook", "1", rule, {"content": rule}, user_id="u1")
    publish_index(lake.index_root, [doc], _OtherModel())
    with TestClient(create_app(settings)) as c:
        body = c.post("/api/search", json={"query": "us-west-2", "user_id": "u1"}).json()
    assert body["success"] and [p["content"] for p in body["user_playbooks"]] == ["always use us-west-2"]
    assert "another embedding model" in body["msg"]


# -- one error shape everywhere ----------------------------------------------------------------------------------------


def _documented_error(reply) -> str | None:
    """What is wrong with an error answer's shape (None: `{"success": false, "message" | "msg": "<text>"}` as JSON,
    docs/api.md); a 422 may add its per-field `detail` list."""
    if "application/json" not in reply.headers.get("content-type", ""):
        return f"not JSON: {reply.headers.get('content-type')} {reply.text[:100]!r}"
    body = reply.json()
    text = body.get("message") or body.get("msg") if isinstance(body, dict) else None
    if not isinstance(body, dict) or body.get("success") is not False or not isinstance(text, str) or not text:
        return f"not the documented shape: {str(body)[:200]}"
    if "detail" in body and not (reply.status_code == 422 and isinstance(body["detail"], list)):
        return f"FastAPI's `detail` shape: {str(body)[:200]}"
    return None


def _routes(app) -> list[tuple[str, str, bool]]:
    """(method, path with its parameters filled, takes a JSON body) for every route of the app."""
    routes = []
    for route in api_routes(app.routes):
        path = route.path_format.format(**{name: "x" for name in route.param_convertors})
        for method in sorted(route.methods - {"HEAD"}):
            routes.append((method, path, route.body_field is not None))
    return routes


def test_every_route_answers_errors_in_the_documented_shape(settings, instance):
    """Walk every route: a body of the wrong type (422), a method it does not take (405), and the answers that no
    route makes (unknown path 404, oversize 413, a handler's exception 500) all carry the one error shape."""
    app = create_app(settings)

    async def boom() -> None:
        raise RuntimeError("secret detail that must not reach the caller")

    app.add_api_route("/api/_test_boom", boom, methods=["GET"])  # stands in for a bug in any handler
    routes = _routes(app)
    documented = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    templates = {(m, r.path_format) for r in api_routes(app.routes) for m in r.methods}
    assert documented <= templates and len(routes) > 40  # every route of the schema is walked
    wrong: list[str] = []
    with TestClient(app, raise_server_exceptions=False) as client:
        for method, path, has_body in routes:
            if has_body:  # a list where an object is expected: rejected before any run or write
                reply = client.request(method, path, json=[["not", "an", "object"]])
                if reply.status_code != 422 or _documented_error(reply):
                    wrong.append(f"{method} {path} bad body -> {reply.status_code}: {_documented_error(reply)}")
            other = "PATCH" if method != "PATCH" else "PUT"
            reply = client.request(other, path)
            if reply.status_code != 405 or _documented_error(reply) or not reply.headers.get("allow"):
                wrong.append(f"{other} {path} -> {reply.status_code}: {_documented_error(reply)}")
        extra = {
            "unknown path": client.get("/api/no_such_route"),
            "unknown page": client.get("/no/such/page"),
            "bad query": client.get("/api/get_operation_status?service_name=nope"),
            "malformed JSON": client.post("/api/search", content=b"{", headers={"content-type": "application/json"}),
            "oversize": client.post("/api/search", content=b"{}", headers={"content-length": str(MAX_BODY_BYTES + 1)}),
            "unknown asset": client.get("/dashboard/static/nope.js"),
            "exception": client.get("/api/_test_boom"),
        }
    for name, reply in extra.items():
        if reply.status_code < 400 or _documented_error(reply):
            wrong.append(f"{name} -> {reply.status_code}: {_documented_error(reply)}")
    assert not wrong, "\n".join(wrong)
    assert extra["unknown path"].status_code == 404 and "does not exist" in extra["unknown path"].json()["message"]
    assert extra["exception"].status_code == 500 and "secret" not in extra["exception"].text


def test_keyed_mode_errors_are_in_the_documented_shape(keyed_service):
    url, _, globex = keyed_service
    import httpx

    unauthorised = httpx.post(f"{url}/api/search", json={"query": "x"})
    assert unauthorised.status_code == 401 and _documented_error(unauthorised) is None
    limited = [
        httpx.post(f"{url}/api/search", json={"query": "x"}, headers={"Authorization": f"Bearer {globex}"})
        for _ in range(3)
    ][-1]
    assert limited.status_code == 429 and _documented_error(limited) is None


# -- Host header allow-list (DNS rebinding) ----------------------------------------------------------------------------


@pytest.fixture
def real_hosts(monkeypatch):
    """The service's own default allow-list, without the `testserver` name tests/conftest.py adds."""
    from serving import hosts
    from tests.support.hosts import REAL_LOOPBACK_HOSTS

    monkeypatch.setattr(hosts, "LOOPBACK_HOSTS", REAL_LOOPBACK_HOSTS)
    return REAL_LOOPBACK_HOSTS


def _host_answer(app, host: str, path: str = "/api/search"):
    with TestClient(app, base_url=f"http://{host}") as client:
        return client.post(path, json={"query": "x"}) if path.startswith("/api/") else client.get(path)


def test_open_mode_answers_loopback_hosts_only_by_default(settings, instance, real_hosts):
    assert real_hosts == ("127.0.0.1", "localhost", "[::1]")  # the documented default, nothing else
    app = create_app(settings)
    for host in ("127.0.0.1:8081", "localhost", "LOCALHOST:9", "[::1]:8081"):
        assert _host_answer(app, host).status_code == 200, host
    for host in ("evil.example", "evil.example:8081", "127.0.0.1.evil.example", "testserver", "localhost.evil"):
        reply = _host_answer(app, host)
        assert reply.status_code == 400 and _documented_error(reply) is None, (host, reply.text)
        assert "REFLEXIO_ALLOWED_HOSTS" in reply.json()["message"]
        assert _host_answer(app, host, "/no/such/page").status_code == 400  # before routing, for every path
    assert _host_answer(app, "evil.example", "/health").status_code == 200  # probes address replicas by IP


def test_allowed_hosts_extend_the_list_with_names_and_wildcards(settings, instance, real_hosts, monkeypatch):
    monkeypatch.setenv("REFLEXIO_LAKE", settings.lake)
    monkeypatch.setenv("REFLEXIO_ALLOWED_HOSTS", "reflexio.internal, *.corp.example")
    loaded = load_settings()
    assert loaded.allowed_hosts == ["reflexio.internal", "*.corp.example"]
    app = create_app(loaded)
    for host in ("reflexio.internal:8081", "api.corp.example", "localhost"):
        assert _host_answer(app, host).status_code == 200, host
    for host in ("corp.example", "corp.example.evil", "evil.example"):
        assert _host_answer(app, host).status_code == 400, host
    assert (
        _host_answer(create_app(settings.model_copy(update={"allowed_hosts": ["*"]})), "any.where").status_code == 200
    )


def test_host_check_over_real_http_and_keyed_mode_left_to_its_keys(settings, instance, real_hosts, tmp_path):
    import httpx

    with serve_app(create_app(settings)) as url:
        assert httpx.post(f"{url}/api/search", json={"query": "x"}).status_code == 200  # Host: 127.0.0.1:<port>
        rebound = httpx.post(f"{url}/api/search", json={"query": "x"}, headers={"Host": "evil.example"})
        assert rebound.status_code == 400 and _documented_error(rebound) is None
    keys = tmp_path / "keys.json"
    KeyStore(keys).create("acme")
    keyed = Settings(lake=str(tmp_path / "keyed"), api_keys_file=str(keys))
    assert _host_answer(create_app(keyed), "evil.example").status_code == 401  # no key: the key is the check
    restricted = keyed.model_copy(update={"allowed_hosts": ["reflexio.internal"]})
    assert _host_answer(create_app(restricted), "evil.example").status_code == 400  # opted in: checked too
