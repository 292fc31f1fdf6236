"""benchmarks/index_shards.py at a tiny size: both subprocesses load, the sharded one holds fewer documents and
answers its users exactly as the whole index does (speed and RSS are the benchmark's to report, not asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.e2e


def test_index_shards_benchmark_smoke(tmp_path: Path) -> None:
    out = tmp_path / "index_shards.json"
    done = run_benchmark("index_shards", "--docs", "2000", "--out", str(out), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    whole, part = report["runs"]["whole"], report["runs"]["shards_0_1_of_4"]
    assert report["answers_identical"] is True and part["users_searched"] == whole["users_searched"] > 0
    assert part["docs_loaded"]["profile"] < whole["docs_loaded"]["profile"]
    assert 0 < report["rss_ratio_sharded_over_whole"] and "RSS sharded / whole" in done.stdout
