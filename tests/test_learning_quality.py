"""What gets learned, end to end through the HTTP API and a Dagster materialisation, once with the built-in
extractor and once through LiteLLM against the OpenAI-compatible stub on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reflexio_pipelines.settings import LLMSettings, Settings


@pytest.fixture
def client(extractor_client):
    return extractor_client


@pytest.fixture
def rules_client(lake, instance) -> Iterator[Any]:
    """The service in-process with the rule extractor (`REFLEXIO_LLM_BUILTIN=rules`), for its exact wording."""
    from fastapi.testclient import TestClient

    from serving.app import create_app

    settings = Settings(lake=str(lake.root), llm=LLMSettings(builtin="rules"))
    with TestClient(create_app(settings)) as client:
        yield client


def _publish(client, user: str, *turns: dict, **extra) -> dict:
    body = {"user_id": user, "session_id": f"{user}-s", "interaction_data_list": list(turns), **extra}
    reply = client.post("/api/publish_interaction?wait_for_response=true", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _playbooks(client, user: str, query: str) -> list[dict]:
    return client.post("/api/search", json={"query": query, "user_id": user, "threshold": 0.0, "top_k": 10}).json()[
        "user_playbooks"
    ]


def _profiles(client, user: str, query: str) -> list[dict]:
    return client.post("/api/search", json={"query": query, "user_id": user, "threshold": 0.0, "top_k": 10}).json()[
        "profiles"
    ]


def test_a_correction_yields_a_rule_naming_the_situation_and_the_fix(client):
    result = _publish(
        client,
        "kim",
        {"role": "user", "content": "Please deploy the search service to production."},
        {"role": "assistant", "content": "Deploying the search service to us-east-1 now."},
        {"role": "user", "content": "No — we never deploy to us-east-1, always use us-west-2."},
    )
    assert result["playbooks_added"] == 1
    (rule,) = _playbooks(client, "kim", "deploy region")
    assert "deploy" in rule["trigger"].lower() and "search service" in rule["trigger"].lower()
    assert "us-west-2" in rule["content"] and "us-east-1" in rule["content"]
    assert rule["kind"] == "correction" and rule["provenance"]["source_turn_ids"]


def test_a_tool_failure_yields_a_rule_naming_the_cause(client):
    _publish(
        client,
        "lee",
        {"role": "user", "content": "Open a ticket about the flaky backup job."},
        {
            "role": "assistant",
            "content": "The tracker rejected the request.",
            "tools_used": [
                {
                    "tool_name": "create_issue",
                    "tool_data": {"input": {"repo": "infra"}, "error": "403 Forbidden: token lacks issues:write"},
                }
            ],
        },
    )
    (rule,) = _playbooks(client, "lee", "create_issue ticket")
    assert "create_issue" in rule["content"] and "403" in rule["content"]
    assert rule["blocking_issue"] == {"kind": "permission_denied", "details": rule["blocking_issue"]["details"]}


@pytest.mark.parametrize(
    ("expert", "learns"),
    [
        (
            "Create a second credential in the vault, roll the service onto it with a rolling restart, verify, then "
            "revoke the old credential so there is no downtime.",
            True,
        ),
        ("Change the password in the database, then restart the reporting service.", False),  # same substance
    ],
)
def test_expert_answers_teach_only_substantive_differences(client, expert, learns):
    _publish(
        client,
        "max",
        {"role": "user", "content": "How do I rotate the database credentials for the reporting service?"},
        {
            "role": "assistant",
            "content": "Change the password in the database and restart the reporting service.",
            "expert_content": expert,
        },
    )
    rules = [r for r in _playbooks(client, "max", "rotate database credentials") if r["kind"] == "expert"]
    assert bool(rules) == learns
    if learns:
        assert "vault" in rules[0]["content"]


def _stated_then_contradicted(client, lives_in: Callable[[str, str], bool]) -> None:
    """Lisbon (and metric units) stated, then a move to Porto: Porto is served, Lisbon no longer, the unrelated
    preference still is. `lives_in(content, city)` says whether a profile is the one placing the user in `city`."""

    def says(text: str) -> list[str]:
        """nia says `text` (the assistant notes it); then the contents of her profiles about where she lives."""
        _publish(client, "nia", {"role": "user", "content": text}, {"role": "assistant", "content": "Noted."})
        return [p["content"] for p in _profiles(client, "nia", "where does the user live")]

    contents = says("I live in Lisbon and I prefer metric units.")
    assert any(lives_in(c, "Lisbon") for c in contents), contents
    time.sleep(1.1)  # a strictly newer statement
    contents = says("I moved to Porto last month.")
    assert any(lives_in(c, "Porto") for c in contents) and not any(lives_in(c, "Lisbon") for c in contents), contents
    assert any("metric" in c for c in contents), contents  # the preference stated with Lisbon is still known


def test_a_stated_fact_yields_a_profile_and_a_later_contradiction_supersedes_it(client):
    """On the default extractor (and LiteLLM), wording-agnostic: a profile naming the city."""
    _stated_then_contradicted(client, lambda content, city: city.lower() in content.lower())


def test_the_rule_extractor_states_the_fact_in_its_canonical_slot_and_supersedes_it(rules_client):
    """Pinned to the rule extractor (`builtin="rules"`): "I live in Lisbon" is stored as exactly "Lives in Lisbon",
    and "I moved to Porto" supersedes it with exactly "Lives in Porto"."""
    _stated_then_contradicted(rules_client, lambda content, city: content == f"Lives in {city}")


def test_the_same_correction_published_three_times_is_one_playbook(client):
    for _ in range(3):
        _publish(
            client,
            "oz",
            {"role": "user", "content": "Deploy the billing api."},
            {"role": "assistant", "content": "Deploying the billing api to us-east-1."},
            {"role": "user", "content": "No, never deploy to us-east-1; always use us-west-2."},
        )
    rules = _playbooks(client, "oz", "deploy region billing")
    assert len([r for r in rules if "us-west-2" in r["content"]]) == 1


def test_an_expired_profile_is_hidden_but_kept(client, lake):
    _expired_is_hidden_but_kept(client, lake)


def test_the_rule_extractor_expires_a_profile_stated_for_today(rules_client, lake):
    """The same, pinned to the rule extractor (`builtin="rules"`), whose TTL words ("today") set `one_day`."""
    _expired_is_hidden_but_kept(rules_client, lake)


def _expired_is_hidden_but_kept(client, lake) -> None:
    """A preference stated "today", three days ago: stored with a one-day TTL, expired, not served, still in the
    lake."""
    three_days_ago = int(time.time()) - 3 * 86_400
    _publish(
        client,
        "pat",
        {"role": "user", "content": "I prefer green tea today.", "created_at": three_days_ago},
        {"role": "assistant", "content": "Noted.", "created_at": three_days_ago},
    )
    rows = lake.read_table("user_profiles").to_pylist()
    (row,) = [r for r in rows if "green tea" in r["content"]]
    assert row["profile_time_to_live"] == "one_day" and row["expiration_timestamp"] < time.time()
    assert _profiles(client, "pat", "green tea") == []


def test_a_successful_run_the_user_approves_yields_a_recipe_with_the_working_calls(client):
    _publish(
        client,
        "quinn",
        {"role": "user", "content": "Export last month's sales report as CSV to the finance bucket."},
        {
            "role": "assistant",
            "content": "Done: the report is in the finance bucket.",
            "tools_used": [
                {
                    "tool_name": "run_query",
                    "tool_data": {
                        "input": {"sql": "select * from sales where month = '2026-10'"},
                        "output": "1200 rows",
                    },
                },
                {
                    "tool_name": "upload_file",
                    "tool_data": {"input": {"bucket": "finance", "path": "sales-2026-10.csv"}, "output": "ok"},
                },
            ],
        },
        {"role": "user", "content": "Perfect, thanks!"},
    )
    (recipe,) = [r for r in _playbooks(client, "quinn", "export sales report") if r["kind"] == "recipe"]
    assert "sales report" in recipe["trigger"]
    assert "run_query" in recipe["content"] and "upload_file" in recipe["content"] and "finance" in recipe["content"]


def test_a_run_without_approval_is_not_a_recipe(client):
    _publish(
        client,
        "ray",
        {"role": "user", "content": "Export the sales report."},
        {
            "role": "assistant",
            "content": "Exported.",
            "tools_used": [{"tool_name": "run_query", "tool_data": {"input": {"sql": "select 1"}, "output": "1 row"}}],
        },
        {"role": "user", "content": "Now also send it to Bob."},
    )
    assert not [r for r in _playbooks(client, "ray", "export sales report") if r["kind"] == "recipe"]
