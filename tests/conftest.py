"""Shared fixtures: a temporary lake, settings pointing at it, sample data landed durably, a Dagster instance."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# No control group unless a test asks for one (tests/test_holdout.py sets shares in its configs): tests of other
# features must not depend on which of their users the holdout hash draws (reflexio_pipelines/learning/holdout.py).
os.environ.setdefault("REFLEXIO_HOLDOUT_SHARE", "0")

import uuid  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

import dagster as dg  # noqa: E402
import pytest  # noqa: E402

from reflexio_pipelines.demo.run import publish_payload, sample_conversations  # noqa: E402
from reflexio_pipelines.lake.io import Lake  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from reflexio_pipelines.settings import LLMSettings, Settings  # noqa: E402
from serving import hosts  # noqa: E402
from serving.app import create_app  # noqa: E402
from tests.support.learned import keyed_service, learned_service  # noqa: E402, F401  (shared fixtures)
from tests.support.openai_stub import make_openai_stub  # noqa: E402
from tests.support.servers import serve_app  # noqa: E402
from serving.landing import LandingWriter  # noqa: E402
from serving.models import PublishUserInteractionRequest  # noqa: E402
from serving.routers.publish import landing_rows  # noqa: E402


#: The service's own Host allow-list default, before the session fixture below widens it for tests.
REAL_LOOPBACK_HOSTS = hosts.LOOPBACK_HOSTS


@pytest.fixture(scope="session", autouse=True)
def testclient_host():
    """Starlette's TestClient sends `Host: testserver`, which an open-mode service refuses (serving/hosts.py): tests
    that drive the app through it are allowed that name. Session-scoped, so apps made by module fixtures get it too;
    tests of the Host check put `REAL_LOOPBACK_HOSTS` back."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hosts, "LOOPBACK_HOSTS", (*REAL_LOOPBACK_HOSTS, "testserver"))
        yield


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake.at(tmp_path / "lake")


@pytest.fixture
def settings(lake: Lake) -> Settings:
    return Settings(lake=str(lake.root))


@pytest.fixture
def instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def samples() -> list[dict]:
    return sample_conversations()


def land(lake: Lake, conversations: list[dict], at: datetime | None = None) -> list[str]:
    """Land conversations through the real group-commit writer (committed `at` a given time); returns request ids."""
    writer = LandingWriter(lake, clock=(lambda: at) if at else lambda: datetime.now(timezone.utc))
    writer.start()
    try:
        futures = []
        for i, conversation in enumerate(conversations):
            body = PublishUserInteractionRequest.model_validate(publish_payload(conversation))
            request_id = f"req-{i}-{conversation['id']}-{uuid.uuid4().hex[:6]}"
            futures.append(writer.submit(request_id, landing_rows(body, request_id), f"key-{conversation['id']}-{request_id}"))
        return [f.result(timeout=30).request_id for f in futures]
    finally:
        writer.close()


def land_hourly(lake: Lake, batches: list[list[dict]], start: datetime) -> list[str]:
    """Land batch i in the hour `start + i h`; returns the partition keys, one per batch."""
    from datetime import timedelta

    from reflexio_pipelines.partitions import GRANULARITY, key_of_moment

    keys = []
    for hour, conversations in enumerate(batches):
        moment = start + timedelta(hours=hour)
        land(lake, conversations, at=moment)
        keys.append(key_of_moment(moment, GRANULARITY))
    return keys


@pytest.fixture
def landed(lake: Lake, samples: list[dict]) -> list[str]:
    return land(lake, samples)


@pytest.fixture(params=["builtin", "litellm"])
def extractor_settings(request, lake: Lake):
    """Settings for each extraction path: the built-in rules, and LiteLLM against the OpenAI-compatible stub on
    127.0.0.1 (extraction, dedup, aggregation and judge prompts all answered over real HTTP)."""
    if request.param == "builtin":
        yield Settings(lake=str(lake.root))
        return
    stub = make_openai_stub()
    with serve_app(stub) as base_url:
        yield Settings(lake=str(lake.root), llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k"))
    assert stub.state.requests, "the LiteLLM path must really have been used"


@pytest.fixture
def extractor_client(extractor_settings, instance):
    """The service (in-process ASGI) for each extraction path."""
    with TestClient(create_app(extractor_settings)) as client:
        yield client
