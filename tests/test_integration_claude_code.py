"""The Claude Code integration: `reflexio-lake setup claude-code` on a temporary project (install, idempotent,
other settings kept, `--uninstall`), and the hook commands it writes, run exactly as written (through the shell, as
Claude Code runs them) with the JSON Claude Code's hooks receive on stdin and a Claude Code transcript (JSONL)
against the real service on 127.0.0.1: Stop publishes the session, the correction is learned, UserPromptSubmit puts
the rule into the next prompt's `additionalContext`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reflexio_pipelines.cli import app
from reflexio_pipelines.integrations.claude_code.transcript import interactions, read_entries
from reflexio_pipelines.runs import launch
from serving.app import create_app
from tests.support.landing import landed_turns
from tests.support.lessons import served_rule_lines
from tests.support.processes import free_port
from tests.support.servers import serve_app

pytestmark = pytest.mark.e2e

SESSION = "8c35adc1-5d4e-4f55-9c1e-2b7f0c6a9d10"
REQUEST = "Deploy the payments service to production."
WRONG = "Deploying the payments service to us-east-1."
CORRECTION = "No — we never deploy to us-east-1, always use us-west-2."
ACK = "Understood, us-west-2 from now on."
NEXT = "Deploy the billing service to production."
TOOL_ERROR = 'Error: kubectl: context "prod-us-east-1" is not allowed for this account (exit code 1)'

# Settings a project already has: none of it may change.
EXISTING = {
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]},
    "env": {"FOO": "bar"},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo project-context"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5}]}],
    },
}


def setup(project: Path, *args: str):
    return CliRunner().invoke(
        app, ["--json", "setup", "claude-code", "--project-dir", str(project), *args], catch_exceptions=False
    )


def test_setup_installs_idempotently_and_uninstalls_exactly_its_hooks(tmp_path):
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    settings = project / ".claude" / "settings.json"
    settings.write_text(json.dumps(EXISTING, indent=2))

    done = setup(project, "--user-id", "dev-1", "--agent-version", "my-repo")
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["action"] == "installed" and result["settings"] == str(settings.absolute())
    written = json.loads(settings.read_text())
    assert {k: v for k, v in written.items() if k != "hooks"} == {k: v for k, v in EXISTING.items() if k != "hooks"}
    assert written["hooks"]["PreToolUse"] == EXISTING["hooks"]["PreToolUse"]
    prompt_hooks = written["hooks"]["UserPromptSubmit"]
    assert prompt_hooks[0] == EXISTING["hooks"]["UserPromptSubmit"][0]  # the project's own hook stays first
    (ours,) = prompt_hooks[1]["hooks"]
    assert ours["type"] == "command" and ours["timeout"] > 0
    assert ours["command"].startswith(f"{sys.executable} -m reflexio_pipelines.integrations.claude_code.hooks context")
    assert "--user-id dev-1" in ours["command"] and "--agent-version my-repo" in ours["command"]
    for event in ("Stop", "SessionEnd"):
        (group,) = written["hooks"][event]
        assert " publish " in group["hooks"][0]["command"] + " "

    again = setup(project, "--user-id", "dev-1", "--agent-version", "my-repo")  # idempotent: byte for byte
    assert json.loads(again.stdout)["action"] == "unchanged"
    assert json.loads(settings.read_text()) == written
    changed = setup(project, "--user-id", "dev-2")  # new options replace the old hooks, never add a second copy
    rewritten = json.loads(settings.read_text())
    assert json.loads(changed.stdout)["action"] == "installed"
    assert [len(rewritten["hooks"][e]) for e in ("UserPromptSubmit", "Stop", "SessionEnd")] == [2, 1, 1]
    assert "--user-id dev-2" in rewritten["hooks"]["Stop"][0]["hooks"][0]["command"]

    removed = setup(project, "--uninstall")
    assert json.loads(removed.stdout) == {"settings": str(settings.absolute()), "action": "uninstalled", "hooks": {}}
    assert json.loads(settings.read_text()) == EXISTING
    assert json.loads(setup(project, "--uninstall").stdout)["action"] == "unchanged"

    # a project without settings: created, and removed again by --uninstall
    bare = tmp_path / "bare"
    bare.mkdir()
    assert json.loads(setup(bare).stdout)["action"] == "installed"
    assert set(json.loads((bare / ".claude" / "settings.json").read_text())["hooks"]) == {
        "UserPromptSubmit",
        "Stop",
        "SessionEnd",
    }
    setup(bare, "--uninstall")
    assert list(bare.iterdir()) == []

    # a settings file that is not JSON is left alone
    (bare / ".claude").mkdir()
    (bare / ".claude" / "settings.json").write_text("{ not json")
    refused = setup(bare)
    assert refused.exit_code == 2 and (bare / ".claude" / "settings.json").read_text() == "{ not json"


# --- the hook commands ----------------------------------------------------------------------------------------------


class Transcript:
    """A Claude Code session transcript (JSONL), written the way Claude Code writes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parent: str | None = None

    def _entry(self, kind: str, message: dict, **extra) -> None:
        entry = {
            "parentUuid": self.parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": str(self.path.parent),
            "sessionId": SESSION,
            "version": "2.1.0",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": str(uuid.uuid4()),
            "timestamp": "2026-12-01T10:00:00.000Z",
            **extra,
        }
        self.parent = entry["uuid"]
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def prompt(self, text: str) -> None:
        self._entry("user", {"role": "user", "content": text})

    def meta(self, text: str) -> None:  # e.g. the caveat Claude Code writes before a local command's output
        self._entry("user", {"role": "user", "content": text}, isMeta=True)

    def answer(self, *blocks: dict) -> None:  # streamed: one entry per content block
        for block in blocks:
            self._entry(
                "assistant",
                {
                    "id": "msg_01",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-x",
                    "content": [block],
                    "stop_reason": None,
                },
            )

    def tool_result(self, tool_use_id: str, text: str, is_error: bool) -> None:
        self._entry(
            "user",
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": text, "is_error": is_error}],
            },
            toolUseResult=text,
        )


def payload(event: str, transcript: Path, **extra) -> dict:
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(transcript.parent),
        "permission_mode": "default",
        "hook_event_name": event,
        **extra,
    }


def run_hook(command: str, body: dict, env: dict) -> subprocess.CompletedProcess:
    """One hook, as Claude Code runs it: the command through the shell, the event's JSON on stdin."""
    return subprocess.run(
        command, shell=True, input=json.dumps(body), capture_output=True, text=True, env=env, timeout=300
    )


def landed(settings, user_id: str) -> list[tuple]:
    return landed_turns(settings.lake, user_id, "role, content, tools_used, agent_version, session_id, source")


def test_hooks_publish_the_session_and_inject_what_was_learned(tmp_path, settings, instance):
    project = tmp_path / "project"
    project.mkdir()
    assert setup(project, "--agent-version", "my-repo").exit_code == 0
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    command = {event: hooks[event][0]["hooks"][0]["command"] for event in ("UserPromptSubmit", "Stop", "SessionEnd")}
    transcript = Transcript(tmp_path / f"{SESSION}.jsonl")
    service = create_app(settings)
    with serve_app(service) as url:
        env = dict(
            os.environ,
            REFLEXIO_API_URL=url,
            REFLEXIO_USER_ID="dev-cc",
            REFLEXIO_CLAUDE_CODE_STATE_DIR=str(tmp_path / "state"),
        )

        # nothing learned yet: UserPromptSubmit prints nothing (the prompt goes on unchanged)
        first = run_hook(command["UserPromptSubmit"], payload("UserPromptSubmit", transcript.path, prompt=REQUEST), env)
        assert (first.returncode, first.stdout) == (0, ""), first.stderr

        # turn 1: a tool call that fails, then the wrong answer; Stop publishes it
        transcript.prompt(REQUEST)
        command_line = "kubectl --context prod-us-east-1 apply -f payments.yaml"
        transcript.answer(
            {"type": "thinking", "thinking": "Deploy with kubectl.", "signature": "x"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": command_line}},
        )
        transcript.tool_result("toolu_1", TOOL_ERROR, is_error=True)
        transcript.answer({"type": "text", "text": WRONG})
        stop = run_hook(command["Stop"], payload("Stop", transcript.path, stop_hook_active=False), env)
        assert (stop.returncode, stop.stdout, stop.stderr) == (0, "", "")

        # turn 2: the correction (a local command's caveat in between is not conversation)
        transcript.meta("Caveat: The messages below were generated by the user while running local commands.")
        transcript.prompt(CORRECTION)
        transcript.answer({"type": "text", "text": ACK})
        assert run_hook(command["Stop"], payload("Stop", transcript.path, stop_hook_active=False), env).returncode == 0
        # a repeated Stop and the session's end publish nothing twice
        assert run_hook(command["Stop"], payload("Stop", transcript.path, stop_hook_active=True), env).returncode == 0
        end = run_hook(command["SessionEnd"], payload("SessionEnd", transcript.path, reason="prompt_input_exit"), env)
        assert (end.returncode, end.stderr) == (0, "")

        rows = landed(settings, "dev-cc")
        assert [(r[0], r[1]) for r in rows] == [
            ("user", REQUEST),
            ("assistant", WRONG),
            ("user", CORRECTION),
            ("assistant", ACK),
        ]
        assert {(r[3], r[4], r[5]) for r in rows} == {("my-repo", SESSION, "claude-code")}
        (tool,) = json.loads(rows[1][2])
        assert tool == {"tool_name": "Bash", "tool_data": {"input": {"command": command_line}, "error": TOOL_ERROR}}

        launch(settings=settings, instance=instance)
        service.state.svc.index.refresh()

        # the next prompt: the learned rule comes back as additionalContext
        injected = run_hook(command["UserPromptSubmit"], payload("UserPromptSubmit", transcript.path, prompt=NEXT), env)
        assert injected.returncode == 0, injected.stderr
        output = json.loads(injected.stdout)["hookSpecificOutput"]
        assert output["hookEventName"] == "UserPromptSubmit"
        context = output["additionalContext"]
        assert context.startswith("<reflexio_context>") and served_rule_lines(context), context

    # the service is gone: the hooks still exit 0 (Claude Code goes on), the reason on stderr
    down = dict(env, REFLEXIO_API_URL=f"http://127.0.0.1:{free_port()}")
    transcript.prompt(NEXT)
    transcript.answer({"type": "text", "text": "Deploying the billing service to us-west-2."})
    for event, body in (
        ("UserPromptSubmit", payload("UserPromptSubmit", transcript.path, prompt=NEXT)),
        ("Stop", payload("Stop", transcript.path, stop_hook_active=False)),
    ):
        failed = run_hook(command[event], body, down)
        assert (failed.returncode, failed.stdout) == (0, "") and "reflexio:" in failed.stderr, failed.stderr
    garbage = subprocess.run(
        command["Stop"], shell=True, input="not json", capture_output=True, text=True, env=down, timeout=300
    )
    assert garbage.returncode == 0 and "reflexio: publish skipped" in garbage.stderr


def test_transcript_reading_skips_what_is_not_conversation(tmp_path):
    transcript = Transcript(tmp_path / "t.jsonl")
    transcript.prompt("<command-name>/model</command-name>\n<command-message>model</command-message>")
    transcript.prompt("<local-command-stdout>Set model to opus</local-command-stdout>")
    transcript.prompt(f"<reflexio_context>\nold block\n</reflexio_context>\n{REQUEST}")
    write = {"file_path": "a.txt", "content": "x" * 10_000}
    transcript.answer(
        {"type": "text", "text": "Checking."}, {"type": "tool_use", "id": "t1", "name": "Write", "input": write}
    )
    transcript.tool_result("t1", "File created successfully at: a.txt", is_error=False)
    transcript.answer({"type": "text", "text": "Done."})
    with transcript.path.open("a") as f:
        f.write(
            json.dumps(
                {
                    "type": "assistant",
                    "isSidechain": True,
                    "uuid": "sub",
                    "message": {"role": "assistant", "content": [{"type": "text", "text": "subagent"}]},
                }
            )
        )
        f.write('\n{"type": "user", "message"')  # a line still being written
    turns = interactions(read_entries(transcript.path))
    assert [(t["role"], t["content"]) for t in turns] == [("user", REQUEST), ("assistant", "Checking.\n\nDone.")]
    (tool,) = turns[1]["tools_used"]
    assert tool["tool_name"] == "Write" and tool["tool_data"]["output"] == "File created successfully at: a.txt"
    assert len(tool["tool_data"]["input"]["content"]) < 2100  # long tool inputs are shortened
