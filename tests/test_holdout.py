"""The holdout control group: a deterministic share of users per agent version gets no learned context from
/api/search (same response shape, `holdout: true`, logged), unless the caller sends `X-Reflexio-Holdout: off`; the
impact metrics compare treated and control over the same period with 95 % intervals for the difference."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.config import ConfigError, HoldoutSettings
from reflexio_pipelines.learning.config_loading import parse_extraction_config
from reflexio_pipelines.learning.holdout import (
    CONTROL,
    DEFAULT_SHARE,
    SHARE_ENV,
    TREATED,
    arm_of,
    default_share,
    share_for,
)
from reflexio_pipelines.learning.stats import newcombe_difference, welch_difference
from reflexio_pipelines.runs import launch, run_evaluation
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.landing import land
from tests.support.lessons import REGION_AGAIN, TEACH_REGION

AGENT = "ops-v1"
USERS = [f"user-{i:02d}" for i in range(16)]
GOOD = [
    ("user", "Deploy the payments service to production."),
    ("assistant", "Deploying to us-west-2 as usual."),
    ("user", "Perfect, thanks!"),
]
BAD = REGION_AGAIN


def test_arms_are_deterministic_per_agent_version_and_default_to_five_percent(monkeypatch):
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert default_share() == DEFAULT_SHARE == 0.05
    settings = HoldoutSettings(agent_versions={"v2": 0.5})
    users = [f"u{i}" for i in range(20_000)]
    control = [u for u in users if arm_of(settings, "v1", u) == CONTROL]
    assert 0.045 < len(control) / len(users) < 0.055  # the default share, per agent version
    assert control == [u for u in users if arm_of(settings, "v1", u) == CONTROL]  # the same users every time
    in_v2 = {u for u in users if arm_of(settings, "v2", u) == CONTROL}
    assert 0.48 < len(in_v2) / len(users) < 0.52 and share_for(settings, "v2") == 0.5
    assert set(control) - in_v2  # each version draws its own control group
    assert share_for(HoldoutSettings(share=0.2), "v1") == 0.2
    monkeypatch.setenv(SHARE_ENV, "0")
    assert all(arm_of(HoldoutSettings(), "v1", u) == TREATED for u in users[:500])
    with pytest.raises(ConfigError, match="holdout.agent_versions"):
        parse_extraction_config({"holdout": {"agent_versions": {"v1": 1.5}}})


def test_difference_intervals():
    diff = newcombe_difference(45, 50, 30, 50)
    assert diff.difference == pytest.approx(0.3) and diff.ci_low < 0.3 < diff.ci_high and diff.ci_low > 0
    none = newcombe_difference(5, 10, 0, 0)
    assert none.difference is None and none.ci_low is None
    means = welch_difference([0, 1, 0, 0, 1, 0], [2, 1, 3, 2, 2, 1])
    assert means.difference == pytest.approx(-1.5, abs=1e-3) and means.ci_low < -1.5 < means.ci_high < 0
    assert welch_difference([1.0], [2.0, 3.0]).ci_low is None  # too few sessions for an interval


def _conversation(user: str, session: str, turns: list[tuple[str, str]], at: int | None = None) -> dict:
    return {
        "id": f"{user}-{session}",
        "user_id": user,
        "session_id": session,
        "agent_version": AGENT,
        "source": "test",
        "interactions": [{"role": r, "content": t, "created_at": at} for r, t in turns],
    }


def test_control_users_get_no_learned_context_and_impact_compares_the_arms(lake: Lake, tmp_path, instance):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "holdout": {"agent_versions": {AGENT: 0.5}},
                "agent_success_configs": [{"evaluation_name": "ops", "sampling_rate": 1.0}],
            }
        )
    )
    settings = Settings(lake=str(lake.root), extraction_config=str(config))
    arms = {u: arm_of(HoldoutSettings(agent_versions={AGENT: 0.5}), AGENT, u) for u in USERS}
    control = [u for u in USERS if arms[u] == CONTROL]
    treated = [u for u in USERS if arms[u] == TREATED]
    assert len(control) >= 3 and len(treated) >= 3, arms
    # taught a minute before the first search: a session that closed in the same second as the first search falls
    # inside the compared period (session_closed_at >= first_search_at, both in seconds), and a fast run searches
    # within that second
    taught = datetime.now(timezone.utc) - timedelta(minutes=1)
    land(lake, [_conversation(u, "teach", TEACH_REGION, at=int(taught.timestamp())) for u in USERS], at=taught)
    launch(None, settings=settings, instance=instance)

    def search(client: TestClient, user: str, **headers: str) -> dict:
        body = {
            "query": "deploy the payments service",
            "user_id": user,
            "agent_version": AGENT,
            "threshold": 0.0,
            "session_id": "follow-up",
        }
        reply = client.post("/api/search", json=body, headers=headers)
        assert reply.status_code == 200
        return reply.json()

    with TestClient(create_app(settings)) as client:
        answers = {u: search(client, u) for u in USERS}
        debug = search(client, control[0], **{"X-Reflexio-Holdout": "off"})
        for user in USERS:
            publish = {
                "user_id": user,
                "session_id": "follow-up",
                "agent_version": AGENT,
                "interaction_data_list": [
                    {"role": r, "content": t} for r, t in (BAD if arms[user] == CONTROL or user == treated[0] else GOOD)
                ],
            }
            assert client.post("/api/publish_interaction", json=publish).status_code == 200
    with TestClient(create_app(settings)) as again:  # another replica draws the same users
        assert search(again, control[1])["holdout"] and not search(again, treated[1])["holdout"]
    for user in control:  # the normal shape, nothing learned, flagged as the holdout
        answer = answers[user]
        assert answer["holdout"] is True and answer["success"] is True
        assert answer["profiles"] == answer["user_playbooks"] == answer["agent_playbooks"] == []
    for user in treated:
        assert answers[user]["holdout"] is False
        assert any("us-west-2" in p["content"] for p in answers[user]["user_playbooks"])
    assert debug["holdout"] is False and debug["user_playbooks"]  # switched off for one request
    events = lake.read_table("retrieval_events").to_pylist()
    logged = {(e["user_id"], e["holdout_override"]): e for e in events if e["session_id"] == "follow-up"}
    assert all(logged[(u, False)]["arm"] == CONTROL and logged[(u, False)]["holdout"] for u in control)
    assert all(not logged[(u, False)]["holdout"] and logged[(u, False)]["user_playbook_ids"] for u in treated)
    assert logged[(control[0], True)]["arm"] == CONTROL and not logged[(control[0], True)]["holdout"]

    launch(None, settings=settings, instance=instance)
    run_evaluation(now=int(time.time()) + 3600, settings=settings, instance=instance)
    with TestClient(create_app(settings)) as client:
        body = client.get("/api/impact_metrics", params={"agent_version": AGENT}).json()
    rows = {(r["evaluation_name"], r["judge"], r["metric"]): r for r in body["holdout"]}
    success = rows[("ops", "heuristic", "success_rate")]
    # The follow-up sessions only (the teaching sessions closed before the first search); control[0]'s follow-up
    # asked for the holdout off and is left out.
    assert success["treated_sessions"] == len(treated) and success["control_sessions"] == len(control) - 1
    assert success["treated_value"] == pytest.approx((len(treated) - 1) / len(treated), abs=1e-4)
    assert success["control_value"] == 0.0 and success["interval"] == "newcombe"
    assert success["ci_low"] < success["difference"] < success["ci_high"] and success["ci_low"] > 0
    corrections = rows[("session_signals", "heuristic", "corrections_per_session")]
    assert corrections["difference"] < 0 and corrections["interval"] == "welch"
    assert corrections["ci_low"] <= corrections["difference"] <= corrections["ci_high"]
    assert {m for (_, _, m) in rows} == {
        "success_rate",
        "turns_to_resolution",
        "corrections_per_session",
        "tool_failures_per_session",
    }
    assert corrections["period_start"] == corrections["period_end"] == success["period_start"]
