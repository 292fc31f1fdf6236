"""Smoke test of `benchmarks/interaction_search.py --through-api` at a tiny size: one pair's conversation (26
sessions x 27 turns, 20 questions) published to a live `python -m serving` (with its daemon), searched through the
API 5 s after publishing ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_runs import assert_recall_beats, interaction_search_report

pytestmark = pytest.mark.e2e


def test_interaction_search_through_the_api_smoke(tmp_path: Path) -> None:
    from benchmarks import interaction_corpus as corpus

    per_user = corpus.SESSIONS * corpus.TURNS_PER_SESSION
    data = interaction_search_report(
        tmp_path / "interaction_search_live.json", "--through-api", "--users", "1", "--wait", "5"
    )
    api = data["through_api"]
    assert api["turns"] == per_user and api["publishes"] == corpus.SESSIONS
    then = api["at_measurement"]
    assert sum(then["learning_status"].values()) == corpus.SESSIONS
    assert 0 <= then["unindexed_turns"] <= per_user
    # every question answered through the API: ids mapped back to the corpus's turns (0 would mean none matched)
    assert_recall_beats(api["ours"], api["plain_bm25"])
    for side in ("ours", "plain_bm25"):
        assert api[side]["cold"]["calls"] == 20 and api[side]["cold"]["p95_ms"] >= api[side]["cold"]["p50_ms"] > 0
