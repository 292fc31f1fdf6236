"""`reflexio-lake`: every command against the real service on 127.0.0.1 (through the SDK), `--json` output that
parses, exit codes and messages that say what to do next; `serve`, `ui` and `demo` as real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from reflexio_pipelines.cli import app
from tests.support.learned import AGENT, QUERY, correction_turns, landed_rows
from tests.support.lessons import served_rule_lines
from tests.support.processes import child_env, free_port, stop

ROOT = Path(__file__).resolve().parents[1]


def cli(url: str, *args: str, input: str | None = None):
    """Run the CLI in-process against `url`."""
    return CliRunner().invoke(app, ["--server-url", url, *args], input=input, catch_exceptions=False)


def as_json(result) -> dict | list:
    return json.loads(result.stdout)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# -- publish ---------------------------------------------------------------------------------------------------------


def test_publish_inline_file_jsonl_and_stdin(learned_service, tmp_path: Path):
    url, lake = learned_service.url, learned_service.lake
    inline, in_payload, first, second, piped = (unique(p) for p in ("inline", "payload", "first", "second", "piped"))

    result = cli(url, "publish", "--user-id", inline, '[{"role": "user", "content": "I prefer tea."}]')
    assert result.exit_code == 0 and f"1 turn(s) for {inline} stored" in result.stdout

    payload = tmp_path / "payload.json"  # the original CLI's payload: its user_id wins over --user-id
    payload.write_text(
        json.dumps(
            {
                "user_id": in_payload,
                "session_id": "s1",
                "interactions": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            }
        )
    )
    result = cli(url, "publish", "--json", "--user-id", "ignored", "--file", str(payload))
    (published,) = as_json(result)["published"]
    assert published["success"] and published["request_id"]
    assert [r["session_id"] for r in landed_rows(lake, in_payload)] == ["s1", "s1"]

    jsonl = tmp_path / "many.jsonl"  # one publish per line
    jsonl.write_text(
        "\n".join(
            json.dumps({"user_id": u, "interactions": [{"role": "user", "content": f"I am {u}"}]})
            for u in (first, second)
        )
        + "\n"
    )
    result = cli(url, "--json", "publish", "--file", str(jsonl), "--agent-version", AGENT)
    assert len(as_json(result)["published"]) == 2
    assert [r["agent_version"] for r in landed_rows(lake, first) + landed_rows(lake, second)] == [AGENT, AGENT]

    turns = "\n".join(json.dumps(t) for t in correction_turns("a", "b", "c"))  # JSONL of loose turns: one publish
    result = cli(url, "publish", "--stdin", "--user-id", piped, "--json", input=turns)
    assert len(as_json(result)["published"]) == 1 and len(landed_rows(lake, piped)) == 3


def test_publish_wait_returns_when_searchable(learned_service):
    user = unique("gus")
    turns = correction_turns(
        "Write the commit message for this fix.",
        "Commit: arreglado el error de login.",
        "No, always write commit messages in English.",
    )
    result = cli(
        learned_service.url, "publish", "--wait", "--user-id", user, "--agent-version", AGENT, json.dumps(turns)
    )
    assert result.exit_code == 0 and "learned 0 profile(s), 1 playbook(s), searchable now" in result.stdout
    found = as_json(cli(learned_service.url, "search", "commit message language", "--user-id", user, "--json"))
    assert any("English" in p["content"] for p in found["user_playbooks"])


@pytest.mark.parametrize(
    ("args", "stdin", "expected"),
    [
        ([], None, "give the turns exactly one way"),
        (['[{"role": "user", "content": "x"}]', "--stdin"], "[]", "got DATA, --stdin"),
        (["{not json"], None, "cannot read the turns: not valid JSON"),
        (["[1, 2]"], None, "item 1: expected a turn object"),
        (['[{"role": "user", "content": "x"}]'], None, "no user id"),
        (["--user-id", "u", '[{"role": "user", "content": ""}]'], None, "interaction_data_list.0: Value error"),
    ],
)
def test_publish_usage_errors_exit_2_with_a_next_step(learned_service, args, stdin, expected):
    result = cli(learned_service.url, "publish", *args, input=stdin)
    assert result.exit_code == 2 and expected in result.stderr and "→" in result.stderr
    assert result.stdout == ""
    failed = as_json(cli(learned_service.url, "--json", "publish", *args, input=stdin))
    assert failed["success"] is False and expected in failed["error"] and failed["exit_code"] == 2


def test_unreachable_service_says_how_to_start_it():
    url = f"http://127.0.0.1:{free_port()}"
    result = cli(url, "search", "anything")
    assert result.exit_code == 1 and result.stdout == ""
    assert f"service not reachable at {url}" in result.stderr and "reflexio-lake serve" in result.stderr
    assert as_json(cli(url, "search", "anything", "--json"))["hint"].startswith("start it with `reflexio-lake serve`")


# -- search, context ---------------------------------------------------------------------------------------------


def test_search_human_and_json(learned_service):
    human = cli(learned_service.url, "search", QUERY, "--user-id", "ann", "--agent-version", AGENT)
    assert human.exit_code == 0
    assert "User playbooks" in human.stdout and "Agent playbooks" in human.stdout and "us-west-2" in human.stdout
    data = as_json(cli(learned_service.url, "--json", "search", QUERY, "--agent-version", AGENT, "--mode", "fts"))
    assert data["agent_playbooks"][0]["agent_playbook_id"] == learned_service.agent_playbook_id
    assert cli(learned_service.url, "search", QUERY, "--top-k", "0").exit_code == 2  # typer's range check


def test_context_prints_the_block_verbatim(learned_service):
    result = cli(learned_service.url, "context", QUERY, "--user-id", "ann", "--agent-version", AGENT)
    assert result.exit_code == 0 and result.stdout.startswith("<reflexio_context>\n")
    assert served_rule_lines(result.stdout), result.stdout  # the learned region rule, as a behaviour line
    data = as_json(cli(learned_service.url, "context", QUERY, "--user-id", "ann", "--json"))
    assert data["context"] + "\n" == result.stdout
    nothing = cli(learned_service.url, "context", QUERY, "--user-id", "nobody", "--agent-version", "none")
    assert nothing.exit_code == 0 and nothing.stdout == "" and "nothing learned matches" in nothing.stderr


# -- playbooks, aggregation ------------------------------------------------------------------------------------------


def test_playbooks_list_approve_reject(learned_service):
    url, pid = learned_service.url, learned_service.agent_playbook_id
    listed = as_json(cli(url, "playbooks", "list", "--agent-version", AGENT, "--json"))
    assert [p["agent_playbook_id"] for p in listed] == [pid]
    rejected = cli(url, "playbooks", "reject", str(pid))
    assert rejected.exit_code == 0 and f"agent playbook {pid} is now rejected" in rejected.stdout
    rejected_list = as_json(cli(url, "--json", "playbooks", "list", "--status", "rejected"))
    assert [p["agent_playbook_id"] for p in rejected_list] == [pid]
    assert as_json(cli(url, "playbooks", "approve", str(pid), "--json"))["success"] is True
    human = cli(url, "playbooks", "list", "--status", "approved")
    assert str(pid) in human.stdout and "approved" in human.stdout
    missing = cli(url, "playbooks", "approve", "987654321")
    assert missing.exit_code == 1 and "not found" in missing.stderr and "playbooks list" in missing.stderr
    assert cli(url, "playbooks", "list", "--kind", "user", "--status", "approved").exit_code == 2


def test_aggregate(learned_service):
    data = as_json(cli(learned_service.url, "aggregate", "--agent-version", AGENT, "--json"))
    assert data["success"] and data["run_id"]
    human = cli(learned_service.url, "aggregate", "--agent-version", AGENT)
    assert human.exit_code == 0 and human.stdout.startswith("✓ aggregation run")


# -- commands on endpoints of the reads / privacy work ---------------------------------------------------------------


def test_profiles_list_and_user_playbooks(learned_service):
    url = learned_service.url
    profiles = as_json(cli(url, "profiles", "list", "--user-id", learned_service.facts_user, "--json"))
    assert profiles and {p["user_id"] for p in profiles} == {learned_service.facts_user}
    human = cli(url, "profiles", "list", "--user-id", learned_service.facts_user)
    assert human.exit_code == 0 and profiles[0]["profile_id"] in human.stdout
    playbooks = as_json(cli(url, "playbooks", "list", "--kind", "user", "--user-id", "ann", "--json"))
    assert [p["user_id"] for p in playbooks] == ["ann"]


def test_export_and_erase(learned_service, tmp_path: Path):
    url, user = learned_service.url, unique("erase")
    cli(url, "publish", "--user-id", user, '[{"role": "user", "content": "My favourite editor is vim."}]')
    exported = as_json(cli(url, "export", "--user-id", user))
    assert "vim" in json.dumps(exported)
    target = tmp_path / "export.zip"
    written = as_json(cli(url, "export", "--user-id", user, "--format", "parquet", "--out", str(target), "--json"))
    assert written["bytes"] == target.stat().st_size and zipfile.is_zipfile(target)
    kept = cli(url, "erase", "--user-id", user, input="n\n")
    assert kept.exit_code == 1 and "not erased" in kept.stderr and "--yes" in kept.stderr
    assert "vim" in json.dumps(as_json(cli(url, "export", "--user-id", user)))
    erased = cli(url, "erase", "--user-id", user, "--yes", "--json")
    assert erased.exit_code == 0 and as_json(erased)["success"]
    assert "vim" not in json.dumps(as_json(cli(url, "export", "--user-id", user)))
    listed = cli(url, "erasures", "--json")  # by salted hash: the user's id is never listed
    assert listed.exit_code == 0 and user not in listed.stdout
    assert as_json(listed)["erasures"] and {e["status"] for e in as_json(listed)["erasures"]} == {"completed"}
    assert "Erasures" in cli(url, "erasures").stdout


# -- doctor ----------------------------------------------------------------------------------------------------------


def test_doctor_passes_on_a_ready_machine(learned_service, monkeypatch):
    monkeypatch.setenv("REFLEXIO_LAKE", str(learned_service.lake.root))
    result = cli(learned_service.url, "doctor", "--json")
    report = as_json(result)
    assert result.exit_code == 0 and report["ok"], report
    assert [c["name"] for c in report["checks"]] == ["settings", "lake", "index", "embedding model", "service"]
    assert all(c["ok"] for c in report["checks"])
    human = cli(learned_service.url, "doctor")
    assert human.exit_code == 0 and human.stdout.count("✓") == 5 and "ready" in human.stdout


def test_doctor_fails_with_next_steps(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("REFLEXIO_LAKE", str(tmp_path / "fresh-lake"))
    url = f"http://127.0.0.1:{free_port()}"
    result = cli(url, "doctor")
    assert result.exit_code == 1
    assert "! index: no index published yet" in result.stdout  # optional: reported, not fatal
    assert "✗ service: service not reachable" in result.stdout and "reflexio-lake serve" in result.stdout
    monkeypatch.setenv("REFLEXIO_PARTITION", "weekly")
    report = as_json(cli(url, "doctor", "--json"))
    assert report["ok"] is False and report["checks"][0]["name"] == "settings" and not report["checks"][0]["ok"]
    assert "partition" in report["checks"][0]["detail"]


def test_doctor_checks_the_api_key(keyed_service, tmp_path: Path, monkeypatch):
    url, acme, _ = keyed_service
    monkeypatch.setenv("REFLEXIO_LAKE", str(tmp_path / "lake"))
    monkeypatch.delenv("REFLEXIO_API_KEY", raising=False)
    refused = cli(url, "doctor")
    assert refused.exit_code == 1 and "✗ service: not authorised" in refused.stdout and "--api-key" in refused.stdout
    monkeypatch.setenv("REFLEXIO_API_KEY", acme)  # the global option's environment variable
    accepted = cli(url, "doctor")
    assert accepted.exit_code == 0 and "✓ service: " in accepted.stdout and "as organisation acme" in accepted.stdout


# -- serve, ui, demo: real child processes ----------------------------------------------------------------------------


def _spawn(args: list[str], env: dict, log: Path, cwd: Path = ROOT) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "reflexio_pipelines.cli", *args],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_answering(url: str, proc: subprocess.Popen, log: Path, timeout_s: float) -> httpx.Response:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            reply = httpx.get(url, timeout=2)
            if reply.status_code == 200:
                return reply
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{url} did not answer: {log.read_text()[-3000:]}")


@pytest.mark.e2e
def test_serve_runs_the_service_on_loopback(tmp_path: Path):
    port, log = free_port(), tmp_path / "serve.log"
    env = child_env(tmp_path / "lake", tmp_path / "home")
    proc = _spawn(
        [
            "--json",
            "serve",
            "--port",
            str(port),
            "--lake",
            str(tmp_path / "lake"),
            "--log-level",
            "warning",
            "--no-daemon",
        ],
        env,
        log,
    )
    try:
        assert _wait_answering(f"http://127.0.0.1:{port}/health", proc, log, 60).json()["status"] == "healthy"
        announced = json.loads(log.read_text().splitlines()[0])
        assert announced["service"] == f"http://127.0.0.1:{port}" and announced["argv"][-1] == "--no-daemon"
        assert "dagster daemon not started" in log.read_text()  # the daemon starting: test_service_runs_the_loop.py
        found = cli(f"http://127.0.0.1:{port}", "--json", "search", "anything")
        assert as_json(found)["success"] is True
    finally:
        stop(proc)


@pytest.mark.e2e
def test_ui_runs_dagster_dev_with_a_local_dagster_home(tmp_path: Path):
    port, log = free_port(), tmp_path / "ui.log"
    env = child_env(tmp_path / "lake", tmp_path / "unused")
    del env["DAGSTER_HOME"]  # the default must be ./.dagster_home of the working directory
    proc = _spawn(["ui", "--port", str(port)], env, log, cwd=tmp_path)
    try:
        _wait_answering(f"http://127.0.0.1:{port}/server_info", proc, log, 240)
        assert (tmp_path / ".dagster_home" / "dagster.yaml").is_file()
    finally:
        stop(proc)


@pytest.mark.e2e
def test_demo_passes_its_arguments_through():
    result = subprocess.run(
        [sys.executable, "-m", "reflexio_pipelines.cli", "demo", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "python -m reflexio_pipelines demo" in result.stdout and "--once" in result.stdout


@pytest.mark.e2e
def test_demo_once_end_to_end(tmp_path: Path):
    env = child_env(tmp_path / "lake", tmp_path / "home")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "reflexio_pipelines.cli",
            "demo",
            "--once",
            "--api-port",
            str(free_port()),
            "--ui-port",
            str(free_port()),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "us-west-2" in result.stdout


@pytest.mark.e2e
def test_console_script_and_module_entry_points():
    script = Path(sys.executable).with_name("reflexio-lake")
    for argv in ([str(script), "--help"], [sys.executable, "-m", "reflexio_pipelines.cli", "--help"]):
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="120"))
        assert result.returncode == 0 and "publish" in result.stdout and "doctor" in result.stdout
