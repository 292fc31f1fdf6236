"""Smoke test of benchmarks/update_pairs.py through its command line at 3 pairs per file: every file of
benchmarks/data/updates is scored for the product and for the words of change alone, the counts add up to the pairs,
and the rates are rates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 3


def test_update_pairs_scores_every_file_in_both_arms(tmp_path: Path) -> None:
    out = tmp_path / "update_pairs.json"
    subprocess.run(
        [sys.executable, "-m", "benchmarks.update_pairs", "--limit", str(LIMIT), "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        check=True,
        capture_output=True,
        timeout=600,
    )
    report = json.loads(out.read_text())
    files = {p.stem for p in (ROOT / "benchmarks" / "data" / "updates").glob("written_*.jsonl")}
    assert set(report["files"]) == files and "written_dev" in files
    assert report["files"]["written_dev"]["split"].startswith("development")
    for entry in report["files"].values():
        for arm in ("product", "words_only"):
            counts = entry[arm]
            assert sum(counts[k] for k in ("tp", "fn", "fp", "tn", "empty")) == entry["pairs"] == LIMIT
            for rate in ("precision", "recall"):
                assert counts[rate] is None or 0.0 <= counts[rate] <= 1.0
