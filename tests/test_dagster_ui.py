"""`dagster-webserver -w workspace.yaml` loads the code location: assets, partitions, sensor, jobs and the check."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.dagster_home import make_dagster_home
from tests.support.processes import child_env, free_port, stop

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]

QUERY = """
{
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        sensors { name sensorState { status } }
        schedules { name scheduleState { status } }
        jobs { name }
        assetNodes {
          assetKey { path }
          partitionDefinition { type }
          assetChecksOrError { ... on AssetChecks { checks { name blocking } } }
        }
      }
    }
  }
}
"""


def test_workspace_lists_assets_partitions_sensor_and_blocking_check(tmp_path: Path):
    home = make_dagster_home(tmp_path / "dagster_home")
    port = free_port()
    webserver = Path(sys.executable).parent / "dagster-webserver"
    with open(tmp_path / "webserver.log", "wb") as log:
        proc = subprocess.Popen(
            [str(webserver), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
            cwd=ROOT,
            env=child_env(tmp_path / "lake", home),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}/graphql"
        deadline, data = time.monotonic() + 120, None
        while time.monotonic() < deadline and data is None:
            assert proc.poll() is None, (tmp_path / "webserver.log").read_text()[-3000:]
            try:
                reply = httpx.post(url, json={"query": QUERY}, timeout=10)
                nodes = reply.json()["data"]["repositoriesOrError"].get("nodes")
                data = nodes[0] if nodes else None
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                pass
            if data is None:
                time.sleep(0.5)
        assert data is not None, (tmp_path / "webserver.log").read_text()[-3000:]
    finally:
        stop(proc)

    assets = {"/".join(a["assetKey"]["path"]): a for a in data["assetNodes"]}
    assert {"turns", "user_profiles", "user_playbooks", "search_index", "serving_index"} <= set(assets)
    for name in ("turns", "user_profiles", "user_playbooks"):
        assert assets[name]["partitionDefinition"]["type"] == "TIME_WINDOW"
    checks = assets["search_index"]["assetChecksOrError"]["checks"]
    assert {"name": "search_index_is_servable", "blocking": True} in checks
    assert sorted(s["name"] for s in data["sensors"]) == ["interaction_index_sensor", "landing_sensor"]
    assert {s["sensorState"]["status"] for s in data["sensors"]} == {"RUNNING"}
    assert {
        "learn_job",
        "extract_job",
        "index_job",
        "aggregation_job",
        "evaluation_job",
        "rerun_job",
        "lifecycle_job",
    } <= {j["name"] for j in data["jobs"]}
    assert {"playbook_embeddings", "agent_playbooks", "aggregation_change_log", "change_log"} <= set(assets)
    schedules = sorted(data["schedules"], key=lambda x: x["name"])
    assert schedules == [
        {"name": "daily_aggregation", "scheduleState": {"status": "RUNNING"}},
        {"name": "index_compaction", "scheduleState": {"status": "RUNNING"}},
        {"name": "session_evaluation", "scheduleState": {"status": "RUNNING"}},
    ]
    assert {"session_evaluations", "shadow_comparisons", "impact_metrics"} <= set(assets)
