"""Evaluation end to end: sessions closed from the lake, deterministic sampling, judged (heuristic offline, or the
LiteLLM judge against the stub), impact metrics per agent version that show what learning changed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch, run_evaluation
from reflexio_pipelines.settings import LLMSettings, Settings
from serving.app import create_app
from tests.support.landing import land
from tests.support.openai_stub import make_openai_stub
from tests.support.servers import serve_app

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=timezone.utc)


def _session(version: str, i: int, good: bool, base: datetime = T0) -> dict:
    if good:
        turns = [
            ("user", "Please rotate the reporting credentials."),
            ("assistant", "Done: new credential issued and the service rolled onto it."),
            ("user", "Perfect, thanks!"),
        ]
    else:
        turns = [
            ("user", "Please rotate the reporting credentials."),
            ("assistant", "I changed the password and restarted the database."),
            ("user", "No, that's wrong — never restart the database for a rotation."),
            ("assistant", "Sorry, restarting it again now."),
            ("user", "No! This is still wrong and now it's down. Let me talk to a human."),
        ]
    created = int((base + timedelta(minutes=i % 100)).timestamp())
    interactions = [{"role": role, "content": text, "created_at": created} for role, text in turns]
    if version == "v2" and i % 2 == 0:
        interactions[1]["shadow_content"] = "I restarted the database."  # what the agent said before learning
    return {
        "id": f"{version}-{i}",
        "user_id": f"{version}-u{i}",
        "session_id": f"{version}-s{i}",
        "agent_version": version,
        "source": "test",
        "interactions": interactions,
    }


def _config(tmp_path, rate: float) -> str:
    path = tmp_path / "extraction.json"
    path.write_text(json.dumps({"agent_success_configs": [{"evaluation_name": "ops_success", "sampling_rate": rate}]}))
    return str(path)


@pytest.fixture(params=["builtin", "litellm"])
def eval_settings(request, lake: Lake, tmp_path):
    config = _config(tmp_path, 1.0)
    if request.param == "builtin":
        yield Settings(lake=str(lake.root), extraction_config=config)
        return
    stub = make_openai_stub()
    with serve_app(stub) as base_url:
        yield Settings(
            lake=str(lake.root),
            extraction_config=config,
            llm=LLMSettings(model="openai/stub", api_base=f"{base_url}/v1", api_key="k"),
        )


def test_after_version_shows_higher_success_and_fewer_corrections(lake: Lake, eval_settings, instance):
    land(
        lake,
        [_session("v1", i, good=i % 5 == 0) for i in range(10)]
        + [_session("v2", i, good=i % 5 != 0) for i in range(10)],
        at=T0,
    )
    launch([key_of_moment(T0, GRANULARITY)], settings=eval_settings, instance=instance)
    still_open = run_evaluation(
        now=int((T0 + timedelta(minutes=12)).timestamp()), settings=eval_settings, instance=instance
    )
    assert still_open["evaluated_now"] < 20  # the newest sessions are still inside their quiet period
    result = run_evaluation(now=int((T0 + timedelta(hours=1)).timestamp()), settings=eval_settings, instance=instance)
    assert result["success"]
    again = run_evaluation(now=int((T0 + timedelta(hours=2)).timestamp()), settings=eval_settings, instance=instance)
    assert again["evaluated_now"] == 0  # each session is judged once
    rows = lake.read_table("session_evaluations").to_pylist()
    assert len(rows) == 20 and len({r["session_id"] for r in rows}) == 20
    judge = {r["judge"] for r in rows}
    assert judge == ({"litellm"} if eval_settings.llm.model else {"heuristic"})
    rows_by_evaluation = [
        r for r in lake.read_table("impact_metrics").to_pylist() if r["evaluation_name"] == "ops_success"
    ]
    metrics = {r["agent_version"]: r for r in rows_by_evaluation}
    assert {r["judge"] for r in rows_by_evaluation} == judge  # every rate names the judge that produced it
    before, after = metrics["v1"], metrics["v2"]
    assert after["success_rate"] > before["success_rate"]
    assert after["corrections_per_session"] < before["corrections_per_session"]
    assert before["success_ci_low"] <= before["success_rate"] <= before["success_ci_high"]
    assert after["shadow_comparisons"] == 5 and after["regular_win_rate"] >= 0.5
    escalated = [r for r in rows if r["is_escalated"]]
    assert escalated and all(r["agent_version"] == "v1" or not r["is_success"] for r in escalated)
    with TestClient(create_app(eval_settings)) as client:
        served = client.get("/api/impact_metrics").json()["metrics"]
        assert {m["agent_version"] for m in served} == {"v1", "v2"}
        results = client.post("/api/get_agent_success_evaluation_results", json={"agent_version": "v2"}).json()
        assert len(results["agent_success_evaluation_results"]) == 10


def test_default_sampling_rate_is_applied_deterministically(lake: Lake, instance, tmp_path, capsys):
    settings = Settings(lake=str(lake.root), extraction_config=_config(tmp_path, 0.05))
    land(lake, [_session("v1", i, good=True) for i in range(400)], at=T0)
    launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
    now = int((T0 + timedelta(days=1)).timestamp())
    first = run_evaluation(now=now, settings=settings, instance=instance)
    evaluated = lake.read_table("session_evaluations").num_rows
    assert 0 < evaluated < 400 * 0.12 and first["sessions_closed"] == 400
    assert run_evaluation(now=now, settings=settings, instance=instance)["evaluated_now"] == 0
    with capsys.disabled():
        print(f"\nsampling: {evaluated} of 400 closed sessions evaluated at rate 0.05 ({evaluated / 400:.3f})")


def test_before_after_the_first_retrieval_of_a_learned_playbook(lake: Lake, instance, tmp_path):
    """Sessions closed before a learned rule was first served vs after: the retrieval is logged by the service."""
    settings = Settings(lake=str(lake.root), extraction_config=_config(tmp_path, 1.0))
    land(lake, [_session("v3", i, good=False) for i in range(4)], at=T0)
    launch([key_of_moment(T0, GRANULARITY)], settings=settings, instance=instance)
    with TestClient(create_app(settings)) as client:  # the service serves a learned rule, and logs it
        hits = client.post(
            "/api/search", json={"query": "rotate credentials restart database", "user_id": "v3-u0", "threshold": 0.0}
        ).json()["user_playbooks"]
        assert hits and hits[0]["agent_version"] == "v3"
        assert any("restart the database" in hit["content"].lower() for hit in hits), hits  # the learned rule
    # one row per served item (the user may have more than one learned playbook): the version's first retrieval is
    # the earliest of them
    logged = lake.read_table("retrievals").to_pylist()
    assert logged and {(r["entity"], r["agent_version"]) for r in logged} == {("user_playbook", "v3")}
    assert {r["item_id"] for r in logged} == {str(hit["user_playbook_id"]) for hit in hits}
    first_served_at = min(r["first_served_at"] for r in logged)
    after = datetime.fromtimestamp(first_served_at + 60, timezone.utc)
    land(lake, [_session("v3", 100 + i, good=True, base=after) for i in range(4)])  # users now thank the agent
    launch(None, settings=settings, instance=instance)
    run_evaluation(now=int((after + timedelta(hours=1)).timestamp()), settings=settings, instance=instance)
    (row,) = lake.read_table("impact_before_after").to_pylist()
    assert row["agent_version"] == "v3" and row["first_retrieval_at"] == first_served_at
    assert (row["sessions_before"], row["success_rate_before"]) == (4, 0.0)
    assert (row["sessions_after"], row["success_rate_after"]) == (4, 1.0)
    assert row["corrections_per_session_after"] < row["corrections_per_session_before"]
