"""The code location's `Definitions`, built in-process (reflexio_pipelines/definitions.py): every job, schedule,
sensor and the blocking index check exist and resolve against the assets, without a webserver or a run."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from reflexio_pipelines.definitions import build_definitions
from reflexio_pipelines.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
JOBS = {"learn_job", "extract_job", "index_job", "aggregation_job", "evaluation_job", "rerun_job", "lifecycle_job"}
#: schedule -> (job, cron): aggregation, then the index compaction after it, and the evaluation every 10 minutes.
SCHEDULES = {
    "daily_aggregation": ("aggregation_job", "0 3 * * *"),
    "session_evaluation": ("evaluation_job", "*/10 * * * *"),
    "index_compaction": ("index_job", "30 3 * * *"),
}
#: sensor -> (job, minimum interval in seconds).
SENSORS = {"landing_sensor": ("learn_job", 5), "interaction_index_sensor": ("index_job", 30)}
INDEX = {"search_index", "serving_index"}
LEARNED = {"user_profiles", "user_playbooks", "change_log", "extraction_bookmarks"}


def _selected(defs: dg.Definitions, job: str) -> set[str]:
    return {key.to_user_string() for key in defs.resolve_job_def(job).asset_layer.selected_asset_keys}


@pytest.fixture(scope="module", params=[1, 4], ids=["in-process", "sharded"])
def defs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dg.Definitions:
    lake = tmp_path_factory.mktemp("defs") / "lake"
    return build_definitions(Settings(lake=str(lake), learning_shards=request.param))


def test_the_workspace_loads_the_modules_defs_with_every_job_schedule_and_sensor() -> None:
    (location,) = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    module, attribute = location["python_module"]["module_name"], location["python_module"]["attribute"]
    loaded = getattr(__import__(module, fromlist=[attribute]), attribute)
    assert isinstance(loaded, dg.Definitions)
    assert {job.name for job in loaded.resolve_all_job_defs() if not job.name.startswith("__")} == JOBS
    assert {s.name for s in loaded.schedules} == set(SCHEDULES) and {s.name for s in loaded.sensors} == set(SENSORS)


def test_every_job_resolves_against_the_assets(defs: dg.Definitions) -> None:
    # Dagster's implicit `__ASSET_JOB` aside, these are all the jobs: a new one must be added here (and documented).
    assert {job.name for job in defs.resolve_all_job_defs() if not job.name.startswith("__")} == JOBS
    for name in JOBS:
        assert defs.resolve_job_def(name).name == name


def test_the_loop_jobs_are_partitioned_by_window_and_index_job_is_not(defs: dg.Definitions) -> None:
    for name in ("learn_job", "extract_job"):
        assert defs.resolve_job_def(name).partitions_def is not None, name
    assert defs.resolve_job_def("index_job").partitions_def is None
    assert _selected(defs, "index_job") == INDEX


def test_learn_job_covers_the_learning_loop_and_not_aggregation(defs: dg.Definitions) -> None:
    selected = _selected(defs, "learn_job")
    assert {"turns"} | INDEX | LEARNED <= selected
    assert not selected & {"agent_playbooks", "impact_metrics"}
    assert _selected(defs, "extract_job") == selected - INDEX  # the same window, without touching the index


def test_aggregation_re_indexes_and_evaluation_does_not(defs: dg.Definitions) -> None:
    assert {"agent_playbooks"} | INDEX <= _selected(defs, "aggregation_job")
    evaluation = _selected(defs, "evaluation_job")
    assert {"session_evaluations", "impact_metrics"} <= evaluation and not evaluation & (INDEX | LEARNED)


def test_schedules_target_their_jobs(defs: dg.Definitions) -> None:
    assert {s.name for s in defs.schedules} == set(SCHEDULES)
    for name, (job, cron) in SCHEDULES.items():
        schedule = defs.resolve_schedule_def(name)
        assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (job, cron, "UTC")
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_sensors_target_their_jobs(defs: dg.Definitions) -> None:
    assert {s.name for s in defs.sensors} == set(SENSORS)
    for name, (job, interval) in SENSORS.items():
        sensor = defs.resolve_sensor_def(name)
        assert (sensor.job_name, sensor.minimum_interval_seconds) == (job, interval)
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING  # on without a click in the UI


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
