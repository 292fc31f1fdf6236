"""Index shards in serving (issue 15 item 5): RSS and answers of a replica loading 2 of 4 shards vs the whole index.

One index version of D synthetic documents (benchmarks/embedding_cache.py `documents`, spread over `--users` 1000
users: 2/3 profiles, 1/3 user playbooks; vectors text-like and cached, see window_cost.py `text_like_vectors`) is opened in fresh
subprocesses: once whole, once with `ShardSelector("0,1" of 4)` (what `REFLEXIO_INDEX_SHARDS=0,1`,
`REFLEXIO_INDEX_SHARD_COUNT=4` load), each running the same per-user searches (3 modes x Q queries for every user
the shard selection holds). Reported per subprocess: RSS after loading (VmRSS) and peak (VmHWM), load seconds,
search p50/p95; the ratio of the sharded RSS to the whole one (target <= 0.6, judged on the memory the version
takes, i.e. RSS growth from loading it; whole-process and anonymous-memory ratios beside) and whether every answer
of the sharded replica equals the whole index's (ids, ranks, scores, payloads).

    .venv/bin/python -m benchmarks.index_shards                 # 200k docs
    .venv/bin/python -m benchmarks.index_shards --docs 20000     # quicker

Writes benchmarks/results/index_shards.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, percentile, status_mb

QUERIES = [
    "deploy region",
    "python tests",
    "short answers please",
    "billing payments",
    "timezone berlin",
    "escalate support",
    "cluster alert oncall",
    "vegetarian lunch",
]
TARGET_RSS_RATIO = 0.6


def child(root: str, shards: str, count: int) -> dict[str, Any]:
    """Open the version (whole or sharded), search for every held user, return memory, timings and answers."""
    from reflexio_pipelines.learning.embedding import make_embedder
    from reflexio_pipelines.search.query import LoadedIndex
    from reflexio_pipelines.search.shards import ShardSelector
    from reflexio_pipelines.search.text import embed_search_query
    from reflexio_pipelines.search.types import SearchFilters

    embedder = make_embedder("local")
    vectors = {q: embed_search_query(embedder, q) for q in QUERIES}
    selector = ShardSelector.parse(shards, count)
    held = ShardSelector.parse("0,1", 4)  # both children answer the users the sharded replica holds
    baseline = status_mb("VmRSS")
    started = time.perf_counter()
    index = LoadedIndex.load(Path(root), shards=selector)
    load_s = time.perf_counter() - started
    rss, anon, file_backed = status_mb("VmRSS"), status_mb("RssAnon"), status_mb("RssFile")
    users = sorted({u for u in (index.field_values("profile", "user_id").values()) if u and held.holds(u)})
    answers, latencies = hashlib.sha256(), []
    for user in users:
        for query in QUERIES:
            for mode in ("hybrid", "vector", "fts"):
                began = time.perf_counter()
                hits = index.search(
                    "profile",
                    query,
                    vectors[query],
                    top_k=10,
                    threshold=0.0,
                    mode=mode,
                    filters=SearchFilters(user_id=user),
                )
                latencies.append((time.perf_counter() - began) * 1000)
                answers.update(
                    json.dumps(
                        [(h.doc_id, h.bm25_rank, h.vector_rank, round(h.score, 9), h.payload) for h in hits],
                        sort_keys=True,
                    ).encode()
                )
    return {
        "shards": shards or "all",
        "docs_loaded": {t: index.count(t) for t in ("profile", "user_playbook", "agent_playbook")},
        "rss_mb_before_load": round(baseline, 1),
        "rss_mb": round(rss, 1),
        "rss_index_mb": round(rss - baseline, 1),
        "peak_rss_mb": round(status_mb("VmHWM"), 1),
        "rss_anon_mb_after_load": round(anon, 1),
        "rss_file_mb_after_load": round(file_backed, 1),
        "rss_mb_after_searches": round(status_mb("VmRSS"), 1),
        "rss_file_mb_after_searches": round(status_mb("RssFile"), 1),
        "load_s": round(load_s, 2),
        "users_searched": len(users),
        "searches": len(latencies),
        "search_ms_p50": round(statistics.median(latencies), 3),
        "search_ms_p95": percentile(latencies, 0.95),
        "answers_sha256": answers.hexdigest(),
    }


def build(root: Path, n: int, users: int, seed: int, hnsw_min_rows: int) -> dict[str, Any]:
    from dataclasses import replace

    from benchmarks.embedding_cache import documents
    from benchmarks.window_cost import DictCache, text_like_vectors
    from reflexio_pipelines.learning.embedding import make_embedder
    from reflexio_pipelines.search.text import normalize_text
    from reflexio_pipelines.search.versions import publish_index

    embedder = make_embedder("local")
    docs = [replace(d, user_id=f"user-{i % users}") for i, d in enumerate(documents(n, seed))]
    texts = list(dict.fromkeys(normalize_text(d.text) for d in docs))
    cache = DictCache()
    cache.store(embedder.model_id, int(embedder.dim), texts, text_like_vectors(texts, embedder, int(embedder.dim)), {})
    started = time.perf_counter()
    version = publish_index(root, docs, embedder, cache=cache, hnsw_min_rows=hnsw_min_rows)
    return {"version": version, "docs": n, "users": users, "build_s": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, default=200_000)
    p.add_argument("--users", type=int, default=1000, help="users the documents belong to (hashed into the shards)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--hnsw-min-rows",
        type=int,
        default=50_000,
        help="the whole index's HNSW threshold (the index default); a sharded replica never loads the graph",
    )
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "index_shards.json"))
    p.add_argument("--child", nargs=3, metavar=("ROOT", "SHARDS", "COUNT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return {}
    with tempfile.TemporaryDirectory(prefix="reflexio-shards-") as tmp:
        root = Path(tmp) / "index"
        print(f"building a {args.docs}-doc index ...", flush=True)
        built = build(root, args.docs, args.users, args.seed, args.hnsw_min_rows)
        print(f"  built in {built['build_s']} s", flush=True)
        runs = {}
        for name, shards in (("whole", ""), ("shards_0_1_of_4", "0,1")):
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.index_shards", "--child", str(root), shards, "4"],
                cwd=ROOT,  # `-m` finds the package from the working directory
                check=True,
                capture_output=True,
                text=True,
            )
            runs[name] = json.loads(done.stdout.strip().splitlines()[-1])
            r = runs[name]
            print(
                f"  {name:18s} rss {r['rss_mb']:8.1f} MB (index {r['rss_index_mb']:8.1f} MB, peak "
                f"{r['peak_rss_mb']:8.1f})  load {r['load_s']:6.2f} s  search p50 {r['search_ms_p50']} ms p95 "
                f"{r['search_ms_p95']} ms  docs {r['docs_loaded']}",
                flush=True,
            )
    whole, part = runs["whole"], runs["shards_0_1_of_4"]
    ratio = round(part["rss_mb"] / whole["rss_mb"], 3)
    report = {
        "benchmark": "index_shards",
        "index": built,
        "hnsw_min_rows": args.hnsw_min_rows,
        "runs": runs,
        "rss_ratio_sharded_over_whole": ratio,
        "index_rss_ratio_sharded_over_whole": round(part["rss_index_mb"] / whole["rss_index_mb"], 3),
        "anon_rss_ratio_sharded_over_whole": round(part["rss_anon_mb_after_load"] / whole["rss_anon_mb_after_load"], 3),
        "answers_identical": part["answers_sha256"] == whole["answers_sha256"],
        "target": {
            "index_rss_ratio_max": TARGET_RSS_RATIO,
            "met": part["rss_index_mb"] / whole["rss_index_mb"] <= TARGET_RSS_RATIO
            and part["answers_sha256"] == whole["answers_sha256"],
        },
        "notes": [
            "RSS = VmRSS of a fresh process after loading (Python, numpy, tantivy, faiss and the local embedder "
            "included, as in a serving replica), rss_index_mb = the growth from loading the version; RssAnon = "
            "the process's own memory, RssFile = mapped file pages (tantivy's index is memory-mapped whole in "
            "both, so its pages count as the searches touch them, and the kernel may drop them). Searches: "
            "every held user x queries x 3 modes, user-filtered (what a replica serves); the whole index answers "
            "the same users so the two answer digests must match."
        ],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"RSS sharded / whole: {ratio} (index only {report['index_rss_ratio_sharded_over_whole']}, anonymous "
        f"{report['anon_rss_ratio_sharded_over_whole']}); answers "
        f"identical: {report['answers_identical']}; target <= {TARGET_RSS_RATIO}: "
        f"{'met' if report['target']['met'] else 'not met'}\nwrote {args.out}"
    )
    return report


if __name__ == "__main__":
    main()
