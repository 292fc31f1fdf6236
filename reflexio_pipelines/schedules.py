"""Schedules: aggregation daily, evaluation every 10 minutes (learning itself is driven by the landing sensor)."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.jobs import aggregation_job, evaluation_job

aggregation_schedule = dg.ScheduleDefinition(
    name="daily_aggregation",
    job=aggregation_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Clusters the day's user playbooks into agent playbooks at 03:00 UTC.",
)

evaluation_schedule = dg.ScheduleDefinition(
    name="session_evaluation",
    job=evaluation_job,
    cron_schedule="*/10 * * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Judges sessions that closed since the last run (quiet period elapsed) and refreshes impact metrics.",
)
