"""`reflexio`: the original CLI's command names and flags for the loop, against the real service on 127.0.0.1, in
process (typer's runner) and as the installed console script the original's hooks and skills shell out to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reflexio_pipelines.cli.original import app
from tests.support.learned import AGENT, QUERY, REGION, correction_turns
from tests.support.processes import free_port

SCRIPT = Path(sys.executable).with_name("reflexio")


def reflexio(url: str, *args: str, input: str | None = None):
    """Run `reflexio` in-process against `url`."""
    return CliRunner().invoke(app, ["--server-url", url, *args], input=input, catch_exceptions=False)


def envelope(result) -> dict:
    """The `--json` envelope of a successful command."""
    data = json.loads(result.stdout)
    assert data["ok"] is True, data
    return data


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The installed console script, as an integration runs it."""
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, COLUMNS="120", **(env or {})),
    )


def test_agent_playbooks_aggregate_wait_exits_0_after_a_real_run(learned_service):
    """The OpenClaw plugin's call, verbatim, through the console script (REFLEXIO_URL as the original reads it)."""
    result = script(
        "agent-playbooks", "aggregate", "--agent-version", AGENT, "--wait", env={"REFLEXIO_URL": learned_service.url}
    )
    assert result.returncode == 0, result.stderr
    assert f"Aggregated (agent_version={AGENT}, playbook_name=all): aggregation run " in result.stderr
    data = envelope(reflexio(learned_service.url, "--json", "agent-playbooks", "aggregate", "--agent-version", AGENT))
    assert data["data"]["success"] and data["data"]["run_id"]  # a Dagster run


@pytest.mark.e2e
def test_search_with_the_service_stopped_fails_in_one_line():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    result = script("--server-url", url, "search", "which region", "--user-id", "ann")
    assert result.returncode == 4 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"Error: service not reachable at {url} — start it with `reflexio-lake serve`")
    as_json = script("--server-url", url, "--json", "search", "which region")
    error = json.loads(as_json.stderr)
    assert as_json.returncode == 4 and error["ok"] is False and error["error"]["type"] == "network"


def test_publish_then_search_prints_the_context_block(learned_service):
    url, user = learned_service.url, unique("pat")
    turns = correction_turns(
        "Write the changelog entry.", "Changelog: arreglado el login.", "No, always write the changelog in English."
    )
    payload = json.dumps({"user_id": user, "agent_version": AGENT, "interactions": turns})
    published = reflexio(url, "publish", "--data", payload, "--wait")
    assert published.exit_code == 0 and f"Published ({user})" in published.stderr
    assert "1 playbook(s) added" in published.stderr
    single = reflexio(url, "--json", "publish", "--user-id", user, "--user-message", "hi", "--agent-response", "hello")
    assert envelope(single)["data"]["request_id"]

    found = reflexio(url, "search", "changelog language", "--user-id", user, "--agent-version", AGENT)
    assert found.exit_code == 0 and "<reflexio_context>" in found.stdout and "English" in found.stdout
    assert "Found 0 profiles, 0 agent playbooks, 1 user playbooks" in found.stderr
    assert envelope(reflexio(url, "--json", "search", QUERY, "--user-id", "ann"))["data"]["user_playbooks"]


def test_profiles_and_user_playbooks(learned_service):
    url, user = learned_service.url, unique("quinn")
    for group in ("user-profiles", "profiles"):  # the original's name, and the short one
        listed = envelope(reflexio(url, "--json", group, "list", "--user-id", learned_service.facts_user))
        assert listed["data"] and listed["meta"]["limit"] == 20
    assert (
        reflexio(url, "user-profiles", "add", "--user-id", user, "--content", "Quinn works night shifts.").exit_code
        == 0
    )
    hits = envelope(reflexio(url, "--json", "user-profiles", "search", "night shifts", "--user-id", user))
    assert [p["content"] for p in hits["data"]] == ["Quinn works night shifts."]  # searchable at once
    assert envelope(reflexio(url, "--json", "user-profiles", "list", "--limit", "5"))["data"]

    added = reflexio(
        url,
        "user-playbooks",
        "add",
        "--user-id",
        user,
        "--content",
        "Send summaries as bullets.",
        "--trigger",
        "summarising a meeting",
        "--agent-version",
        AGENT,
    )
    assert added.exit_code == 0
    mine = envelope(reflexio(url, "--json", "user-playbooks", "list", "--user-id", user))["data"]
    assert [(p["content"], p["trigger"]) for p in mine] == [("Send summaries as bullets.", "summarising a meeting")]
    hits = envelope(reflexio(url, "--json", "user-playbooks", "search", "meeting summary", "--user-id", user))
    assert [p["content"] for p in hits["data"]] == ["Send summaries as bullets."]
    assert reflexio(url, "user-playbooks", "add", "--content", "x").exit_code == 2  # needs its user here
    # the original's OpenClaw skill still passes the older --instruction / --pitfall fields
    skill = reflexio(
        url,
        "user-playbooks",
        "add",
        "--user-id",
        user,
        "--trigger",
        "quoting prices",
        "--instruction",
        "Quote prices in euros.",
        "--pitfall",
        "dollar amounts",
    )
    assert skill.exit_code == 0, skill.output
    mine = envelope(reflexio(url, "--json", "user-playbooks", "list", "--user-id", user))["data"]
    assert "Quote prices in euros. Avoid: dollar amounts" in [p["content"] for p in mine]


def test_agent_playbooks_add_list_approve_reject_update_delete(learned_service):
    url, version = learned_service.url, unique("cli-v")
    assert (
        reflexio(
            url, "agent-playbooks", "add", "--content", "Link the incident ticket.", "--agent-version", version
        ).exit_code
        == 0
    )
    (playbook,) = envelope(reflexio(url, "--json", "agent-playbooks", "list", "--agent-version", version))["data"]
    pid, served = str(playbook["agent_playbook_id"]), ["search", "incident ticket", "--agent-version", version]
    assert playbook["playbook_status"] == "pending"
    assert reflexio(url, "agent-playbooks", "reject", pid).exit_code == 0
    assert envelope(reflexio(url, "--json", "agent-playbooks", *served))["data"] == []
    assert reflexio(url, "agent-playbooks", "update-status", "--playbook-id", pid, "--status", "pending").exit_code == 0
    assert reflexio(url, "agent-playbooks", "approve", "--playbook-id", pid).exit_code == 0
    (approved,) = envelope(reflexio(url, "--json", "agent-playbooks", *served))["data"]
    assert approved["playbook_status"] == "approved"
    assert (
        reflexio(url, "agent-playbooks", "update", "--playbook-id", pid, "--content", "Link the ticket.").exit_code == 0
    )
    listed = envelope(
        reflexio(url, "--json", "agent-playbooks", "list", "--agent-version", version, "--playbook-status", "approved")
    )["data"]
    assert [p["content"] for p in listed] == ["Link the ticket."]
    assert reflexio(url, "agent-playbooks", "delete", "--playbook-id", pid).exit_code == 0
    assert envelope(reflexio(url, "--json", "agent-playbooks", "list", "--agent-version", version))["data"] == []
    assert reflexio(url, "agent-playbooks", "approve", pid).exit_code == 1  # gone: not found


def test_status_interactions_and_the_raw_api(learned_service):
    url = learned_service.url
    check = reflexio(url, "status", "check")
    assert check.exit_code == 0 and check.stdout.startswith(f"Connected to {url} (healthy)")
    assert envelope(reflexio(url, "--json", "status", "whoami"))["data"]["org_id"] == "default"
    turns = envelope(reflexio(url, "--json", "interactions", "list", "--user-id", "ann"))["data"]
    assert sorted(t["content"] for t in turns) == sorted(REGION[0][1:])
    raw = envelope(
        reflexio(
            url, "--json", "api", "POST", "/api/get_agent_playbooks", "--data", json.dumps({"agent_version": AGENT})
        )
    )["data"]
    assert [p["agent_playbook_id"] for p in raw["agent_playbooks"]] == [learned_service.agent_playbook_id]


@pytest.mark.parametrize(
    ("args", "instead"),
    [
        (["services", "start", "--only", "backend"], "reflexio-lake serve"),
        (["auth", "login", "--api-key", "k"], "python -m serving keys create"),
        (["config", "show"], "reflexio api GET /api/get_config"),
        (["setup", "claude-code"], "docs/integrations.md"),
        (["doctor", "check"], "reflexio-lake doctor"),
        (
            ["user-profiles", "regenerate", "--user-id", "u", "--wait"],
            "reflexio api POST /api/rerun_profile_generation",
        ),
        (["agent-playbooks", "delete-all", "--yes"], "reflexio api DELETE /api/delete_all_agent_playbooks"),
    ],
)
def test_commands_without_a_counterpart_exit_2_and_say_what_to_use(args, instead):
    result = reflexio("http://127.0.0.1:9", *args)  # never contacted
    assert result.exit_code == 2 and "is not available with this service" in result.stderr
    assert instead in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.e2e
def test_console_script_and_module_entry_points():
    for argv in ([str(SCRIPT), "--help"], [sys.executable, "-m", "reflexio_pipelines.cli.original", "--help"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="120"))
        assert result.returncode == 0
        assert all(
            name in result.stdout for name in ("publish", "search", "user-playbooks", "agent-playbooks", "status")
        )
