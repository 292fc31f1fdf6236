"""The mem0 drop-in (reflexio_pipelines.integrations.mem0) with the real mem0ai client, against a local stand-in
of the mem0 platform API and the real Reflexio service, both on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path

# mem0 reads these when it is imported: no telemetry to PostHog, and its config file in a scratch directory
# instead of ~/.mem0.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = str(Path(tempfile.gettempdir()) / "reflexio-mem0-test")

import mem0  # noqa: E402
import pytest  # noqa: E402
from mem0.exceptions import MemoryNotFoundError  # noqa: E402
from mem0.memory import telemetry  # noqa: E402

from reflexio_pipelines.integrations.mem0 import AsyncMemoryClient, MemoryClient  # noqa: E402
from reflexio_pipelines.lake.duck import connect  # noqa: E402
from reflexio_pipelines.runs import launch  # noqa: E402
from reflexio_pipelines.sdk import AsyncReflexioClient, ReflexioClient  # noqa: E402
from serving.app import create_app  # noqa: E402
from tests.support.mem0_platform import API_KEY, make_mem0_platform  # noqa: E402
from tests.support.processes import free_port  # noqa: E402
from tests.support.servers import serve_app  # noqa: E402

pytestmark = pytest.mark.e2e

CONVERSATION = [
    {"role": "system", "content": "You are a deployment assistant."},
    {"role": "user", "content": "Please deploy the payments service to production."},
    {"role": "assistant", "content": "Sure. I'll deploy the payments service to production in us-east-1 now."},
    {"role": "user", "content": "No — we never deploy to us-east-1, always use us-west-2."},
    {"role": "assistant", "content": "Understood. Deploying the payments service to us-west-2 instead."},
]


@pytest.fixture
def mem0_platform():
    app = make_mem0_platform()
    with serve_app(app) as url:
        yield app, url


@pytest.fixture
def reflexio(settings, instance):
    app = create_app(settings)
    with serve_app(app) as url:
        yield app, url


def landed(settings, user_id: str) -> list[tuple]:
    return connect(settings.lake).sql(
        "select role, content, agent_version, session_id, source from landing_turns where user_id = ? "
        "order by ingested_at_us, turn_index", params=[user_id]
    ).fetchall()


def test_telemetry_is_off():
    assert telemetry.MEM0_TELEMETRY is False and telemetry.client_telemetry.posthog is None


def test_add_goes_to_mem0_and_to_reflexio_which_learns_from_it(mem0_platform, reflexio, settings, instance):
    platform, mem0_url = mem0_platform
    service, reflexio_url = reflexio
    client = MemoryClient(api_key=API_KEY, host=mem0_url, reflexio=ReflexioClient(base_url=reflexio_url))
    assert isinstance(client, mem0.MemoryClient)

    added = client.add(CONVERSATION, user_id="alice-m0", agent_id="ops-agent", run_id="sess-1")

    # mem0's answer comes back untouched, and the platform got the whole call
    assert [r["memory"] for r in added["results"]] == [m["content"] for m in CONVERSATION[1:]]
    adds = [body for method, path, body, _ in platform.state.requests if path == "/v3/memories/add/"]
    assert adds == [{"messages": CONVERSATION, "user_id": "alice-m0", "agent_id": "ops-agent", "run_id": "sess-1"}]
    # Reflexio got the conversation without the system prompt, under mem0's ids
    assert landed(settings, "alice-m0") == [
        (m["role"], m["content"], "ops-agent", "sess-1", "mem0") for m in CONVERSATION[1:]
    ]

    launch(settings=settings, instance=instance)
    service.state.svc.index.refresh()
    hits = client.reflexio.search("Deploy the payments service to production", user_id="alice-m0")
    assert any("us-west-2" in p.content for p in hits.user_playbooks), hits

    # every other method is mem0's own: same results, same exceptions
    assert client.get_all(filters={"user_id": "alice-m0"})["count"] == 4
    found = client.search("us-west-2", filters={"user_id": "alice-m0"})["results"]
    assert found[0]["memory"] == CONVERSATION[3]["content"]
    memory_id = added["results"][0]["id"]
    assert client.delete(memory_id) == {"message": "Memory deleted successfully!"}
    with pytest.raises(MemoryNotFoundError):
        client.delete(memory_id)


def test_reflexio_failure_never_breaks_the_mem0_call(mem0_platform, caplog):
    _, mem0_url = mem0_platform
    down = ReflexioClient(base_url=f"http://127.0.0.1:{free_port()}", max_retries=0)  # nothing listens there
    client = MemoryClient(api_key=API_KEY, host=mem0_url, reflexio=down)
    with caplog.at_level(logging.WARNING, logger="reflexio_pipelines.integrations"):
        added = client.add("I prefer answers with SQL examples.", user_id="bob-m0")
    assert [r["memory"] for r in added["results"]] == ["I prefer answers with SQL examples."]
    assert "Reflexio publish failed" in caplog.text


def test_async_client_reads_ids_from_filters_and_keeps_a_conversation_together(mem0_platform, reflexio, settings):
    _, mem0_url = mem0_platform
    _, reflexio_url = reflexio
    scope = {"filters": {"user_id": "carol-m0", "agent_id": "ops-agent"}}

    async def run():
        async with AsyncReflexioClient(base_url=reflexio_url) as publisher, \
                AsyncMemoryClient(api_key=API_KEY, host=mem0_url, reflexio=publisher) as client:
            assert isinstance(client, mem0.AsyncMemoryClient)
            # turn by turn, as chat apps call mem0, without a run id
            return [await client.add(CONVERSATION[1:3], **scope), await client.add(CONVERSATION[3:5], **scope)]

    added = asyncio.run(run())
    assert [len(a["results"]) for a in added] == [2, 2]
    rows = landed(settings, "carol-m0")
    assert [(r[0], r[1], r[2]) for r in rows] == [(m["role"], m["content"], "ops-agent") for m in CONVERSATION[1:]]
    # one session, so the correction in the second add is read with the answer from the first
    assert len({r[3] for r in rows}) == 1 and rows[0][3]
