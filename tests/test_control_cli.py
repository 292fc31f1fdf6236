"""The operators' commands against a live service on 127.0.0.1: aggregate now, then reject from the terminal."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.support.processes import child_env, running_service
from tests.test_aggregation import REGION

pytestmark = pytest.mark.e2e


def _cli(api: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reflexio_pipelines", *args, "--api", api], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_aggregate_and_reject_from_the_command_line(tmp_path):
    lake, home = tmp_path / "lake", tmp_path / "dagster_home"
    with running_service(lake, home, tmp_path / "serving.log") as api:
        for user, request, answer, correction in REGION:
            body = {"user_id": user, "agent_version": "ops-1", "interaction_data_list": [
                {"role": "user", "content": request}, {"role": "assistant", "content": answer},
                {"role": "user", "content": correction}]}  # fmt: skip
            reply = httpx.post(f"{api}/api/publish_interaction?wait_for_response=true", json=body, timeout=300)
            assert reply.json()["playbooks_added"] == 1
        env = child_env(lake, home)
        done = _cli(api, env, "aggregate", "--agent-version", "ops-1")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "1 new" in done.stdout
        (rule,) = httpx.post(f"{api}/api/get_agent_playbooks", json={}).json()["agent_playbooks"]
        query = {"query": "deploy region", "agent_version": "ops-1", "threshold": 0.0}
        assert len(httpx.post(f"{api}/api/search", json=query).json()["agent_playbooks"]) == 1

        done = _cli(api, env, "playbook-status", str(rule["agent_playbook_id"]), "rejected")
        assert done.returncode == 0 and "rejected" in done.stdout
        assert httpx.post(f"{api}/api/search", json=query).json()["agent_playbooks"] == []

        missing = _cli(api, env, "playbook-status", "999", "approved")
        assert missing.returncode == 1 and "not found" in missing.stdout
    unreachable = _cli(api, child_env(lake, home), "playbook-status", "1", "approved")
    assert unreachable.returncode == 2 and "cannot reach" in unreachable.stderr
