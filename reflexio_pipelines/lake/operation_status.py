"""The operation status store: one file per service under `state/operations/`, read and written by the Dagster ops
that run an operation and by the service that starts, polls and cancels it.

`<service>.json` holds the service's OperationStatusInfo (the original's shape). Whoever starts an operation records
itself as its owner (pid, host, a token only that process holds) and refreshes `heartbeat_at` while it runs. A
process that dies without writing an end (SIGKILL, OOM kill, a lost node) leaves `in_progress` behind; such a status
is *stale* once its owner is known to be gone or its heartbeat is older than the timeout, and is then settled as
failed (`interrupted: true`), so the next operation can start. Every read-modify-write of a status file holds the
service's operation lock, so a start (check that nothing runs, then record the new operation) is atomic against
every other writer on the host. `<service>.cancel` names the operation asked to stop before its next user.
"""

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.storage import LakePath, write_bytes

SERVICES = {"profile": "profile_generation", "user_playbook": "playbook_generation"}
#: Earlier names of those services: reflexio-client 0.2.2 polls `feedback_generation` after a playbook rerun.
SERVICE_ALIASES = {"feedback_generation": "playbook_generation"}

#: Seconds without a heartbeat after which an `in_progress` operation is taken as interrupted
#: (`Settings.operation_stale_after_s` overrides it).
DEFAULT_STALE_AFTER_S = 120.0
#: Seconds between heartbeats of a running operation (well inside the stale timeout).
DEFAULT_HEARTBEAT_S = 10.0


#: Names this process in status files. A pid alone can be reused (every restart of a container's pid 1), so a
#: status owned by "our" pid with another token was written by an earlier process that is gone.
_PROCESS_TOKEN = uuid.uuid4().hex

log = logging.getLogger(__name__)


class OperationInProgress(Exception):
    """Another operation of the service is running (its status is live); the new one was not started."""

    def __init__(self, status: dict) -> None:
        name, operation = status.get("service_name"), status.get("operation_id")
        super().__init__(f"{name} is already in progress (operation {operation})")
        self.status = status


def status_path(lake: Lake, service_name: str) -> LakePath:
    """Where the service's status file lives in the lake."""
    return lake.root / "state" / "operations" / f"{service_name}.json"


def _status_lock(lake: Lake, service_name: str):
    # Held only for a read-modify-write of one small file: a short timeout surfaces a stuck holder as an error.
    return lake.lock(f"operation-{service_name}", timeout_s=30)


def _read(lake: Lake, service_name: str) -> dict | None:
    path = status_path(lake, service_name)
    return json.loads(path.read_text()) if path.exists() else None


def _write(lake: Lake, service_name: str, info: dict) -> dict:
    total, done = info.get("total_users") or 0, info.get("processed_users") or 0
    info["progress_percentage"] = (
        round(100.0 * done / total, 1) if total else (100.0 if info.get("status") == "completed" else 0.0)
    )
    write_bytes(status_path(lake, service_name), json.dumps(info, sort_keys=True).encode())
    return info


def write_status(lake: Lake, service_name: str, **fields: Any) -> dict:
    """Merge `fields` into the service's OperationStatusInfo (the original's shape) and persist it atomically."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name) or {}
        info.update(fields, service_name=service_name)
        return _write(lake, service_name, info)


def update_status(lake: Lake, service_name: str, operation_id: str, **fields: Any) -> dict | None:
    """Merge `fields` into the status if it is still operation `operation_id`'s and in progress; None (nothing
    written) once it was settled without its owner (interrupted, force-cancelled) or another operation replaced it,
    so an owner that was taken for dead, and is not, cannot overwrite what came after."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name)
        if info is None or info.get("operation_id") != operation_id or info.get("status") != "in_progress":
            return None
        info.update(fields, service_name=service_name)
        return _write(lake, service_name, info)


def read_status(lake: Lake, service_name: str) -> dict | None:
    """The status file as stored (see `current_status` for one with a stale `in_progress` settled)."""
    return _read(lake, service_name)


def owner() -> dict:
    """This process as the owner of a running operation (pid, host, its token, a first heartbeat): what
    `stale_reason` checks. Also used for the receipts of durable aggregation operations."""
    return {
        "owner_pid": os.getpid(),
        "owner_host": socket.gethostname(),
        "owner_token": _PROCESS_TOKEN,
        "heartbeat_at": time.time(),
    }


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host and is not a zombie (a killed child not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:  # no procfs (macOS): existence is all we know
        return True


def stale_reason(info: dict, stale_after_s: float = DEFAULT_STALE_AFTER_S, now: float | None = None) -> str | None:
    """Why an `in_progress` status can no longer be running (None if it may be, or is not in progress).

    On the owner's host its process is checked directly; from anywhere, a heartbeat older than `stale_after_s`
    means the owner stopped (a status written before heartbeats existed is judged by its start time)."""
    if info.get("status") != "in_progress":
        return None
    pid, host = info.get("owner_pid"), info.get("owner_host")
    if isinstance(pid, int) and host == socket.gethostname():
        if pid == os.getpid() and info.get("owner_token") != _PROCESS_TOKEN:
            return f"its process {pid} on {host} was restarted"
        if pid != os.getpid() and not _pid_alive(pid):
            return f"its process {pid} on {host} is gone"
    beat = info.get("heartbeat_at") or info.get("started_at") or 0
    silent = (now if now is not None else time.time()) - float(beat)
    if silent > stale_after_s:
        return f"no heartbeat for {silent:.0f} s (timeout {stale_after_s:.0f} s)"
    return None


def _interrupted(reason: str) -> dict:
    return {
        "status": "failed",
        "interrupted": True,
        "completed_at": int(time.time()),
        "current_user_id": None,
        "error_message": f"interrupted: {reason}; nothing of it was applied, start it again",
    }


def current_status(lake: Lake, service_name: str, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> dict | None:
    """The service's status, with a stale `in_progress` settled (persisted) as failed / interrupted first."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name)
        if not info:
            return info
        reason = stale_reason(info, stale_after_s)
        if reason is None:
            return info
        log.warning("%s operation %s was interrupted: %s", service_name, info.get("operation_id"), reason)
        info.update(_interrupted(reason))
        return _write(lake, service_name, info)


def begin_operation(
    lake: Lake,
    service_name: str,
    operation_id: str,
    request_params: dict,
    total_users: int = 0,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
) -> dict | None:
    """Record `operation_id` as the service's running operation, owned by this process, atomically: raises
    `OperationInProgress` if another operation is live. A stale one is settled as interrupted first. The same
    operation id takes its own `in_progress` status over (the service records it, then the Dagster op that runs it
    claims it); None (nothing written) if that status was settled meanwhile (cleared, interrupted): it must not run.

    Every field of the original's OperationStatusInfo is set, so a client polling before the first user is done
    parses it."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name) or {}
        started_at = int(time.time())
        if info.get("operation_id") == operation_id:
            if info.get("status") != "in_progress":
                return None
            started_at = info.get("started_at") or started_at
        elif info.get("status") == "in_progress":
            reason = stale_reason(info, stale_after_s)
            if reason is None:
                raise OperationInProgress(info)
            log.warning("%s operation %s was interrupted: %s", service_name, info.get("operation_id"), reason)
        info = {
            "service_name": service_name,
            "status": "in_progress",
            "operation_id": operation_id,
            "started_at": started_at,
            "completed_at": None,
            "total_users": total_users,
            "processed_users": 0,
            "failed_users": 0,
            "current_user_id": None,
            "processed_user_ids": [],
            "failed_user_ids": [],
            "request_params": request_params,
            "error_message": None,
            "interrupted": False,
            "stats": {"total_interactions_processed": 0, "total_generated": 0},
            **owner(),
        }
        return _write(lake, service_name, info)


def clear_operation(lake: Lake, service_name: str, reason: str) -> dict | None:
    """Settle the service's `in_progress` operation as cancelled now, whether or not its owner still runs (an
    operator's force-cancel of a hung operation); None if nothing was in progress. An owner that later resumes
    finds its status replaced and writes nothing (`update_status`)."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name)
        if not info or info.get("status") != "in_progress":
            return None
        info.update(
            status="cancelled", completed_at=int(time.time()), current_user_id=None, error_message=f"cleared: {reason}"
        )
        return _write(lake, service_name, info)


@contextmanager
def heartbeat(
    lake: Lake, service_name: str, operation_id: str, interval_s: float = DEFAULT_HEARTBEAT_S
) -> Iterator[None]:
    """Refresh the operation's `heartbeat_at` every `interval_s` while the block runs (a daemon thread: a process
    that dies stops beating, which is the point)."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval_s):
            try:
                info = update_status(lake, service_name, operation_id, heartbeat_at=time.time())
            except Exception:  # a missed beat is retried on the next tick; the stale timeout spans several
                log.warning("heartbeat of %s operation %s not written", service_name, operation_id, exc_info=True)
                continue
            if info is None or info.get("status") != "in_progress":
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{operation_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _cancel_path(lake: Lake, service_name: str) -> LakePath:
    return lake.root / "state" / "operations" / f"{service_name}.cancel"


def request_cancel(lake: Lake, service_name: str, operation_id: str) -> None:
    """Ask the running operation `operation_id` to stop before its next user (cooperative, as in the original).
    A marker file separate from the status, which the running operation rewrites as it goes."""
    write_bytes(_cancel_path(lake, service_name), operation_id.encode())


def cancel_requested(lake: Lake, service_name: str, operation_id: str) -> bool:
    """Whether operation `operation_id` was asked to stop (`request_cancel`)."""
    path = _cancel_path(lake, service_name)
    return path.exists() and path.read_text().strip() == operation_id


def new_operation_id() -> str:
    """A fresh id for an operation (names it in its status, its pending rows and its lifecycle events)."""
    return uuid.uuid4().hex[:16]
