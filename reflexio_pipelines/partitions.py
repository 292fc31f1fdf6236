"""The Dagster partitions of the window-partitioned assets: one partition per lake window (lake/windows.py), at the
deployment's granularity."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.lake.windows import Granularity, configured_granularity


def partitions_def(granularity: Granularity, start: str) -> dg.TimeWindowPartitionsDefinition:
    """The partitions definition; `end_offset=1` makes the current, still-open window materialisable."""
    if granularity == "hourly":
        return dg.HourlyPartitionsDefinition(start_date=f"{start}-00:00", end_offset=1)
    return dg.DailyPartitionsDefinition(start_date=start, end_offset=1)


def _configured() -> tuple[Granularity, dg.TimeWindowPartitionsDefinition]:
    # Granularity is deployment configuration: read once when the code location loads.
    from reflexio_pipelines.settings import load_settings

    granularity = configured_granularity()
    return granularity, partitions_def(granularity, load_settings().partition_start)


GRANULARITY, PARTITIONS = _configured()
