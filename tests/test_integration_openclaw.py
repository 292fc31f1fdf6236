"""The OpenClaw plugin (reflexio_pipelines/integrations/openclaw) against the real service: its `node --test` suite
runs with the URL of a live service on 127.0.0.1, and the turn the plugin published must be in the lake."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from reflexio_pipelines.lake.duck import connect
from serving.app import create_app
from tests.support.servers import serve_app

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "reflexio_pipelines" / "integrations" / "openclaw"
NODE = shutil.which("node")

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(NODE is None, reason="node is not installed (Node >= 20 needed)")]


def test_openclaw_plugin_recalls_and_publishes(settings, instance):
    user = f"openclaw-{uuid.uuid4().hex[:8]}"
    with serve_app(create_app(settings)) as base_url:
        env = dict(os.environ, REFLEXIO_TEST_URL=base_url, REFLEXIO_TEST_USER=user)
        done = subprocess.run([NODE, "--test", "test/"], cwd=PLUGIN_DIR, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-4000:]
    assert "# fail 0" in report and "# skipped 0" in report, report[-2000:]  # the live test really ran

    rows = connect(settings.lake).sql(
        "select session_id, agent_version, source, role, content, tools_used from landing_turns "
        "where user_id = ? and session_id <> 'seed' order by turn_index", params=[user]
    ).fetchall()
    assert [(r[3], r[4]) for r in rows] == [
        ("user", "Deploy the payments service to production, please."),  # the injected block was stripped
        ("assistant", "Deploying the payments service to us-west-2."),
    ]
    assert {(r[0], r[1], r[2]) for r in rows} == {("sess-run-1", "ops-agent", "openclaw")}
    tools = json.loads(rows[1][5])
    assert tools[0]["tool_name"] == "create_issue"
    assert tools[0]["tool_data"]["error"] == "403 Forbidden: token lacks the issues:write scope for repo infra"
