"""The original's newest CLI, `reflexio` from reflexio-ai 0.2.32 (PyPI, unchanged, Python 3.12), against a live
`python -m serving` with real Dagster runs: publish, search, context, config show / update / set, profiles,
playbooks, aggregate (the durable operations it submits and polls) and the delete ("erase") commands.

The tests run in file order on one lake. Each checks what the service did, not only the CLI's exit status."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.ai032 import Original, original_against_service
from tests.support.learned import REGION, correction_turns

pytestmark = pytest.mark.e2e

AGENT = "ops-1"


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Original]:
    with original_against_service(tmp_path_factory.mktemp("cli032")) as found:
        yield found


def _ok(envelope: dict) -> object:
    assert envelope.get("ok") is True, envelope
    return envelope["data"]


def test_publish_waits_until_learned(original: Original) -> None:
    for user, request, answer, correction in REGION:
        data = _ok(
            original.cli(
                "publish",
                "--user-id",
                user,
                "--session-id",
                f"s-{user}",
                "--agent-version",
                AGENT,
                "--data",
                json.dumps({"interactions": correction_turns(request, answer, correction)}),
                "--wait",
            )
        )
        assert data["playbooks_added"] == 1, data
    facts = _ok(
        original.cli(
            "publish",
            "--user-id",
            "frank",
            "--session-id",
            "s-frank",
            "--user-message",
            "I am vegetarian and I live in Porto.",
            "--agent-response",
            "Noted.",
            "--wait",
        )
    )
    assert facts["profiles_added"] >= 1 and facts["message"] == "stored, learned and indexed"


def test_search_finds_the_learned_rule(original: Original) -> None:
    data = _ok(original.cli("search", "which region should I deploy to", "--user-id", "ann"))
    assert any("us-west-2" in p["content"] for p in data["user_playbooks"]), data


def test_context_gives_profiles_for_bootstrap(original: Original) -> None:
    query = "what should I cook for dinner"
    data = _ok(original.cli("context", "--user-id", "frank", "--agent-version", AGENT, "--query", query))
    assert any("vegetarian" in p["content"].lower() for p in data["profiles"]), data
    assert isinstance(data["playbooks"], list)  # the CLI searches user playbooks without a user id


def test_config_show_and_update(original: Original) -> None:
    shown = _ok(original.cli("config", "show"))
    assert isinstance(shown, dict) and "window_size" in shown, shown
    _ok(original.cli("config", "update", "--field", "window_size=:json:12"))
    assert _ok(original.cli("config", "show"))["window_size"] == 12


def test_config_set(original: Original) -> None:
    _ok(original.cli("config", "set", "--data", '{"storage_config": null, "window_size": 10, "stride_size": 4}'))
    shown = _ok(original.cli("config", "show"))
    assert (shown["window_size"], shown["stride_size"]) == (10, 4)


def test_profiles_list_search_add_delete(original: Original) -> None:
    listed = _ok(original.cli("user-profiles", "list", "--user-id", "frank"))
    assert any("porto" in p["content"].lower() for p in listed), listed
    found = _ok(original.cli("user-profiles", "search-user-profiles", "where does he live", "--user-id", "frank"))
    assert "porto" in found[0]["content"].lower(), found
    _ok(original.cli("user-profiles", "add", "--user-id", "frank", "--content", "Speaks Portuguese."))
    added = [
        p for p in _ok(original.cli("user-profiles", "list", "--user-id", "frank")) if "Portuguese" in p["content"]
    ]
    assert len(added) == 1
    _ok(original.cli("user-profiles", "delete", "--user-id", "frank", "--profile-id", added[0]["profile_id"]))
    left = _ok(original.cli("user-profiles", "list", "--user-id", "frank"))
    assert not any("Portuguese" in p["content"] for p in left)


def test_playbooks_list(original: Original) -> None:
    mine = _ok(original.cli("user-playbooks", "list", "--user-id", "bob"))
    assert [p["user_id"] for p in mine] == ["bob"] and "us-west-2" in mine[0]["content"]
    assert _ok(original.cli("agent-playbooks", "list", "--agent-version", AGENT)) == []


def test_aggregate_submits_and_polls_a_durable_operation(original: Original) -> None:
    envelope = original.cli("agent-playbooks", "aggregate", "--agent-version", AGENT, "--wait")
    data = _ok(envelope)
    assert data["message"] == "Processed 3 user playbooks, found 1 clusters, generated 1 agent playbooks", data
    assert envelope["meta"]["status"] == "succeeded"
    (agent,) = _ok(original.cli("agent-playbooks", "list", "--agent-version", AGENT))
    assert "us-west-2" in agent["content"]


def test_aggregate_without_an_agent_version_finds_the_versions(original: Original) -> None:
    data = _ok(original.cli("agent-playbooks", "aggregate", "--wait"))
    assert data["message"].startswith("Processed 3 user playbooks"), data


def test_delete_commands_erase(original: Original) -> None:
    deleted = _ok(original.cli("interactions", "delete-all", "--yes"))
    assert deleted["deleted_count"] >= 4
    assert _ok(original.cli("user-profiles", "list", "--user-id", "frank")) == []  # cascaded to what was learned
    _ok(original.cli("agent-playbooks", "delete-all", "--yes"))
    assert _ok(original.cli("agent-playbooks", "list", "--agent-version", AGENT)) == []
