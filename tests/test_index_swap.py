"""The served index swaps to new versions under continuous query load without dropping or failing a request, and
one failing entity type yields partial results instead of a failed response."""

from __future__ import annotations

import threading

import httpx
from fastapi.testclient import TestClient

from reflexio_pipelines.runs import launch, rebuild_index
from reflexio_pipelines.search.query import LoadedIndex
from serving.app import create_app
from tests.support.servers import serve_app


def test_swaps_under_continuous_load_drop_nothing(settings, instance, landed):
    launch(settings=settings, instance=instance)
    app = create_app(settings)
    results: list[tuple[int, str | None, int]] = []
    stop = threading.Event()

    def hammer(base: str) -> None:
        with httpx.Client(base_url=base, timeout=30) as client:
            while not stop.is_set():
                reply = client.post(
                    "/api/search", json={"query": "deploy region", "user_id": "alice", "threshold": 0.0}
                )
                body = reply.json() if reply.status_code == 200 else {}
                results.append((reply.status_code, body.get("index_version"), len(body.get("user_playbooks", []))))

    with serve_app(app) as base:
        threads = [threading.Thread(target=hammer, args=(base,)) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(3):  # three new versions published while queries run
            before = app.state.svc.index.version
            rebuild_index(settings=settings, instance=instance, compact=True)  # a full build: always a new version
            app.state.svc.index.refresh()
            assert app.state.svc.index.version != before
        stop.set()
        for t in threads:
            t.join()
    assert results and all(code == 200 for code, _, _ in results)
    assert all(hits > 0 for _, _, hits in results)  # every answer complete, none from a half-loaded version
    assert len({version for _, version, _ in results}) >= 2  # the load really spanned swaps


def test_one_failing_entity_type_gives_partial_results(settings, instance, landed, monkeypatch):
    launch(settings=settings, instance=instance)
    original = LoadedIndex.search

    def broken(self, entity_type, *args, **kwargs):
        if entity_type == "agent_playbook":
            raise RuntimeError("disk read error")
        return original(self, entity_type, *args, **kwargs)

    monkeypatch.setattr(LoadedIndex, "search", broken)
    with TestClient(create_app(settings)) as client:
        reply = client.post("/api/search", json={"query": "deploy region", "user_id": "alice", "threshold": 0.0})
    body = reply.json()
    assert reply.status_code == 200 and body["success"]
    assert body["user_playbooks"] and body["agent_playbooks"] == []
    assert "agent_playbook search failed; partial results" in body["msg"]
