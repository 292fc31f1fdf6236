"""Reruns, upgrades, downgrades and operation status: the original's REST paths, run as Dagster jobs.

A rerun is started in the background (like the original's BackgroundTask) and reports progress through
`GET /api/get_operation_status` (the original's OperationStatusInfo, so its client's polling parses it); `POST
/api/cancel_operation` stops it before its next user. Upgrade and downgrade are quick and answer with their counts
once the new index version is being served.
"""

from __future__ import annotations

import logging
import threading
import time

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from reflexio_pipelines.lake.operation_status import (
    SERVICE_ALIASES,
    SERVICES,
    OperationInProgress,
    begin_operation,
    clear_operation,
    current_status,
    heartbeat,
    new_operation_id,
    request_cancel,
    update_status,
)
from reflexio_pipelines.operations import RUN_FIELDS
from serving.deps import ServiceDep, state_of
from serving.errors import error
from serving.models.lifecycle import (
    CancelOperationRequest,
    CancelOperationResponse,
    DowngradeProfilesResponse,
    DowngradeUserPlaybooksResponse,
    GetOperationStatusResponse,
    ManualGenerationRequest,
    PlaybookGenerationResponse,
    ProfileGenerationResponse,
    RerunPlaybookGenerationRequest,
    RerunPlaybookGenerationResponse,
    RerunProfileGenerationRequest,
    RerunProfileGenerationResponse,
    UpgradeProfilesRequest,
    UpgradeProfilesResponse,
    UpgradeUserPlaybooksRequest,
    UpgradeUserPlaybooksResponse,
)
from serving.state import ServiceState

router = APIRouter()
log = logging.getLogger(__name__)


def _start_rerun(state: ServiceState, entity: str, config: dict) -> JSONResponse | str:
    service = SERVICES[entity]
    stale_after = state.settings.operation_stale_after_s
    beat = stale_after / 4  # several beats per timeout: one slow write does not make a live rerun look dead
    operation_id = new_operation_id()
    config = dict(config, entity=entity, operation_id=operation_id, heartbeat_s=beat, stale_after_s=stale_after)
    try:
        params = {k: v for k, v in config.items() if k not in RUN_FIELDS}
        begin_operation(state.lake, service, operation_id, params, stale_after_s=stale_after)
    except OperationInProgress as exc:
        return error(
            409,
            f"{service} is already in progress (operation {exc.status.get('operation_id')}); poll "
            "get_operation_status, or cancel_operation to stop it",
            key="msg",
        )

    def work() -> None:
        # The heartbeat spans the whole run, including the wait for the lake's run lock before the Dagster op starts.
        with heartbeat(state.lake, service, operation_id, beat):
            try:
                state.operate("rerun_job", config)
                state.index.refresh()
            except Exception as exc:  # recorded for get_operation_status; the service keeps serving
                log.exception("rerun %s failed", operation_id)
                update_status(
                    state.lake,
                    service,
                    operation_id,
                    status="failed",
                    error_message=type(exc).__name__,
                    completed_at=int(time.time()),
                )

    threading.Thread(target=work, name=f"rerun-{operation_id}", daemon=True).start()
    return operation_id


@router.post("/api/rerun_profile_generation", response_model=RerunProfileGenerationResponse)
def rerun_profile_generation(body: RerunProfileGenerationRequest, state: ServiceDep):
    """Re-extract profiles from the turns in [start_time, end_time] into pending profiles (not served until
    `upgrade_all_profiles`). Poll `get_operation_status?service_name=profile_generation`."""
    config = body.model_dump(include={"user_id", "start_time", "end_time", "source"})
    started = _start_rerun(state, "profile", config)
    if isinstance(started, JSONResponse):
        return started
    return {"success": True, "msg": "rerun started", "profiles_generated": 0, "operation_id": started}


@router.post("/api/rerun_playbook_generation", response_model=RerunPlaybookGenerationResponse)
def rerun_playbook_generation(body: RerunPlaybookGenerationRequest, state: ServiceDep):
    """Re-extract user playbooks of `agent_version` from the turns in the range into pending playbooks."""
    config = body.model_dump(include={"agent_version", "start_time", "end_time", "source"})
    started = _start_rerun(state, "user_playbook", config)
    if isinstance(started, JSONResponse):
        return started
    return {"success": True, "msg": "rerun started", "playbooks_generated": 0, "operation_id": started}


class OperationFailed(Exception):
    """A lifecycle job run failed; answered as 503 (its events are appended in one commit, or not at all)."""


async def _change(state: ServiceState, config: dict) -> dict:
    config = dict(config, operation_id=new_operation_id())
    try:
        counts = await run_in_threadpool(state.operate, "lifecycle_job", config)
    except Exception as exc:
        raise OperationFailed(type(exc).__name__) from exc
    await run_in_threadpool(state.index.refresh)
    return counts


async def _move(state: ServiceState, scope: dict, noun: str) -> dict:
    """Run one upgrade or downgrade (`scope["op"]`) of `noun` ("profiles", "user playbooks") and answer with its
    counts under the original's `<noun>_<verb>` field names."""
    counts = await _change(state, scope)
    key = noun.replace(" ", "_")
    if scope["op"] == "upgrade":
        promoted, archived = counts.get("pending->current", 0), counts.get("current->archived", 0)
        message = "upgraded" if promoted else f"no pending {noun} to upgrade"
        moved = {f"{key}_archived": archived, f"{key}_promoted": promoted, f"{key}_deleted": 0}
        return {"success": promoted > 0, **moved, "message": message}
    restored, demoted = counts.get("archived->current", 0), counts.get("current->archived", 0)
    message = "downgraded" if restored else f"no archived {noun} to restore"
    return {"success": restored > 0, f"{key}_demoted": demoted, f"{key}_restored": restored, "message": message}


@router.post("/api/upgrade_all_profiles", response_model=UpgradeProfilesResponse)
async def upgrade_all_profiles(body: UpgradeProfilesRequest, state: ServiceDep):
    """Pending profiles become current; the current profiles of the affected users are archived (kept)."""
    scope = {"entity": "profile", "op": "upgrade", "user_id": body.user_id}
    return await _move(state, dict(scope, only_affected_users=body.only_affected_users), "profiles")


@router.post("/api/downgrade_all_profiles", response_model=DowngradeProfilesResponse)
async def downgrade_all_profiles(body: UpgradeProfilesRequest, state: ServiceDep):
    """Archived profiles become current again and the profiles that replaced them are archived."""
    return await _move(state, {"entity": "profile", "op": "downgrade", "user_id": body.user_id}, "profiles")


def _playbooks_scope(op: str, body: UpgradeUserPlaybooksRequest) -> dict:
    return {
        "entity": "user_playbook",
        "op": op,
        "agent_version": body.agent_version,
        "playbook_name": body.playbook_name,
    }


@router.post("/api/upgrade_all_user_playbooks", response_model=UpgradeUserPlaybooksResponse)
async def upgrade_all_user_playbooks(body: UpgradeUserPlaybooksRequest, state: ServiceDep):
    """Pending user playbooks become current; with `archive_current`, the current ones they replace are archived."""
    scope = dict(_playbooks_scope("upgrade", body), archive_current=body.archive_current, only_affected_users=False)
    return await _move(state, scope, "user playbooks")


@router.post("/api/downgrade_all_user_playbooks", response_model=DowngradeUserPlaybooksResponse)
async def downgrade_all_user_playbooks(body: UpgradeUserPlaybooksRequest, state: ServiceDep):
    """Archived user playbooks become current again and the ones that replaced them are archived."""
    return await _move(state, _playbooks_scope("downgrade", body), "user playbooks")


@router.get("/api/get_operation_status", response_model=GetOperationStatusResponse)
def get_operation_status(request: Request, service_name: str = Query("profile_generation")):
    """The original's OperationStatusInfo for `profile_generation` or `playbook_generation` (also under its
    earlier name `feedback_generation`)."""
    service_name = SERVICE_ALIASES.get(service_name, service_name)
    if service_name not in SERVICES.values():
        return error(422, f"service_name: must be one of {sorted(SERVICES.values())}")
    # Looked up here, not as a dependency: a bad name answers 422 before the organisation's state is loaded.
    state = state_of(request)
    status = current_status(state.lake, service_name, state.settings.operation_stale_after_s)
    if status is None:
        return GetOperationStatusResponse(success=True, msg="no operation has run")
    shown = {k: v for k, v in status.items() if k != "owner_token"}  # the process's private name stays internal
    return GetOperationStatusResponse(success=True, operation_status=shown, msg="")


@router.post("/api/cancel_operation", response_model=CancelOperationResponse)
def cancel_operation(body: CancelOperationRequest, state: ServiceDep) -> CancelOperationResponse:
    """Stop the running rerun of one service (or of both): it stops before its next user and writes nothing, its
    status becomes `cancelled`. With `force`, the status is settled as `cancelled` at once (for a rerun that hangs:
    if it ever goes on, it writes nothing). A rerun whose process died is settled as interrupted (failed) and not
    listed. Services with nothing in progress are left alone (not listed)."""
    cancelled = []
    wanted = [SERVICE_ALIASES.get(body.service_name, body.service_name)] if body.service_name else None
    for name in wanted or sorted(SERVICES.values()):
        status = current_status(state.lake, name, state.settings.operation_stale_after_s)
        if not (status and status.get("status") == "in_progress" and status.get("operation_id")):
            continue
        if body.force:
            clear_operation(state.lake, name, "force-cancelled through the API")
        else:
            request_cancel(state.lake, name, status["operation_id"])
        cancelled.append(name)
    if not cancelled:
        msg = "no operation in progress"
    elif body.force:
        msg = f"cleared {', '.join(cancelled)}"
    else:
        msg = f"cancelling {', '.join(cancelled)} before the next user"
    return CancelOperationResponse(success=True, cancelled_services=cancelled, msg=msg)


def _generate_now(state: ServiceState, table: str) -> tuple[int, list[str]]:
    """Learn from every pending window now (real Dagster runs), serve the new index; (items written, windows)."""
    from reflexio_pipelines.partitions import GRANULARITY
    from reflexio_pipelines.pending import pending_windows

    keys = [p.partition_key for p in pending_windows(state.lake, GRANULARITY)]
    result = state.launcher(keys)
    state.index.refresh()
    run_ids = set(getattr(result, "run_ids", []))
    written = sum(1 for r in state.lake.read_table(table).to_pylist() if r["run_id"] in run_ids)
    return written, keys


@router.post("/api/manual_profile_generation", response_model=ProfileGenerationResponse)
async def manual_profile_generation(body: ManualGenerationRequest, state: ServiceDep):
    """Learn from what was published so far, now, instead of waiting for the sensor (synchronous)."""
    written, keys = await run_in_threadpool(_generate_now, state, "user_profiles")
    return {"success": True, "msg": f"learned from {len(keys)} pending window(s)", "profiles_generated": written}


@router.post("/api/manual_playbook_generation", response_model=PlaybookGenerationResponse)
async def manual_playbook_generation(body: ManualGenerationRequest, state: ServiceDep):
    """As manual_profile_generation; reports the user playbooks written."""
    written, keys = await run_in_threadpool(_generate_now, state, "user_playbooks")
    return {"success": True, "msg": f"learned from {len(keys)} pending window(s)", "playbooks_generated": written}
