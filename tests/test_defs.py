"""The code location's `Definitions`, built in-process (reflexio_pipelines/definitions.py): every job, schedule,
sensor and the blocking index check exist and resolve against the assets, without a webserver or a run."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from reflexio_pipelines.definitions import build_definitions
from reflexio_pipelines.settings import Settings

JOBS = {"learn_job", "extract_job", "index_job", "aggregation_job", "evaluation_job", "rerun_job", "lifecycle_job"}
#: schedule -> (job, cron): aggregation, then the index compaction after it, and the evaluation every 10 minutes.
SCHEDULES = {
    "daily_aggregation": ("aggregation_job", "0 3 * * *"),
    "session_evaluation": ("evaluation_job", "*/10 * * * *"),
    "index_compaction": ("index_job", "30 3 * * *"),
}
SENSORS = {"landing_sensor": "learn_job", "interaction_index_sensor": "index_job"}
LEARNED = {"user_profiles", "user_playbooks", "change_log", "extraction_bookmarks"}


@pytest.fixture(scope="module", params=[1, 4], ids=["in-process", "sharded"])
def defs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dg.Definitions:
    lake = tmp_path_factory.mktemp("defs") / "lake"
    return build_definitions(Settings(lake=str(lake), learning_shards=request.param))


def test_every_job_resolves_against_the_assets(defs: dg.Definitions) -> None:
    assert {job.name for job in defs.resolve_all_job_defs()} >= JOBS
    for name in JOBS:
        assert defs.resolve_job_def(name).name == name


def test_the_loop_jobs_are_partitioned_by_window_and_index_job_is_not(defs: dg.Definitions) -> None:
    for name in ("learn_job", "extract_job"):
        assert defs.resolve_job_def(name).partitions_def is not None, name
    index_keys = defs.resolve_job_def("index_job").asset_layer.selected_asset_keys
    assert {key.to_user_string() for key in index_keys} == {"search_index", "serving_index"}


def test_learn_job_covers_the_learning_loop_and_not_aggregation(defs: dg.Definitions) -> None:
    selected = {key.to_user_string() for key in defs.resolve_job_def("learn_job").asset_layer.selected_asset_keys}
    assert {"turns", "search_index", "serving_index"} | LEARNED <= selected
    assert not selected & {"agent_playbooks", "impact_metrics"}


def test_schedules_target_their_jobs(defs: dg.Definitions) -> None:
    for name, (job, cron) in SCHEDULES.items():
        schedule = defs.resolve_schedule_def(name)
        assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (job, cron, "UTC")
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_sensors_target_their_jobs(defs: dg.Definitions) -> None:
    for name, job in SENSORS.items():
        assert defs.resolve_sensor_def(name).job_name == job


def test_the_index_check_blocks_serving(defs: dg.Definitions) -> None:
    key = dg.AssetCheckKey(dg.AssetKey("search_index"), "search_index_is_servable")
    assert key in defs.resolve_asset_graph().asset_check_keys
    (spec,) = defs.get_asset_checks_def(key).check_specs
    assert spec.blocking
    # serving_index (CURRENT) is downstream of the checked asset, so a failed check stops it.
    assert dg.AssetKey("search_index") in defs.resolve_assets_def("serving_index").dependency_keys


def test_the_code_location_loads_with_its_resources(defs: dg.Definitions) -> None:
    dg.Definitions.validate_loadable(defs)  # what `dagster dev` checks when it loads the code location
    assert set(defs.resources) >= {"lake", "extractor", "embedder"}
    assert Path(defs.resources["lake"].root).name == "lake"
