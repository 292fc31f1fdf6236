"""Sensors: newly landed files (and held-back turns that fell due) become runs of `learn_job` for their window;
turns the served index version does not hold yet become an `index_job` run that takes them in
(`interaction_index_sensor`) when no learning run is under way to take them in with its own index build.

Its runs hold back an incomplete window of a session that is still active (`flush="due"`, see
learning/windows.py), so running often under steady traffic costs the same LLM calls as one pass, and it ticks
every 5 s: publish → searchable waits for a tick, a run's start and the run, not for a long interval. A window's next
run is requested as soon as its running one has compacted the window's turns (it is learning then), not after it
ends: the next run is queued, launched and waits for the window's lock while this one learns, and compacts and learns
the moment this one commits (instead of a tick, a dequeue and a launch later, ~6 s under steady publishing). A
window whose run has not compacted yet (queued, launching, or waiting for the lock) is not requested again, so at
most one run waits behind a learning one and it takes every file that landed meanwhile. serving_index never moves
the served version back, so two runs' index builds cannot undo each other.

Both sensors fan out over every lake the way the schedules do (organisations.py `lakes_of`): the configured lake,
and in keyed mode each organisation's under `<lake>/orgs/`. Each request carries its organisation's lake in run
config (`jobs.lake_run_config`) and its `ORG_TAG`; run keys and the in-flight checks are per organisation. An
organisation whose lake cannot be read is logged and skipped on this tick; the others still get their requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import dagster as dg

from reflexio_pipelines.jobs import (
    MAX_NEW_TURNS_PER_BUILD,
    index_job,
    lake_run_config,
    learn_job,
    learning_run_config,
)
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.organisations import DEFAULT_ORG, ORG_TAG, lakes_of
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, unindexed_turn_files
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.search.versions import current_version
from reflexio_pipelines.storage import lake_path

log = logging.getLogger(__name__)

#: Run states in which a window's run has not finished yet.
UNFINISHED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


@dg.sensor(
    job=learn_job,
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests a learn_job run for every window whose landing files changed since it was last compacted.",
)
def landing_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
    return _fan_out(context, lake, _learn_requests)


def _learn_requests(
    context: dg.SensorEvaluationContext, org: str, store: Lake, run_config: dict
) -> list[dg.RunRequest] | str:
    pending = pending_windows(store, GRANULARITY)
    if not pending:
        return "no new landing files"
    busy = _windows_in_flight(context.instance, org, [p.partition_key for p in pending])
    # The run key names the organisation and the exact file set, so a window is requested once per new set of
    # files even though this sensor keeps no cursor: the lake, not the sensor, is the state.
    requests = [
        dg.RunRequest(
            run_key=f"{org}:{p.partition_key}:{p.digest}",
            partition_key=p.partition_key,
            tags={ORG_TAG: org},
            run_config={**learning_run_config("due", index_turns=True), **run_config},
        )
        for p in pending
        if p.partition_key not in busy
    ]
    return requests or "a run is in flight for every pending window"


def _fan_out(
    context: dg.SensorEvaluationContext,
    lake: LakeResource,
    requests_of: Callable[[dg.SensorEvaluationContext, str, Lake, dict], list[dg.RunRequest] | str],
) -> dg.SensorResult:
    """`requests_of(context, org, store, lake run config)` (its requests, or why none) for every lake; one that
    raises is logged and skipped."""
    requests: list[dg.RunRequest] = []
    idle: dict[str, str] = {}
    for org, root in lakes_of(lake_path(lake.root)):
        config = {} if org == DEFAULT_ORG else lake_run_config(str(root), lake.metadata_previews)
        try:
            store = Lake.at(lake.root if org == DEFAULT_ORG else str(root))
            found = requests_of(context, org, store, config)
        except Exception:  # its files stay pending; the next tick looks again
            # into the daemon's log, with the traceback
            log.exception("organisation %s: lake not readable, skipped this tick", org)
            found = "lake not readable"
        if isinstance(found, str):
            idle[org] = found
        else:
            requests += found
    if requests:
        return dg.SensorResult(run_requests=requests)
    reasons = list(idle.values()) if list(idle) == [DEFAULT_ORG] else [f"{o}: {r}" for o, r in idle.items()]
    return dg.SensorResult(skip_reason="; ".join(reasons) or "no lake holds data")


def _windows_in_flight(instance: dg.DagsterInstance, org: str, keys: list[str]) -> set[str]:
    """The partition keys among `keys` with an unfinished `learn_job` run of `org` that has not compacted the window
    yet (no `turns` materialisation: it is queued, starting, or waiting for the window's lock behind a learning run)."""
    if not keys:
        return set()
    runs = _unfinished(instance, learn_job.name, org)
    waiting = {r.dagster_run.tags.get("dagster/partition") for r in runs if not _compacted(instance, r.dagster_run)}
    return waiting & set(keys)


def _compacted(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Whether `run` has compacted its window (reported `turns`): it is learning (the window's lock is held until its
    learning is committed), or only its index build and check remain. A run requested now waits for that lock, so it
    starts learning right after the commit; one requested after the commit started ~6 s later (a sensor tick, a
    dequeue and a run launch, under steady publishing with a 1 s LLM), while most of a run is learning."""
    if run.status != dg.DagsterRunStatus.STARTED:
        return False
    records = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    return any(r.asset_materialization and r.asset_materialization.asset_key.path[-1] == "turns" for r in records)


@dg.sensor(
    job=index_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests an index_job run that takes in the turns published since the served index version (each "
    "new turn embedded once); until it is served, search_interactions covers them from landing files.",
)
def interaction_index_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
    return _fan_out(context, lake, _index_requests)


def _index_requests(
    context: dg.SensorEvaluationContext, org: str, store: Lake, run_config: dict
) -> list[dg.RunRequest] | str:
    newer = unindexed_turn_files(store)
    if not newer:
        return "the served index holds every published turn"
    if _unfinished(context.instance, index_job.name, org):
        return "an index_job run is in flight"
    # A learning run's own index build takes the new turns in (landing_sensor asks for it). Two builds at once
    # would each stage a version from the same base, and the one activated last would drop what the other added
    # until the next build; they also shared 2 cores: under steady publishing (50 turns/s, 1 s LLM) the turns
    # build took 35-245 s beside the learning run's and two in five failed their check against the other's counts.
    if _unfinished(context.instance, learn_job.name, org):
        return "a learn_job run is in flight: its index build takes the turns in"
    # Keyed by organisation, version and newest file: requested once per new turns, again only after a new version.
    ops = {"ops": {"search_index": {"config": {"index_turns": True, "max_new_turns": MAX_NEW_TURNS_PER_BUILD}}}}
    return [
        dg.RunRequest(
            run_key=f"{org}:turns:{current_version(store.index_root)}:{newer[-1].name}",
            tags={ORG_TAG: org},
            run_config={**ops, **run_config},
        )
    ]


def _unfinished(instance: dg.DagsterInstance, job_name: str, org: str) -> list[dg.RunRecord]:
    """Unfinished runs of `job_name` for `org`: tagged with it, or (the configured lake's) untagged, as runs the
    service or a person launched on that lake are."""
    runs = instance.get_run_records(dg.RunsFilter(job_name=job_name, statuses=UNFINISHED), limit=100)
    return [r for r in runs if r.dagster_run.tags.get(ORG_TAG, DEFAULT_ORG) == org]
