"""Smoke test of benchmarks/learning_throughput.py at a tiny size, through its command line: the rounds phase with
one round count (one pass over 2 users x 4 turns against the 0.2 s stub in its own process, the service and
`python -m reflexio_pipelines materialize` as subprocesses; about 30-60 s on 2 cores, most of it the materialize
process). Checks the JSON's shape, that its numbers add up, and that every child process is gone afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benchmark_runs import processes_mentioning, run_benchmark

pytestmark = pytest.mark.e2e

USERS, TURNS = 2, 4


def test_learning_throughput_benchmark_smoke(tmp_path: Path) -> None:
    out, workdir = tmp_path / "learning_throughput.json", tmp_path / "work"
    done = run_benchmark(
        "learning_throughput",
        *("--phase", "rounds", "--rounds-users", str(USERS), "--turns-per-user", str(TURNS), "--rounds", "1"),
        *("--rounds-delay", "0.2", "--per-publish-users", "0", "--settle-s", "0", "--max-run-s", "240"),
        *("--out", str(out), "--workdir", str(workdir)),
        timeout=420,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert processes_mentioning(str(workdir)) == []  # stub, service and materialize processes all stopped

    data = json.loads(out.read_text())
    assert data["benchmark"] == "learning_throughput"
    assert any("NOT extraction quality" in note for note in data["notes"])
    assert data["params"]["phases"] == ["rounds"] and data["params"]["rounds"] == [1]
    assert data["runtime_s"]["rounds"] > 0 and data["machine"]["cpus"] >= 1

    rounds = data["phases"]["rounds"]
    assert rounds["stream"]["users"] == USERS and rounds["stream"]["turns"] == USERS * TURNS
    assert set(rounds["modes"]) == {"rounds_1"} and rounds["delay_s"] == 0.2
    one = rounds["modes"]["rounds_1"]
    assert one["publish_errors"] == 0 and one["failed_materialize"] == 0, one
    assert one["rounds"] == 1 and one["materialize_runs"] == 1 and one["settle_runs"] == 0
    assert one["turns_published"] == USERS * TURNS and one["users_published"] == USERS
    assert one["turns_learned"] == one["turns_published"]  # one pass (--flush all) learns every turn
    assert len(one["windows"]) >= 1 and 0 < one["learning_step_s_total"] < one["materialize_s_total"]
    assert one["profile_rows"] + one["playbook_rows"] > 0

    # The stub counted the pipeline's calls in its own process; per-1k figures are those counts scaled to the stream.
    stub = one["stub"]
    assert stub["calls"] >= USERS and stub["prompt_tokens"] > 0 and 1 <= stub["max_in_flight"] <= stub["calls"]
    assert sum(stub["calls_by_kind"].values()) == stub["all_calls"] == stub["calls"]  # all of them learning calls
    assert stub["calls_by_kind"]["extraction"] >= USERS and stub["all_prompt_tokens"] == stub["prompt_tokens"]
    assert stub["calls_per_1k_turns"] == pytest.approx(stub["calls"] * 1000 / (USERS * TURNS), abs=0.1)
    assert stub["prompt_tokens_per_1k_turns"] == pytest.approx(stub["prompt_tokens"] * 1000 / (USERS * TURNS), abs=0.1)
    assert one["calls_ratio_vs_1_round"] == 1.0 and one["prompt_tokens_ratio_vs_1_round"] == 1.0
    # ...and the run's own metadata, read back from the Dagster instance, saw the same users.
    assert one["pipeline_reported"]["users"] == USERS and one["pipeline_reported"]["failed_windows"] == 0
    assert one["pipeline_reported"]["prompt_tokens"] > 0
    assert "rounds_calls_ratio" not in data["targets"]  # one pass only: no cadence to compare it with
    assert "LLM cost by run cadence" in done.stdout and "NOT extraction quality" in done.stdout
