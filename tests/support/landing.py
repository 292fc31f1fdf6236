"""Conversations landed durably through the service's real group-commit writer, as the pipeline tests start."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

from reflexio_pipelines.demo.run import publish_payload
from reflexio_pipelines.lake.duck import connect
from reflexio_pipelines.lake.io import Lake
from serving.landing import LandingWriter
from serving.models.publish import PublishUserInteractionRequest
from serving.routers.publish import landing_rows


def land(lake: Lake, conversations: list[dict], at: datetime | None = None) -> list[str]:
    """Land conversations through the real group-commit writer (committed `at` a given time); returns request ids."""
    writer = LandingWriter(lake, clock=(lambda: at) if at else lambda: datetime.now(timezone.utc))
    writer.start()
    try:
        futures = []
        for i, conversation in enumerate(conversations):
            body = PublishUserInteractionRequest.model_validate(publish_payload(conversation))
            request_id = f"req-{i}-{conversation['id']}-{uuid.uuid4().hex[:6]}"
            futures.append(
                writer.submit(request_id, landing_rows(body, request_id), f"key-{conversation['id']}-{request_id}")
            )
        return [f.result(timeout=30).request_id for f in futures]
    finally:
        writer.close()


def land_hourly(lake: Lake, batches: list[list[dict]], start: datetime) -> list[str]:
    """Land batch i in the hour `start + i h`; returns the partition keys, one per batch."""
    # Imported here: partitions.py builds Dagster's partitions definition at import, which `land` alone never needs.
    from reflexio_pipelines.lake.windows import key_of_moment
    from reflexio_pipelines.partitions import GRANULARITY

    keys = []
    for hour, conversations in enumerate(batches):
        moment = start + timedelta(hours=hour)
        land(lake, conversations, at=moment)
        keys.append(key_of_moment(moment, GRANULARITY))
    return keys


def landed_turns(lake: str, user_id: str, columns: str) -> list[tuple]:
    """`columns` (SQL, comma-separated) of `user_id`'s landed turns, in the order they were landed."""
    sql = f"select {columns} from landing_turns where user_id = ? order by ingested_at_us, turn_index"
    return connect(lake).sql(sql, params=[user_id]).fetchall()
