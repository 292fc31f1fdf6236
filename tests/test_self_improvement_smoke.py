"""Smoke test of benchmarks/self_improvement.py (a SIMULATION: simulated users and agent, the real service and
pipeline) at a tiny size through its command line: 6 users (4 treated, 2 in the holdout control group by the hash),
3 rounds. Treated users stop being corrected once their lessons are served; the control group is not; the pipeline
sees no recurrence for the treated and measures the difference with an interval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.e2e


def test_self_improvement_simulation_smoke(tmp_path: Path) -> None:
    out = tmp_path / "self_improvement.json"
    done = run_benchmark("self_improvement", "--users", "6", "--rounds", "3", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SIMULATION" in done.stdout
    data = json.loads(out.read_text())
    assert data["label"].startswith("SIMULATION")
    treated, control = data["per_round"]["treated"], data["per_round"]["control"]
    assert [r["corrections_per_session"]["n"] for r in treated] == [4, 4, 4]
    assert treated[-1]["corrections_per_session"]["mean"] < treated[0]["corrections_per_session"]["mean"]
    assert all(r["corrections_per_session"]["mean"] == 1.0 for r in control)  # flat without learned context
    assert treated[-1]["steps_per_task"]["mean"] < control[-1]["steps_per_task"]["mean"]
    assert data["recurrence"]["treated"]["recurring"] == 0 and data["recurrence"]["treated"]["corrections"] > 0
    rows = {r["metric"]: r for r in data["impact_holdout"]}
    assert rows["corrections_per_session"]["difference"] < 0
    assert rows["corrections_per_session"]["ci_high"] is not None
