"""Smoke test of benchmarks/interaction_search.py at a tiny size: one pair's conversation (26 sessions x 27 turns, 20 questions)
and a "large" user of two copies of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import assert_recall_beats, interaction_search_report

pytestmark = pytest.mark.e2e


def test_interaction_search_benchmark_smoke(tmp_path: Path) -> None:
    from benchmarks import interaction_corpus as corpus

    per_user = corpus.SESSIONS * corpus.TURNS_PER_SESSION
    out = tmp_path / "interaction_search.json"
    data = interaction_search_report(out, "--users", "1", "--big-turns", str(2 * per_user), "--trials", "1")
    small = data["long_conversations"]
    assert small["turns_per_user"] == per_user and small["index_build"]["turns"] == per_user
    assert_recall_beats(small["ours"], small["baseline"])
    for side in ("ours", "baseline"):
        assert small[side]["cold"]["calls"] == 20 and small[side]["warm"]["p50_ms"] > 0
    large = data["large_user"]
    assert large["turns_per_user"] == 2 * per_user and large["index_build"]["turns"] == 2 * per_user
    assert large["ours"]["warm"]["p95_ms"] >= large["ours"]["warm"]["p50_ms"]
