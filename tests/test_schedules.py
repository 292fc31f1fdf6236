"""The schedules reach every organisation: in keyed mode each organisation's lake (`<lake>/orgs/<org>`) gets its own
evaluation and daily aggregation run from the same schedule tick, evaluated with Dagster's schedule context and the
requested runs executed as Dagster would (their run config points the lake resource at the organisation's lake)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from reflexio_pipelines.definitions import build_definitions
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.organisations import ORG_TAG, lakes_of, org_lake
from reflexio_pipelines.resources import LakeResource
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from reflexio_pipelines.storage import write_bytes
from tests.support.landing import land
from tests.support.learned import AGENT, REGION, correction_turns

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=timezone.utc)
ORGS = ("acme", "globex")


def _conversations(org: str) -> list[dict]:
    """Three users teaching the same lesson, as closed sessions (long before the schedules run)."""
    created = int(T0.timestamp())
    return [
        {
            "id": f"{org}-{user}",
            "user_id": f"{org}-{user}",
            "session_id": f"{org}-s-{user}",
            "agent_version": AGENT,
            "source": "test",
            "interactions": [dict(t, created_at=created) for t in correction_turns(*turns)],
        }
        for user, *turns in REGION
    ]


@pytest.fixture
def keyed_lake(tmp_path, instance) -> Lake:
    """A keyed-mode lake: no data of its own, two organisations that learned from their turns and evaluate every
    session (their own stored config, as `set_config` stores it)."""
    root = Lake.at(tmp_path / "lake")
    for org in ORGS:
        lake = Lake.at(org_lake(root.root, org))
        config = {"agent_success_configs": [{"evaluation_name": f"{org}_success", "sampling_rate": 1.0}]}
        write_bytes(lake.extraction_config_path, json.dumps(config).encode())
        land(lake, _conversations(org), at=T0)
        launch(settings=Settings(lake=str(lake.root)), instance=instance)
    return root


def _requests(name: str, root: Lake, instance) -> list[dg.RunRequest]:
    schedule = build_definitions(Settings(lake=str(root.root))).resolve_schedule_def(name)
    tick = T0 + timedelta(days=1)
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=tick, resources={"lake": LakeResource(root=str(root.root))}
    ) as context:
        return list(schedule(context))


@pytest.mark.parametrize(
    ("schedule", "table"), [("daily_aggregation", "agent_playbooks"), ("session_evaluation", "session_evaluations")]
)
def test_every_organisation_gets_the_scheduled_runs(keyed_lake: Lake, instance, schedule: str, table: str):
    requests = _requests(schedule, keyed_lake, instance)
    assert sorted(r.tags[ORG_TAG] for r in requests) == list(ORGS)  # the bare keyed root holds no data: no run
    assert len({r.run_key for r in requests}) == len(requests)
    defs = build_definitions(Settings(lake=str(keyed_lake.root)))
    job = defs.resolve_schedule_def(schedule).job_name
    for request in requests:
        run = defs.resolve_job_def(job).execute_in_process(
            run_config=request.run_config, instance=instance, tags=request.tags
        )
        assert run.success
    for org in ORGS:
        rows = Lake.at(org_lake(keyed_lake.root, org)).read_table(table).to_pylist()
        assert rows, f"{org} got no {table} from the {schedule} schedule"
        if table == "session_evaluations":  # each organisation's own evaluator config applied
            assert {r["evaluation_name"] for r in rows} == {f"{org}_success"}
            assert len(rows) == len(REGION)
        else:
            assert [r["member_user_ids"] for r in rows if r["status"] == "current"] == [
                sorted(f"{org}-{user}" for user, *_ in REGION)
            ]


def test_open_mode_schedules_run_against_the_configured_lake(lake: Lake, instance):
    land(lake, _conversations("solo"), at=T0)
    (request,) = _requests("daily_aggregation", lake, instance)
    assert request.tags[ORG_TAG] == "default" and request.run_config == {}
    assert lakes_of(lake.root) == [("default", lake.root)]
