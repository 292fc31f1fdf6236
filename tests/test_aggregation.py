"""Agent playbooks end to end through the API and real Dagster runs: recurring corrections across users become one
pending rule, served only once approved; rejection hides it at once and is remembered; approval survives re-runs;
audit links back to turns. The poisoning scenarios (sybil accounts, flagged rules) are in test_shared_rule_review.py."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from serving.app import create_app
from tests.support.learned import REGION, publish_correction

COMMITS = [
    (
        "dan",
        "Write the commit message for this fix.",
        "Commit: arreglado el error de login.",
        "No, always write commit messages in English.",
    ),
    (
        "eve",
        "Commit these changes with a message.",
        "Commit: corrige le bug de connexion.",
        "No — commit messages must always be in English.",
    ),
]
NOISE = (
    "fay",
    "Summarise the incident report.",
    "Here is a 3-page summary of the incident.",
    "No, keep incident summaries under five bullet points.",
)


@pytest.fixture
def client(extractor_client):
    return extractor_client


def _aggregate(client) -> dict:
    result = client.post("/api/run_playbook_aggregation", json={"agent_version": "ops-1"}).json()
    assert result["success"] and result["run_id"]
    return result


def _agent_playbooks(client, **filters) -> list[dict]:
    return client.post("/api/get_agent_playbooks", json={"agent_version": "ops-1", **filters}).json()["agent_playbooks"]


def _support_from(client, users: int) -> None:
    """Let `users` distinct users make a shared rule (the default is 3), for tests of other things than support."""
    config = client.get("/api/get_config").json()
    for extractor in config["user_playbook_extractor_configs"]:
        extractor["aggregation_config"] = {**(extractor.get("aggregation_config") or {}), "min_distinct_users": users}
    config.pop("user_playbook_extractor_config", None)  # get_config answers in both shapes: send the list only
    assert client.post("/api/set_config", json=config).json()["success"]


def _decide(client, agent_playbook_id: int, status: str) -> None:
    reply = client.put(
        "/api/update_agent_playbook_status", json={"agent_playbook_id": agent_playbook_id, "playbook_status": status}
    )
    assert reply.json()["success"]


def _served(client) -> list[dict]:
    return client.post(
        "/api/search",
        json={"query": "which region to deploy to", "agent_version": "ops-1", "threshold": 0.0, "top_k": 10},
    ).json()["agent_playbooks"]


def test_same_correction_from_three_users_is_one_pending_agent_playbook_and_rejection_sticks(client, lake, request):
    for case in REGION:
        publish_correction(client, *case)
    publish_correction(client, *NOISE)
    _aggregate(client)
    (rule,) = _agent_playbooks(client)
    assert rule["playbook_status"] == "pending" and "us-west-2" in rule["content"]
    assert rule["member_user_count"] == 3 and len(rule["member_user_playbook_ids"]) == 3
    assert rule["supporting_user_ids"] == ["ann", "bob", "cat"] and rule["flag_reason"] is None
    assert _served(client) == []  # pending: in the approval queue, not in prompts
    (row,) = lake.read_table("agent_playbooks").to_pylist()
    expected = "openai/stub" if "litellm" in request.node.name else "builtin"
    assert row["model"] == expected  # consolidated by the LLM (one call for the cluster) or the offline path

    approved_at = time.monotonic()
    _decide(client, rule["agent_playbook_id"], "approved")
    assert [p["agent_playbook_id"] for p in _served(client)] == [rule["agent_playbook_id"]]
    assert time.monotonic() - approved_at < 1.0  # served in the same second, without a pipeline run

    rejected_at = time.monotonic()
    _decide(client, rule["agent_playbook_id"], "rejected")
    assert _served(client) == [] and time.monotonic() - rejected_at < 1.0  # gone from search in the same second

    _aggregate(client)  # a full re-run must not bring it back
    assert _served(client) == []
    assert [p["playbook_status"] for p in _agent_playbooks(client, status_filter=None)] == ["rejected"]

    _decide(client, rule["agent_playbook_id"], "pending")  # un-reject: back in the queue, still not served
    assert _served(client) == []
    assert [p["agent_playbook_id"] for p in _agent_playbooks(client, playbook_status_filter="pending")] == [
        rule["agent_playbook_id"]
    ]


def test_unrelated_corrections_make_separate_clusters_and_approval_survives_reruns(client):
    _support_from(client, 2)  # two users per lesson here: this test is about clusters, not about support
    for case in [*REGION[:2], *COMMITS, NOISE]:
        publish_correction(client, *case)
    _aggregate(client)
    rules = _agent_playbooks(client)
    assert len(rules) == 2  # region and commit language; the one-off stays unclustered
    commit = next(r for r in rules if "English" in r["content"])
    _decide(client, commit["agent_playbook_id"], "approved")
    publish_correction(
        client,
        "gus",
        "Commit and push the hotfix.",
        "Commit: hotfix für den Login.",
        "No, commit messages are always in English.",
    )  # the approved cluster grows
    publish_correction(client, *REGION[2])
    _aggregate(client)
    after = {r["agent_playbook_id"]: r for r in _agent_playbooks(client)}
    assert after[commit["agent_playbook_id"]]["content"] == commit["content"]
    assert after[commit["agent_playbook_id"]]["playbook_status"] == "approved"
    assert len(after) == 2


def test_change_log_and_audit_trail(client):
    for case in REGION:
        publish_correction(client, *case)
    _aggregate(client)
    logs = client.get("/api/playbook_aggregation_change_logs?agent_version=ops-1").json()["change_logs"]
    assert len(logs) == 1 and len(logs[0]["added_agent_playbooks"]) == 1
    added = logs[0]["added_agent_playbooks"][0]
    assert "us-west-2" in added["content"] and len(added["member_user_playbook_ids"]) == 3
    member_ids = set(added["member_user_playbook_ids"])
    listed = client.post("/api/get_user_playbooks", json={"agent_version": "ops-1"}).json()["user_playbooks"]
    members = [p for p in listed if p["user_playbook_id"] in member_ids]
    assert len(members) == 3 and all(m["provenance"]["source_turn_ids"] for m in members)


def test_status_update_validates(settings, instance):
    with TestClient(create_app(settings)) as client:
        assert (
            client.put(
                "/api/update_agent_playbook_status", json={"agent_playbook_id": 12345, "playbook_status": "approved"}
            ).status_code
            == 404
        )
        assert (
            client.put(
                "/api/update_agent_playbook_status", json={"agent_playbook_id": 1, "playbook_status": "maybe"}
            ).status_code
            == 422
        )


def test_auto_approve_is_configurable_per_run(lake, instance, settings):
    from reflexio_pipelines.runs import run_aggregation

    with TestClient(create_app(settings)) as c:
        for case in REGION:
            publish_correction(c, *case)
    result = run_aggregation({"agent_version": "ops-1", "auto_approve": True}, settings=settings, instance=instance)
    assert result["success"] and result["consolidate_new"] == 1
    (row,) = lake.read_table("agent_playbooks").to_pylist()
    assert row["playbook_status"] == "approved"


# -- wording: a shared rule never carries one person's words (issue #19) ------------------------------------------


def _members(*rows: tuple[str, str, str]) -> list:
    from reflexio_pipelines.learning.aggregate import Member

    return [Member(i, user, content, trigger) for i, (user, trigger, content) in enumerate(rows, 1)]


def test_offline_consolidation_keeps_only_what_two_users_wrote_and_no_facts_about_anyone():
    import numpy as np

    from reflexio_pipelines.learning.aggregate import RepresentativeConsolidator

    members = _members(
        (
            "zed",
            "When asked: I am a staff engineer at Plonkworks, how should I size the database pool?",
            "Answer as the expert did: two connections per core at Plonkworks.",
        ),
        (
            "ann",
            "When asked: How should I size the database pool?",
            "Answer as the expert did: two connections per core.",
        ),
    )
    same = {m.user_playbook_id: np.ones(4, np.float32) / 2 for m in members}  # a tie: the lowest id (zed's) is chosen
    rule, calls, _, _ = RepresentativeConsolidator(same).consolidate(members, [])
    assert calls == 0
    assert rule.trigger == "When asked: how should the user size the database pool?"  # not "the user am a staff…"
    assert rule.content == "Answer as the expert did: two connections per core."
    assert "plonkworks" not in f"{rule.trigger} {rule.content} {rule.rationale}".lower()
    assert rule.rationale.startswith("Consolidated from 2 user playbooks of 2 users")


def test_shared_rule_filters_any_consolidator_and_says_when_nothing_is_shared():
    from reflexio_pipelines.learning.aggregate import NothingShared, Rule, shared_rule

    members = _members(
        ("zed", "When deploying the Flumpdoodle service", "Never deploy to us-east-1."),
        ("ann", "When deploying the billing service", "Never deploy to us-east-1."),
    )
    copied = Rule(
        "Never deploy to us-east-1 (the Flumpdoodle rule).",
        "When deploying the Flumpdoodle service",
        "Region policy, as Zed's team says.",
    )  # an LLM that copied one member, plus words of its own
    rule = shared_rule(copied, members)
    assert rule == Rule(
        "Never deploy to us-east-1 (the rule).", "When deploying the service", "Region policy, as Zed's team says."
    )  # its own words stay: no member wrote them
    with pytest.raises(NothingShared):
        shared_rule(Rule("Flumpdoodle first."), members)
    alone = _members(("zed", "When deploying the Flumpdoodle service", "Flumpdoodle first."))
    assert shared_rule(Rule("Flumpdoodle first."), alone).content == "Flumpdoodle first."  # one user: theirs


def test_wording_normalises_words_and_tidies_what_is_left():
    from reflexio_pipelines.learning.wording import keep_words, normal_word, vocabulary, without_personal_facts

    assert normal_word("Deploying") == normal_word("deploy") and normal_word("write") == normal_word("writing")
    assert normal_word("Zed's") == normal_word("zed")
    assert vocabulary(["The user said: don't use Zürich!"]) == {"said", "use", "zürich"}
    drop = {normal_word("Flumpdoodle"), normal_word("Zed")}
    assert (
        keep_words("Deploy the 'Flumpdoodle' service (Zed), please.", lambda w: w not in drop)
        == "Deploy the service, please."
    )
    text = "Use us-west-2."
    assert keep_words(text, lambda w: True) is text
    assert keep_words("Flumpdoodle!", lambda w: w not in drop) == ""
    text = "My cat is called Quixotica. Always answer in English."
    assert without_personal_facts(text) == "Always answer in English."
