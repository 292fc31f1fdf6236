"""End to end over real HTTP: uvicorn on 127.0.0.1, publish, materialise with Dagster, find the learned item."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from reflexio_pipelines.demo.run import publish_payload
from tests.support.processes import child_env, running_service

pytestmark = pytest.mark.e2e


def _wait_for_index(api: str, timeout_s: float = 30) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        version = httpx.get(f"{api}/health").json()["index_version"]
        if version:
            return version
        time.sleep(0.2)
    raise AssertionError("no index version was served")


def test_publish_materialise_search_over_http(tmp_path, samples):
    lake, home = tmp_path / "lake", tmp_path / "dagster_home"
    with running_service(lake, home, tmp_path / "serving.log") as api:
        for conversation in samples:
            reply = httpx.post(f"{api}/api/publish_interaction", json=publish_payload(conversation), timeout=30)
            assert reply.status_code == 200 and reply.json()["success"]
        assert httpx.post(f"{api}/api/search", json={"query": "deploy region"}).json()["user_playbooks"] == []

        done = subprocess.run(
            [sys.executable, "-m", "reflexio_pipelines", "materialize", "--lake", str(lake)],
            env=child_env(lake, home),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "materialised 1 window" in done.stdout

        version = _wait_for_index(api)
        hits = httpx.post(
            f"{api}/api/search", json={"query": "Which region should the payments service go to?", "user_id": "alice"}
        ).json()
        assert hits["index_version"] == version
        top = hits["user_playbooks"][0]
        assert "us-west-2" in top["content"] and top["user_id"] == "alice"
        assert top["provenance"]["source_turn_ids"]
        assert any(
            "analyst" in p["content"].lower()
            for p in httpx.post(f"{api}/api/search", json={"query": "what is my job", "user_id": "bob"}).json()[
                "profiles"
            ]
        )
        # another user's profile never leaks into a user-scoped search
        assert all(
            p["user_id"] == "bob"
            for p in httpx.post(f"{api}/api/search", json={"query": "deploy us-west-2", "user_id": "bob"}).json()[
                "profiles"
            ]
        )
