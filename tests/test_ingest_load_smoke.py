"""Smoke test of benchmarks/ingest_load.py: a tiny run (2 client processes, 2 s per mode) through its command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.e2e


def test_ingest_load_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ingest_load.json"
    done = run_benchmark(
        "ingest_load",
        *("--seconds", "2", "--processes", "2", "--concurrency", "2", "--turns", "3", "--out", str(out)),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())

    assert data["params"] == {"seconds": 2.0, "processes": 2, "concurrency_per_process": 2, "turns_per_publish": 3}
    assert set(data["results"]) == {"group_commit", "fsync_per_publish_baseline"}
    for mode, row in data["results"].items():
        assert row["errors"] == 0 and row["error_samples"] == [], (mode, row["error_samples"])
        assert row["publishes"] > 0 and row["acked_turns"] == 3 * row["publishes"]
        # Durable acknowledgements: the landing files hold exactly the acknowledged turns.
        assert row["lost_turns"] == 0 and row["landing_rows"] == row["acked_turns"]
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert row["turns_per_s"] == pytest.approx(row["acked_turns"] / row["elapsed_s"], rel=0.01)
    assert data["ratio_vs_baseline"] == pytest.approx(
        data["results"]["group_commit"]["turns_per_s"] / data["results"]["fsync_per_publish_baseline"]["turns_per_s"],
        abs=0.01,
    )
    assert isinstance(data["meets_target"], bool) and data["target_turns_per_s"] == 2000
    assert "turns/s" in done.stdout and "p99" in done.stdout
