"""Schedules: aggregation and index compaction daily, evaluation every 10 minutes (learning itself is driven by the
landing sensor).

Each tick requests one run per lake holding data: the code location's own lake, and in keyed mode every
organisation's lake under `<lake>/orgs/` (organisations.py), each run pointed at its lake through run config
(`jobs.lake_run_config`) and tagged with its organisation. The steps read the organisation's stored extraction
config from that lake (`ExtractorResource.get_config(lake)`), so its evaluators and aggregation settings apply.
"""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.jobs import aggregation_job, evaluation_job, index_job, lake_run_config
from reflexio_pipelines.organisations import DEFAULT_ORG, ORG_TAG, lakes_of
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.storage import lake_path


def per_organisation(
    context: dg.ScheduleEvaluationContext, lake: LakeResource, run_config: dict | None = None
) -> list[dg.RunRequest]:
    """One run request per lake for this tick (with `run_config`'s op config); the run key (tick + organisation)
    makes a tick request each once."""
    tick = context.scheduled_execution_time.strftime("%Y%m%dT%H%M") if context.scheduled_execution_time else "now"
    return [
        dg.RunRequest(
            run_key=f"{tick}:{org}",
            tags={ORG_TAG: org},
            run_config={
                **(run_config or {}),
                **({} if org == DEFAULT_ORG else lake_run_config(str(root), lake.metadata_previews)),
            },
        )
        for org, root in lakes_of(lake_path(lake.root))
    ]


def lake_schedule(
    name: str, job: dg.UnresolvedAssetJobDefinition, cron: str, description: str, run_config: dict | None = None
) -> dg.ScheduleDefinition:
    """A schedule (UTC, running by default) whose every tick requests one run of `job` per lake holding data."""

    @dg.schedule(
        name=name,
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=description,
    )
    def schedule(context: dg.ScheduleEvaluationContext, lake: LakeResource) -> list[dg.RunRequest]:
        return per_organisation(context, lake, run_config)

    return schedule


aggregation_schedule = lake_schedule(
    "daily_aggregation",
    aggregation_job,
    "0 3 * * *",
    "Clusters the day's user playbooks into agent playbooks at 03:00 UTC, for every organisation.",
)
evaluation_schedule = lake_schedule(
    "session_evaluation",
    evaluation_job,
    "*/10 * * * *",
    "Judges sessions that closed since the last run (quiet period elapsed) and refreshes impact metrics, "
    "for every organisation.",
)
index_compaction_schedule = lake_schedule(
    "index_compaction",
    index_job,
    "30 3 * * *",
    "Rebuilds every organisation's search index from scratch at 03:30 UTC (after aggregation): the day's "
    "delta segments and tombstones fold into a new base with its HNSW graph over every row.",
    {"ops": {"search_index": {"config": {"compact": True}}}},
)
