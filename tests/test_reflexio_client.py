"""The original Python client, `reflexio-client` 0.2.2 from PyPI (import `reflexio`), unchanged, against our service
on 127.0.0.1 (real uvicorn): every one of its endpoint methods answers 2xx with a body it parses, with the
original's request and response models — including the config round trip, manual adds found by the next search
and the approval flow of a manually added agent playbook."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
import types
from pathlib import Path

import httpx
import pytest
import requests

from reflexio_pipelines import runs
from reflexio_pipelines.definitions import build_resources
from reflexio_pipelines.lake.operation_status import request_cancel
from reflexio_pipelines.operations import RerunConfig, rerun
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.learned import AGENT, QUERY, REGION, correction_turns, serve_learned
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e


def _install_missing_defaults_module() -> None:
    """reflexio-client 0.2.2's wheel lacks `reflexio/defaults.py` (a packaging bug of theirs): its client
    (`reflexio/client/client.py`) and models (`reflexio/models/api_schema/domain/entities.py`) both do
    `from reflexio.defaults import DEFAULT_AGENT_VERSION`, so `import reflexio` fails. That constant is the only
    name they import from it; register a stand-in with the documented default before importing, and only when the
    installed package really lacks the file (a fixed release is then used as is)."""
    package = importlib.util.find_spec("reflexio")  # locates the package without executing it
    assert package is not None and package.submodule_search_locations, "reflexio-client is not installed"
    if not (Path(package.submodule_search_locations[0]) / "defaults.py").exists():
        defaults = types.ModuleType("reflexio.defaults")
        defaults.DEFAULT_AGENT_VERSION = "agent-v0"  # type: ignore[attr-defined]
        sys.modules["reflexio.defaults"] = defaults


_install_missing_defaults_module()

from reflexio import PlaybookStatus, ReflexioClient  # noqa: E402
from reflexio.models.api_schema.service_schemas import (  # noqa: E402
    AgentPlaybook,
    GetOperationStatusResponse,
    ManualPlaybookGenerationRequest,
    ManualProfileGenerationRequest,
    OperationStatus,
    StructuredData,
    UserPlaybook,
)
from reflexio.models.config_schema import PlaybookAggregatorConfig  # noqa: E402


@pytest.fixture
def original(learned_service) -> ReflexioClient:
    return ReflexioClient(url_endpoint=learned_service.url + "/", timeout=600)


def test_publish_interaction_with_wait_for_response(original):
    user = "orig-publisher"
    reply = original.publish_interaction(
        user, correction_turns(*REGION[0][1:]), agent_version=AGENT, session_id="orig-s1", wait_for_response=True
    )
    assert reply.success and reply.request_id and reply.playbooks_added == 1
    quick = original.publish_interaction(user, [{"role": "user", "content": "hello again"}])  # the original's default
    assert quick.success and quick.request_id != reply.request_id


def test_search_returns_the_originals_view_models(original, learned_service):
    result = original.search(query=QUERY, user_id="ann", agent_version=AGENT)
    assert result.success
    (playbook,) = [p for p in result.user_playbooks if p.user_id == "ann"]
    assert "us-west-2" in playbook.content and playbook.agent_version == AGENT and playbook.request_id
    assert playbook.structured_data.trigger  # the original reads trigger / rationale from structured_data
    (shared,) = result.agent_playbooks
    assert shared.agent_playbook_id == learned_service.agent_playbook_id
    assert shared.playbook_status in (PlaybookStatus.PENDING, PlaybookStatus.APPROVED)


def test_get_agent_playbooks_and_update_status(original, learned_service):
    pid = learned_service.agent_playbook_id
    listed = original.get_agent_playbooks(agent_version=AGENT, force_refresh=True)
    assert [p.agent_playbook_id for p in listed.agent_playbooks] == [pid]

    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.REJECTED).success
    assert original.search(query=QUERY, agent_version=AGENT).agent_playbooks == []
    rejected = original.get_agent_playbooks(playbook_status_filter=PlaybookStatus.REJECTED, force_refresh=True)
    assert [p.playbook_status for p in rejected.agent_playbooks] == [PlaybookStatus.REJECTED]

    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.APPROVED).success
    assert [p.agent_playbook_id for p in original.search(query=QUERY, agent_version=AGENT).agent_playbooks] == [pid]


def test_run_playbook_aggregation(original):
    reply = original.run_playbook_aggregation(
        agent_version=AGENT, playbook_name="default_playbook_extractor", wait_for_response=True
    )
    assert reply is not None and reply.success and "aggregation run" in reply.message


# -- reads ------------------------------------------------------------------------------


def test_get_profiles(original, learned_service):
    result = original.get_profiles(user_id=learned_service.facts_user, force_refresh=True)
    assert result.success and result.user_profiles
    assert {p.user_id for p in result.user_profiles} == {learned_service.facts_user}
    assert all(p.profile_id and p.content and p.last_modified_timestamp for p in result.user_profiles)


def test_get_user_playbooks_and_interactions(original):
    playbooks = original.get_user_playbooks(user_id="ann")
    assert [p.user_id for p in playbooks.user_playbooks] == ["ann"]
    interactions = original.get_interactions(user_id="ann")
    assert sorted(i.content for i in interactions.interactions) == sorted(REGION[0][1:])


def test_whoami(original):
    me = original.whoami()
    assert me.success and me.org_id


def test_search_profiles(original, learned_service):
    result = original.search_profiles(user_id=learned_service.facts_user, query="timezone")
    assert result.success and result.user_profiles


def test_entity_searches(original, learned_service):
    playbooks = original.search_user_playbooks(query=QUERY, user_id="ann", agent_version=AGENT)
    assert playbooks.success and [p.user_id for p in playbooks.user_playbooks] == ["ann"]
    shared = original.search_agent_playbooks(query=QUERY, agent_version=AGENT)
    assert [p.agent_playbook_id for p in shared.agent_playbooks] == [learned_service.agent_playbook_id]
    turns = original.search_interactions(user_id="ann", query="us-west-2")
    assert turns.success and any("us-west-2" in t.content for t in turns.interactions)


# -- every method of the client, the config round trip, manual adds, manual agent playbooks -------------------------

PLAYBOOK_NAME = "default_playbook_extractor"
#: Every public method of reflexio-client 0.2.2's ReflexioClient (each one is an endpoint call).
CLIENT_METHODS = frozenset(
    name for name in vars(ReflexioClient) if not name.startswith("_") and callable(getattr(ReflexioClient, name))
)


@pytest.fixture
def throwaway(tmp_path):
    """A learned service of its own, for tests that change or delete what it learned."""
    with serve_learned(tmp_path) as service:
        yield service


class Covered:
    """Calls client methods by name and remembers which ones answered (2xx, and a body the client parsed)."""

    def __init__(self, client: ReflexioClient) -> None:
        self.client, self.names = client, set()

    def __call__(self, name: str, *args, **kwargs):
        result = getattr(self.client, name)(*args, **kwargs)
        self.names.add(name)
        return result

    def fire_and_forget(self, name: str, coroutine) -> None:
        """A method that only sends in the background (no answer to look at): send it the way it does, awaiting the
        answer, which raises unless it is 2xx JSON."""
        asyncio.run(coroutine)
        self.names.add(name)


def test_every_client_method_answers_2xx_with_a_body_the_client_parses(throwaway):
    """All of reflexio-client 0.2.2's endpoint methods against a live service, the destructive ones last."""
    original = ReflexioClient(url_endpoint=throwaway.url + "/", timeout=600)
    call = Covered(original)
    published = call(
        "publish_interaction",
        "orig-every",
        correction_turns(*REGION[1][1:]),
        agent_version=AGENT,
        session_id="orig-every-s",
        wait_for_response=True,
    )
    assert published.success and published.request_id

    # reads and searches
    assert call("get_interactions", user_id="orig-every").interactions
    assert call("get_all_interactions", limit=5).interactions
    (profile, *_) = call("get_profiles", user_id=throwaway.facts_user, force_refresh=True).user_profiles
    assert call("get_all_profiles", limit=10).user_profiles
    assert call("get_profile_change_log").success
    (playbook, *_) = call("get_user_playbooks", user_id="ann").user_playbooks
    (shared,) = call("get_agent_playbooks", agent_version=AGENT, force_refresh=True).agent_playbooks
    assert call("get_requests", user_id="orig-every").sessions
    assert call("get_agent_success_evaluation_results", limit=10).success
    assert call("search", query=QUERY, user_id="ann", agent_version=AGENT).user_playbooks
    assert call("search_profiles", user_id=throwaway.facts_user, query="timezone").success
    assert call("search_user_playbooks", query=QUERY, user_id="ann", agent_version=AGENT).user_playbooks
    assert call("search_agent_playbooks", query=QUERY, agent_version=AGENT).agent_playbooks
    assert call("search_interactions", user_id="ann", query="us-west-2").interactions

    # organisation
    assert call("set_config", call("get_config"))["success"]
    assert call("whoami").org_id == "default"
    mine = call("get_my_config")
    assert mine.success is False and mine.storage_config is None and "disabled" in mine.message

    # manual adds and edits
    assert (
        call(
            "add_user_playbook",
            [
                UserPlaybook(
                    user_id="orig-every", agent_version=AGENT, request_id="cli-manual", content="Quote prices in euros."
                )
            ],
        ).added_count
        == 1
    )
    assert (
        call(
            "add_agent_playbooks",
            [AgentPlaybook(agent_version=AGENT, content="Confirm before deleting data.", playbook_metadata="")],
        ).added_count
        == 1
    )
    assert call("add_user_profile", [{"user_id": "orig-every", "content": "Works from Lisbon."}]).added_count == 1
    assert call(
        "update_user_playbook",
        playbook.user_playbook_id,
        content="Deploy to us-west-2 only.",
        structured_data=StructuredData(trigger="deploying a service"),
    ).success
    assert call("update_agent_playbook", shared.agent_playbook_id, content="Never deploy to us-east-1.").success
    listed = {
        p.agent_playbook_id: p.content
        for p in original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks
    }
    assert listed[shared.agent_playbook_id] == "Never deploy to us-east-1."  # curation edits reach the reads
    assert call(
        "update_agent_playbook_status", shared.agent_playbook_id, playbook_status=PlaybookStatus.APPROVED
    ).success

    # generation: the waiting variants poll get_operation_status until it reports completion
    assert call("rerun_profile_generation", user_id="ann", wait_for_response=True).msg == "Profile generation completed"
    rerun_playbooks = call("rerun_playbook_generation", agent_version=AGENT, wait_for_response=True)
    assert rerun_playbooks.msg == "Playbook generation completed"
    call.fire_and_forget(
        "manual_profile_generation",
        original._manual_profile_generation_async(ManualProfileGenerationRequest(user_id="ann")),
    )
    call.fire_and_forget(
        "manual_playbook_generation",
        original._manual_playbook_generation_async(ManualPlaybookGenerationRequest(agent_version=AGENT)),
    )
    assert call(
        "run_playbook_aggregation", agent_version=AGENT, playbook_name=PLAYBOOK_NAME, wait_for_response=True
    ).success

    # deletes, one by one (waiting for the answer), then by ids, then all
    interaction = original.get_interactions(user_id="orig-every").interactions[0]
    assert call("delete_interaction", "orig-every", interaction.interaction_id, wait_for_response=True).success
    assert call("delete_request", published.request_id, wait_for_response=True).success
    assert call("delete_session", "orig-every-s", wait_for_response=True).success
    assert call("delete_profile", throwaway.facts_user, profile_id=profile.profile_id, wait_for_response=True).success
    assert call("delete_user_playbook", playbook.user_playbook_id, wait_for_response=True).success
    assert call("delete_agent_playbook", shared.agent_playbook_id, wait_for_response=True).success
    remaining = original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks
    assert shared.agent_playbook_id not in [p.agent_playbook_id for p in remaining]
    requests_of_bob = original.get_requests(user_id="bob").sessions[0].requests
    assert call("delete_requests_by_ids", [requests_of_bob[0].request.request_id]).deleted_count == 1
    (added,) = original.get_profiles(user_id="orig-every", force_refresh=True).user_profiles
    assert call("delete_profiles_by_ids", [added.profile_id]).deleted_count == 1
    cat = original.get_user_playbooks(user_id="cat").user_playbooks
    assert call("delete_user_playbooks_by_ids", [p.user_playbook_id for p in cat]).deleted_count == len(cat)
    manual = original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks
    assert call("delete_agent_playbooks_by_ids", [p.agent_playbook_id for p in manual]).success
    for name in (
        "delete_all_interactions",
        "delete_all_profiles",
        "delete_all_user_playbooks",
        "delete_all_agent_playbooks",
        "delete_all_playbooks",
    ):
        assert call(name).success
    assert original.get_all_interactions().interactions == []
    assert original.search(query=QUERY, agent_version=AGENT).agent_playbooks == []

    assert CLIENT_METHODS - call.names == set(), "client methods the test did not exercise"


def test_config_round_trip_and_aggregation_config_change_the_next_run(throwaway):
    original = ReflexioClient(url_endpoint=throwaway.url + "/", timeout=600)
    # The client's Config serialises every field, the original-only ones at their defaults: accepted as is.
    saved = original.set_config(original.get_config())
    assert saved == {"success": True, "msg": "config saved; the next pipeline run uses it"}
    assert len(original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks) == 1

    # Back to pending (the fixture approved it): an approved rule is never archived by a re-run, a pending one is.
    (pid,) = [p.agent_playbook_id for p in original.get_agent_playbooks(agent_version=AGENT).agent_playbooks]
    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.PENDING).success
    config = original.get_config()
    config.user_playbook_extractor_configs[0].aggregation_config = PlaybookAggregatorConfig(min_cluster_size=4)
    assert original.set_config(config)["success"]
    assert original.get_config().user_playbook_extractor_configs[0].aggregation_config.min_cluster_size == 4
    # The next aggregation run clusters with it: three users are no longer enough for a shared rule.
    assert original.run_playbook_aggregation(
        agent_version=AGENT, playbook_name=PLAYBOOK_NAME, wait_for_response=True
    ).success
    assert original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks == []
    assert original.search(query=QUERY, agent_version=AGENT).agent_playbooks == []

    config.user_playbook_extractor_configs[0].aggregation_config = PlaybookAggregatorConfig(min_cluster_size=3)
    assert original.set_config(config)["success"]
    original.run_playbook_aggregation(agent_version=AGENT, playbook_name=PLAYBOOK_NAME, wait_for_response=True)
    assert len(original.get_agent_playbooks(agent_version=AGENT, force_refresh=True).agent_playbooks) == 1

    # A value that would change behaviour this pipeline does not have is refused, naming the field; nothing saved.
    config.profile_extractor_configs[0].context_prompt = "Always answer in French."
    with pytest.raises(requests.HTTPError) as refused:
        original.set_config(config)
    assert refused.value.response.status_code == 422
    assert "profile_extractor_configs.0.context_prompt" in refused.value.response.json()["msg"]
    assert original.get_config().profile_extractor_configs[0].context_prompt is None

    # This pipeline's own fields, which the original's Config lacks, survive a round trip through its client.
    body = httpx.get(f"{throwaway.url}/api/get_config").json()
    assert httpx.post(f"{throwaway.url}/api/set_config", json=dict(body, session_quiet_period_seconds=123)).json()[
        "success"
    ]
    assert original.set_config(original.get_config())["success"]
    assert httpx.get(f"{throwaway.url}/api/get_config").json()["session_quiet_period_seconds"] == 123


def test_manual_adds_are_found_by_the_very_next_search(tmp_path, instance, monkeypatch):
    """Before the background re-index has published anything (it is held back here), every manual add is found by
    the next search; once the re-indexed version is served, each item is found once, from it."""
    release = threading.Event()
    rebuild = runs.rebuild_index

    def held_back(**kwargs):
        release.wait(120)
        return rebuild(**kwargs)

    monkeypatch.setattr(runs, "rebuild_index", held_back)
    with serve_app(create_app(Settings(lake=str(tmp_path / "lake")))) as url:
        original = ReflexioClient(url_endpoint=url + "/", timeout=600)
        assert original.add_user_playbook(
            [
                UserPlaybook(
                    user_id="zed",
                    agent_version=AGENT,
                    request_id="seed",
                    content="Report distances in kilometres.",
                    structured_data=StructuredData(trigger="giving a distance"),
                )
            ]
        ).success
        assert [p.content for p in original.search(query="distance in kilometres", user_id="zed").user_playbooks] == [
            "Report distances in kilometres."
        ]
        assert original.add_user_profile([{"user_id": "zed", "content": "Zed lives in Reykjavik."}]).success
        assert [p.content for p in original.search(query="where does zed live", user_id="zed").profiles] == [
            "Zed lives in Reykjavik."
        ]
        assert original.add_agent_playbooks(
            [
                AgentPlaybook(
                    agent_version=AGENT, content="Greet users by name.", playbook_status=PlaybookStatus.APPROVED
                )
            ]
        ).success
        assert [p.content for p in original.search(query="greet users", agent_version=AGENT).agent_playbooks] == [
            "Greet users by name."
        ]
        assert original.search_user_playbooks(query="kilometres", user_id="zed").user_playbooks
        assert original.search_profiles(user_id="zed", query="Reykjavik").user_profiles
        assert original.search_agent_playbooks(query="greet", agent_version=AGENT).agent_playbooks
        assert httpx.post(f"{url}/api/search", json={"query": "greet users"}).json()["index_version"] is None

        release.set()
        deadline = time.monotonic() + 120
        while httpx.get(f"{url}/health").json()["index_version"] is None:
            assert time.monotonic() < deadline, "the background re-index did not publish"
            time.sleep(0.2)
        found = original.search(query="greet users distance kilometres Reykjavik", user_id="zed", agent_version=AGENT)
        assert [len(found.profiles), len(found.user_playbooks), len(found.agent_playbooks)] == [1, 1, 1]


def test_manual_agent_playbook_is_listed_approved_rejected_edited_and_deleted(original):
    version = "manual-v1"
    assert (
        original.add_agent_playbooks(
            [
                AgentPlaybook(
                    agent_version=version, content="Always attach the runbook link.", playbook_name="manual_rules"
                )
            ]
        ).added_count
        == 1
    )
    listed = original.get_agent_playbooks(agent_version=version, force_refresh=True).agent_playbooks
    (pid,) = [p.agent_playbook_id for p in listed]
    queue = original.get_agent_playbooks(playbook_status_filter=PlaybookStatus.PENDING, force_refresh=True)
    assert pid in [p.agent_playbook_id for p in queue.agent_playbooks]  # the dashboard's approval queue

    def served() -> list:
        return [
            (p.agent_playbook_id, p.content, p.playbook_status)
            for p in original.search(query="runbook link", agent_version=version).agent_playbooks
        ]

    assert served() == []  # pending (the original's default for an add): in the queue, not served
    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.APPROVED).success
    assert served() == [(pid, "Always attach the runbook link.", PlaybookStatus.APPROVED)]  # at once
    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.REJECTED).success
    assert served() == []  # at once, no pipeline run in between
    rejected = original.get_agent_playbooks(playbook_status_filter=PlaybookStatus.REJECTED, force_refresh=True)
    assert pid in [p.agent_playbook_id for p in rejected.agent_playbooks]
    assert original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.APPROVED).success
    assert served() == [(pid, "Always attach the runbook link.", PlaybookStatus.APPROVED)]

    assert original.update_agent_playbook(pid, content="Always attach the runbook link and the dashboard.").success
    (edited,) = original.get_agent_playbooks(agent_version=version, force_refresh=True).agent_playbooks
    assert (edited.content, edited.playbook_status) == (
        "Always attach the runbook link and the dashboard.",
        PlaybookStatus.APPROVED,
    )
    assert served()[0][1] == "Always attach the runbook link and the dashboard."

    assert original.delete_agent_playbook(pid, wait_for_response=True).success
    assert original.get_agent_playbooks(agent_version=version, force_refresh=True).agent_playbooks == []
    assert served() == []
    with pytest.raises(requests.HTTPError) as gone:
        original.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.APPROVED)
    assert gone.value.response.status_code == 404


def test_cancel_operation_stops_a_rerun_before_its_next_user(original, learned_service):
    idle = httpx.post(f"{learned_service.url}/api/cancel_operation", json={}).json()
    assert idle == {"success": True, "cancelled_services": [], "msg": "no operation in progress"}

    settings = Settings(lake=str(learned_service.lake.root))
    resources = build_resources(settings)
    request_cancel(learned_service.lake, "profile_generation", "op-cancelled")  # asked for before its first user
    result = rerun(
        learned_service.lake,
        resources["extractor"],
        resources["embedder"],
        RerunConfig(entity="profile", operation_id="op-cancelled"),
        run_id="test",
    )
    assert result["cancelled"] and result["generated"] == 0
    pending = learned_service.lake.read_table("user_profiles").to_pylist()
    assert not [r for r in pending if r["operation_id"] == "op-cancelled"]  # nothing of it was written
    answer = requests.get(
        f"{learned_service.url}/api/get_operation_status", params={"service_name": "profile_generation"}
    )
    status = GetOperationStatusResponse(**answer.json()).operation_status  # the original's model parses it
    assert status.status == OperationStatus.CANCELLED and status.started_at > 0 and status.completed_at
