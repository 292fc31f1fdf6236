"""Shared fixtures: a temporary lake, settings pointing at it, sample data landed durably, a Dagster instance, the
service in-process and the fake LLM on a real socket.

Dagster and the service are imported inside the fixtures that need them, so a test of pure logic does not pay for
the whole stack; helpers tests import live in tests/support/.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# No control group unless a test asks for one (tests/test_holdout.py sets shares in its configs): tests of other
# features must not depend on which of their users the holdout hash draws (reflexio_pipelines/learning/holdout.py).
os.environ.setdefault("REFLEXIO_HOLDOUT_SHARE", "0")

from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from reflexio_pipelines.lake.io import Lake  # noqa: E402
from reflexio_pipelines.settings import LLMSettings, Settings  # noqa: E402
from tests.support.dagster_home import dagster_home_env  # noqa: E402
from tests.support.learned import keyed_service, learned_service  # noqa: E402, F401  (shared fixtures)

#: Shared fixtures that start a Dagster instance or a real server: a test using one (directly or through another
#: fixture) is an e2e test. Tests that start such things themselves carry the marker in their own module.
E2E_FIXTURES = frozenset({"instance", "stub", "learned_service", "keyed_service"})


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT Python's handler when the suite starts with it ignored (`make test &` from a script, `nohup …
    &`): Dagster copies SIGINT's disposition to SIGTERM for every in-process run (`setup_interrupt_handlers`), the
    `tail` processes that mirror each step's logs then inherit an ignored SIGTERM, and steps waited up to 30 s for
    their `tail` to stop (seen in a backgrounded `.ci/run`: the suite ran several times slower)."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses an `E2E_FIXTURES` fixture `e2e`, so `-m "not e2e"` leaves the pure tests."""
    for item in items:
        if E2E_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session", autouse=True)
def testclient_host() -> Iterator[None]:
    """Allow Starlette's `Host: testserver` for the whole session (tests/support/hosts.py). Session-scoped, so apps
    made by module fixtures get it too."""
    from tests.support.hosts import testserver_allowed

    with testserver_allowed():
        yield


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    """An empty lake in this test's temporary directory."""
    return Lake.at(tmp_path / "lake")


@pytest.fixture
def settings(lake: Lake) -> Settings:
    """Default settings (built-in extractor, local embedder) on `lake`."""
    return Settings(lake=str(lake.root))


@pytest.fixture
def dagster_home(tmp_path: Path) -> Iterator[Path]:
    """A fresh `$DAGSTER_HOME` (telemetry off) for this test."""
    with dagster_home_env(tmp_path / "dagster_home") as home:
        yield home


@pytest.fixture
def instance(dagster_home: Path) -> Iterator[Any]:
    """An ephemeral Dagster instance (runs in memory), with `$DAGSTER_HOME` pointing at a fresh directory."""
    import dagster as dg

    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture
def samples() -> list[dict]:
    """The demo's sample conversations."""
    from reflexio_pipelines.demo.run import sample_conversations

    return sample_conversations()


@pytest.fixture
def landed(lake: Lake, samples: list[dict]) -> list[str]:
    """`samples` landed durably in `lake`; the request ids."""
    from tests.support.landing import land

    return land(lake, samples)


@contextmanager
def _service_in_process(settings: Settings) -> Iterator[Any]:
    """The service as Starlette's TestClient (in-process ASGI, lifespan run) on `settings`."""
    from fastapi.testclient import TestClient

    from serving.app import create_app

    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def client(settings: Settings, instance: Any) -> Iterator[Any]:
    """The service in-process on this test's lake and Dagster instance."""
    with _service_in_process(settings) as c:
        yield c


@pytest.fixture
def stub() -> Iterator[tuple[Any, str]]:
    """The OpenAI-compatible fake LLM served on 127.0.0.1: (its app, whose state records requests; its base URL)."""
    from reflexio_pipelines.devtools.openai_stub import make_openai_stub
    from reflexio_pipelines.devtools.servers import serve_app

    app = make_openai_stub()
    with serve_app(app) as base_url:
        yield app, base_url


@pytest.fixture(params=["builtin", pytest.param("litellm", marks=pytest.mark.e2e)])
def extractor_settings(request: pytest.FixtureRequest, lake: Lake) -> Iterator[Settings]:
    """Settings for each extraction path: the built-in rules, and LiteLLM against the OpenAI-compatible stub on
    127.0.0.1 (extraction, dedup, aggregation and judge prompts all answered over real HTTP)."""
    if request.param == "builtin":
        yield Settings(lake=str(lake.root))
        return
    # Requested here, not as an argument: the built-in path must not start a server.
    app, base_url = request.getfixturevalue("stub")
    yield Settings(lake=str(lake.root), llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k"))
    assert app.state.requests, "the LiteLLM path must really have been used"


@pytest.fixture
def extractor_client(extractor_settings: Settings, instance: Any) -> Iterator[Any]:
    """The service in-process for each extraction path."""
    with _service_in_process(extractor_settings) as client:
        yield client
