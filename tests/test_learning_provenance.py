"""`POST /api/get_learning_provenance` on a real learned lake: a learned item's source turns and triggering request,
an agent playbook's member user playbooks with theirs, nothing once a source turn is deleted (the cascade deletes
the item); and the lineage statuses (learning/lineage.py) over rows as the lake holds them."""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.learning.lineage import lineage_of
from tests.support.learned import REGION, correction_turns

PROVENANCE = "/api/get_learning_provenance"


def _teach(client: Any, index: int) -> str:
    user, request, answer, correction = REGION[index]
    body = {"user_id": user, "agent_version": "ops-1", "session_id": f"{user}-s"}
    body["interaction_data_list"] = correction_turns(request, answer, correction)
    published = client.post("/api/publish_interaction?wait_for_response=true", json=body).json()
    assert published["playbooks_added"] == 1
    return published["request_id"]


def test_a_user_playbooks_source_turns_and_lineage(client: Any) -> None:
    request_id = _teach(client, 0)
    (playbook,) = client.post("/api/get_user_playbooks", json={"user_id": "ann"}).json()["user_playbooks"]
    body = {"kind": "user_playbook", "id": str(playbook["user_playbook_id"])}
    found = client.post(PROVENANCE, json=body).json()
    assert (found["success"], found["provenance_status"], found["trigger_request_id"]) == (True, "exact", request_id)
    assert [i["request_id"] for i in found["interactions"]] == [request_id] * len(found["interactions"])
    assert any("us-west-2" in i["content"] for i in found["interactions"])
    assert found["lineage"] == {"status": "current"}

    correction = next(i for i in found["interactions"] if "us-west-2" in i["content"])
    deleted = client.request(
        "DELETE", "/api/delete_interaction", json={"user_id": "ann", "interaction_id": correction["interaction_id"]}
    )
    assert deleted.json()["success"], deleted.text
    # Deleting a source turn deletes what was learned from it (the curation cascade): no provenance is left.
    after = client.post(PROVENANCE, json=body).json()
    assert (after["success"], after["provenance_status"], after["interactions"]) == (False, "unavailable", [])


def test_an_agent_playbooks_member_playbooks_and_unknown_ids(client: Any) -> None:
    requests = {_teach(client, i) for i in range(3)}
    assert client.post("/api/run_playbook_aggregation", json={"agent_version": "ops-1"}).json()["success"]
    (agent,) = client.post("/api/get_agent_playbooks", json={"agent_version": "ops-1"}).json()["agent_playbooks"]
    found = client.post(PROVENANCE, json={"kind": "agent_playbook", "id": str(agent["agent_playbook_id"])}).json()
    assert found["success"] and found["provenance_status"] == "exact"
    groups = found["source_user_playbooks"]
    assert sorted(g["user_playbook"]["user_id"] for g in groups) == ["ann", "bob", "cat"]
    assert {i["request_id"] for g in groups for i in g["interactions"]} == requests
    assert all(g["source_interaction_ids"] == [i["interaction_id"] for i in g["interactions"]] for g in groups)

    for kind, item in (("agent_playbook", "999"), ("user_playbook", "x"), ("profile", "nope")):
        missing = client.post(PROVENANCE, json={"kind": kind, "id": item}).json()
        assert (missing["success"], missing["provenance_status"]) == (False, "unavailable"), missing
    assert client.post(PROVENANCE, json={"kind": "skill", "id": "1"}).status_code == 422


def _row(item_id: str, status: str = "current", supersedes: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"profile_id": item_id, "status": status, "supersedes": supersedes, "window": "w1", **extra}


def test_lineage_statuses() -> None:
    rows = [
        _row("a"),
        _row("b"),
        _row("c"),
        _row("merged", supersedes=["a", "b"]),
        _row("d"),
        _row("newer", supersedes=["d"]),
        _row("e"),
        _row("tomb", "forgotten", ["e"]),
        _row("f"),
        _row("tomb2", "replaced", ["f"]),
        _row("old", expiration_timestamp=100),
        _row("p", "pending", expiration_timestamp=10_000),
    ]

    def status(item: str) -> tuple[str, str | None]:
        lineage = lineage_of(item, rows, "profile_id", now=1_000)
        return lineage["status"], lineage["by"]

    assert status("a") == status("b") == ("merged", "merged")
    assert status("d") == ("superseded", "newer")
    assert (status("e"), status("f")) == (("forgotten", "tomb"), ("replaced", "tomb2"))
    assert status("old") == ("expired", None)
    assert (status("c"), status("p")) == (("current", None), ("pending", None))
