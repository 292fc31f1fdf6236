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
"""

import dagster as dg

from reflexio_pipelines.jobs import MAX_NEW_TURNS_PER_BUILD, index_job, learn_job, learning_run_config
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.pending import pending_windows, unindexed_turn_files
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.search.versions import current_version

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
    pending = pending_windows(lake.get(), GRANULARITY)
    busy = _windows_in_flight(context.instance, [p.partition_key for p in pending])
    # The run key names the exact file set, so a window is requested once per new set of files even though
    # this sensor keeps no cursor: the lake, not the sensor, is the state.
    requests = [
        dg.RunRequest(
            run_key=f"{p.partition_key}:{p.digest}",
            partition_key=p.partition_key,
            run_config=learning_run_config("due", index_turns=True),
        )
        for p in pending
        if p.partition_key not in busy
    ]
    if not requests:
        return dg.SensorResult(
            skip_reason="a run is in flight for every pending window" if pending else "no new landing files"
        )
    return dg.SensorResult(run_requests=requests)


def _windows_in_flight(instance: dg.DagsterInstance, keys: list[str]) -> set[str]:
    """The partition keys among `keys` with an unfinished `learn_job` run that has not compacted the window yet (no
    `turns` materialisation: it is queued, starting, or waiting for the window's lock behind a learning run)."""
    if not keys:
        return set()
    runs = instance.get_run_records(dg.RunsFilter(job_name=learn_job.name, statuses=UNFINISHED), limit=100)
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
    store = lake.get()
    newer = unindexed_turn_files(store)
    if not newer:
        return dg.SensorResult(skip_reason="the served index holds every published turn")
    if context.instance.get_run_records(dg.RunsFilter(job_name=index_job.name, statuses=UNFINISHED), limit=1):
        return dg.SensorResult(skip_reason="an index_job run is in flight")
    # A learning run's own index build takes the new turns in (landing_sensor asks for it). Two builds at once
    # would each stage a version from the same base, and the one activated last would drop what the other added
    # until the next build; they also shared 2 cores: under steady publishing (50 turns/s, 1 s LLM) the turns
    # build took 35-245 s beside the learning run's and two in five failed their check against the other's counts.
    if context.instance.get_run_records(dg.RunsFilter(job_name=learn_job.name, statuses=UNFINISHED), limit=1):
        return dg.SensorResult(skip_reason="a learn_job run is in flight: its index build takes the turns in")
    # Keyed by the version and the newest file: requested once per new turns, again only after a new version.
    key = f"turns:{current_version(store.index_root)}:{newer[-1].name}"
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=key,
                run_config={
                    "ops": {"search_index": {"config": {"index_turns": True, "max_new_turns": MAX_NEW_TURNS_PER_BUILD}}}
                },
            )
        ]
    )
