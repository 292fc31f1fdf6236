"""Lifecycle operations as Dagster jobs: rerun extraction over a time range (writes *pending* items), upgrade
(pending → current, current → archived) and downgrade (swap back). Reachable from the REST API through
`runs.run_operation`. Progress of a rerun is written to its status file as it goes, with its owner and a heartbeat,
so a rerun whose process died is detected and settled as interrupted (lake/operation_status.py); a rerun stops
before its next user once its cancel marker names it (`request_cancel`).
"""

import time
from collections import defaultdict

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.operation_status import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_STALE_AFTER_S,
    SERVICES,
    begin_operation,
    cancel_requested,
    heartbeat,
    new_operation_id,
    update_status,
)
from reflexio_pipelines.lake.records import ENTITY_TABLES, live_rows, turns_from_table
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES, plan_downgrade, plan_upgrade
from reflexio_pipelines.learning.types import stable_int_id, stable_uuid
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource


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
    if (
        begin_operation(
            lake,
            service,
            cfg.operation_id,
            cfg.model_dump(exclude=RUN_FIELDS),
            total_users=len(by_user),
            stale_after_s=cfg.stale_after_s,
        )
        is None
    ):
        return stopped  # cleared before it began
    with heartbeat(lake, service, cfg.operation_id, cfg.heartbeat_s):
        rows: list[dict] = []
        processed: list[str] = []
        for user_id in sorted(by_user):
            if cancel_requested(lake, service, cfg.operation_id):
                # Nothing of a cancelled rerun is written: its pending rows appear all at once or not at all.
                update_status(
                    lake,
                    service,
                    cfg.operation_id,
                    status="cancelled",
                    completed_at=int(time.time()),
                    current_user_id=None,
                )
                return stopped
            output = learn(
                by_user[user_id],
                {user_id: UserState()},
                extractor.get(),
                embedder.get(),
                extractor.dedup_judge_factory(),
                window="rerun",
                run_id=run_id,
                config=extractor.get_config(),
                status="pending",
            )
            produced = output.profiles if cfg.entity == "profile" else output.playbooks
            for row in produced:
                row["window"] = max(window_of[t] for t in row["source_turn_ids"])
                row["operation_id"] = cfg.operation_id
                # A rerun's item is a new version of the fact, even with the same wording: its own id, so its
                # status can change independently of the current item it may replace on upgrade.
                row[id_column] = _versioned_id(row[id_column], cfg.operation_id)
            rows.extend(produced)
            processed.append(user_id)
            progress = update_status(
                lake,
                service,
                cfg.operation_id,
                current_user_id=user_id,
                processed_users=len(processed),
                processed_user_ids=processed,
                stats={"total_interactions_processed": turns_table.num_rows, "total_generated": len(rows)},
            )
            if progress is None:  # cleared or taken for interrupted meanwhile: write nothing, as for a cancel
                return stopped
        discarded = _discard_earlier_pending(lake, cfg, set(by_user))
        lake.replace_operation(table_name, cfg.operation_id, pa.Table.from_pylist(rows, schema=TABLES[table_name]))
        update_status(
            lake, service, cfg.operation_id, status="completed", completed_at=int(time.time()), current_user_id=None
        )
    return {"generated": len(rows), "users": len(by_user), "discarded_pending": discarded, "id_column": id_column}


def _versioned_id(item_id: str | int, operation_id: str) -> str | int:
    if isinstance(item_id, int):
        return stable_int_id(str(item_id), operation_id)
    return stable_uuid(item_id, operation_id)


def _discard_earlier_pending(lake: Lake, cfg: RerunConfig, users: set[str]) -> int:
    pending = [
        r
        for r in live_rows(lake, cfg.entity, statuses=("pending",))
        if r["user_id"] in users and r["operation_id"] != cfg.operation_id
    ]
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
    _append_events(
        lake,
        cfg.operation_id,
        cfg.op,
        cfg.entity,
        [(c.item_id, c.user_id, c.from_status, c.to_status) for c in changes],
    )
    counts: dict[str, int] = defaultdict(int)
    for change in changes:
        counts[f"{change.from_status}->{change.to_status}"] += 1
    return dict(counts)


def _matches(row: dict, cfg: StatusChangeConfig) -> bool:
    filters = {c: getattr(cfg, c) for c in ("user_id", "agent_version", "playbook_name") if getattr(cfg, c) is not None}
    return all(row.get(column) == value for column, value in filters.items())


def _append_events(
    lake: Lake, operation_id: str, op: str, entity: str, events: list[tuple[str, str, str, str]]
) -> None:
    if not events:
        return
    with lake.lock("lifecycle-events"):
        base = lake.read_table("lifecycle_events").num_rows
        now = int(time.time())
        rows = [
            {
                "operation_id": operation_id,
                "op": op,
                "entity": entity,
                "item_id": item_id,
                "user_id": user_id,
                "from_status": old,
                "to_status": new,
                "seq": base + i,
                "at": now,
            }
            for i, (item_id, user_id, old, new) in enumerate(events)
        ]
        lake.append("lifecycle_events", pa.Table.from_pylist(rows, schema=TABLES["lifecycle_events"]))


# -- Dagster wiring ---------------------------------------------------------------------------------------------


@dg.op(description="Re-extract profiles or user playbooks over a time range into pending rows.")
def rerun_extraction(
    context: dg.OpExecutionContext,
    config: RerunConfig,
    lake: LakeResource,
    extractor: ExtractorResource,
    embedder: EmbedderResource,
) -> dict:
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
