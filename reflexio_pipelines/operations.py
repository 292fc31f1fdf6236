"""Lifecycle operations as Dagster jobs: rerun extraction over a time range (writes *pending* items), upgrade
(pending → current, current → archived) and downgrade (swap back). Reachable from the REST API through
`runs.run_operation`. Progress of a rerun is written to `state/operations/<service>.json` as it goes; a rerun stops
before its next user once `state/operations/<service>.cancel` names it (`request_cancel`).
"""

import json
import time
import uuid
from collections import defaultdict
from typing import Any

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.storage import write_bytes
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import ENTITY_TABLES, live_rows, turns_from_table
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.learn import UserState, learn
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES, plan_downgrade, plan_upgrade
from reflexio_pipelines.learning.types import stable_int_id, stable_uuid
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource

SERVICES = {"profile": "profile_generation", "user_playbook": "playbook_generation"}
#: Earlier names of those services: reflexio-client 0.2.2 polls `feedback_generation` after a playbook rerun.
SERVICE_ALIASES = {"feedback_generation": "playbook_generation"}


class RerunConfig(dg.Config):
    """Which turns to re-extract from. Times are unix seconds over the turns' `created_at`."""

    entity: str = "profile"  # profile | user_playbook
    operation_id: str = ""
    start_time: int | None = None
    end_time: int | None = None
    user_id: str | None = None
    source: str | None = None
    agent_version: str | None = None


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


def status_path(lake: Lake, service_name: str):
    return lake.root / "state" / "operations" / f"{service_name}.json"


def write_status(lake: Lake, service_name: str, **fields: Any) -> dict:
    """Merge `fields` into the service's OperationStatusInfo (the original's shape) and persist it atomically."""
    path = status_path(lake, service_name)
    info = json.loads(path.read_text()) if path.exists() else {}
    info.update(fields, service_name=service_name)
    total, done = info.get("total_users") or 0, info.get("processed_users") or 0
    info["progress_percentage"] = round(100.0 * done / total, 1) if total else (100.0 if info.get("status") == "completed" else 0.0)
    write_bytes(path, json.dumps(info, sort_keys=True).encode())
    return info


def read_status(lake: Lake, service_name: str) -> dict | None:
    path = status_path(lake, service_name)
    return json.loads(path.read_text()) if path.exists() else None


def start_status(lake: Lake, service_name: str, operation_id: str, request_params: dict, total_users: int = 0) -> dict:
    """The status of an operation that is about to run: every field of the original's OperationStatusInfo set, so a
    client polling before the first user is done parses it."""
    return write_status(lake, service_name, status="in_progress", operation_id=operation_id, started_at=int(time.time()),
                        completed_at=None, total_users=total_users, processed_users=0, failed_users=0, current_user_id=None,
                        processed_user_ids=[], failed_user_ids=[], request_params=request_params, error_message=None,
                        stats={"total_interactions_processed": 0, "total_generated": 0})  # fmt: skip


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
    """
    service = SERVICES[cfg.entity]
    table_name, id_column, _ = ENTITY_TABLES[cfg.entity]
    turns_table = lake.read_table("turns", filters=_range_filters(cfg) or None)
    window_of = dict(zip(turns_table.column("turn_id").to_pylist(), turns_table.column("window").to_pylist()))
    by_user = defaultdict(list)
    for turn in turns_from_table(turns_table):
        by_user[turn.user_id].append(turn)
    start_status(lake, service, cfg.operation_id, cfg.model_dump(), total_users=len(by_user))
    rows: list[dict] = []
    processed: list[str] = []
    for user_id in sorted(by_user):
        if cancel_requested(lake, service, cfg.operation_id):
            # Nothing of a cancelled rerun is written: its pending rows appear all at once or not at all.
            write_status(lake, service, status="cancelled", completed_at=int(time.time()), current_user_id=None)
            return {"generated": 0, "users": len(by_user), "discarded_pending": 0, "id_column": id_column,
                    "cancelled": True}  # fmt: skip
        output = learn(
            by_user[user_id], {user_id: UserState()}, extractor.get(), embedder.get(), extractor.dedup_judge_factory(),
            window="rerun", run_id=run_id, config=extractor.get_config(), status="pending",
        )  # fmt: skip
        produced = output.profiles if cfg.entity == "profile" else output.playbooks
        for row in produced:
            row["window"] = max(window_of[t] for t in row["source_turn_ids"])
            row["operation_id"] = cfg.operation_id
            # A rerun's item is a new version of the fact, even with the same wording: its own id, so its status
            # can change independently of the current item it may replace on upgrade.
            row[id_column] = _versioned_id(row[id_column], cfg.operation_id)
        rows.extend(produced)
        processed.append(user_id)
        write_status(lake, service, current_user_id=user_id, processed_users=len(processed),
                     processed_user_ids=processed, stats={"total_interactions_processed": turns_table.num_rows,
                                                          "total_generated": len(rows)})  # fmt: skip
    discarded = _discard_earlier_pending(lake, cfg, set(by_user))
    lake.replace_operation(table_name, cfg.operation_id, pa.Table.from_pylist(rows, schema=TABLES[table_name]))
    write_status(lake, service, status="completed", completed_at=int(time.time()), current_user_id=None)
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
