"""Ranking quality of search_interactions, in process: the index path and the landing-file fallback beside plain BM25.

Per corpus draw (benchmarks/interaction_corpus.py; a dev seed to tune on, a held-out seed evaluated once), in a
fresh lake: the conversations are landed as published turns (one publish per session, benchmarks/interaction_search
.py's `land_conversations`), then

- fallback: `search_turns` before any index version exists, so every turn comes from the landing files
  (serving/recent_turns.py), the path a client sees between a publish and the next index build;
- index: one index build takes every turn in (as an `index_turns` run does), then `search_turns` again;
- plain BM25: each user's turn contents, BM25 built per query (`rank_texts`), nothing else.

Recall@1/5/10 per category and overall go to benchmarks/results/interaction_ranking.json.

    .venv/bin/python benchmarks/interaction_ranking.py [--users 10] [--dev-seed 7] [--heldout-seed 11]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from interaction_corpus import corpus  # noqa: E402
from interaction_search import KS, baseline, build, evaluate, land_conversations, ours, turn_keys  # noqa: E402

from reflexio_pipelines.lake.io import Lake  # noqa: E402
from reflexio_pipelines.settings import Settings  # noqa: E402
from serving.state import ServiceState  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "interaction_ranking.json"
SIDES = ("index", "fallback", "plain_bm25")


def run(users: int, seed: int) -> dict[str, Any]:
    """Recall of the three rankers on one corpus draw, in a fresh lake."""
    conversations = corpus(users, seed=seed)
    with tempfile.TemporaryDirectory(prefix="reflexio-ranking-") as tmp:
        lake = Lake.at(Path(tmp) / "lake")
        land_conversations(lake, conversations)
        keys = turn_keys(lake)
        state = ServiceState.create(Settings(lake=str(lake.root)))
        try:
            state.recent_turns.refresh(0)  # no index version yet: every landed turn is recent
            out = {"fallback": evaluate(lambda u, q, k: ours(state, u, q, k), conversations, keys)}
            build(lake, state.embedder)
            state.index.refresh()
            state.curation.refresh()
            out["index"] = evaluate(lambda u, q, k: ours(state, u, q, k), conversations, keys)
            out["plain_bm25"] = evaluate(lambda u, q, k: baseline(lake, u, q, k), conversations, keys)
        finally:
            state.close()
    return {side: out[side]["recall"] for side in SIDES}


def report(name: str, result: dict[str, Any]) -> None:
    print(f"\n== {name}")
    print(f"{'category':<12}" + "".join(f"{s[:8] + ' R@' + str(k):>14}" for s in SIDES for k in KS) + f"{'n':>6}")
    for cat, counts in result["index"].items():
        row = "".join(f"{result[s][cat][f'recall@{k}']:>14.3f}" for s in SIDES for k in KS)
        print(f"{cat:<12}{row}{counts['n']:>6}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--dev-seed", type=int, default=7)
    parser.add_argument("--heldout-seed", type=int, default=11)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = {
        "dev": {"seed": args.dev_seed, **run(args.users, args.dev_seed)},
        "heldout": {"seed": args.heldout_seed, **run(args.users, args.heldout_seed)},
    }
    for name, result in results.items():
        report(f"{name} (seed {result['seed']})", result)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.output}")
    return results


if __name__ == "__main__":
    main()
