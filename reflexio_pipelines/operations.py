"""Lifecycle operations as Dagster jobs: rerun extraction over a time range (writes *pending* items), upgrade
(pending → current, current → archived) and downgrade (swap back). Reachable from the REST API through
`runs.run_operation`. Progress of a rerun is written to `state/operations/<service>.json` as it goes, with its owner
and a heartbeat, so a rerun whose process died is detected and settled as interrupted (see "operation status"); a
rerun stops before its next user once `state/operations/<service>.cancel` names it (`request_cancel`).
"""

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.storage import write_bytes
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import ENTITY_TABLES, live_rows, turns_from_table
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES, plan_downgrade, plan_upgrade
from reflexio_pipelines.learning.types import stable_int_id, stable_uuid
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource

SERVICES = {"profile": "profile_generation", "user_playbook": "playbook_generation"}
#: Earlier names of those services: reflexio-client 0.2.2 polls `feedback_generation` after a playbook rerun.
SERVICE_ALIASES = {"feedback_generation": "playbook_generation"}

#: Seconds without a heartbeat after which an `in_progress` operation is taken as interrupted
#: (`Settings.operation_stale_after_s` overrides it).
DEFAULT_STALE_AFTER_S = 120.0
#: Seconds between heartbeats of a running operation (well inside the stale timeout).
DEFAULT_HEARTBEAT_S = 10.0


class RerunConfig(dg.Config):
    """Which turns to re-extract from. Times are unix seconds over the turns' `created_at`."""

    entity: str = "profile"  # profile | user_playbook
    operation_id: str = ""
    start_time: int | None = None
    end_time: int | None = None
    user_id: str | None = None
    source: str | None = None
    agent_version: str | None = None
    #: Seconds between heartbeats, and after which another rerun's silent `in_progress` counts as interrupted.
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stale_after_s: float = DEFAULT_STALE_AFTER_S


#: RerunConfig fields that say how the rerun runs, not what it covers (left out of the status' request_params).
RUN_FIELDS = {"heartbeat_s", "stale_after_s"}


class StatusChangeConfig(dg.Config):
    """An upgrade or downgrade of one entity, optionally narrowed to a user / agent version / playbook name."""

    entity: str = "profile"
    op: str = "upgrade"  # upgrade | downgrade
    operation_id: str = ""
    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    archive_current: bool = True
    only_affected_users: bool = True


# -- operation status -------------------------------------------------------------------------------------------
#
# One status file per service. Whoever starts an operation records itself as its owner (pid, host, a token only
# that process holds) and refreshes `heartbeat_at` while it runs. A process that dies without writing an end
# (SIGKILL, OOM kill, a lost node) leaves `in_progress` behind; such a status is *stale* once its owner is known to
# be gone or its heartbeat is older than the timeout, and is then settled as failed (`interrupted: true`), so the
# next operation can start. Every read-modify-write of a status file holds the service's operation lock, so a
# start (check that nothing runs, then record the new operation) is atomic against every other writer on the host.

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


def status_path(lake: Lake, service_name: str):
    return lake.root / "state" / "operations" / f"{service_name}.json"


def _status_lock(lake: Lake, service_name: str):
    # Held only for a read-modify-write of one small file: a short timeout surfaces a stuck holder as an error.
    return lake.lock(f"operation-{service_name}", timeout_s=30)


def _read(lake: Lake, service_name: str) -> dict | None:
    path = status_path(lake, service_name)
    return json.loads(path.read_text()) if path.exists() else None


def _write(lake: Lake, service_name: str, info: dict) -> dict:
    total, done = info.get("total_users") or 0, info.get("processed_users") or 0
    info["progress_percentage"] = round(100.0 * done / total, 1) if total else (100.0 if info.get("status") == "completed" else 0.0)
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


def _owner() -> dict:
    return {"owner_pid": os.getpid(), "owner_host": socket.gethostname(), "owner_token": _PROCESS_TOKEN,
            "heartbeat_at": time.time()}  # fmt: skip


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
    return {"status": "failed", "interrupted": True, "completed_at": int(time.time()), "current_user_id": None,
            "error_message": f"interrupted: {reason}; nothing of it was applied, start it again"}  # fmt: skip


def current_status(lake: Lake, service_name: str, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> dict | None:
    """The service's status, with a stale `in_progress` settled (persisted) as failed / interrupted first."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name)
        reason = stale_reason(info, stale_after_s) if info else None
        if reason is None:
            return info
        log.warning("%s operation %s was interrupted: %s", service_name, info.get("operation_id"), reason)
        info.update(_interrupted(reason))
        return _write(lake, service_name, info)


def begin_operation(lake: Lake, service_name: str, operation_id: str, request_params: dict, total_users: int = 0,
                    stale_after_s: float = DEFAULT_STALE_AFTER_S) -> dict | None:  # fmt: skip
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
        info = {"service_name": service_name, "status": "in_progress", "operation_id": operation_id,
                "started_at": started_at, "completed_at": None, "total_users": total_users, "processed_users": 0,
                "failed_users": 0, "current_user_id": None, "processed_user_ids": [], "failed_user_ids": [],
                "request_params": request_params, "error_message": None, "interrupted": False,
                "stats": {"total_interactions_processed": 0, "total_generated": 0}, **_owner()}  # fmt: skip
        return _write(lake, service_name, info)


def clear_operation(lake: Lake, service_name: str, reason: str) -> dict | None:
    """Settle the service's `in_progress` operation as cancelled now, whether or not its owner still runs (an
    operator's force-cancel of a hung operation); None if nothing was in progress. An owner that later resumes
    finds its status replaced and writes nothing (`update_status`)."""
    with _status_lock(lake, service_name):
        info = _read(lake, service_name)
        if not info or info.get("status") != "in_progress":
            return None
        info.update(status="cancelled", completed_at=int(time.time()), current_user_id=None,
                    error_message=f"cleared: {reason}")  # fmt: skip
        return _write(lake, service_name, info)


@contextmanager
def heartbeat(lake: Lake, service_name: str, operation_id: str,
              interval_s: float = DEFAULT_HEARTBEAT_S) -> Iterator[None]:  # fmt: skip
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


def _cancel_path(lake: Lake, service_name: str):
    return lake.root / "state" / "operations" / f"{service_name}.cancel"


def request_cancel(lake: Lake, service_name: str, operation_id: str) -> None:
    """Ask the running operation `operation_id` to stop before its next user (cooperative, as in the original).
    A marker file separate from the status, which the running operation rewrites as it goes."""
    write_bytes(_cancel_path(lake, service_name), operation_id.encode())


def cancel_requested(lake: Lake, service_name: str, operation_id: str) -> bool:
    path = _cancel_path(lake, service_name)
    return path.exists() and path.read_text().strip() == operation_id


# -- rerun ------------------------------------------------------------------------------------------------------


def _range_filters(cfg: RerunConfig) -> list[tuple]:
    filters: list[tuple] = []
    if cfg.start_time is not None:
        filters.append(("created_at", ">=", cfg.start_time))
    if cfg.end_time is not None:
        filters.append(("created_at", "<=", cfg.end_time))
    for column in ("user_id", "source", "agent_version"):
        if getattr(cfg, column):
            filters.append((column, "=", getattr(cfg, column)))
    return filters


def rerun(lake: Lake, extractor: ExtractorResource, embedder: EmbedderResource, cfg: RerunConfig, run_id: str) -> dict:
    """Re-extract `cfg.entity` from the matching turns into pending rows of this operation.

    Each user's rerun items are deduplicated among themselves (as the original gives the extractor only the
    user's pending items). Earlier pending items of the same users that were never upgraded are discarded.
    Raises `OperationInProgress` if another rerun of the service is live.
    """
    if not cfg.operation_id:  # started from the Dagster UI: it still needs an id of its own for its status
        cfg = cfg.model_copy(update={"operation_id": new_operation_id()})
    service = SERVICES[cfg.entity]
    table_name, id_column, _ = ENTITY_TABLES[cfg.entity]
    turns_table = lake.read_table("turns", filters=_range_filters(cfg) or None)
    window_of = dict(zip(turns_table.column("turn_id").to_pylist(), turns_table.column("window").to_pylist()))
    by_user = defaultdict(list)
    for turn in turns_from_table(turns_table):
        by_user[turn.user_id].append(turn)
    stopped = {"generated": 0, "users": len(by_user), "discarded_pending": 0, "id_column": id_column, "cancelled": True}
    if begin_operation(lake, service, cfg.operation_id, cfg.model_dump(exclude=RUN_FIELDS), total_users=len(by_user),
                       stale_after_s=cfg.stale_after_s) is None:  # fmt: skip
        return stopped  # cleared before it began
    with heartbeat(lake, service, cfg.operation_id, cfg.heartbeat_s):
        rows: list[dict] = []
        processed: list[str] = []
        for user_id in sorted(by_user):
            if cancel_requested(lake, service, cfg.operation_id):
                # Nothing of a cancelled rerun is written: its pending rows appear all at once or not at all.
                update_status(lake, service, cfg.operation_id, status="cancelled", completed_at=int(time.time()),
                              current_user_id=None)  # fmt: skip
                return stopped
            output = learn(
                by_user[user_id], {user_id: UserState()}, extractor.get(), embedder.get(),
                extractor.dedup_judge_factory(), window="rerun", run_id=run_id, config=extractor.get_config(),
                status="pending",
            )  # fmt: skip
            produced = output.profiles if cfg.entity == "profile" else output.playbooks
            for row in produced:
                row["window"] = max(window_of[t] for t in row["source_turn_ids"])
                row["operation_id"] = cfg.operation_id
                # A rerun's item is a new version of the fact, even with the same wording: its own id, so its
                # status can change independently of the current item it may replace on upgrade.
                row[id_column] = _versioned_id(row[id_column], cfg.operation_id)
            rows.extend(produced)
            processed.append(user_id)
            progress = update_status(lake, service, cfg.operation_id, current_user_id=user_id,
                                     processed_users=len(processed), processed_user_ids=processed,
                                     stats={"total_interactions_processed": turns_table.num_rows,
                                            "total_generated": len(rows)})  # fmt: skip
            if progress is None:  # cleared or taken for interrupted meanwhile: write nothing, as for a cancel
                return stopped
        discarded = _discard_earlier_pending(lake, cfg, set(by_user))
        lake.replace_operation(table_name, cfg.operation_id, pa.Table.from_pylist(rows, schema=TABLES[table_name]))
        update_status(lake, service, cfg.operation_id, status="completed", completed_at=int(time.time()),
                      current_user_id=None)  # fmt: skip
    return {"generated": len(rows), "users": len(by_user), "discarded_pending": discarded, "id_column": id_column}


def _versioned_id(item_id: str | int, operation_id: str) -> str | int:
    if isinstance(item_id, int):
        return stable_int_id(str(item_id), operation_id)
    return stable_uuid(item_id, operation_id)


def _discard_earlier_pending(lake: Lake, cfg: RerunConfig, users: set[str]) -> int:
    pending = [r for r in live_rows(lake, cfg.entity, statuses=("pending",))
               if r["user_id"] in users and r["operation_id"] != cfg.operation_id]  # fmt: skip
    _, id_column, _ = ENTITY_TABLES[cfg.entity]
    events = [(str(r[id_column]), r["user_id"], "pending", "discarded") for r in pending]
    _append_events(lake, cfg.operation_id, "rerun", cfg.entity, events)
    return len(events)


# -- upgrade / downgrade ----------------------------------------------------------------------------------------


def change_status(lake: Lake, cfg: StatusChangeConfig) -> dict:
    """Plan and record the lifecycle events of an upgrade or downgrade; returns counts per transition."""
    _, id_column, _ = ENTITY_TABLES[cfg.entity]
    rows = [r for r in live_rows(lake, cfg.entity, statuses=LIFECYCLE_STATUSES) if _matches(r, cfg)]
    if cfg.op == "upgrade":
        changes = plan_upgrade(rows, id_column, cfg.archive_current, cfg.only_affected_users)
    elif cfg.op == "downgrade":
        changes = plan_downgrade(rows, id_column)
    else:
        raise dg.Failure(f"unknown lifecycle operation {cfg.op!r}")
    _append_events(lake, cfg.operation_id, cfg.op, cfg.entity,
                   [(c.item_id, c.user_id, c.from_status, c.to_status) for c in changes])  # fmt: skip
    counts: dict[str, int] = defaultdict(int)
    for change in changes:
        counts[f"{change.from_status}->{change.to_status}"] += 1
    return dict(counts)


def _matches(row: dict, cfg: StatusChangeConfig) -> bool:
    filters = {c: getattr(cfg, c) for c in ("user_id", "agent_version", "playbook_name") if getattr(cfg, c) is not None}
    return all(row.get(column) == value for column, value in filters.items())


def _append_events(lake: Lake, operation_id: str, op: str, entity: str, events: list[tuple[str, str, str, str]]) -> None:
    if not events:
        return
    with lake.lock("lifecycle-events"):
        base = lake.read_table("lifecycle_events").num_rows
        now = int(time.time())
        rows = [
            {"operation_id": operation_id, "op": op, "entity": entity, "item_id": item_id, "user_id": user_id,
             "from_status": old, "to_status": new, "seq": base + i, "at": now}
            for i, (item_id, user_id, old, new) in enumerate(events)
        ]  # fmt: skip
        lake.append("lifecycle_events", pa.Table.from_pylist(rows, schema=TABLES["lifecycle_events"]))


def new_operation_id() -> str:
    return uuid.uuid4().hex[:16]


# -- Dagster wiring ---------------------------------------------------------------------------------------------


@dg.op(description="Re-extract profiles or user playbooks over a time range into pending rows.")
def rerun_extraction(context: dg.OpExecutionContext, config: RerunConfig, lake: LakeResource,
                     extractor: ExtractorResource, embedder: EmbedderResource) -> dict:  # fmt: skip
    result = rerun(lake.get(), extractor, embedder, config, context.run.run_id)
    context.add_output_metadata({"generated": result["generated"], "users": result["users"]})
    return result


@dg.op(description="Record the lifecycle events of an upgrade or downgrade.")
def change_lifecycle_status(context: dg.OpExecutionContext, config: StatusChangeConfig, lake: LakeResource) -> dict:
    counts = change_status(lake.get(), config)
    context.add_output_metadata({k: v for k, v in counts.items()} or {"changes": 0})
    return counts


@dg.job(description="Rerun extraction over a time range; results are pending until upgraded.")
def rerun_job():
    rerun_extraction()


@dg.job(description="Upgrade (pending → current, current → archived) or downgrade (swap back).")
def lifecycle_job():
    change_lifecycle_status()
