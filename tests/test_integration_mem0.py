"""The mem0 drop-ins (reflexio_pipelines.integrations.mem0) with the real mem0ai package and the real Reflexio
service on 127.0.0.1: the platform clients against a local stand-in of the mem0 platform API, and the self-hosted
`Memory` / `AsyncMemory` with mem0's local options — an OpenAI-compatible stub on 127.0.0.1 as its LLM and embedder,
qdrant in local mode (a directory, no server) as its vector store, its SQLite history database."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import tempfile
from pathlib import Path

# mem0 reads these when it is imported: no telemetry to PostHog, and its config file in a scratch directory
# instead of ~/.mem0.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ["MEM0_DIR"] = str(Path(tempfile.gettempdir()) / "reflexio-mem0-test")

import mem0  # noqa: E402
import pytest  # noqa: E402
from mem0.configs.base import MemoryConfig  # noqa: E402
from mem0.exceptions import MemoryNotFoundError  # noqa: E402
from mem0.exceptions import ValidationError as Mem0ValidationError  # noqa: E402
from mem0.memory import telemetry  # noqa: E402

from reflexio_pipelines.integrations.mem0 import AsyncMemory, AsyncMemoryClient, Memory, MemoryClient  # noqa: E402
from reflexio_pipelines.runs import launch  # noqa: E402
from reflexio_pipelines.sdk import AsyncReflexioClient, ReflexioClient  # noqa: E402
from serving.app import create_app  # noqa: E402
from tests.support.landing import landed_turns  # noqa: E402
from tests.support.lessons import served_rule_lines  # noqa: E402
from tests.support.mem0_platform import API_KEY, make_mem0_platform  # noqa: E402
from tests.support.processes import free_port  # noqa: E402
from tests.support.provider_stubs import Reply, make_provider_stub  # noqa: E402
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
    return landed_turns(settings.lake, user_id, "role, content, agent_version, session_id, source")


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
        async with (
            AsyncReflexioClient(base_url=reflexio_url) as publisher,
            AsyncMemoryClient(api_key=API_KEY, host=mem0_url, reflexio=publisher) as client,
        ):
            assert isinstance(client, mem0.AsyncMemoryClient)
            # turn by turn, as chat apps call mem0, without a run id
            return [await client.add(CONVERSATION[1:3], **scope), await client.add(CONVERSATION[3:5], **scope)]

    added = asyncio.run(run())
    assert [len(a["results"]) for a in added] == [2, 2]
    rows = landed(settings, "carol-m0")
    assert [(r[0], r[1], r[2]) for r in rows] == [(m["role"], m["content"], "ops-agent") for m in CONVERSATION[1:]]
    # one session, so the correction in the second add is read with the answer from the first
    assert len({r[3] for r in rows}) == 1 and rows[0][3]


# --- self-hosted mem0: Memory / AsyncMemory ----------------------------------------------------------------------

MODEL_KEY = "sk-local-stub"
DIMS = 32
_NEW_MESSAGES = re.compile(r"## New Messages\n(.*?)\n## ", re.S)


def mem0_extractor(body: dict) -> Reply:
    """mem0's LLM: answers mem0's (v3, additive) extraction prompt by keeping each new user message as a memory, in
    the JSON mem0 asks for (`{"memory": [{"text": ...}]}`)."""
    prompt = str(body["messages"][-1].get("content", ""))  # the user prompt (the system prompt explains sections)
    new = _NEW_MESSAGES.search(prompt)
    users = re.findall(r"^user: (.+)$", new.group(1), re.M) if new else []
    return Reply(text=json.dumps({"memory": [{"text": text} for text in users]}))


@pytest.fixture
def mem0_local(tmp_path):
    """A self-hosted mem0 config whose every part is local (the model stub's app, the config dict)."""
    model = make_provider_stub("openai", MODEL_KEY, responder=mem0_extractor, embedding_dim=DIMS)
    with serve_app(model) as url:
        yield (
            model,
            {
                "llm": {
                    "provider": "openai",
                    "config": {"model": "local-llm", "api_key": MODEL_KEY, "openai_base_url": f"{url}/v1"},
                },
                "embedder": {
                    "provider": "openai",
                    "config": {
                        "model": "local-embedder",
                        "api_key": MODEL_KEY,
                        "openai_base_url": f"{url}/v1",
                        "embedding_dims": DIMS,
                    },
                },
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "path": str(tmp_path / "qdrant"),
                        "collection_name": "memories",
                        "embedding_model_dims": DIMS,
                    },
                },
                "history_db_path": str(tmp_path / "mem0-history.db"),
            },
        )


def test_self_hosted_memory_keeps_its_memories_and_reflexio_learns_the_correction(
    mem0_local, reflexio, settings, instance, monkeypatch
):
    model, config = mem0_local
    service, reflexio_url = reflexio
    monkeypatch.setenv("REFLEXIO_API_URL", reflexio_url)  # the user's code changes its import, nothing else

    with Memory.from_config(config) as memory:
        assert isinstance(memory, mem0.Memory)
        added = memory.add(CONVERSATION, user_id="hana-m0", agent_id="ops-agent", run_id="sess-7")

        # mem0 did its own work, against its configured (local) LLM and embedder, and answered as always
        kinds = [seen.kind for seen in model.state.stub.seen]
        assert "chat" in kinds and "embeddings" in kinds
        users = [m["content"] for m in CONVERSATION if m["role"] == "user"]
        assert sorted(r["memory"] for r in added["results"]) == sorted(users)
        assert {r["event"] for r in added["results"]} == {"ADD"}
        # Reflexio got the conversation without the system prompt, under mem0's ids
        assert landed(settings, "hana-m0") == [
            (m["role"], m["content"], "ops-agent", "sess-7", "mem0") for m in CONVERSATION[1:]
        ]

        launch(settings=settings, instance=instance)
        service.state.svc.index.refresh()
        # what Reflexio learned is served back, ready for the system prompt
        block = memory.reflexio.context("Deploy the billing service to production", user_id="hana-m0")
        assert served_rule_lines(block), block

        # mem0's own memories are intact: listed, searchable, deletable as mem0 does it
        stored = memory.get_all(filters={"user_id": "hana-m0"})["results"]
        assert sorted(m["memory"] for m in stored) == sorted(users)
        assert {(m["agent_id"], m["run_id"]) for m in stored} == {("ops-agent", "sess-7")}
        hit = memory.search(CONVERSATION[3]["content"], filters={"user_id": "hana-m0"})["results"][0]
        assert hit["memory"] == CONVERSATION[3]["content"]
        memory.delete(hit["id"])
        assert len(memory.get_all(filters={"user_id": "hana-m0"})["results"]) == len(users) - 1


def test_self_hosted_memory_publishes_nothing_when_mem0_fails(mem0_local, reflexio, settings):
    model, config = mem0_local
    _, reflexio_url = reflexio
    memory = Memory(MemoryConfig(**config), reflexio=ReflexioClient(base_url=reflexio_url))
    with pytest.raises(Mem0ValidationError):  # mem0's own error, unchanged
        memory.add(CONVERSATION, user_id="ivan-m0", memory_type="not-a-type")
    assert memory.reflexio.get_interactions("ivan-m0") == []  # nothing reached Reflexio
    memory.close()


def test_async_self_hosted_memory_keeps_a_conversation_together(mem0_local, reflexio, settings):
    _, config = mem0_local
    _, reflexio_url = reflexio

    async def run():
        async with (
            AsyncReflexioClient(base_url=reflexio_url) as publisher,
            AsyncMemory.from_config(config, reflexio=publisher) as memory,
        ):
            assert isinstance(memory, mem0.AsyncMemory)
            # turn by turn, as chat apps call mem0, without a run id
            added = [
                await memory.add(CONVERSATION[1:3], user_id="jade-m0", agent_id="ops-agent"),
                await memory.add(CONVERSATION[3:5], user_id="jade-m0", agent_id="ops-agent"),
            ]
            return added, await memory.get_all(filters={"user_id": "jade-m0"})

    added, stored = asyncio.run(run())
    assert [[r["memory"] for r in a["results"]] for a in added] == [
        [CONVERSATION[1]["content"]],
        [CONVERSATION[3]["content"]],
    ]
    assert len(stored["results"]) == 2
    rows = landed(settings, "jade-m0")
    assert [(r[0], r[1], r[2], r[4]) for r in rows] == [
        (m["role"], m["content"], "ops-agent", "mem0") for m in CONVERSATION[1:]
    ]
    assert len({r[3] for r in rows}) == 1 and rows[0][3]  # one session across the two adds
