"""Retrieval experiments at the original's paths, on the project's holdout: starting one puts its share of users in
the control arm of search at once; results compare the arms over the sessions a real evaluation run closed, with
client-reported outcomes replacing the judge's verdicts; stopping restores the holdout."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.config import HoldoutSettings
from reflexio_pipelines.learning.holdout import CONTROL, arm_of
from reflexio_pipelines.partitions import GRANULARITY

PATH = "/api/retrieval_experiments"
USERS = [f"user-{i}" for i in range(12)]


def _session(client: Any, user: str) -> tuple[str, bool]:
    """A search then a published session for `user`; (session id, whether search held the user out)."""
    session = f"s-{user}"
    found = client.post(
        "/api/search", json={"query": "deploy region", "user_id": user, "agent_version": "v1", "session_id": session}
    ).json()
    turns = [{"role": "User", "content": "Deploy the service."}, {"role": "Agent", "content": "Deployed."}]
    body = {"user_id": user, "agent_version": "v1", "session_id": session, "interaction_data_list": turns}
    assert client.post("/api/publish_interaction", json=body).status_code == 200
    return session, bool(found.get("holdout"))


def test_experiment_lifecycle_and_results(client: Any) -> None:
    from reflexio_pipelines.runs import run_evaluation

    assert client.get(PATH).json() == {"active_experiment": None, "experiments": []}
    started = client.post(PATH, json={"experiment_id": "exp-1", "holdout_percentage": 50}).json()
    assert started["active_experiment"]["experiment_id"] == "exp-1"
    again = client.post(PATH, json={"experiment_id": "exp-2", "holdout_percentage": 10})
    assert again.status_code == 409 and "exp-1" in again.json()["message"]

    share = HoldoutSettings(share=0.5)
    held = {}
    for user in USERS:
        session, held_out = _session(client, user)
        assert held_out == (arm_of(share, "v1", user) == CONTROL)  # search applied the experiment's share
        held[session] = held_out
    assert 0 < sum(held.values()) < len(USERS)
    now = int(time.time())
    for session, held_out in held.items():  # treated sessions succeed, held-out ones fail
        report = {"session_id": session, "outcome": "failure" if held_out else "success", "occurred_at": now}
        assert client.post("/api/session_outcome", json=report).json()["recorded"]

    state = client.app.state.svc
    state.retrievals.flush()
    state.launcher([key_of_moment(datetime.now(timezone.utc), GRANULARITY)])  # the turns compacted and learned
    assert run_evaluation(now=now + 3600, settings=state.settings)["success"]
    results = client.get(f"{PATH}/exp-1/results").json()
    treated, control = results["treatment"], results["holdout"]
    assert treated["published_session_count"] + control["published_session_count"] == len(USERS)
    assert control["published_session_count"] == sum(held.values())
    assert (treated["success_rate"], control["success_rate"]) == (1.0, 0.0)
    assert results["success_rate_lift_percentage_points"] == 100.0
    low, high = results["confidence_interval_95_percentage_points"]
    assert 0 < low < 100.0 and high == 100.0
    assert results["evaluated_session_coverage"] == 1.0 and results["unattributed_evaluated_session_count"] == 0

    stopped = client.post(f"{PATH}/stop", json={"experiment_id": "exp-1"}).json()
    assert stopped["active_experiment"] is None and stopped["experiments"][0]["ended_at"] >= now
    assert client.get("/api/get_config").json().get("holdout", {}).get("share") in (None, 0.0)
    assert client.post(f"{PATH}/stop", json={"experiment_id": "exp-1"}).status_code == 409
    assert client.get(f"{PATH}/nope/results").status_code == 404
    assert client.post(PATH, json={"experiment_id": "exp-1", "holdout_percentage": 50}).status_code == 409
    assert client.post(PATH, json={"experiment_id": "exp-3", "holdout_percentage": 100}).status_code == 422
