"""Smoke test of benchmarks/window_cost.py at a tiny size, through its command line (`--quick`: lakes of 0 and 30
users in 10-user windows, a 3-user window, in-process passes only, a 2,000-doc index build; about 40-60 s on 2
cores). Checks the JSON's shape, that its numbers are sane and add up, and that the window's users were learned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmark_runs import run_benchmark

pytestmark = pytest.mark.e2e

STEPS = ("turns", "user_learning", "search_index", "search_index_is_servable", "serving_index")


def test_window_cost_benchmark_smoke(tmp_path: Path) -> None:
    out, workdir = tmp_path / "window_cost.json", tmp_path / "work"
    done = run_benchmark("window_cost", "--quick", "--workdir", str(workdir), "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())

    assert data["benchmark"] == "window_cost" and data["notes"]
    assert len(data["machine"]["load_average_at_start"]) == 3
    assert set(data["sizes"]) == {"0", "30"}
    window_users = data["params"]["window_users"]
    assert window_users == 3
    for n, row in data["sizes"].items():
        assert row["lake"]["users"] == int(n)
        assert row["lake"]["windows"] == (0 if n == "0" else 3)
        assert len(row["in_process"]) == data["params"]["repeats"] == 1
        for r in row["in_process"]:
            # the window's users were learned: every one of them has a bookmark in the measured window
            assert r["window_users_learned"] == window_users
            assert r["runs"] and all(run["status"] == "SUCCESS" for run in r["runs"])
            assert set(STEPS) <= set(r["steps_s"]) and all(v >= 0 for v in r["steps_s"].values())
            assert 0 < sum(r["steps_s"].values()) <= r["wall_s"]
            assert r["index_docs"] > 0
            cache = r["embedding_cache"]
            assert cache["embedded"] + cache["cached"] == cache["texts"] > 0
            reads = r["lake_reads"]
            assert reads["files_read"] > 0 and reads["bytes_of_files_read"] > 0 and not reads["overflow"]
            assert reads["files_read"] == sum(v["files"] for v in reads["by_area"].values())
            assert r["proc_io"]["rchar"] > 0
            assert 0 < r["cpu_s"]
        assert row["summary"]["wall_s_p50"] == row["in_process"][0]["wall_s"]
        assert row["cli_runs"] == [] and "strace" not in row  # --quick runs no subprocess pass
    empty, grown = data["sizes"]["0"], data["sizes"]["30"]
    assert empty["ratio_vs_empty"]["in_process_wall_p50"] == 1.0
    assert grown["ratio_vs_empty"]["in_process_wall_p50"] == pytest.approx(
        grown["summary"]["wall_s_p50"] / empty["summary"]["wall_s_p50"], abs=0.01
    )
    # a grown lake holds more documents and its history is read
    assert grown["in_process"][0]["index_docs"] > empty["in_process"][0]["index_docs"]
    assert grown["in_process"][0]["lake_reads"]["delta_data_files_read"] > 0

    build = data["index_build"]
    assert build["docs"] == 2000 and build["added"] == 100
    full = build["builds"]["2000_docs_full_build"]
    plus = build["builds"]["2000+100_new_10_edited_10_deleted_delta"]
    rebuild = build["builds"]["2000+100_same_docs_full_rebuild"]
    assert full["embedded"] == 0 and full["from_cache"] == 2000
    # the delta embeds exactly the new and edited texts and writes a fraction of what a full build writes
    assert plus["embedded"] == 110 and plus["docs_upserted"] == 110 and plus["docs_deleted"] == 10
    assert plus["docs"] == rebuild["docs"] == 2090 and 0 < plus["bytes_written"] < rebuild["bytes_written"] / 5
    assert rebuild["embedded"] == 0  # the delta stored its new vectors in the cache
    same = build["delta_matches_full_rebuild"]
    # The vector leg is exact; BM25 statistics still count the 20 tombstoned docs, which may swap near ties.
    assert same["searches"] == 132 and same["differing_order"].get("vector", 0) == 0
    assert same["top10_overlap_mean"] >= 0.95

    targets = data["targets"]
    assert set(targets) == {"window_5k", "window_50k", "index_plus_100"}
    assert all(t["at_issue_size"] is False and t["met"] is None for t in targets.values())
    assert all(t["verdict"].startswith("not at issue size") for t in targets.values())
    assert "targets (issue 15)" in done.stdout
