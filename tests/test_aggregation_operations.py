"""Durable aggregation operations at the original's paths (what the 0.2.32 CLI's `agent-playbooks aggregate` uses):
submit, then poll, backed by a real `aggregation_job` run; request ids make a retry return the same operation."""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.lake import aggregation_operations as receipts
from tests.support.learned import REGION, publish_correction

PATH = "/api/playbook_aggregation_operations"


def test_submit_then_poll_runs_the_aggregation(client: Any) -> None:
    for case in REGION:
        publish_correction(client, *case)
    submitted = client.post(PATH, json={"request_id": "r-1", "agent_version": "ops-1"})
    assert submitted.status_code == 202, submitted.text
    operation = submitted.json()
    assert operation["status"] == "queued" and operation["request_id"] == "r-1"
    assert "owner_pid" not in operation  # bookkeeping stays in the lake

    polled = client.get(f"{PATH}/{operation['operation_id']}").json()  # TestClient ran the background run
    assert polled["status"] == "succeeded", polled
    assert polled["result"] == {
        "clusters_found": 1,
        "user_playbooks_processed": 3,
        "playbooks_generated": 1,
        "skipped": None,
    }
    agent = client.post("/api/get_agent_playbooks", json={"agent_version": "ops-1"}).json()["agent_playbooks"]
    assert len(agent) == 1 and "us-west-2" in agent[0]["content"]

    again = client.post(PATH, json={"request_id": "r-1", "agent_version": "ops-1"})
    assert again.status_code == 202 and again.json()["operation_id"] == operation["operation_id"]
    conflict = client.post(PATH, json={"request_id": "r-1", "agent_version": "other"})
    assert conflict.status_code == 409 and conflict.json()["operation_id"] == operation["operation_id"]


def test_nothing_to_aggregate_is_a_skipped_success_and_bad_input_is_refused(client: Any) -> None:
    operation = client.post(PATH, json={"request_id": "r-2", "agent_version": "empty"}).json()
    polled = client.get(f"{PATH}/{operation['operation_id']}").json()
    assert polled["status"] == "succeeded" and "no current user playbooks" in polled["result"]["skipped"]
    assert client.get(f"{PATH}/{'0' * 32}").status_code == 404
    assert client.get(f"{PATH}/not-hex").status_code == 422
    refused = client.post(PATH, json={"request_id": " ", "agent_version": "v"})
    assert refused.status_code == 422 and "request_id" in refused.json()["message"]


def test_an_operation_whose_owner_died_is_settled_as_failed_and_frees_its_agent_version(lake: Any) -> None:
    receipt, created = receipts.submit(lake, "r-3", "v1")
    assert created
    receipts.update(lake, receipt["operation_id"], owner_token="a process that is gone", heartbeat_at=0)
    settled = receipts.get(lake, receipt["operation_id"])
    assert settled["status"] == "failed" and settled["error"].startswith("interrupted:")
    _, created = receipts.submit(lake, "r-4", "v1")
    assert created
    try:
        receipts.submit(lake, "r-5", "v1")
    except receipts.OperationConflict as exc:
        assert "already active" in str(exc)
    else:
        raise AssertionError("a second active operation of one agent version was admitted")
