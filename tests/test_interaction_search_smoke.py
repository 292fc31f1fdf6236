"""Smoke test of benchmarks/interaction_search.py at a tiny size: one pair's conversation (26 sessions x 27 turns, 20 questions)
and a "large" user of two copies of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_interaction_search_benchmark_smoke(tmp_path: Path) -> None:
    from benchmarks import interaction_corpus as corpus
    from benchmarks import interaction_search as bench

    per_user = corpus.SESSIONS * corpus.TURNS_PER_SESSION
    out = tmp_path / "interaction_search.json"
    returned = bench.main(["--users", "1", "--big-turns", str(2 * per_user), "--trials", "1", "--output", str(out)])
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(returned))
    small = data["long_conversations"]
    assert small["turns_per_user"] == per_user and small["index_build"]["turns"] == per_user
    recall = small["ours"]["recall"]
    assert set(recall) == {"overall", "single_hop", "multi_hop", "temporal", "speaker", "context"}
    assert recall["overall"]["n"] == 20
    assert recall["overall"]["recall@1"] <= recall["overall"]["recall@5"] <= recall["overall"]["recall@10"]
    assert recall["overall"]["recall@10"] > small["baseline"]["recall"]["overall"]["recall@10"]
    for side in ("ours", "baseline"):
        assert small[side]["cold"]["calls"] == 20 and small[side]["warm"]["p50_ms"] > 0
    large = data["large_user"]
    assert large["turns_per_user"] == 2 * per_user and large["index_build"]["turns"] == 2 * per_user
    assert large["ours"]["warm"]["p95_ms"] >= large["ours"]["warm"]["p50_ms"]
