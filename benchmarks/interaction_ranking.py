"""Ranking quality of search_interactions, in process: the index path and the landing-file fallback beside plain BM25.

Per corpus draw (benchmarks/interaction_corpus.py; a dev seed to tune on, a held-out seed evaluated once), in a
fresh lake: the conversations are landed as published turns (one publish per session, benchmarks/interaction_search
.py's `land_conversations`), then

- fallback: `search_turns` before any index version exists, so every turn comes from the landing files
  (serving/recent_turns.py), the path a client sees between a publish and the next index build;
- index: one index build takes every turn in (as an `index_turns` run does), then `search_turns` again;
- plain BM25: each user's turn contents, BM25 built per query (`rank_texts`), nothing else.

Recall@1/5/10 per category and overall go to benchmarks/results/interaction_ranking.json (or
interaction_ranking_public.json).

`--corpus public` measures on conversations we did not write (benchmarks/interaction_public_corpus.py: Synthetic-
Persona-Chat from the fetched mirror; dev = its valid file, held-out = its test file). `--ablation` also measures the
index path with one leg off at a time: BM25 only (mode fts), vectors only (mode vector), no time leg, no speaker leg
(`search_turns(boosts=...)`), and no neighbours (a second lake whose documents carry no window: the module constants
`CONTEXT_BEFORE`/`CONTEXT_AFTER` of search/conversation.py at 0 for the build, so the vector is the turn's own line).

    .venv/bin/python -m benchmarks.interaction_ranking [--corpus template|public] [--ablation] [--users 10]
        [--dev-seed 7] [--heldout-seed 11]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any
from unittest.mock import patch

from benchmarks import interaction_corpus, interaction_public_corpus, interaction_realtalk_corpus
from benchmarks._common import write_result
from benchmarks.interaction_corpus import Conversation
from benchmarks.interaction_search import KS, baseline, build, evaluate, land_conversations, turn_keys
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search import conversation as turn_windows
from reflexio_pipelines.settings import Settings
from serving.interaction_search import BOOSTS, search_turns
from serving.state import ServiceState

RESULTS = Path(__file__).resolve().parent / "results" / "interaction_ranking.json"
SIDES = ("index", "fallback", "plain_bm25")
# index-path variants with one leg off: (search mode, heuristic boosts)
ABLATIONS: dict[str, tuple[str, frozenset[str]]] = {
    "bm25_only": ("fts", BOOSTS),
    "vector_only": ("vector", BOOSTS),
    "no_time": ("hybrid", BOOSTS - {"time"}),
    "no_speaker": ("hybrid", BOOSTS - {"speaker"}),
}


def ours(state: ServiceState, mode: str = "hybrid", boosts: frozenset[str] = BOOSTS):
    """search_turns as the service calls it (with `mode` and `boosts`), answering interaction ids."""

    def search(user_id: str, query: str, top_k: int) -> list[int]:
        views, _ = search_turns(state, user_id, query, top_k, mode, None, None, boosts=boosts)
        return [v["interaction_id"] for v in views]

    return search


def draw(kind: str, users: int, seed: int, split: str) -> list[Conversation]:
    if kind == "public":
        return interaction_public_corpus.corpus(users, seed=seed, split=split)
    if kind == "realtalk":  # real people's chats; the seed draws nothing (the split names its five chats)
        return interaction_realtalk_corpus.corpus(min(users, 5), split=split)
    return interaction_corpus.corpus(users, seed=seed)


def run(conversations: list[Conversation], ablation: bool) -> dict[str, Any]:
    """Recall of the three rankers (and with `ablation`, of the index path without each leg) on one corpus draw."""
    out = _measure(conversations, ablation)
    if ablation:
        with (
            patch.object(turn_windows, "CONTEXT_BEFORE", 0),
            patch.object(turn_windows, "CONTEXT_AFTER", 0),
        ):
            out["no_neighbours"] = _measure(conversations, ablation=False, index_only=True)["index"]
    return out


def _measure(conversations: list[Conversation], ablation: bool, index_only: bool = False) -> dict[str, Any]:
    """The rankers' recall in a fresh lake: fallback before any build, then the index (and its ablations), BM25."""
    with tempfile.TemporaryDirectory(prefix="reflexio-ranking-") as tmp:
        lake = Lake.at(Path(tmp) / "lake")
        land_conversations(lake, conversations)
        keys = turn_keys(lake)
        state = ServiceState.create(Settings(lake=str(lake.root)))
        try:
            out = {}
            if not index_only:
                state.recent_turns.refresh(0)  # no index version yet: every landed turn is recent
                out["fallback"] = evaluate(ours(state), conversations, keys)
            build(lake, state.embedder)
            state.index.refresh()
            state.curation.refresh()
            out["index"] = evaluate(ours(state), conversations, keys)
            if not index_only:
                out["plain_bm25"] = evaluate(lambda u, q, k: baseline(lake, u, q, k), conversations, keys)
            for name, (mode, boosts) in ABLATIONS.items() if ablation else ():
                out[name] = evaluate(ours(state, mode, boosts), conversations, keys)
        finally:
            state.close()
    return {side: found["recall"] for side, found in out.items()}


def report(name: str, result: dict[str, Any]) -> None:
    print(f"\n== {name}")
    print(f"{'category':<12}" + "".join(f"{s[:8] + ' R@' + str(k):>14}" for s in SIDES for k in KS) + f"{'n':>6}")
    for cat, counts in result["index"].items():
        row = "".join(f"{result[s][cat][f'recall@{k}']:>14.3f}" for s in SIDES for k in KS)
        print(f"{cat:<12}{row}{counts['n']:>6}")
    variants = ["index", *ABLATIONS, "no_neighbours"]
    if "no_neighbours" in result:
        print(
            f"\nindex path, one leg off: recall@10 (@1) per category\n{'category':<12}"
            + "".join(f"{v:>16}" for v in variants)
        )
        for cat in result["index"]:
            row = "".join(f"{result[v][cat]['recall@10']:>9.3f} ({result[v][cat]['recall@1']:.2f})" for v in variants)
            print(f"{cat:<12}{row}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=("template", "public", "realtalk"), default="template")
    parser.add_argument("--ablation", action="store_true", help="also the index path with one leg off at a time")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--dev-seed", type=int, default=7)
    parser.add_argument("--heldout-seed", type=int, default=11)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    output = args.output or (
        RESULTS if args.corpus == "template" else RESULTS.with_name(f"interaction_ranking_{args.corpus}.json")
    )
    results = {
        split: {"corpus": args.corpus, "seed": seed, **run(draw(args.corpus, args.users, seed, split), args.ablation)}
        for split, seed in (("dev", args.dev_seed), ("heldout", args.heldout_seed))
    }
    for name, result in results.items():
        report(f"{name} ({result['corpus']} corpus, seed {result['seed']})", result)
    print(f"\nwritten to {write_result(output, results)}")
    return results


if __name__ == "__main__":
    main()
