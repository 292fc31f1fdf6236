"""Dagster assets materialised in-process with a partition key, over a real lake on disk."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import dagster as dg
import pyarrow as pa
import pytest

from reflexio_pipelines.assets.learning import user_learning
from reflexio_pipelines.assets.turns import turns
from reflexio_pipelines.definitions import build_resources
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment, window_of_key
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import embed_search_query
from reflexio_pipelines.search.types import SearchFilters
from reflexio_pipelines.search.versions import current_version
from reflexio_pipelines.sensors import landing_sensor
from reflexio_pipelines.settings import Settings
from tests.support.landing import land

PROVENANCE_OF_RUN = {"run_id"}


def _current_key() -> str:
    return key_of_moment(datetime.now(timezone.utc), GRANULARITY)


def _sorted_rows(table: pa.Table, id_column: str, drop: set[str] = frozenset()) -> list[dict]:
    rows = [{k: v for k, v in row.items() if k not in drop} for row in table.to_pylist()]
    return sorted(rows, key=lambda r: str(r[id_column]))


def test_turns_partition_is_compacted_and_rematerialisation_is_idempotent(
    lake: Lake, settings, instance, landed, samples
):
    key = _current_key()
    window = window_of_key(key, GRANULARITY)
    resources = build_resources(settings)
    for _ in range(2):
        result = dg.materialize([turns], partition_key=key, resources=resources, instance=instance)
        assert result.success
    table = lake.read_table("turns", window)
    expected = sum(len(c["interactions"]) for c in samples)
    assert table.num_rows == expected
    assert len(set(table.column("turn_id").to_pylist())) == expected
    metadata = result.asset_materializations_for_node("turns")[0].metadata
    assert metadata["dagster/row_count"].value == expected
    assert "preview" in metadata


def test_learning_assets_write_provenance_and_same_rows_on_rerun(lake: Lake, settings, instance, landed):
    key = _current_key()
    window = window_of_key(key, GRANULARITY)
    resources = build_resources(settings)
    dg.materialize([turns], partition_key=key, resources=resources, instance=instance)
    snapshots = []
    for _ in range(2):
        result = dg.materialize([user_learning], partition_key=key, resources=resources, instance=instance)
        assert result.success
        snapshots.append(
            (
                _sorted_rows(lake.read_table("user_playbooks", window), "user_playbook_id", PROVENANCE_OF_RUN),
                _sorted_rows(lake.read_table("user_profiles", window), "profile_id", PROVENANCE_OF_RUN),
            )
        )
    assert snapshots[0] == snapshots[1]
    playbooks, profiles = snapshots[0]
    correction = [p for p in playbooks if "us-west-2" in p["content"]]
    assert len(correction) == 1
    turn_ids = set(lake.read_table("turns", window).column("turn_id").to_pylist())
    assert correction[0]["user_id"] == "alice"
    assert correction[0]["source_turn_ids"] and set(correction[0]["source_turn_ids"]) <= turn_ids
    assert correction[0]["extractor"] and correction[0]["window"] == window
    assert any(p["kind"] == "tool_failure" and "403" in p["content"] for p in playbooks)
    assert any(p["user_id"] == "bob" for p in profiles)
    metadata = result.asset_materializations_for_node("user_learning")
    assert {m.asset_key.path[-1] for m in metadata} == {
        "user_profiles",
        "user_playbooks",
        "change_log",
        "extraction_bookmarks",
    }
    assert all("llm_calls" in m.metadata for m in metadata)


def test_launch_publishes_an_index_that_finds_the_correction(lake: Lake, settings, instance, landed):
    result = launch(settings=settings, instance=instance)
    assert result.partition_keys == [_current_key()]
    assert result.index_version and current_version(lake.index_root) == result.index_version
    index = LoadedIndex.load(lake.index_root)
    query = "which region do we deploy to"
    hits = index.search(
        "user_playbook",
        query,
        embed_search_query(make_embedder(), query),
        top_k=3,
        threshold=0.2,
        mode="hybrid",
        filters=SearchFilters(user_id="alice"),
    )
    assert hits and "us-west-2" in hits[0].payload["content"]
    # the blocking check ran and passed, otherwise serving_index would not have published
    check = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("search_index"), "search_index_is_servable")]
    )
    evaluation = next(iter(check.values())).evaluation
    assert evaluation is not None and evaluation.passed


def test_nothing_pending_after_launch_and_rerun_keeps_the_index_consistent(lake: Lake, settings, instance, landed):
    first = launch(settings=settings, instance=instance)
    assert launch(settings=settings, instance=instance).partition_keys == []
    again = launch([first.partition_keys[0]], settings=settings, instance=instance)
    # The rerun writes the same rows: the index build finds no changed document and keeps the served version.
    assert again.index_version == first.index_version
    old, new = LoadedIndex.load(lake.index_root, first.index_version), LoadedIndex.load(lake.index_root)
    for entity in ("profile", "user_playbook"):
        assert old.count(entity) == new.count(entity) > 0


def test_sensor_requests_a_run_per_new_file_set(lake: Lake, settings, instance, samples):
    resources = {"lake": LakeResource(root=str(lake.root))}
    context = dg.build_sensor_context(instance=instance, resources=resources)
    assert landing_sensor(context).skip_reason is not None  # empty lake
    land(lake, samples[:1])
    first = landing_sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests
    assert [r.partition_key for r in first] == [_current_key()]
    launch(settings=settings, instance=instance)
    assert not landing_sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests
    land(lake, samples[1:2])
    second = landing_sensor(dg.build_sensor_context(instance=instance, resources=resources)).run_requests
    assert len(second) == 1 and second[0].run_key != first[0].run_key


@pytest.mark.parametrize("previews", [True, False])
def test_metadata_previews_off_keep_user_data_out_of_dagster_storage(lake: Lake, instance, samples, previews):
    """Erasure cannot reach Dagster's run storage, so no materialisation metadata may quote a user's words: with
    `metadata_previews` on (the default, for the data team's UI) the previews show ids and text lengths, with it
    off not even the ids."""
    land(lake, samples)
    launch(settings=Settings(lake=str(lake.root), metadata_previews=previews), instance=instance)
    keys = instance.get_asset_keys()
    assert {dg.AssetKey("turns"), dg.AssetKey("user_profiles"), dg.AssetKey("search_index")} <= set(keys)
    records = [r for key in keys for r in instance.fetch_materializations(key, limit=100).records]
    text = "\n".join(repr(r.asset_materialization.metadata) for r in records)
    users = {c["user_id"] for c in samples}
    words = {turn["content"][:24] for c in samples for turn in c["interactions"]} | {"us-west-2"}
    quoted = {u for u in users if re.search(rf"\b{re.escape(u)}\b", text)} | {w for w in words if w in text}
    if previews:
        assert quoted == quoted & users and quoted, quoted  # ids, never words
        assert "chars)" in text
    else:
        assert quoted == set(), quoted
