"""Durable aggregation operations (the original's `/api/playbook_aggregation_operations`, all the 0.2.32 CLI's
`reflexio agent-playbooks aggregate` uses): submit, answered 202 at once, then poll. The operation is a real
Dagster `aggregation_job` run for the agent version, run by this process after the answer; its receipt lives in
the lake (`lake/aggregation_operations.py`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Path
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake import aggregation_operations as receipts
from reflexio_pipelines.lake.records import live_rows
from serving.deps import ServiceDep
from serving.errors import error, not_found
from serving.models.aggregation_operations import PlaybookAggregationOperation, SubmitPlaybookAggregationRequest
from serving.state import ServiceState

router = APIRouter()
log = logging.getLogger(__name__)
#: Seconds between heartbeats of a running operation (well inside `operation_status.DEFAULT_STALE_AFTER_S`).
HEARTBEAT_S = 10.0


def _result(run: dict[str, Any], processed: int, agent_version: str) -> dict[str, Any]:
    """The original's PlaybookAggregationResult from the run's materialisation counts."""
    if "clusters" not in run:  # the run found no group to cluster
        return {"skipped": f"no current user playbooks of agent version {agent_version!r}"}
    return {
        "clusters_found": run["clusters"],
        "user_playbooks_processed": processed,
        "playbooks_generated": run.get("consolidate_new", 0) + run.get("reconsolidate", 0),
    }


def _execute(state: ServiceState, operation_id: str, agent_version: str) -> None:
    """Run the operation: a heartbeat while the Dagster run goes, then its outcome on the receipt."""
    receipts.update(state.lake, operation_id, status="running", started_at=int(time.time()), attempts=1)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            receipts.update(state.lake, operation_id)

    threading.Thread(target=beat, name=f"aggregation-{operation_id}", daemon=True).start()
    try:
        processed = len(live_rows(state.lake, "user_playbook", [("agent_version", "=", agent_version)]))
        run = state.aggregate({"agent_version": agent_version})
        state.index.refresh()
    except Exception as exc:  # the Dagster run records the failure; the receipt names its class only
        log.exception("aggregation operation %s failed", operation_id)
        outcome: dict[str, Any] = {"status": "failed", "error": f"aggregation run failed ({type(exc).__name__})"}
    else:
        outcome = (
            {"status": "succeeded", "result": _result(run, processed, agent_version)}
            if run["success"]
            else {"status": "failed", "error": f"aggregation run {run['run_id']} failed"}
        )
    finally:
        stop.set()
    receipts.update(state.lake, operation_id, completed_at=int(time.time()), next_attempt_at=None, **outcome)


@router.post(
    "/api/playbook_aggregation_operations",
    status_code=202,
    response_model=PlaybookAggregationOperation,
    responses={409: {"description": "the request id names another operation, or one is already active"}},
)
def submit_playbook_aggregation_operation(
    body: SubmitPlaybookAggregationRequest, state: ServiceDep, background: BackgroundTasks
) -> dict[str, Any] | JSONResponse:
    """Admit an aggregation of one agent version's user playbooks; the same `request_id` again returns the same
    operation (a retry never runs twice). Poll `GET /api/playbook_aggregation_operations/{operation_id}`."""
    try:
        receipt, created = receipts.submit(state.lake, body.request_id, body.agent_version)
    except receipts.OperationConflict as exc:
        return error(409, str(exc), "message", extra={"operation_id": exc.operation_id})
    if created:
        background.add_task(_execute, state, receipt["operation_id"], body.agent_version)
    return receipts.public(receipt)


@router.get(
    "/api/playbook_aggregation_operations/{operation_id}",
    response_model=PlaybookAggregationOperation,
    responses={404: {"description": "no such operation"}},
)
def get_playbook_aggregation_operation(
    state: ServiceDep, operation_id: Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$")]
) -> dict[str, Any] | JSONResponse:
    """The operation's receipt: queued, running, succeeded (with `result`) or failed (with `error`)."""
    receipt = receipts.get(state.lake, operation_id)
    if receipt is None:
        return not_found("Aggregation operation", "message")
    return receipts.public(receipt)
