"""Outcome counters per learned item, end to end: a learned rule is served through /api/search, the sessions that
follow it are scripted (followed → helpful, contradicted → harmful, the same correction again → missed), the
evaluation job counts them, and the counts come back through the read and search APIs. A harmful-flagged item
leaves search when `outcomes.hold_out_flagged` is on, until a reviewer keeps it; every flag action is in the outcome
change log with its evidence sessions. Plus the heuristic matching rules on their own (learning/outcomes.py)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.outcome_types import ItemRef, LearnedItem
from reflexio_pipelines.learning.outcomes import relate, trigger_met
from reflexio_pipelines.runs import launch, run_evaluation
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.conversations import conversation
from tests.support.landing import land
from tests.support.lessons import REGION_AGAIN, TEACH_REGION

USER, AGENT = "dana", "ops-v1"
QUERY = "deploy the payments service"


FOLLOWED = [
    ("user", "Deploy the payments service to production."),
    ("assistant", "Deploying the payments service to us-west-2 as usual."),
    ("user", "Perfect, thanks!"),
]
CONTRADICTED = [
    ("user", "Deploy the payments service for the EU launch."),
    ("assistant", "Deploying the payments service to us-west-2."),
    ("user", "No, for this one use us-east-1, not us-west-2."),
]
RECURS = REGION_AGAIN


@pytest.fixture
def settings(lake: Lake, tmp_path) -> Settings:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "agent_success_configs": [{"evaluation_name": "ops", "sampling_rate": 1.0}],
                "holdout": {"share": 0.0},
                "outcomes": {"min_outcomes": 3},
            }
        )
    )
    return Settings(lake=str(lake.root), extraction_config=str(config))


def _search(client: TestClient, session_id: str | None) -> dict:
    body = {"query": QUERY, "user_id": USER, "agent_version": AGENT, "threshold": 0.0}
    if session_id:
        body["session_id"] = session_id
    reply = client.post("/api/search", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _publish(client: TestClient, session: str, turns: list[tuple[str, str]]) -> None:
    body = {
        "user_id": USER,
        "session_id": session,
        "agent_version": AGENT,
        "interaction_data_list": [{"role": role, "content": text} for role, text in turns],
    }
    assert client.post("/api/publish_interaction", json=body).status_code == 200


def test_served_rule_followed_contradicted_and_repeated_is_counted_and_flagged(lake: Lake, settings, instance):
    teach = conversation(USER, "teach", *TEACH_REGION, session="teach", agent_version=AGENT)
    land(lake, [teach], at=datetime.now(timezone.utc))
    launch(None, settings=settings, instance=instance)
    with TestClient(create_app(settings)) as client:
        (rule,) = [p for p in _search(client, "s1")["user_playbooks"] if "us-west-2" in p["content"]]
        rule_id = rule["user_playbook_id"]
        assert rule["outcomes"] == {
            "served": 0,
            "sessions": 0,
            "helpful": 0,
            "harmful": 0,
            "missed": 0,
            "flagged": False,
            "held_out": False,
            "rules": "outcome-heuristic-v1 (heuristic)",
        }
        _publish(client, "s1", FOLLOWED)  # the rule is followed: helpful
        _search(client, "s2")
        _publish(client, "s2", CONTRADICTED)  # the user says the opposite: harmful
        _search(client, "s3")
        _publish(client, "s3", RECURS)  # served, and the same correction came again: missed
        time.sleep(1.1)  # the next serve falls in a later second than s3's turns
        _search(client, None)  # no session named: the user's next turns decide (heuristic attribution)
        _publish(client, "s4", CONTRADICTED)  # harmful again
    launch(None, settings=settings, instance=instance)  # compacts (and learns from) the follow-up sessions
    result = run_evaluation(now=int(time.time()) + 3600, settings=settings, instance=instance)
    assert result["success"]

    events = {
        r["session_id"]: r
        for r in lake.read_table("item_outcome_events").to_pylist()
        if r["entity"] == "user_playbook" and r["item_id"] == str(rule_id)
    }
    assert {s: e["outcome"] for s, e in events.items()} == {
        "s1": "helpful",
        "s2": "harmful",
        "s3": "missed",
        "s4": "harmful",
    }
    assert all(e["reason"].startswith("heuristic:") and e["rules"] == "outcome-heuristic-v1" for e in events.values())
    sessions = {r["session_id"]: r for r in lake.read_table("session_outcomes").to_pylist()}
    assert sessions["s3"]["recurring_corrections"] == 1 and sessions["s3"]["corrections"] == 1
    assert sessions["s2"]["recurring_corrections"] == 0  # a contradiction is not a repeat
    assert sessions["teach"]["recurring_corrections"] == 0  # the correction the rule was learned from

    with TestClient(create_app(settings)) as client:
        # Correction recurrence per agent version and day (heuristic session signals): of the four corrections
        # (teach, s2, s3, s4) one repeats the rule that was learned and served before it.
        metrics = client.get("/api/impact_metrics", params={"agent_version": AGENT}).json()["metrics"]
        (signals,) = [m for m in metrics if m["evaluation_name"] == "session_signals"]
        assert signals["judge"] == "heuristic" and signals["sessions_evaluated"] == 5
        assert (signals["corrections"], signals["recurring_corrections"], signals["correction_recurrence"]) == (
            4,
            1,
            0.25,
        )
        assert signals["repeated_learned_corrections"] == 1
        (judged,) = [m for m in metrics if m["evaluation_name"] == "ops"]
        assert judged["judge"] == "heuristic" and judged["sessions_evaluated"] == 5

        listed = client.post("/api/get_user_playbooks", json={"user_id": USER}).json()["user_playbooks"]
        (read,) = [p for p in listed if p["user_playbook_id"] == rule_id]
        counts = read["outcomes"]
        expected = {
            "served": 4,
            "sessions": 4,
            "helpful": 1,
            "harmful": 2,
            "missed": 1,
            "flagged": True,
            "held_out": False,
        }
        assert {k: counts[k] for k in expected} == expected
        (item,) = [i for i in client.get("/api/item_outcomes").json()["items"] if i["item_id"] == str(rule_id)]
        assert {k: item[k] for k in expected} == expected and "us-west-2" in item["content"]

        # Flagged, but the setting is off: still served, and the search answer carries the counters.
        def served() -> list[dict]:
            return [p for p in _search(client, None)["user_playbooks"] if p["user_playbook_id"] == rule_id]

        (hit,) = served()
        assert {k: hit["outcomes"][k] for k in ("helpful", "harmful", "missed", "flagged")} == {
            "helpful": 1,
            "harmful": 2,
            "missed": 1,
            "flagged": True,
        }
        (flag,) = client.get("/api/outcome_change_log", params={"item_id": str(rule_id)}).json()["entries"]
        assert flag["action"] == "flagged" and sorted(flag["evidence_session_ids"]) == ["s2", "s4"]
        assert flag["reason"].startswith("heuristic counters: harmful 2 > helpful 1")

        # The setting on: the flagged rule leaves search at once, pending review; a reviewer keeps it: back.
        config = client.get("/api/get_config").json()
        config["outcomes"] = {"min_outcomes": 3, "hold_out_flagged": True}
        assert client.post("/api/set_config", json=config).json()["success"]
        assert served() == []
        listed = client.post("/api/get_user_playbooks", json={"user_id": USER}).json()["user_playbooks"]
        assert all(p["outcomes"]["held_out"] for p in listed if p["user_playbook_id"] == rule_id)
        review = client.post(
            "/api/review_flagged_item",
            json={"entity": "user_playbook", "item_id": str(rule_id), "reason": "EU launch was a one-off"},
        )
        assert review.status_code == 200, review.text
        assert len(served()) == 1
        entries = client.get("/api/outcome_change_log").json()["entries"]
        # newest first, to the second (`at`): the keep is among the newest, with the flag when both fell in one second
        assert "kept" in {e["action"] for e in entries if e["at"] == entries[0]["at"]}
        assert [e["at"] for e in entries] == sorted((e["at"] for e in entries), reverse=True)
        missing = client.post("/api/review_flagged_item", json={"entity": "profile", "item_id": "nope"})
        assert missing.status_code == 404

    # A later run respects the review (no new harmful evidence) and holds nothing out.
    run_evaluation(now=int(time.time()) + 3600, settings=settings, instance=instance)
    (row,) = [r for r in lake.read_table("item_outcomes").to_pylist() if r["item_id"] == str(rule_id)]
    assert not row["flagged"] and not row["held_out"]

    # Erasure reaches every new table that names the user: the retrieval log, outcomes, counters, evidence.
    with TestClient(create_app(settings)) as client:
        assert client.request("DELETE", "/api/erase_user_data", json={"user_id": USER}).json()["success"]
    for table in ("retrieval_events", "session_outcomes", "item_outcome_events", "item_outcomes", "outcome_change_log"):
        rows = lake.read_table(table).to_pylist()
        assert not [r for r in rows if r.get("user_id") == USER or r.get("item_id") == str(rule_id)], table


ITEM = LearnedItem(
    ItemRef("user_playbook", "1"),
    "u",
    "v",
    "Never deploy to us-east-1; always use us-west-2.",
    "When deploying the payments service",
)


@pytest.mark.parametrize(
    "correction, relation",
    [
        ("No, for this one use us-east-1, not us-west-2.", "contradicts"),
        ("No, deploy to us-east-1 this time.", "contradicts"),
        ("No — we never deploy to us-east-1, always use us-west-2.", "repeats"),
        ("Wrong, the payments service lives in us-west-2 not us-east-1", "repeats"),
        ("No, deploy it later.", None),
        ("Please keep answers short.", None),
    ],
)
def test_heuristic_relation_of_a_correction_to_a_rule(correction, relation):
    assert relate(ITEM, correction) == relation


def test_heuristic_relation_to_profiles_and_the_trigger():
    lives = LearnedItem(ItemRef("profile", "p"), "u", "", "Lives in Berlin")
    assert relate(lives, "No, I live in Munich now.") == "contradicts"
    assert relate(lives, "No, I told you I live in Berlin") == "repeats"
    rotation = LearnedItem(ItemRef("user_playbook", "2"), "u", "", "Never restart the database during a rotation.")
    assert relate(rotation, "No, restart the database, it is fine.") == "contradicts"
    assert relate(rotation, "Always back up the database first.") is None
    assert trigger_met(ITEM, ["Can you deploy the payments service?"])
    assert not trigger_met(ITEM, ["What is the weather like?"])
