"""What a learning run reads of the lake, after Delta's file skipping, is counted and reported in its metadata
(issue 15 item 3): a window of new users opens none of the files that hold only other users' learned items."""

from __future__ import annotations

from datetime import datetime, timezone

import dagster as dg

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.reads import counting_reads
from reflexio_pipelines.lake.windows import window_of_key
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from tests.support.landing import land_hourly

START = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def _renamed(conversations: list[dict], prefix: str) -> list[dict]:
    return [
        dict(c, id=f"{prefix}-{c['id']}", user_id=f"{prefix}-{c['user_id']}", session_id=f"{prefix}-{c['session_id']}")
        for c in conversations
    ]


def _learning_metadata(instance: dg.DagsterInstance, key: str) -> dict:
    records = instance.fetch_materializations(dg.AssetKey("user_profiles"), limit=50).records
    (event,) = [
        r.event_log_entry.asset_materialization
        for r in records
        if r.event_log_entry.asset_materialization.partition == key
    ][:1]
    return {k: v.value for k, v in event.metadata.items()}


def test_counting_reads_sees_delta_file_skipping(lake: Lake, settings, instance, samples):
    keys = land_hourly(lake, [_renamed(samples, "a"), _renamed(samples, "b"), _renamed(samples, "c")], START)
    launch(settings=settings, instance=instance)
    held = len([p for p in (lake.table_path("turns")).rglob("*.parquet")])
    with counting_reads() as reads:
        lake.read_table("turns", window_of_key(keys[0], GRANULARITY))
        lake.read_table("turns", filters=[("user_id", "in", ["b-alice"])])
    turns = reads.tables["turns"]
    assert turns.reads == 2 and turns.files_in_table == 2 * held == 6
    # one window's file, then only the file whose user_id range holds b-alice (a-* and c-* files skipped)
    assert turns.files == 2 and turns.bytes > 0
    with counting_reads() as nothing:
        pass
    lake.read_table("turns")  # outside a block: not counted anywhere
    assert nothing.tables == {} and reads.tables["turns"].reads == 2


def test_a_window_of_new_users_reads_none_of_the_other_users_files(lake: Lake, settings, instance, samples):
    keys = land_hourly(lake, [_renamed(samples, "a"), _renamed(samples, "b"), _renamed(samples, "z")], START)
    launch(settings=settings, instance=instance)
    first, last = _learning_metadata(instance, keys[0]), _learning_metadata(instance, keys[-1])
    assert last["lake_files_read"] > 0 and last["lake_files_held"] > last["lake_files_read"]
    reads = last["lake_reads"]
    # earlier windows' learned items belong to a-* and b-* users only: their files are skipped by user_id statistics
    assert reads["user_profiles"]["of_files"] > 0 and reads["user_profiles"]["files"] == 0
    assert reads["user_playbooks"]["files"] == 0
    assert first["lake_bytes_read"] > 0 and "turns" in reads
