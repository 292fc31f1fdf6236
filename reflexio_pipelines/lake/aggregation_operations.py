"""Receipts of durable aggregation operations (the original's `/api/playbook_aggregation_operations`): one JSON file
per operation under `state/aggregation_operations/`, holding no user data (ids, agent version, counts).

The original's rules: a submit names a client `request_id`, and submitting it again returns the same operation
(with another agent version it is a conflict); one operation per agent version is active (queued or running) at a
time. The process that submits an operation runs it (a real `aggregation_job` run) and owns it as lifecycle
operations are owned (`operation_status.owner`): a receipt still active after its owner died is settled as failed
on the next read, so a new operation can start.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.operation_status import owner, stale_reason
from reflexio_pipelines.storage import LakePath, write_bytes

ACTIVE = ("queued", "running", "retrying")
_OWNER_FIELDS = ("owner_pid", "owner_host", "owner_token", "heartbeat_at")


class OperationConflict(ValueError):
    """The submit was refused: its request id belongs to another agent version's operation, or the agent version
    already has an active operation. `operation_id` names the operation in the way."""

    def __init__(self, operation_id: str, message: str) -> None:
        super().__init__(message)
        self.operation_id = operation_id


def _dir(lake: Lake) -> LakePath:
    return lake.root / "state" / "aggregation_operations"


def _path(lake: Lake, operation_id: str) -> LakePath:
    return _dir(lake) / f"{operation_id}.json"


def _write(lake: Lake, receipt: dict[str, Any]) -> dict[str, Any]:
    write_bytes(_path(lake, receipt["operation_id"]), json.dumps(receipt, sort_keys=True).encode())
    return receipt


def _settled(lake: Lake, receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt, settled as failed first when it is active but its owner can no longer be running it."""
    if receipt["status"] not in ACTIVE:
        return receipt
    reason = stale_reason({**receipt, "status": "in_progress"})
    if reason is None:
        return receipt
    now = int(time.time())
    return _write(
        lake, dict(receipt, status="failed", error=f"interrupted: {reason}", completed_at=now, updated_at=now)
    )


def _all(lake: Lake) -> list[dict[str, Any]]:
    folder = _dir(lake)
    if not folder.exists():
        return []
    return [_settled(lake, json.loads(p.read_text())) for p in folder.iterdir() if p.name.endswith(".json")]


def public(receipt: dict[str, Any]) -> dict[str, Any]:
    """The receipt as the original's PlaybookAggregationOperation (without the owner bookkeeping)."""
    return {k: v for k, v in receipt.items() if k not in _OWNER_FIELDS}


def submit(lake: Lake, request_id: str, agent_version: str) -> tuple[dict[str, Any], bool]:
    """(the operation for `request_id`, whether this call created it — queued and owned by this process)."""
    with lake.lock("aggregation-operations", timeout_s=30):
        receipts = _all(lake)
        for receipt in receipts:
            if receipt["request_id"] == request_id:
                if receipt["agent_version"] != agent_version:
                    raise OperationConflict(receipt["operation_id"], "request_id parameters changed")
                return receipt, False
        for receipt in receipts:
            if receipt["agent_version"] == agent_version and receipt["status"] in ACTIVE:
                raise OperationConflict(receipt["operation_id"], "aggregation operation already active")
        now = int(time.time())
        receipt = {
            "operation_id": uuid.uuid4().hex,
            "request_id": request_id,
            "agent_version": agent_version,
            "status": "queued",
            "created_at": now,
            "updated_at": now,
            "started_at": None,
            "completed_at": None,
            "attempts": 0,
            "next_attempt_at": now,
            "error": None,
            "result": None,
            **owner(),
        }
        return _write(lake, receipt), True


def get(lake: Lake, operation_id: str) -> dict[str, Any] | None:
    """The operation's receipt (settled if its owner is gone), or None."""
    path = _path(lake, operation_id)
    if "/" in operation_id or not path.exists():
        return None
    return _settled(lake, json.loads(path.read_text()))


def update(lake: Lake, operation_id: str, **fields: Any) -> dict[str, Any]:
    """Merge `fields` (and a fresh heartbeat) into the receipt."""
    with lake.lock("aggregation-operations", timeout_s=30):
        receipt = json.loads(_path(lake, operation_id).read_text())
        receipt.update(fields, updated_at=int(time.time()), heartbeat_at=time.time())
        return _write(lake, receipt)
