"""The OpenClaw plugin (reflexio_pipelines/integrations/openclaw) against the real service.

- In the real OpenClaw runtime: the pinned `openclaw` release from the npm registry (tests/support/openclaw_runtime.py)
  installs the plugin as a user does (`openclaw plugins install --link`), and `openclaw agent --local` runs agent
  turns whose model is an OpenAI-compatible stub on 127.0.0.1. OpenClaw's own loader loads the plugin and its embedded
  runner fires the hooks: a correction made in one session is learned and shows up in the prompt OpenClaw sends the
  model in the next session; every turn, with its tool error verbatim, lands in the lake.
- The plugin's `node --test` suite runs with the URL of a live service, and the turn it published must be in the lake.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from reflexio_pipelines.lake.duck import connect
from reflexio_pipelines.runs import launch
from reflexio_pipelines.sdk import ReflexioClient
from serving.app import create_app
from tests.support.lessons import served_rule_lines, states_lesson
from tests.support.openclaw_runtime import OpenClawRuntime, openclaw_runtime  # noqa: F401  (fixture)
from tests.support.provider_stubs import Reply, make_provider_stub
from tests.support.servers import serve_app

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "reflexio_pipelines" / "integrations" / "openclaw"
NODE = shutil.which("node")

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(NODE is None, reason="node is not installed (Node >= 20 needed)")
def test_openclaw_plugin_recalls_and_publishes(settings, instance):
    user = f"openclaw-{uuid.uuid4().hex[:8]}"
    with serve_app(create_app(settings)) as base_url:
        env = dict(os.environ, REFLEXIO_TEST_URL=base_url, REFLEXIO_TEST_USER=user)
        done = subprocess.run(
            [NODE, "--test", "test/"], cwd=PLUGIN_DIR, env=env, capture_output=True, text=True, timeout=600
        )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert "# fail 0" in report and "# skipped 0" in report, report[-2000:]  # the live test really ran

    rows = (
        connect(settings.lake)
        .sql(
            "select session_id, agent_version, source, role, content, tools_used from landing_turns "
            "where user_id = ? and session_id <> 'seed' order by turn_index",
            params=[user],
        )
        .fetchall()
    )
    assert [(r[3], r[4]) for r in rows] == [
        ("user", "Deploy the payments service to production, please."),  # the injected block was stripped
        ("assistant", "Deploying the payments service to us-west-2."),
    ]
    assert {(r[0], r[1], r[2]) for r in rows} == {("sess-run-1", "ops-agent", "openclaw")}
    tools = json.loads(rows[1][5])
    assert tools[0]["tool_name"] == "create_issue"
    assert tools[0]["tool_data"]["error"] == "403 Forbidden: token lacks the issues:write scope for repo infra"


# --- the plugin inside the real OpenClaw runtime ----------------------------------------------------------------

MODEL_KEY = "stub-model-key"
REQUEST = "Deploy the payments service to production, please."
WRONG = "Deploying the payments service to us-east-1."
CORRECTION = "No — we never deploy to us-east-1, always use us-west-2."
ACK = "Understood — us-west-2 from now on."
NEXT = "Deploy the billing service to production."
NEXT_REPLY = "Deploying the billing service to us-west-2."


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _model(body: dict) -> Reply:
    """The stub model of the OpenClaw agent: answers the user's latest request; for NEXT it first calls a tool
    (which OpenClaw does not have, so the tool result is an error), then answers once the result came back."""
    messages = body.get("messages", [])
    users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
    latest = next((text for text in reversed(users) if any(q in text for q in (REQUEST, CORRECTION, NEXT))), "")
    if NEXT in latest:  # NEXT opens a new session: a tool result in it is the one of this turn
        if any(m.get("role") == "tool" for m in messages):
            return Reply(text=NEXT_REPLY)
        return Reply(tool_json='{"title": "billing deploy", "region": "us-west-2"}')
    return Reply(text=ACK if CORRECTION in latest else WRONG)


def _chat_requests(model) -> list[dict]:
    return [json.loads(seen.body) for seen in model.state.stub.seen if seen.kind == "chat"]


def _openclaw_config(home: Path, model_url: str) -> None:
    """OpenClaw's config before the plugin is installed: the stub model as the default model, and only the Reflexio
    plugin allowed to load (a faster startup)."""
    config = {
        "models": {
            "mode": "merge",
            "providers": {
                "stub": {
                    "baseUrl": f"{model_url}/v1",
                    "apiKey": MODEL_KEY,
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "stub-model",
                            "name": "Stub model",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "agents": {"defaults": {"model": {"primary": "stub/stub-model"}}},
        "skills": {"allowBundled": []},
        "plugins": {"allow": ["reflexio"]},
    }
    (home / ".openclaw").mkdir(parents=True)
    (home / ".openclaw" / "openclaw.json").write_text(json.dumps(config, indent=2))


def _turn(runtime: OpenClawRuntime, home: Path, session: str, message: str) -> str:
    """One agent turn through OpenClaw's embedded runner (`openclaw agent --local`); the reply text."""
    done = runtime.run(
        home,
        "agent",
        "--local",
        "--session-id",
        session,
        "--message",
        message,
        "--json",
        "--timeout",
        "600",
        timeout=900,
    )
    result = json.loads(done.stdout)
    return "\n".join(p.get("text") or "" for p in result["payloads"])


def _published(settings) -> list[tuple]:
    return (
        connect(settings.lake)
        .sql(
            "select session_id, agent_version, source, role, content, tools_used from landing_turns "
            "where user_id = 'openclaw:main' order by ingested_at_us, turn_index"
        )
        .fetchall()
    )


@pytest.mark.timeout(3600)
def test_openclaw_runtime_learns_a_correction_and_injects_it_in_the_next_session(
    openclaw_runtime,  # noqa: F811  (the fixture imported above)
    settings,
    instance,
    tmp_path,
):
    home = tmp_path / "openclaw-home"
    model = make_provider_stub("openai", MODEL_KEY, responder=_model)
    service = create_app(settings)
    with serve_app(model) as model_url, serve_app(service) as reflexio_url:
        _openclaw_config(home, model_url)
        # the install, as docs/integrations.md tells OpenClaw users
        installed = openclaw_runtime.run(
            home, "plugins", "install", "--link", PLUGIN_DIR, "--force", "--accept-capabilities", timeout=900
        )
        assert "Linked plugin path" in installed.stdout + installed.stderr, installed.stdout + installed.stderr
        openclaw_runtime.run(
            home,
            "config",
            "set",
            "plugins.entries.reflexio.hooks.allowConversationAccess",
            "true",
            "--strict-json",
            timeout=900,
        )
        openclaw_runtime.run(
            home,
            "config",
            "set",
            "plugins.entries.reflexio.config",
            json.dumps({"url": reflexio_url}),
            "--strict-json",
            "--merge",
            timeout=900,
        )
        config = json.loads((home / ".openclaw" / "openclaw.json").read_text())
        assert str(PLUGIN_DIR) in config["plugins"]["load"]["paths"]
        assert config["plugins"]["entries"]["reflexio"] == {
            "enabled": True,
            "hooks": {"allowConversationAccess": True},
            "config": {"url": reflexio_url},
        }

        # session 1: a request, a wrong answer, the user's correction
        assert _turn(openclaw_runtime, home, "deploy-1", REQUEST) == WRONG
        first = _chat_requests(model)
        assert first and not any("<reflexio_context>" in json.dumps(b) for b in first)  # nothing learned yet
        assert _turn(openclaw_runtime, home, "deploy-1", CORRECTION) == ACK
        assert [(r[0], r[1], r[2], r[3], r[4]) for r in _published(settings)] == [
            ("deploy-1", "main", "openclaw", "user", REQUEST),
            ("deploy-1", "main", "openclaw", "assistant", WRONG),
            ("deploy-1", "main", "openclaw", "user", CORRECTION),
            ("deploy-1", "main", "openclaw", "assistant", ACK),
        ]  # the local operator (no sender on a CLI run) is one user across sessions; agent version = agent id

        # the pipeline learns from what the plugin published
        launch(settings=settings, instance=instance)
        service.state.svc.index.refresh()
        with ReflexioClient(reflexio_url) as client:
            learned = client.search(NEXT, user_id="openclaw:main")
        assert any(states_lesson(p.content) for p in learned.user_playbooks), learned

        # session 2: OpenClaw's prompt to the model carries the learned rule, before the user's request
        seen = len(_chat_requests(model))
        reply = _turn(openclaw_runtime, home, "deploy-2", NEXT)
        calls = _chat_requests(model)[seen:]
        assert reply == NEXT_REPLY, [
            [(m["role"], _text(m.get("content"))[-300:]) for m in c["messages"][1:]] for c in calls
        ]
        assert len(calls) == 2  # the tool call, then the answer after the tool result
        prompt = next(
            _text(m["content"]) for m in calls[0]["messages"] if m["role"] == "user" and NEXT in _text(m["content"])
        )
        block = prompt[prompt.index("<reflexio_context>") : prompt.index("</reflexio_context>")]
        assert served_rule_lines(block) and prompt.index("</reflexio_context>") < prompt.index(NEXT), prompt
        tool_error = next(_text(m["content"]) for m in calls[1]["messages"] if m["role"] == "tool")

    rows = _published(settings)[4:]
    assert [(r[0], r[3], r[4]) for r in rows] == [("deploy-2", "user", NEXT), ("deploy-2", "assistant", NEXT_REPLY)]
    (tool,) = json.loads(rows[1][5])
    assert tool["tool_name"] == "record_memory"
    assert tool["tool_data"]["input"] == {"title": "billing deploy", "region": "us-west-2"}
    assert tool["tool_data"]["error"] == tool_error  # verbatim, as OpenClaw reported it to the model
