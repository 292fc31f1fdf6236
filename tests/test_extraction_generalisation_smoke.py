"""Smoke test of benchmarks/extraction_generalisation.py at a tiny size through its command line: 3 probe users per
live measure, a stratified sample of 200 dev rows, both services (`python -m serving`, learned and rules) with two
materialize runs each. Checks that every section is there with numbers in range, that the live numbers add up, and
that no child process is left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.benchmark_runs import processes_mentioning, run_benchmark

pytestmark = pytest.mark.e2e

USERS = 3


def _rate(value: object) -> bool:
    return value is None or (isinstance(value, float | int) and 0.0 <= value <= 1.0)


def test_extraction_generalisation_smoke(tmp_path: Path) -> None:
    out = tmp_path / "extraction_generalisation.json"
    done = run_benchmark(
        "extraction_generalisation",
        *("--users", str(USERS), "--dev-limit", "200", "--out", str(out)),
        timeout=300,
        env=dict(os.environ, TMPDIR=str(tmp_path)),  # the lakes, so leftover children would name tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "served@5" in done.stdout and "ratio learned/rules" in done.stdout
    data = json.loads(out.read_text())
    assert set(data) >= {"params", "head_sha256_16", "dev", "cost", "live", "targets", "seconds"}

    dev = data["dev"]
    assert 150 <= dev["rows"] <= 250
    # the public rows are rebuilt from fetched datasets and never committed: a fresh clone scores our own rows only
    origins = ("all", "own", "public") if data["pools"] == "public" else ("all", "own")
    for origin in origins:
        assert 0.0 <= dev["classifier"][origin]["accuracy"] <= 1.0
        for kind, row in dev["classifier"][origin].items():
            if kind != "accuracy":
                assert _rate(row["precision"]) and _rate(row["recall"]) and row["gold"] > 0
        for name in ("learned", "rules"):
            lasting = dev["lasting"][name][origin]
            assert all(_rate(lasting[k]) for k in ("precision", "recall", "right_type"))
    assert sum(row["gold"] for k, row in dev["classifier"]["all"].items() if k != "accuracy") == dev["rows"]

    cost = data["cost"]
    assert cost["windows"] == USERS and cost["turns"] >= USERS * 8
    for name in ("learned", "rules"):
        assert cost[name]["s_per_1k_turns"] > 0 and 0 < cost[name]["p50_ms"] <= cost[name]["p95_ms"]
    assert cost["ratio_learned_over_rules"] > 0

    assert set(data["live"]) == {"learned", "rules"}
    for part in data["live"].values():
        served = part["served"]
        assert served["probes"] == USERS and len(served["per_probe"]) == USERS
        for route in ("unified", "per_entity"):
            stats = served[route]
            assert _rate(stats["served_at_5"]) and _rate(stats["served_precision"]) and _rate(stats["false_serve_rate"])
            assert stats["hits"] == sum(p[route]["hit"] for p in served["per_probe"])
            assert stats["relevant_related"] <= stats["served_related"] <= USERS * 10
        junk = part["junk"]
        assert junk["sessions"] == USERS and junk["items"] >= 0 and junk["filler_sessions"] == USERS * 3
        sup = part["supersession"]
        assert sup["probes"] == USERS
        for route in ("unified", "per_entity"):
            assert sup[route]["old_items_served"] >= 0 and _rate(sup[route]["update_served_rate"])
            assert sup[route]["probes_with_old_served"] <= USERS
        assert len(part["learn_runs_s"]) == 2 and all(s > 0 for s in part["learn_runs_s"])
    assert not processes_mentioning(str(tmp_path)), "a child process outlived the benchmark"
