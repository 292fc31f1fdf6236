"""The original Python client, `reflexio-client` 0.2.2 from PyPI (import `reflexio`), unchanged, against our service
on 127.0.0.1 (real uvicorn): the calls the two share must work, with the original's request and response models."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from tests.support.learned import AGENT, QUERY, REGION, correction_turns


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


@pytest.fixture
def original(learned_service) -> ReflexioClient:
    return ReflexioClient(url_endpoint=learned_service.url + "/", timeout=600)


def test_publish_interaction_with_wait_for_response(original):
    user = "orig-publisher"
    reply = original.publish_interaction(user, correction_turns(*REGION[0][1:]), agent_version=AGENT,
                                         session_id="orig-s1", wait_for_response=True)  # fmt: skip
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
    reply = original.run_playbook_aggregation(agent_version=AGENT, playbook_name="default_playbook_extractor",
                                              wait_for_response=True)  # fmt: skip
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
