"""Smoke test of `benchmarks/interaction_search.py --through-api` at a tiny size: one pair's conversation (26
sessions x 27 turns, 20 questions) published to a live `python -m serving` (with its daemon), searched through the
API 5 s after publishing ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_interaction_search_through_the_api_smoke(tmp_path: Path) -> None:
    from benchmarks import interaction_corpus as corpus
    from benchmarks import interaction_search as bench

    per_user = corpus.SESSIONS * corpus.TURNS_PER_SESSION
    out = tmp_path / "interaction_search_live.json"
    returned = bench.main(["--through-api", "--users", "1", "--wait", "5", "--output", str(out)])
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(returned))
    api = data["through_api"]
    assert api["turns"] == per_user and api["publishes"] == corpus.SESSIONS
    then = api["at_measurement"]
    assert sum(then["learning_status"].values()) == corpus.SESSIONS
    assert 0 <= then["unindexed_turns"] <= per_user
    recall = api["ours"]["recall"]
    assert set(recall) == {"overall", "single_hop", "multi_hop", "temporal", "speaker", "context"}
    assert recall["overall"]["n"] == 20
    assert recall["overall"]["recall@1"] <= recall["overall"]["recall@5"] <= recall["overall"]["recall@10"]
    # every question answered through the API: ids mapped back to the corpus's turns (0 would mean none matched)
    assert recall["overall"]["recall@10"] > api["plain_bm25"]["recall"]["overall"]["recall@10"]
    for side in ("ours", "plain_bm25"):
        assert api[side]["cold"]["calls"] == 20 and api[side]["cold"]["p95_ms"] >= api[side]["cold"]["p50_ms"] > 0
