"""Index builds with the lake's embedding cache: a first build, a second build of the same lake, one with a few new
documents, and a build without the cache for reference, all with the real local embedder on the same documents.

The documents are synthetic profiles and user playbooks (seeded sentences of 8-24 words, like learned items) handed
straight to `stage_index`, the call the `search_index` asset makes, so the numbers are the build (embedding, BM25,
vectors, docs) without the Dagster run around it. Every build's vector files must be byte-identical to the uncached
build's (checked via the manifests' sha256), so the speed-up does not come from different vectors.

    .venv/bin/python -m benchmarks.embedding_cache [--docs 3000] [--new 20] [--seed 7]
                                                 [--out benchmarks/results/embedding_cache.json]

The default run takes 3-7 minutes on 2 cores, nearly all of it the three builds that embed everything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT  # importing reflexio_pipelines (here, via _common) turns telemetry off
from reflexio_pipelines.lake.embedding_cache import EmbeddingCache
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import stage_index

WORDS = (
    "deploy region service always never prefers python tests review timezone berlin london report morning "
    "evening answer short detail commit message english billing payments search retry backoff ticket escalate "
    "support vegetarian editor keybindings terraform kubernetes cluster alert oncall weekly summary"
).split()


def documents(n: int, seed: int, prefix: str = "d") -> list[SearchDoc]:
    """`n` distinct documents of 100 users, two thirds profiles and one third user playbooks."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        text = f"{' '.join(rng.choice(WORDS) for _ in range(rng.randint(8, 24)))} ({prefix}{i})"
        kind = "profile" if i % 3 else "user_playbook"
        docs.append(SearchDoc(kind, f"{prefix}{i}", text, {"content": text}, user_id=f"user-{i % 100}"))
    return docs


def timed_build(lake: Lake, docs: list[SearchDoc], embedder, cache: bool) -> dict:
    store = EmbeddingCache(lake) if cache else None
    started = time.perf_counter()
    version = stage_index(lake.index_root, docs, embedder, cache=store)
    seconds = time.perf_counter() - started
    manifest = json.loads((lake.index_root / version / "manifest.json").read_text())
    stats = store.stats if store else None
    return {
        "seconds": round(seconds, 3),
        "docs": len(docs),
        "embedded": stats.embedded if stats else len(docs),
        "from_cache": stats.cached if stats else 0,
        "files_read": stats.files_read if stats else 0,
        "vector_sha256": manifest["vector_sha256"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=3000)
    parser.add_argument("--new", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "embedding_cache.json"))
    args = parser.parse_args()

    embedder = make_embedder("local")
    embedder.embed(["warm-up"])  # model load is not part of any build
    docs = documents(args.docs, args.seed)
    grown = docs + documents(args.new, args.seed + 1, prefix="new")
    with tempfile.TemporaryDirectory(prefix="reflexio-cache-bench-") as tmp:
        cached_lake, plain_lake = Lake.at(Path(tmp) / "cached"), Lake.at(Path(tmp) / "plain")
        runs = {
            "uncached": timed_build(plain_lake, docs, embedder, cache=False),
            "first_build": timed_build(cached_lake, docs, embedder, cache=True),
            "second_build_same_lake": timed_build(cached_lake, docs, embedder, cache=True),
            f"build_with_{args.new}_new_docs": timed_build(cached_lake, grown, embedder, cache=True),
            f"uncached_with_{args.new}_new_docs": timed_build(plain_lake, grown, embedder, cache=False),
        }
    same = (
        runs["uncached"]["vector_sha256"]
        == runs["first_build"]["vector_sha256"]
        == runs["second_build_same_lake"]["vector_sha256"]
    )
    grown_same = (
        runs[f"build_with_{args.new}_new_docs"]["vector_sha256"]
        == runs[f"uncached_with_{args.new}_new_docs"]["vector_sha256"]
    )
    if not (same and grown_same):
        raise SystemExit("vectors differ between cached and uncached builds")
    for run in runs.values():
        del run["vector_sha256"]
    report = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        },  # other processes skew the embedding time
        "uncached_texts_per_second": round(args.docs / runs["uncached"]["seconds"], 1),
        "docs": args.docs,
        "runs": runs,
        "speedup_second_build": round(runs["uncached"]["seconds"] / runs["second_build_same_lake"]["seconds"], 1),
        "vectors_identical": True,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    for name, run in runs.items():
        print(f"{name:28s} {run['seconds']:8.2f} s  embedded {run['embedded']:6d}  from cache {run['from_cache']:6d}")
    print(
        f"second build of the same lake: {report['speedup_second_build']}x faster than without the cache; "
        f"vectors identical; uncached {report['uncached_texts_per_second']} texts/s; "
        f"load average {report['machine']['load_average_1m']}"
    )


if __name__ == "__main__":
    main()
