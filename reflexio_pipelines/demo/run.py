"""The demo: start the service and the Dagster UI, publish the sample conversations over HTTP, learn, search.

Run with `make demo` (or `python -m reflexio_pipelines demo [--once]`). Everything runs on this machine with the
built-in extractor and the bundled embedding model; no API key is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import httpx

from reflexio_pipelines.runs import ensure_dagster_home, launch
from reflexio_pipelines.settings import load_settings

DEMO_QUERY = "Which AWS region should I deploy the payments service to?"
DEMO_USER = "alice"


def sample_conversations() -> list[dict]:
    """The bundled sample conversations (written for this project)."""
    text = resources.files("reflexio_pipelines.demo").joinpath("sample_conversations.json").read_text()
    return json.loads(text)["conversations"]


def publish_payload(conversation: dict) -> dict:
    """The publish_interaction body for one sample conversation."""
    return {
        "user_id": conversation["user_id"],
        "session_id": conversation["session_id"],
        "agent_version": conversation["agent_version"],
        "source": conversation["source"],
        "interaction_data_list": conversation["interactions"],
    }


def _start(cmd: list[str], log_path: Path, env: dict) -> subprocess.Popen:
    # A new session per child: `dagster dev` ignores SIGINT/SIGTERM when started as a background job of a
    # non-interactive shell, so we stop whole process groups instead.
    log_file = open(log_path, "ab")
    return subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def _wait_index(api: str, version: str | None, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(f"{api}/health", timeout=5).json().get("index_version") == version:
            return
        time.sleep(0.2)
    raise RuntimeError(f"service did not swap to index version {version}")


def run_demo(api_port: int = 8081, ui_port: int = 3000, once: bool = False) -> int:
    """Run the demo; returns a process exit code (non-zero if the learned correction is not found)."""
    started = time.monotonic()
    settings = load_settings()
    lake = Path(settings.lake).expanduser().resolve()
    home = ensure_dagster_home()
    logs = lake.parent / ".demo-logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, REFLEXIO_LAKE=str(lake), DAGSTER_HOME=str(home))
    api = f"http://127.0.0.1:{api_port}"
    ui = f"http://127.0.0.1:{ui_port}"
    bin_dir = Path(sys.executable).parent
    service = _start([sys.executable, "-m", "serving", "--port", str(api_port), "--lake", str(lake)], logs / "serving.log", env)
    dagster = _start(
        [str(bin_dir / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(ui_port)],
        logs / "dagster.log",
        env,
    )
    try:
        if not _wait_http(f"{api}/health", 60, service):
            print(f"service did not start; see {logs / 'serving.log'}", file=sys.stderr)
            return 1
        print(f"service up at {api}")
        for conversation in sample_conversations():
            reply = httpx.post(
                f"{api}/api/publish_interaction",
                json=publish_payload(conversation),
                headers={"Idempotency-Key": f"demo-{conversation['id']}"},
                timeout=30,
            )
            reply.raise_for_status()
            print(f"published {conversation['id']:<22} request_id={reply.json()['request_id']}")
        result = launch(settings=settings)
        print(f"materialised windows {', '.join(result.partition_keys) or '(none pending)'} in {len(result.run_ids)} Dagster run(s)")
        _wait_index(api, result.index_version)
        hits = httpx.post(f"{api}/api/search", json={"query": DEMO_QUERY, "user_id": DEMO_USER}, timeout=30).json()
        ui_ok = _wait_http(ui, 120, dagster)
        _report(api, ui, ui_ok, hits, time.monotonic() - started)
        found = any("us-west-2" in p["content"] for p in hits["user_playbooks"])
        if not found or not ui_ok:
            print("demo FAILED: " + ("the correction was not found" if not found else f"Dagster UI did not start; see {logs / 'dagster.log'}"), file=sys.stderr)
            return 1
        if once:
            return 0
        print("\nPress Ctrl-C to stop the service and the Dagster UI.")
        while service.poll() is None and dagster.poll() is None:
            time.sleep(1)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(service)
        _stop(dagster)


def _report(api: str, ui: str, ui_ok: bool, hits: dict, elapsed: float) -> None:
    print("\n" + "=" * 78)
    print(f"Dagster UI : {ui}{'' if ui_ok else '  (not answering yet)'}")
    print(f"API        : {api}   (OpenAPI docs at {api}/docs)")
    print(f"Index      : version {hits.get('index_version')}")
    print(f"\nPOST /api/search  query={DEMO_QUERY!r}  user_id={DEMO_USER!r}")
    for playbook in hits["user_playbooks"][:3]:
        print(f"  user playbook  trigger: {playbook['trigger']}")
        print(f"                 content: {playbook['content']}")
        print(f"                 from turns: {', '.join(playbook['provenance']['source_turn_ids'])}")
    for profile in hits["profiles"][:3]:
        print(f"  profile        {profile['content']}")
    print(f"\ndemo finished in {elapsed:.1f} s")
    print("=" * 78)
