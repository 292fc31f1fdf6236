"""Schedules: aggregation runs daily (learning itself is driven by the landing sensor)."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.jobs import aggregation_job

aggregation_schedule = dg.ScheduleDefinition(
    name="daily_aggregation",
    job=aggregation_job,
    cron_schedule="0 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Clusters the day's user playbooks into agent playbooks at 03:00 UTC.",
)
