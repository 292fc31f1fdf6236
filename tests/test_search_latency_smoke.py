"""Smoke test of benchmarks/search_latency.py at a tiny size (3x50 rows, 3 trials, service layer only), with the
HNSW threshold lowered so the graph-building path of the index runs too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_search_latency_benchmark_smoke(tmp_path: Path) -> None:
    from benchmarks import search_latency as bench

    out = tmp_path / "search_latency.json"
    returned = bench.main(
        [
            "--sizes",
            "50",
            "--trials",
            "3",
            "--warmup",
            "1",
            "--layers",
            "service",
            "--hnsw-min-rows",
            "40",
            "--output",
            str(out),
        ]
    )

    data = json.loads(out.read_text())
    assert data["sizes"].keys() == returned["sizes"].keys() == {"50"}
    assert data["config"]["trials"] == 3 and len(data["config"]["queries"]) == 20
    size = data["sizes"]["50"]
    assert size["rows_total"] == 150
    assert data["config"]["hnsw_min_rows"] == 40
    assert set(size["vector_index"]) == {"profile", "user_playbook", "agent_playbook"}
    assert all(v.startswith("hnsw ") for v in size["vector_index"].values())  # 50 rows >= 40: graphs built
    assert len(size["load_avg_before"]) == len(size["load_avg_after"]) == 3

    # Every retrieval kind has stats for both sides, over 3 trials x 20 queries, and a ratio.
    service = size["results"]["service"]
    assert set(service) == {"profile", "user_playbook", "agent_playbook", "unified"}
    for kind, row in service.items():
        for side in ("ours", "baseline"):
            s = row[side]
            assert s["n"] == 60, (kind, side)
            assert 0 < s["p50"] <= s["p95"], (kind, side, s)
            assert s["mean"] > 0
        assert row["ratio_p50"] == pytest.approx(row["ours"]["p50"] / row["baseline"]["p50"], rel=1e-3)
    assert "http" not in size["results"]  # service layer only

    # Both sides answered every query with results.
    for side in ("ours", "baseline"):
        per_query = size["top_ids_unified"][side]
        assert len(per_query) == 20
        for qi, result in enumerate(per_query):
            assert set(result) == {"profiles", "user_playbooks", "agent_playbooks"}
            assert any(result.values()), (side, qi, data["config"]["queries"][qi])

    # Ours returns the planted document for the keyword query aimed at it.
    assert data["config"]["queries"][0]["kind"] == "short_keyword"
    assert "planted-profile-kestrel" in size["top_ids_unified"]["ours"][0]["profiles"]
    assert size["planted_found"]["ours"]["q0:kestrel ledger export"] is True

    recall = size["recall_at_10"]
    # The graphs exist, but filters admitting this few rows are scanned exactly: recall is 1.
    assert recall["vector_index"] == {"profile": "hnsw", "user_playbook": "hnsw", "agent_playbook": "hnsw"}
    assert recall["ours"] == pytest.approx(1.0)
    assert 0.0 <= recall["baseline"] <= 1.0
