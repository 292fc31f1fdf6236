"""The services the SDK, CLI and original-client tests share (registered as fixtures in tests/conftest.py; the
service is imported inside them, so registering them costs the tests that do not use them nothing).

`learned_service` (module scope): a service whose lake has learned one correction from three users (one agent
playbook, approved through the API so that it is served) and one user's stated facts. `keyed_service`: the service in keyed mode with two organisations.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.settings import Settings
from tests.support.dagster_home import dagster_home_env

AGENT = "ops-1"
QUERY = "which region to deploy to"
REGION = [  # three users, one lesson, three wordings (-> one agent playbook)
    (
        "ann",
        "Please deploy the payments service.",
        "Deploying the payments service to us-east-1.",
        "No — we never deploy to us-east-1, always use us-west-2.",
    ),
    (
        "bob",
        "Deploy the billing service to production.",
        "Deploying the billing service to us-east-1 now.",
        "No, never deploy to us-east-1; use us-west-2 instead.",
    ),
    (
        "cat",
        "Can you deploy the search service?",
        "Sure, deploying the search service in us-east-1.",
        "Wrong region: never us-east-1, always deploy to us-west-2.",
    ),
]


def correction_turns(request: str, answer: str, correction: str) -> list[dict]:
    return [
        {"role": "user", "content": request},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": correction},
    ]


def publish_correction(
    client: Any, user: str, request: str, answer: str, correction: str, version: str = AGENT
) -> None:
    """Publish one correction through the API (a TestClient) in a session of its own, waiting for its learning run,
    and check that it was learned as one user playbook."""
    body = {
        "user_id": user,
        "agent_version": version,
        "session_id": f"{user}-{time.time_ns()}",
        "interaction_data_list": correction_turns(request, answer, correction),
    }
    assert client.post("/api/publish_interaction?wait_for_response=true", json=body).json()["playbooks_added"] == 1


@dataclass
class LearnedService:
    url: str
    lake: Lake
    agent_playbook_id: int
    facts_user: str


@pytest.fixture(scope="module")
def learned_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LearnedService]:
    """The real service with a learned lake, shared by a test module."""
    with serve_learned(tmp_path_factory.mktemp("learned")) as service:
        yield service


@contextmanager
def serve_learned(root: Path) -> Iterator[LearnedService]:
    """The real service on a new lake under `root` that learned REGION (one agent playbook, approved: a pending one
    is not served) and one user's stated facts. Every publish waits for its Dagster run, so each window is learned even if the publishes straddle an hour
    boundary."""
    from reflexio_pipelines.demo.run import sample_conversations
    from reflexio_pipelines.sdk import ReflexioClient
    from serving.app import create_app
    from tests.support.servers import serve_app

    lake = Lake.at(root / "lake")
    facts = next(c for c in sample_conversations() if c["id"] == "bob-personal-facts")
    with dagster_home_env(root / "dagster_home"):
        with serve_app(create_app(Settings(lake=str(lake.root)))) as url, ReflexioClient(url) as client:
            for user, *turns in REGION:
                assert client.publish(user, correction_turns(*turns), agent_version=AGENT, wait=True).playbooks_added
            client.publish("frank", facts["interactions"], agent_version=AGENT, wait=True)
            client.run_aggregation(agent_version=AGENT)
            (playbook,) = client.get_agent_playbooks(agent_version=AGENT)
            client.approve_agent_playbook(playbook.agent_playbook_id)
            yield LearnedService(url, lake, playbook.agent_playbook_id, "frank")


def landed_rows(lake: Lake, user_id: str) -> list[dict]:
    """The landed rows (not yet compacted) of one user."""
    import pyarrow.parquet as pq

    files = lake.landing_files([p for _, _, p in lake.landing_hours()])
    return [r for f in files for r in pq.read_table(f).to_pylist() if r["user_id"] == user_id]


@pytest.fixture
def keyed_service(tmp_path: Path, instance) -> Iterator[tuple[str, str, str]]:
    """The real service in keyed mode: (url, key of acme, key of globex whose searches are limited to 2 a minute)."""
    from serving.app import create_app
    from serving.tenancy import KeyStore
    from tests.support.servers import serve_app

    store = KeyStore(tmp_path / "keys.json")
    acme, globex = store.create("acme"), store.create("globex", {"search": 2})
    settings = Settings(lake=str(tmp_path / "lake"), api_keys_file=str(tmp_path / "keys.json"))
    with serve_app(create_app(settings)) as url:
        yield url, acme, globex
