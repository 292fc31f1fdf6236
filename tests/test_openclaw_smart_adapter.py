"""The openclaw-smart plugin's Python side, as reflexio-ai 0.2.32 ships it (PyPI, unchanged, Python 3.12), against a
live `python -m serving`: its hook dispatcher (`python -m openclaw_smart.hook <event>`, what the plugin's
TypeScript shim spawns) runs session start, the per-turn search that injects context, and the publish at the end
of the agent's turn, all through its `reflexio_adapter.Adapter`. The adapter swallows every error, so each test
checks the service's side: the context it injected, the turns it stored, the config it set."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.ai032 import Original, original_against_service
from tests.support.learned import REGION, correction_turns

pytestmark = pytest.mark.e2e

PROJECT = "oc-agent"  # no git repository around the workspace: the plugin uses the agent id as the user id
SESSION = "oc-session-1"


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Original]:
    with original_against_service(tmp_path_factory.mktemp("openclaw032")) as found:
        user, request, answer, correction = REGION[0]
        body = {
            "user_id": PROJECT,
            "agent_version": "openclaw",  # the plugin's hard-coded agent version
            "session_id": "earlier",
            "interaction_data_list": correction_turns(request, answer, correction),
        }
        learned = httpx.post(f"{found.url}/api/publish_interaction?wait_for_response=true", json=body, timeout=300)
        assert learned.json()["playbooks_added"] == 1, learned.text
        found.env["OPENCLAW_SMART_STATE_DIR"] = str(tmp_path_factory.mktemp("openclaw-state"))
        yield found


def test_the_adapter_imports_the_clients_it_needs(original: Original) -> None:
    done = original.run_python("from openclaw_smart.reflexio_adapter import Adapter; print(Adapter()._get_client())")
    assert done.returncode == 0 and "ReflexioClient" in done.stdout, done.stderr


def test_session_start_per_turn_search_and_publish(original: Original, tmp_path: Path) -> None:
    # sys.argv for main(): the event name
    started = original.run_python(
        "import sys; sys.argv = ['hook', 'session-start']; from openclaw_smart.hook import main; sys.exit(main())",
        input=json.dumps({"sessionKey": SESSION, "agentId": PROJECT, "workspaceDir": str(tmp_path)}),
        OPENCLAW_SMART_ENABLE_OPTIMIZER="0",
    )
    assert started.returncode == 0, started.stderr

    prompt = "Please deploy the checkout service to production."
    injected = original.run_python(
        "import sys; sys.argv = ['hook', 'before-prompt-build']; from openclaw_smart.hook import main; sys.exit(main())",
        input=json.dumps({"sessionKey": SESSION, "agentId": PROJECT, "workspaceDir": str(tmp_path), "prompt": prompt}),
    )
    assert injected.returncode == 0, injected.stderr
    context = json.loads(injected.stdout)["prependContext"]
    assert "us-west-2" in context, context

    reply = "Deploying the checkout service to us-west-2."
    ended = original.run_python(
        "import sys; sys.argv = ['hook', 'agent-end']; from openclaw_smart.hook import main; sys.exit(main())",
        input=json.dumps(
            {
                "sessionKey": SESSION,
                "agentId": PROJECT,
                "workspaceDir": str(tmp_path),
                "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}],
            }
        ),
    )
    assert ended.returncode == 0, ended.stderr
    stored = httpx.post(f"{original.url}/api/get_requests", json={"user_id": PROJECT}, timeout=30).json()
    (session,) = [s for s in stored["sessions"] if s["session_id"] == SESSION]
    turns = [i for r in session["requests"] for i in r["interactions"]]
    assert [(i["role"], i["content"]) for i in sorted(turns, key=lambda i: i["created_at"])] == [
        ("User", prompt),
        ("Assistant", reply),
    ], stored


def test_session_start_sets_the_plugins_extraction_defaults(original: Original, tmp_path: Path) -> None:
    done = original.run_python(
        "import sys; sys.argv = ['hook', 'session-start']; from openclaw_smart.hook import main; sys.exit(main())",
        input=json.dumps({"sessionKey": "oc-session-2", "agentId": PROJECT, "workspaceDir": str(tmp_path)}),
        OPENCLAW_SMART_ENABLE_OPTIMIZER="0",
    )
    assert done.returncode == 0, done.stderr
    config = httpx.get(f"{original.url}/api/get_config", timeout=30).json()
    assert (config.get("window_size"), config.get("stride_size")) == (5, 3), config
