"""`python -m serving` alone runs the whole loop: it starts the Dagster daemon as its child, whose sensors learn
and index a plain publish (no `wait_for_response`), and stops it when the service stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from reflexio_pipelines.devtools.servers import free_port
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.pending import unindexed_turn_files
from tests.support.conversations import interactions
from tests.support.processes import child_env

pytestmark = pytest.mark.e2e

#: publish -> learned and indexed, with the daemon's start-up (~10 s on 2 cores) and a 5 s sensor tick included.
DEADLINE_S = 90


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) is gone for this purpose
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def _daemon_pid(log: Path, proc: subprocess.Popen) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if "dagster daemon started (pid " in line:
                return int(line.split("dagster daemon started (pid ", 1)[1].split(",", 1)[0])
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"no daemon start logged: {log.read_text()[-3000:]}")


def test_publish_is_learned_and_indexed_by_the_service_alone(tmp_path: Path):
    lake, home, log = tmp_path / "lake", tmp_path / "dagster_home", tmp_path / "serving.log"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "serving", "--host", "127.0.0.1", "--port", str(port), "--lake", str(lake)]
    env = child_env(lake, home)
    env.pop("REFLEXIO_DAEMON", None)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        daemon = _daemon_pid(log, proc)
        assert (home / "dagster.yaml").is_file()  # the service prepared the (fresh) DAGSTER_HOME it passed on
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)

        # as the original client sends it: no wait_for_response
        turns = interactions(
            ("user", "I prefer vegetarian restaurants."), ("assistant", "Noted, I will suggest vegetarian places.")
        )
        body = {"user_id": "ana", "session_id": "s1", "interaction_data_list": turns}
        published = time.monotonic()
        assert httpx.post(url + "/api/publish_interaction", json=body, timeout=30).status_code == 200
        query = {"query": "what food does the user like", "user_id": "ana", "threshold": 0.0}
        learned_s = indexed_s = None
        while (learned_s is None or indexed_s is None) and time.monotonic() - published < DEADLINE_S:
            found = httpx.post(url + "/api/search", json=query, timeout=30).json()
            items = (found.get("profiles") or []) + (found.get("user_playbooks") or [])
            if learned_s is None and any("vegetarian" in str(i.get("content", "")).lower() for i in items):
                learned_s = time.monotonic() - published
            if indexed_s is None and (lake / "landing").exists() and not unindexed_turn_files(Lake.at(lake)):
                indexed_s = time.monotonic() - published
            assert proc.poll() is None and _alive(daemon), log.read_text()[-3000:]
            time.sleep(0.5)
        print(f"publish -> learned {learned_s} s, publish -> indexed {indexed_s} s")
        assert learned_s is not None, f"not learned within {DEADLINE_S} s: {log.read_text()[-3000:]}"
        assert indexed_s is not None, f"turns not indexed within {DEADLINE_S} s: {log.read_text()[-3000:]}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # to the service only: it stops its daemon itself
            proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM, log.read_text()[-3000:]  # ended by the signal, after its cleanup
    assert not _alive(daemon), "the daemon outlived the service"
    assert "dagster daemon stopped" in log.read_text()


def test_a_daemon_that_dies_is_logged_and_restarted_and_stopped_with_the_service(dagster_home, caplog):
    """The supervision alone, on a stand-in child that exits with 3 at once: restarted after the backoff, each exit
    logged as an error, and nothing left running after `stop()`."""
    from serving.daemon import DaemonChild

    child = DaemonChild([sys.executable, "-c", "import sys, time; time.sleep(0.2); sys.exit(3)"])
    first = child.start()
    deadline = time.monotonic() + 10
    while child.pid == first and time.monotonic() < deadline:
        time.sleep(0.1)
    second = child.pid
    assert second != first  # restarted (after the 1 s first backoff)
    child.stop()
    exits = [r for r in caplog.records if r.name == "serving.daemon" and "exited with code 3" in r.getMessage()]
    assert exits and all(r.levelname == "ERROR" for r in exits)
    assert not _alive(first) and not _alive(second)
    assert child.pid == second  # no restart after stop
