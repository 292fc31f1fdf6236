"""Smoke test of the LLM cost benchmark (benchmarks/llm_cost.py) on a tiny corpus.

It starts the OpenAI-compatible stub on 127.0.0.1 and runs both policies through the real LiteLLM client, so it is
an e2e test; the corpus is small enough (20 users x 12 turns) to finish in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.llm_cost import generate_corpus, main

pytestmark = pytest.mark.e2e


def test_corpus_is_deterministic_and_shaped_like_publishes():
    first, again = generate_corpus(5, 12, seed=3, hours=24), generate_corpus(5, 12, seed=3, hours=24)
    assert [t.content for t in first.turns] == [t.content for t in again.turns]
    assert len(first.turns) == 60
    assert all(2 <= len(p.turns) <= 4 for p in first.publishes)
    for user_id in {t.user_id for t in first.turns}:
        sessions: dict[str, list[str]] = {}
        for turn in (t for t in first.turns if t.user_id == user_id):
            sessions.setdefault(turn.session_id, []).append(turn.role)
        for roles in sessions.values():  # every session alternates user / assistant, starting with the user
            assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)


def test_benchmark_writes_report_and_ours_needs_fewer_calls(tmp_path: Path):
    out = tmp_path / "llm_cost.json"
    report = main(["--users", "20", "--turns-per-user", "12", "--seed", "3", "--out", str(out), "--quiet"])

    assert json.loads(out.read_text()) == report
    assert report["simulated"] is True
    corpus = report["corpus"]
    assert corpus["users"] == 20 and corpus["turns"] == 240
    assert corpus["conversation_tokens_per_1k_turns"] > 0
    for policy in ("ours", "original_policy"):
        block = report[policy]
        for key in ("chat_calls", "prompt_tokens", "completion_tokens"):
            assert block["per_1k_turns"][key] > 0
        assert block["prompt_tokens_multiple_of_conversation"] > 1
        assert block["by_call_kind"]["extraction"]["calls"] > 0

    windows = report["ours"]["windows"]
    assert windows["extraction_windows"] == windows["windows_planned"]
    assert windows["turns_covered"] == corpus["turns"]
    assert "gate" not in report["ours"]["by_call_kind"]  # our default config has no gate model
    assert report["original_policy"]["by_call_kind"]["gate"]["calls"] > 0

    ours, original = report["ours"]["totals"], report["original_policy"]["totals"]
    assert ours["calls"] < original["calls"]
    assert 0 < report["ratio_ours_over_original"]["chat_calls"] < 1
    assert report["reference_original_measured"]["chat_calls_per_1k_turns"] == 920
    assert set(report["target"]) == {"max_ratio", "calls_met", "prompt_tokens_met", "vs_measured_original"}
    assert set(report["target"]["vs_measured_original"]) == {
        "calls_ratio",
        "prompt_tokens_ratio",
        "calls_met",
        "prompt_tokens_met",
    }
