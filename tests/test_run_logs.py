"""Run logs per organisation: an organisation's in-process Dagster run never records another organisation's output.

The service runs every organisation's Dagster runs in its own process, organisations in parallel threads. Capturing
a run's stdout/stderr works on the process's file descriptors (Dagster's compute log manager swaps fd 1 and 2), so
whatever any thread printed meanwhile — another organisation's error lines included — landed in that run's logs.
Here one organisation's learning run executes (a real Dagster run on the instance at `$DAGSTER_HOME`, as the service
starts it) while another organisation's errors are logged to stderr; no file of the instance may hold them after.
"""

from __future__ import annotations

import logging
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.settings import Settings
from tests.support.landing import land

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 5, 4, 9, 0, tzinfo=timezone.utc)
MARKER = "globex-only-error-line-7c1"


def _conversation(user: str) -> dict:
    turns = [("user", "Deploy the api."), ("assistant", "Deploying to us-east-1."), ("user", "No, always us-west-2.")]
    return {
        "id": f"{user}-1",
        "user_id": user,
        "agent_version": "a1",
        "source": "chat",
        "session_id": f"{user}-s1",
        "interactions": [{"role": role, "content": text} for role, text in turns],
    }


def test_another_organisations_error_lines_stay_out_of_a_runs_logs(tmp_path: Path, dagster_home: Path) -> None:
    acme = Lake.at(tmp_path / "lake" / "orgs" / "acme")
    land(acme, [_conversation("ann")], at=T0)
    stderr = logging.StreamHandler(sys.stderr)  # where the service's log lines go
    globex_log = logging.getLogger("serving.globex-test")
    globex_log.addHandler(stderr)
    done = threading.Event()
    lines = 0

    def globex_failing() -> None:
        nonlocal lines
        while not done.is_set():
            globex_log.error("%s: landing write failed for globex", MARKER)
            lines += 1
            done.wait(0.01)

    noise = threading.Thread(target=globex_failing)
    noise.start()
    try:
        result = launch([key_of_moment(T0, GRANULARITY)], settings=Settings(lake=str(acme.root)))
    finally:
        done.set()
        noise.join()
        globex_log.removeHandler(stderr)
    assert result.success and result.run_ids and lines > 10
    leaked = [p for p in dagster_home.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    assert leaked == [], leaked
