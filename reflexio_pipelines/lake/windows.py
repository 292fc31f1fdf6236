"""The lake's time windows: a window is the UTC hour (or day) in which turns became durable in the lake.

Partitioning by ingest time rather than the client's `created_at` means a late or back-dated turn still lands in a
window that has not been processed yet, so nothing is skipped; re-materialising a window is idempotent.

Pure arithmetic between a window's three names — its partition key (`2026-11-30-04:00`), its `window` column value
(`2026-11-30T04`) and its landing directories (`date=2026-11-30/hour=04`) — plus the deployment's granularity, read
from the settings on first use only. The Dagster partitions built on it are in partitions.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import cache
from typing import Literal

Granularity = Literal["hourly", "daily"]

_KEY_FORMAT = {"hourly": "%Y-%m-%d-%H:%M", "daily": "%Y-%m-%d"}
_WINDOW_FORMAT = {"hourly": "%Y-%m-%dT%H", "daily": "%Y-%m-%d"}


@cache
def configured_granularity() -> Granularity:
    """The deployment's granularity (`Settings.partition`), read once, when first asked for."""
    # Imported here: importing the window arithmetic must not load the settings (nor the packages they import).
    from reflexio_pipelines.settings import load_settings

    return load_settings().partition


def window_start(key: str, granularity: Granularity) -> datetime:
    """The UTC start of the window named by a Dagster partition key."""
    return datetime.strptime(key, _KEY_FORMAT[granularity]).replace(tzinfo=timezone.utc)


def window_end(key: str, granularity: Granularity) -> datetime:
    """The UTC end (exclusive) of the window named by a Dagster partition key."""
    return window_start(key, granularity) + (timedelta(hours=1) if granularity == "hourly" else timedelta(days=1))


def window_of_key(key: str, granularity: Granularity) -> str:
    """The `window` column value (e.g. 2026-11-30T04) for a partition key (e.g. 2026-11-30-04:00)."""
    return window_start(key, granularity).strftime(_WINDOW_FORMAT[granularity])


def key_of_window(window: str, granularity: Granularity) -> str:
    """The partition key (e.g. 2026-11-30-04:00) of a `window` column value (e.g. 2026-11-30T04)."""
    start = datetime.strptime(window, _WINDOW_FORMAT[granularity]).replace(tzinfo=timezone.utc)
    return start.strftime(_KEY_FORMAT[granularity])


def key_of_moment(moment: datetime, granularity: Granularity) -> str:
    """The partition key of the window containing `moment`."""
    moment = moment.astimezone(timezone.utc)
    if granularity == "hourly":
        moment = moment.replace(minute=0, second=0, microsecond=0)
    else:
        moment = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.strftime(_KEY_FORMAT[granularity])


def key_of_landing_hour(date: str, hour: str, granularity: Granularity) -> str:
    """The partition key that a landing directory `date=…/hour=…` belongs to."""
    return key_of_moment(datetime.strptime(f"{date} {hour}", "%Y-%m-%d %H").replace(tzinfo=timezone.utc), granularity)


def landing_hours_of_key(key: str, granularity: Granularity) -> list[tuple[str, str]]:
    """The (date, hour) landing directories that make up a window."""
    start = window_start(key, granularity)
    hours = 1 if granularity == "hourly" else 24
    moments = (start + timedelta(hours=i) for i in range(hours))
    return [(m.strftime("%Y-%m-%d"), m.strftime("%H")) for m in moments]
