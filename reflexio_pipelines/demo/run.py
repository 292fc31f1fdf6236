"""The demo: start the service and the Dagster UI, publish the sample conversations over HTTP, learn, search, then
fill the dashboard.

Run with `make demo` (or `python -m reflexio_pipelines demo [--once]`). Everything runs on this machine with the
built-in extractor and the bundled embedding model; no API key is needed.

Filling the dashboard (`fill_dashboard`): the demo lake's config samples 100 % of closed sessions for evaluation
(set through the API, for this lake only; the default is 5 %), the follow-up sessions search first and then publish
what happened (a rule followed, the same correction again, a tool used the working way, two more users teaching the
region rule: three users make a shared rule), learning and aggregation run, and the evaluation job judges the
sessions with the clock moved past their quiet period — so success rates, outcome counters, correction recurrence
and the approval queue are there after `make demo`. The judge is the offline heuristic one, and the dashboard says so.
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

import dagster as dg
import httpx

from reflexio_pipelines.learning.config import DEFAULT_EVALUATION
from reflexio_pipelines.runs import ensure_dagster_home, launch, run_evaluation
from reflexio_pipelines.settings import Settings, load_settings

DEMO_QUERY = "Which AWS region should I deploy the payments service to?"
DEMO_USER = "alice"


def _samples() -> dict:
    return json.loads(resources.files("reflexio_pipelines.demo").joinpath("sample_conversations.json").read_text())


def sample_conversations() -> list[dict]:
    """The bundled sample conversations (written for this project)."""
    return _samples()["conversations"]


def followup_conversations() -> list[dict]:
    """The sessions after the first learning run: each carries the `search` its agent makes before answering."""
    return _samples()["followups"]


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


def publish_samples(api: str, conversations: list[dict]) -> None:
    """Publish conversations over HTTP (an Idempotency-Key each, so re-running the demo lands them once)."""
    for conversation in conversations:
        reply = httpx.post(
            f"{api}/api/publish_interaction",
            json=publish_payload(conversation),
            headers={"Idempotency-Key": f"demo-{conversation['id']}"},
            timeout=30,
        )
        reply.raise_for_status()
        print(f"published {conversation['id']:<30} request_id={reply.json()['request_id']}")


def learn(api: str, settings: Settings, instance: dg.DagsterInstance | None = None) -> str | None:
    """Materialise every pending window through Dagster and wait until the service serves the new index."""
    result = launch(settings=settings, instance=instance)
    print(
        f"materialised windows {', '.join(result.partition_keys) or '(none pending)'} in {len(result.run_ids)} Dagster run(s)"
    )
    _wait_index(api, result.index_version)
    return result.index_version


def fill_dashboard(api: str, settings: Settings, instance: dg.DagsterInstance | None = None) -> dict:
    """Follow-up sessions, learning, aggregation and an evaluation of every closed session (see the module
    docstring); returns what the dashboard now shows."""
    config = httpx.get(f"{api}/api/get_config", timeout=30).json()
    evaluators = config.get("agent_success_configs") or [{"evaluation_name": DEFAULT_EVALUATION}]
    config["agent_success_configs"] = [dict(e, sampling_rate=1.0) for e in evaluators]  # the demo lake only
    config.pop("agent_success_config", None)  # get_config answers in both shapes; one is sent, the list changed
    httpx.post(f"{api}/api/set_config", json=config, timeout=30).raise_for_status()
    for conversation in followup_conversations():
        # What an agent does before it answers: ask for the learned context of this user and session.
        httpx.post(
            f"{api}/api/search",
            json={
                "query": conversation["search"],
                "user_id": conversation["user_id"],
                "agent_version": conversation["agent_version"],
                "session_id": conversation["session_id"],
            },
            timeout=30,
        ).raise_for_status()
        publish_samples(api, [conversation])
    time.sleep(1.0)  # the service flushes its retrieval log every poll (0.5 s)
    learn(api, settings, instance)
    aggregation = httpx.post(f"{api}/api/run_playbook_aggregation", json={}, timeout=300).json()
    print(f"aggregation: {aggregation.get('message', aggregation)}")
    quiet = int(config.get("session_quiet_period_seconds") or 600)
    # The sessions just published are still open; judge them as the scheduled run will once they are quiet.
    evaluation = run_evaluation(now=int(time.time()) + quiet + 1, settings=settings, instance=instance)
    print(f"evaluation: {evaluation.get('evaluated_now', 0)} sessions judged")
    time.sleep(1.0)  # the service reloads the outcome counters on its next poll
    metrics = httpx.get(f"{api}/api/impact_metrics", timeout=30).json()["metrics"]
    items = httpx.get(f"{api}/api/item_outcomes", timeout=30).json()["items"]
    queue = httpx.post(f"{api}/api/get_agent_playbooks", json={"playbook_status_filter": "pending"}, timeout=30).json()
    return {"metrics": metrics, "items": items, "pending_agent_playbooks": len(queue["agent_playbooks"])}


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
    service = _start(
        [sys.executable, "-m", "serving", "--port", str(api_port), "--lake", str(lake)], logs / "serving.log", env
    )
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
        publish_samples(api, sample_conversations())
        learn(api, settings)
        hits = httpx.post(f"{api}/api/search", json={"query": DEMO_QUERY, "user_id": DEMO_USER}, timeout=30).json()
        print("\nfilling the dashboard: follow-up sessions, aggregation, evaluation")
        dashboard = fill_dashboard(api, settings)
        ui_ok = _wait_http(ui, 120, dagster)
        _report(api, ui, ui_ok, hits, dashboard, time.monotonic() - started)
        found = any("us-west-2" in p["content"] for p in hits["user_playbooks"])
        if not found or not ui_ok:
            print(
                "demo FAILED: "
                + (
                    "the correction was not found"
                    if not found
                    else f"Dagster UI did not start; see {logs / 'dagster.log'}"
                ),
                file=sys.stderr,
            )
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


def _report(api: str, ui: str, ui_ok: bool, hits: dict, dashboard: dict, elapsed: float) -> None:
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
    print(f"\nDashboard  : {api}/dashboard")
    for row in dashboard["metrics"]:
        if row["success_rate"] is not None:
            print(
                f"  success rate   {row['agent_version']} {row['day']}: {row['success_rate']:.0%} of "
                f"{row['sessions_evaluated']} sessions (evaluation {row['evaluation_name']}, judge {row['judge']})"
            )
        if row["correction_recurrence"] is not None:
            print(
                f"  recurrence     {row['agent_version']} {row['day']}: {row['correction_recurrence']:.0%} of "
                f"{row['corrections']} corrections repeat a served lesson (heuristic)"
            )
    for item in dashboard["items"][:4]:
        print(
            f"  counters       {item['entity']} served {item['served']}, helpful {item['helpful']}, harmful "
            f"{item['harmful']}, missed {item['missed']} (heuristic): {(item['content'] or '')[:60]}"
        )
    print(f"  approval queue {dashboard['pending_agent_playbooks']} agent playbook(s) pending")
    print(f"\ndemo finished in {elapsed:.1f} s")
    print("=" * 78)
