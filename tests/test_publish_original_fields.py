"""The original's newer publish fields against the real service: `learning_status: "deferred"` without waiting,
`retrieved_learnings` / `citations` counted as serves by the outcome counters (a real evaluation run),
`session_finished` learning the session now, and the fields this service cannot honour refused with a 422 naming
them (nothing stored)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import pytest

from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from tests.support.learned import REGION, correction_turns

PUBLISH = "/api/publish_interaction"


def _body(user: str, session: str | None, turns: list[dict]) -> dict:
    body = {"user_id": user, "agent_version": "v1", "interaction_data_list": turns}
    return body | ({"session_id": session} if session else {})


def test_a_publish_without_waiting_is_deferred(client: Any) -> None:
    fact = [{"role": "user", "content": "I live in Porto."}]
    deferred = client.post(PUBLISH, json=_body("dora", "d1", fact)).json()
    assert deferred["learning_status"] == "deferred"
    waited = client.post(f"{PUBLISH}?wait_for_response=true", json=_body("dora", "d2", fact)).json()
    assert "learning_status" not in waited and waited["learned"] is True


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("evaluation_only", True),
        ("request_id", "mine"),
        ("retrieval_experiment_id", "exp-1"),
        ("retrieval_experiment_arm", "holdout"),
    ],
)
def test_fields_this_service_cannot_honour_are_refused(client: Any, field: str, value: object) -> None:
    refused = client.post(PUBLISH, json=_body("erin", "e1", [{"role": "user", "content": "Hello."}]) | {field: value})
    assert refused.status_code == 422 and field in refused.text, refused.text
    assert client.post("/api/get_interactions", json={"user_id": "erin"}).json()["interactions"] == []


def test_a_playbook_id_that_is_not_a_number_is_refused(client: Any) -> None:
    turn = {
        "role": "assistant",
        "content": "Done.",
        "retrieved_learnings": [{"kind": "user_playbook", "learning_id": "x"}],
    }
    refused = client.post(PUBLISH, json=_body("erin", "e2", [turn]))
    assert refused.status_code == 422 and "retrieved_learnings" in refused.text


def test_injected_and_cited_learnings_are_counted_as_serves(client: Any) -> None:
    from reflexio_pipelines.runs import run_evaluation

    user, request, answer, correction = REGION[0]
    taught = client.post(
        f"{PUBLISH}?wait_for_response=true", json=_body(user, "teach", correction_turns(request, answer, correction))
    )
    assert taught.json()["playbooks_added"] == 1
    (playbook,) = client.post("/api/get_user_playbooks", json={"user_id": user}).json()["user_playbooks"]
    playbook_id = str(playbook["user_playbook_id"])

    # The caller injected the rule into the answer's context and the agent still made the mistake: missed.
    later = correction_turns(request, "Deploying to us-east-1.", correction)
    later[1]["retrieved_learnings"] = [{"kind": "user_playbook", "learning_id": playbook_id}]
    later[1]["citations"] = [{"kind": "playbook", "real_id": playbook_id, "tag": "r1"}]  # the same item, once
    assert client.post(PUBLISH, json=_body(user, "later", later)).status_code == 200

    state = client.app.state.svc
    state.retrievals.flush()
    (event,) = state.lake.read_table("retrieval_events", filters=[("session_id", "=", "later")]).to_pylist()
    assert event["user_playbook_ids"] == [int(playbook_id)] and event["profile_ids"] == []
    state.launcher([key_of_moment(datetime.now(timezone.utc), GRANULARITY)])
    assert run_evaluation(now=int(time.time()) + 3600, settings=state.settings)["success"]
    outcomes = state.lake.read_table("item_outcome_events", filters=[("session_id", "=", "later")]).to_pylist()
    assert [(o["item_id"], o["outcome"]) for o in outcomes] == [(playbook_id, "missed")], outcomes


def test_session_finished_learns_the_held_back_session_now(client: Any) -> None:
    assert client.post("/api/update_config", json={"extraction_idle_timeout_seconds": 3600}).json()["success"]
    fact = [{"role": "user", "content": "I am allergic to peanuts and I live in Lisbon."}]
    open_one = client.post(PUBLISH, json=_body("fay", "f1", fact)).json()["request_id"]
    finished = client.post(PUBLISH, json=_body("gus", "g1", fact) | {"session_finished": True}).json()
    assert finished["learning_status"] == "deferred"

    def status(request_id: str) -> str:
        return client.get("/api/learning_status", params={"request_id": request_id}).json()["status"]

    # TestClient runs the background task before returning: the finished session is learned, the open one waits.
    assert (status(finished["request_id"]), status(open_one)) == ("done", "pending")
    profiles = client.post("/api/get_profiles", json={"user_id": "gus"}).json()["user_profiles"]
    assert any("peanut" in p["content"].lower() for p in profiles)
