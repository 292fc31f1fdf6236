"""Benchmarks run at a tiny size, as the smoke tests of benchmarks/ run them: through their command lines, or
in-process where the test reads what `main` returned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(
    module: str, *args: str, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m benchmarks.<module> <args>` from the repository's root (the benchmarks read their data by relative
    path), its output captured as text; `env` None inherits this process's environment."""
    command = [sys.executable, "-m", f"benchmarks.{module}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def processes_mentioning(text: str) -> list[str]:
    """The command lines of live processes that mention `text`: given a benchmark's temporary directory, the children
    it left behind."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        if text in args:
            found.append(args)
    return found


def interaction_search_report(out: Path, *args: str) -> dict:
    """benchmarks/interaction_search.py run in-process with `args`, its report written to `out`: the report read
    back, checked to be what `main` returned (the file is what the docs quote)."""
    from benchmarks import interaction_search

    returned = interaction_search.main([*args, "--output", str(out)])
    data = json.loads(out.read_text())
    assert data == json.loads(json.dumps(returned))
    return data


def assert_recall_beats(ours: dict, baseline: dict) -> None:
    """Our recall on the 20 questions of one pair's conversation: every question category reported, recall growing
    with k, and better at 10 than the plain BM25 baseline's."""
    recall = ours["recall"]
    assert set(recall) == {"overall", "single_hop", "multi_hop", "temporal", "speaker", "context"}
    assert recall["overall"]["n"] == 20
    assert recall["overall"]["recall@1"] <= recall["overall"]["recall@5"] <= recall["overall"]["recall@10"]
    assert recall["overall"]["recall@10"] > baseline["recall"]["overall"]["recall@10"]
