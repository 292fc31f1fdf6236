"""The unified search's filters of reflexio-client 0.2.16 (serving/search_options.py): `entity_types`,
`agent_playbook_status_filter` and `source` are honoured; `tags` and `enable_agent_answer` are refused with a 422
naming the field rather than ignored."""

from __future__ import annotations

import httpx
import pytest

from tests.support.learned import AGENT, QUERY, correction_turns

pytestmark = pytest.mark.e2e


def search(url: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/api/search", json={"query": QUERY, "agent_version": AGENT, **body}, timeout=60)


def found(url: str, **body) -> dict[str, list]:
    reply = search(url, **body)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    return {k: answer[k] for k in ("profiles", "user_playbooks", "agent_playbooks")}


@pytest.fixture(scope="module")
def approved(learned_service):
    reply = httpx.put(
        f"{learned_service.url}/api/update_agent_playbook_status",
        json={"agent_playbook_id": learned_service.agent_playbook_id, "playbook_status": "approved"},
    )
    assert reply.json()["success"]
    return learned_service


def test_entity_types_choose_what_is_searched(approved) -> None:
    everything = found(approved.url, user_id="ann")
    assert everything["user_playbooks"] and everything["agent_playbooks"]
    only_shared = found(approved.url, user_id="ann", entity_types=["agent_playbooks"])
    assert only_shared == {"profiles": [], "user_playbooks": [], "agent_playbooks": everything["agent_playbooks"]}
    only_own = found(approved.url, user_id="ann", entity_types=["user_playbooks"])
    assert only_own == {"profiles": [], "user_playbooks": everything["user_playbooks"], "agent_playbooks": []}
    unknown = search(approved.url, entity_types=["memories"])
    assert unknown.status_code == 422 and "entity_types" in unknown.json()["message"]


def test_agent_playbook_status_filter_is_honoured(approved) -> None:
    assert found(approved.url, agent_playbook_status_filter=["approved"])["agent_playbooks"]
    assert found(approved.url, agent_playbook_status_filter=["pending", "rejected"])["agent_playbooks"] == []


def test_source_filters_every_entity_type(approved) -> None:
    published = httpx.post(
        f"{approved.url}/api/publish_interaction?wait_for_response=true",
        json={
            "user_id": "ann",
            "agent_version": AGENT,
            "source": "ticketing",
            "interaction_data_list": correction_turns(
                "Open a ticket for the outage.",
                "Opening the ticket with priority low.",
                "No, outage tickets are always priority high.",
            ),
        },
        timeout=600,
    )
    assert published.json()["success"]
    from_ticketing = found(approved.url, user_id="ann", query="ticket priority", source="ticketing")
    assert from_ticketing["user_playbooks"] and all(
        p["source"] == "ticketing" for p in from_ticketing["user_playbooks"]
    )
    assert found(approved.url, user_id="ann", source="ticketing")["agent_playbooks"] == []  # its members: no source
    assert found(approved.url, user_id="ann", source="nowhere") == {
        "profiles": [],
        "user_playbooks": [],
        "agent_playbooks": [],
    }


@pytest.mark.parametrize(("field", "value"), [("tags", ["deploy"]), ("enable_agent_answer", True)])
def test_unsupported_filters_are_refused_naming_the_field(approved, field: str, value: object) -> None:
    refused = search(approved.url, user_id="ann", **{field: value})
    assert refused.status_code == 422 and f"body.{field}" in refused.json()["message"]
    assert search(approved.url, user_id="ann", **{field: [] if field == "tags" else False}).status_code == 200
