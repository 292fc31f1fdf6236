"""A failing pipeline run behind an API call is a 503 with a message, never a 500, and changes nothing; a rerun
whose process died is detected and does not block the next one; starting a rerun is atomic."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from reflexio_pipelines.cli import app as cli_app
from reflexio_pipelines.lake import operation_status
from reflexio_pipelines.lake.operation_status import (
    OperationInProgress,
    begin_operation,
    heartbeat,
    read_status,
    stale_reason,
    update_status,
)
from reflexio_pipelines.settings import Settings
from serving.app import create_app
from tests.support.openai_stub import StubBehaviour, make_openai_stub
from tests.support.processes import child_env, free_port, start_service, stop
from tests.support.servers import serve_app


def _failing(*_args, **_kwargs):
    raise RuntimeError("run failed")


def test_failed_aggregation_and_lifecycle_runs_answer_503(settings, instance, lake):
    with TestClient(create_app(settings)) as client:
        state = client.app.state.svc
        state.aggregate, state.operate = _failing, _failing
        reply = client.post("/api/run_playbook_aggregation", json={})
        assert reply.status_code == 503 and "aggregation run failed" in reply.json()["message"]
        reply = client.post("/api/upgrade_all_profiles", json={})
        assert reply.status_code == 503 and "lifecycle run failed" in reply.json()["message"]
    assert lake.read_table("agent_playbooks").num_rows == 0
    assert lake.read_table("lifecycle_events").num_rows == 0


# -- operation status that survives crashes ---------------------------------------------------------------------------
#
# A rerun records its owner (pid, host, a per-process token) and a heartbeat; one whose process died is reported as
# failed / interrupted and no longer blocks the next rerun, and starting one is atomic (one wins, the rest get 409).

SERVICE = "profile_generation"


def _wait_status(client, predicate, timeout_s: float = 120) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get(f"/api/get_operation_status?service_name={SERVICE}").json()["operation_status"]
        if status and predicate(status):
            return status
        time.sleep(0.1)
    raise AssertionError(f"status never matched: {status}")


def test_a_rerun_sigkilled_mid_run_is_interrupted_and_the_next_rerun_runs(tmp_path, instance, lake, monkeypatch):
    """The real service (`python -m serving`) starts a real rerun whose LLM call hangs; SIGKILL it there. The next
    service reports the rerun interrupted and starts a new one, which completes."""
    body = {
        "user_id": "kai",
        "interaction_data_list": [
            {"role": "user", "content": "I live in Lisbon."},
            {"role": "assistant", "content": "Noted."},
        ],
    }
    builtin = Settings(lake=str(lake.root))
    with TestClient(create_app(builtin)) as client:  # learned once with the built-in extractor: `turns` holds kai
        assert client.post("/api/publish_interaction?wait_for_response=true", json=body).json()["profiles_added"] == 1

    hanging = make_openai_stub(StubBehaviour(delay_s=30))  # the rerun's extraction call never answers in time
    with serve_app(hanging) as llm_url:
        for name, value in {
            "REFLEXIO_LLM_MODEL": "openai/stub",
            "REFLEXIO_LLM_API_BASE": f"{llm_url}/v1",
            "REFLEXIO_LLM_API_KEY": "k",
            "REFLEXIO_LLM_MAX_RETRIES": "0",
        }.items():
            monkeypatch.setenv(name, value)
        port = free_port()
        proc = start_service(lake.root, tmp_path / "child_home", port, tmp_path / "serving.log")
        try:
            started = httpx.post(f"http://127.0.0.1:{port}/api/rerun_profile_generation", json={}, timeout=30).json()
            assert started["success"], started
            deadline = time.monotonic() + 90
            while hanging.state.calls == 0:  # the Dagster op is inside the rerun, waiting for the LLM
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "serving.log").read_text()
                time.sleep(0.1)
        finally:
            stop(proc, signal.SIGKILL)
    left = read_status(lake, SERVICE)
    assert left["status"] == "in_progress"  # what the crash left behind

    with TestClient(create_app(builtin)) as client:
        status = client.get(f"/api/get_operation_status?service_name={SERVICE}").json()["operation_status"]
        again = client.post("/api/rerun_profile_generation", json={})
        assert again.status_code == 200, again.text  # not 409 for ever
        assert left["owner_pid"] == proc.pid  # the killed process was the owner on record
        assert status["status"] == "failed" and status["interrupted"] is True  # reported, not "in progress"
        assert f"process {proc.pid}" in status["error_message"] and status["operation_id"] == started["operation_id"]
        done = _wait_status(client, lambda s: s["status"] != "in_progress")
        assert done["status"] == "completed" and done["operation_id"] == again.json()["operation_id"]
        assert done["processed_user_ids"] == ["kai"] and done["interrupted"] is False
        for thread in threading.enumerate():  # the rerun re-indexes after it reports completed: let it end here
            if thread.name.startswith("rerun-"):
                thread.join(120)
    pending = [r for r in lake.read_table("user_profiles").to_pylist() if r["status"] == "pending"]
    assert {r["operation_id"] for r in pending} == {again.json()["operation_id"]}  # nothing of the killed one


def test_concurrent_rerun_starts_exactly_one_wins(settings, instance, lake):
    """Eight simultaneous rerun calls over real HTTP: one starts, seven answer 409, while the winner runs."""
    release = threading.Event()
    app = create_app(settings)
    state = app.state.svc
    state.operate = lambda job, config: release.wait(60) and {}  # a rerun that runs until released
    with serve_app(app) as url:
        barrier = threading.Barrier(8)

        def start(_: int) -> httpx.Response:
            barrier.wait()
            return httpx.post(f"{url}/api/rerun_profile_generation", json={}, timeout=30)

        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(start, range(8)))
        codes = sorted(r.status_code for r in replies)
        assert codes == [200] + [409] * 7, [r.text for r in replies]
        assert all(
            r.json()["success"] is False and "already in progress" in r.json()["msg"]
            for r in replies
            if r.status_code == 409
        )
        winner = next(r.json()["operation_id"] for r in replies if r.status_code == 200)
        assert read_status(lake, SERVICE)["operation_id"] == winner
        release.set()


_RACER = """
import sys, time
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.operation_status import OperationInProgress, begin_operation
lake, at, name = Lake.at(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
time.sleep(max(0.0, at - time.time()))
try:
    begin_operation(lake, "profile_generation", name, {})
    print("won", flush=True)
    # An owner runs its operation: stay alive while the others try (an owner whose process is gone is stale, and
    # without dagster imported this process exits within milliseconds, before the last racer reads the status).
    time.sleep(3)
except OperationInProgress:
    print("lost")
"""


@pytest.mark.e2e
def test_starting_an_operation_is_atomic_across_processes(lake):
    """Four processes start an operation at the same instant (each its own `begin_operation`): exactly one wins."""
    at = time.time() + 6  # after every interpreter has imported the package
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(lake.root), str(at), f"op-{i}"],
            env=child_env(lake.root, lake.root.parent / "home"),
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    results = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert sorted(results) == ["lost", "lost", "lost", "won"], results
    assert read_status(lake, SERVICE)["operation_id"] == f"op-{results.index('won')}"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid names no process any more
    return proc.pid


@pytest.mark.e2e
def test_stale_is_a_dead_owner_a_restarted_owner_or_a_silent_heartbeat():
    now = time.time()
    here = socket.gethostname()
    live = {"status": "in_progress", "owner_host": here, "owner_pid": os.getpid(), "heartbeat_at": now}
    assert stale_reason(dict(live, owner_token=operation_status._PROCESS_TOKEN), 60, now) is None
    assert "restarted" in stale_reason(dict(live, owner_token="an earlier process"), 60, now)  # pid 1 reused
    assert "is gone" in stale_reason(dict(live, owner_pid=_dead_pid()), 60, now)
    elsewhere = dict(live, owner_host="another-replica", owner_pid=_dead_pid())  # its pid means nothing here
    assert stale_reason(elsewhere, 60, now + 30) is None
    assert "no heartbeat for 90 s" in stale_reason(elsewhere, 60, now + 90)
    assert stale_reason(dict(elsewhere, status="completed"), 60, now + 900) is None


def test_a_heartbeat_keeps_a_long_rerun_live_and_stops_when_it_ends(lake):
    begin_operation(lake, SERVICE, "op-long", {}, stale_after_s=0.5)
    with heartbeat(lake, SERVICE, "op-long", interval_s=0.1):
        time.sleep(1.0)  # twice the stale timeout, beating all along
        assert stale_reason(read_status(lake, SERVICE), 0.5) is None
        with pytest.raises(OperationInProgress):
            begin_operation(lake, SERVICE, "op-next", {}, stale_after_s=0.5)
    time.sleep(1.0)  # the beats stopped (as if the process had died on another host)
    assert "no heartbeat" in stale_reason(dict(read_status(lake, SERVICE), owner_host="elsewhere"), 0.5)


def test_force_cancel_clears_a_hung_rerun_through_the_api_and_the_cli(settings, instance, lake):
    """A rerun that hangs (alive, beating, never finishing) is cleared with `cancel_operation force` / `reflexio-lake
    operations cancel --force`; if it ever goes on it writes nothing, and a new rerun can start."""
    release = threading.Event()
    app = create_app(settings)
    app.state.svc.operate = lambda job, config: release.wait(60) and {}
    with serve_app(app) as url:
        hung = httpx.post(f"{url}/api/rerun_profile_generation", json={}).json()["operation_id"]
        assert httpx.post(f"{url}/api/rerun_profile_generation", json={}).status_code == 409
        shown = CliRunner().invoke(cli_app, ["--server-url", url, "--json", "operations", "status"])
        assert shown.exit_code == 0, shown.output
        statuses = json.loads(shown.stdout)["operations"]
        assert statuses[SERVICE]["status"] == "in_progress" and statuses["playbook_generation"] is None

        cleared = CliRunner().invoke(
            cli_app, ["--server-url", url, "operations", "cancel", "--service", SERVICE, "--force"]
        )
        assert cleared.exit_code == 0 and f"cleared {SERVICE}" in cleared.stdout, cleared.output
        status = read_status(lake, SERVICE)
        assert status["status"] == "cancelled" and status["error_message"].startswith("cleared:")
        assert update_status(lake, SERVICE, hung, processed_users=1) is None  # the hung owner writes nothing now
        release.set()
        after = httpx.post(f"{url}/api/rerun_profile_generation", json={})
        assert after.status_code == 200 and after.json()["operation_id"] != hung
        idle = httpx.post(f"{url}/api/cancel_operation", json={"service_name": "playbook_generation"}).json()
        assert idle["cancelled_services"] == [] and idle["msg"] == "no operation in progress"
