"""search_interactions on long multi-session conversations: recall of the evidence turns and latency, ours beside
today's per-request BM25 (the route before issue #21) in the same run.

Corpus: benchmarks/interaction_corpus.py (written for the project, deterministic): 10 pairs of speakers, 26 dated
sessions of 27 turns each (702 turns per user), 200 questions in five categories (single_hop, multi_hop, temporal,
speaker, context), each with the turns that hold its answer. Turns are landed through the service's group-commit
writer (one publish per session, `created_at` = the session's date), then one index build takes them in the way
`interaction_index_sensor`'s runs do (`index_documents(new_turns=True)` → `stage_update`, every turn line embedded
once through the lake's embedding cache).

Recall@k: the share of a question's evidence turns among the top k, averaged per category and overall.

Ours: `serving.interaction_search.search_turns` on a `ServiceState` over the lake (the service layer of
`POST /api/search_interactions`: served index version, recent-turns overlay, heuristic speaker/time boosts,
neighbours). Baseline: the route as it was, `turn_rows` (the user's turns from the lake) + in-memory BM25 over each
turn's content, built per request.

Latency: p50/p95 per call, cold (the first call of each question: its query embedding is computed, 5-20 ms with the
local model) and warm (query embeddings cached, as the service's LRU serves repeated and recent queries). At
--big-turns per user (default 100,000) the latency is measured on one user whose turns are the first pair's
conversation repeated, each copy its own sessions an hour after the previous copy's (recall is not meaningful
there: answers repeat); the HNSW graph is built for it (>= 50,000 rows), and its questions are also asked through HTTP
(`ours_http`: `python -m serving --no-daemon` over the lake, `POST /api/search_interactions`, what a client waits).
Results go to benchmarks/results/interaction_search.json.

    .venv/bin/python -m benchmarks.interaction_search [--users 10] [--seed 7] [--big-turns 100000] [--trials 3]

Through the API (benchmarks/interaction_search_live.py; results to benchmarks/results/interaction_search_live.json):
`--through-api` publishes the corpus to `python -m serving` alone (its own daemon learns and indexes; fresh lake),
waits `--wait` seconds after publishing ends, and asks every question through `POST /api/search_interactions`,
beside plain BM25 over the same turns; `--steady-rate 50 --steady-seconds 60` measures publish -> served by the
index and publish -> learned under steady publishing without `wait_for_response`.

    .venv/bin/python -m benchmarks.interaction_search --through-api [--users 10] [--seed 11] [--wait 60]
    .venv/bin/python -m benchmarks.interaction_search --through-api --corpus realtalk [--split dev] [--wait 60]
    .venv/bin/python -m benchmarks.interaction_search --steady-rate 50 [--steady-seconds 60] [--learned-sample 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import (
    hermetic_env,
    make_dagster_home,
    percentile,
    start_service,
    stop_process,
    write_result,
)
from benchmarks.interaction_corpus import Conversation, corpus
from reflexio_pipelines.lake.embedding_cache import EmbeddingCache
from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.incremental import stage_update
from reflexio_pipelines.search.turns import rank_texts
from reflexio_pipelines.search.versions import activate_version
from reflexio_pipelines.settings import Settings
from serving.interaction_search import search_turns
from serving.landing import LandingWriter
from serving.models.publish import PublishUserInteractionRequest
from serving.routers.publish import landing_rows
from serving.state import ServiceState

KS = (1, 5, 10)
RESULTS = Path(__file__).resolve().parent / "results" / "interaction_search.json"
LIVE_RESULTS = RESULTS.with_name("interaction_search_live.json")


def land_conversations(lake: Lake, conversations: list[Conversation], copies: int = 1) -> None:
    """Publish every session (one request each) through the group-commit writer. `copies` > 1 repeats each
    conversation with its dates an hour later per copy (copies overlap in time, each its own sessions)."""
    writer = LandingWriter(lake)
    writer.start()
    try:
        futures = []
        for c in conversations:
            for copy in range(copies):
                for n, (session, date) in enumerate(zip(c.sessions, c.dates, strict=True)):
                    at = date + timedelta(hours=copy)
                    body = PublishUserInteractionRequest.model_validate(
                        {
                            "user_id": c.user_id,
                            "session_id": f"{c.user_id}-c{copy}-s{n}",
                            "source": "benchmark",
                            "interaction_data_list": [
                                {"role": speaker, "content": text, "created_at": int(at.timestamp()) + 30 * i}
                                for i, (speaker, text) in enumerate(session)
                            ],
                        }
                    )
                    request_id = f"{c.user_id}-c{copy}-s{n}"
                    futures.append(writer.submit(request_id, landing_rows(body, request_id)))
        for future in futures:
            future.result(timeout=120)
    finally:
        writer.close()


def turn_keys(lake: Lake) -> dict[int, str]:
    """interaction id → "s<session>:t<turn>" for every landed turn (copy 0 only carries the benchmark's keys)."""
    out = {}
    for row in turn_rows(lake):
        request = row["request_id"]
        if "-c0-s" in request:
            out[row["interaction_id"]] = f"s{request.rsplit('-s', 1)[1]}:t{row['turn_index']}"
    return out


def build(lake: Lake, embedder: Any) -> dict[str, Any]:
    """Take every landed turn into a new index version (as an `index_turns` run does) and serve it."""
    started = time.perf_counter()
    cache = EmbeddingCache(lake)
    docs, counts, watermarks = index_documents(lake, new_turns=True)
    staged = stage_update(lake.index_root, docs, embedder, cache=cache, watermarks=watermarks)
    activate_version(lake.index_root, staged.version)
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "turns": counts["interaction"],
        **cache.stats.metadata(),
    }


def baseline(lake: Lake, user_id: str, query: str, top_k: int) -> list[int]:
    """The route before issue #21: the user's turns from the lake, BM25 over content built per request."""
    rows = turn_rows(lake, [("user_id", "=", user_id)])
    texts = [f"{r['content'] or ''} {r['user_action_description'] or ''}" for r in rows]
    return [rows[i]["interaction_id"] for i in rank_texts(texts, query, top_k)]


def ours(state: ServiceState, user_id: str, query: str, top_k: int) -> list[int]:
    views, _ = search_turns(state, user_id, query, top_k, "hybrid", None, None)
    return [v["interaction_id"] for v in views]


def evaluate(search, conversations: list[Conversation], keys: dict[int, str]) -> dict[str, Any]:
    """Recall@k per category and overall, and per-call latency (the first call of each question: cold)."""
    per: dict[str, dict[int, list[float]]] = {}
    times = []
    for c in conversations:
        for q in c.questions:
            started = time.perf_counter()
            found = [keys.get(i) for i in search(c.user_id, q.question, max(KS))]
            times.append(time.perf_counter() - started)
            for k in KS:
                got = sum(1 for e in q.evidence if e in found[:k]) / len(q.evidence)
                per.setdefault(q.category, {}).setdefault(k, []).append(got)
                per.setdefault("overall", {}).setdefault(k, []).append(got)
    recall = {
        cat: {f"recall@{k}": round(statistics.fmean(v), 3) for k, v in ks.items()} | {"n": len(ks[1])}
        for cat, ks in per.items()
    }
    return {"recall": recall, "cold": _stats(times)}


def latency(search, conversations: list[Conversation], trials: int) -> dict[str, float]:
    """Warm per-call latency over `trials` passes of every question."""
    times = []
    for _ in range(trials):
        for c in conversations:
            for q in c.questions:
                started = time.perf_counter()
                search(c.user_id, q.question, max(KS))
                times.append(time.perf_counter() - started)
    return _stats(times)


def _stats(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": percentile(ms, 0.95, digits=2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "max_ms": round(ms[-1], 2),
        "calls": len(ms),
    }


def over_http(lake: Lake, conversations: list[Conversation], trials: int) -> dict[str, Any]:
    """The same questions through `POST /api/search_interactions` of `python -m serving --no-daemon` over the lake
    (the served version is the one just built): the first pass cold, then `trials` warm passes."""
    home = make_dagster_home(lake.root.parent / "dagster_home")
    env = hermetic_env(REFLEXIO_LAKE=str(lake.root), DAGSTER_HOME=str(home))
    proc, url = start_service(lake.root, env, daemon=False, timeout=180)
    try:
        with httpx.Client(base_url=url, timeout=60) as http:

            def search(user_id: str, query: str, top_k: int) -> list[int]:
                body = {"user_id": user_id, "query": query, "top_k": top_k}
                reply = http.post("/api/search_interactions", json=body)
                reply.raise_for_status()
                return [v["interaction_id"] for v in reply.json()["interactions"]]

            cold = latency(search, conversations, 1)
            return {"cold": cold, "warm": latency(search, conversations, trials)}
    finally:
        stop_process(proc, group=True)


def run_size(
    conversations: list[Conversation], copies: int, trials: int, with_baseline: bool, http: bool = False
) -> dict[str, Any]:
    """Land, index and measure one corpus size in a fresh lake (`http`: also through a live service)."""
    with tempfile.TemporaryDirectory(prefix="reflexio-interactions-") as tmp:
        lake = Lake.at(Path(tmp) / "lake")
        started = time.perf_counter()
        land_conversations(lake, conversations, copies)
        landed_s = time.perf_counter() - started
        state = ServiceState.create(Settings(lake=str(lake.root)))
        built = build(lake, state.embedder)
        state.index.refresh()
        state.curation.refresh()
        keys = turn_keys(lake)
        turns_per_user = len(keys) * copies // len(conversations)
        out: dict[str, Any] = {
            "turns_per_user": turns_per_user,
            "users": len(conversations),
            "landing_seconds": round(landed_s, 2),
            "index_build": built,
        }
        mine = lambda u, q, k: ours(state, u, q, k)  # noqa: E731
        state.embedder.clear_query_cache()  # cold: no question embedded before (the embedder is shared per process)
        out["ours"] = evaluate(mine, conversations, keys)
        out["ours"]["warm"] = latency(mine, conversations, trials)
        if with_baseline:
            base = lambda u, q, k: baseline(lake, u, q, k)  # noqa: E731
            out["baseline"] = evaluate(base, conversations, keys)
            out["baseline"]["warm"] = latency(base, conversations, 1)
        state.close()
        if http:
            out["ours_http"] = over_http(lake, conversations, trials)
        return out


def report(name: str, result: dict[str, Any]) -> None:
    print(
        f"\n== {name}: {result['users']} user(s), {result['turns_per_user']} turns/user; index build "
        f"{result['index_build']['seconds']} s ({result['index_build']})"
    )
    sides = [s for s in ("ours", "baseline") if s in result]
    if "recall" in result["ours"] and result["turns_per_user"] < 1000:
        print(f"{'category':<12}" + "".join(f"{s + ' R@' + str(k):>16}" for s in sides for k in KS) + f"{'n':>6}")
        for cat in result["ours"]["recall"]:
            row = "".join(f"{result[s]['recall'][cat][f'recall@{k}']:>16.3f}" for s in sides for k in KS)
            print(f"{cat:<12}{row}{result['ours']['recall'][cat]['n']:>6}")
    for side in [*sides, *(["ours_http"] if "ours_http" in result else [])]:
        for phase in ("cold", "warm"):
            st = result[side][phase]
            print(
                f"{side:<9}{phase:<5} p50 {st['p50_ms']:>7.2f} ms  p95 {st['p95_ms']:>7.2f} ms  ({st['calls']} calls)"
            )
    if "baseline" in result:
        for phase in ("cold", "warm"):
            ratio = result["baseline"][phase]["p50_ms"] / max(result["ours"][phase]["p50_ms"], 1e-9)
            print(f"p50 ratio baseline/ours ({phase}): {ratio:.1f}x")


def report_live(results: dict[str, Any]) -> None:
    api = results.get("through_api")
    if api:
        then = api["at_measurement"]
        print(
            f"\n== through the API: {api['users']} user(s), {api['turns']} turns in {api['publishes']} publishes "
            f"({api['publish_seconds']} s); {api['wait_after_publishing_s']} s later: {then['unindexed_files']} "
            f"landing files ({then['unindexed_turns']} turns) not in the served index, learning {then['learning_status']}"
        )
        sides = ("ours", "plain_bm25")
        print(f"{'category':<12}" + "".join(f"{s[:5] + ' R@' + str(k):>12}" for s in sides for k in KS) + f"{'n':>6}")
        for cat, counts in api["ours"]["recall"].items():
            row = "".join(f"{api[s]['recall'][cat][f'recall@{k}']:>12.3f}" for s in sides for k in KS)
            print(f"{cat:<12}{row}{counts['n']:>6}")
        phases = [
            ("plain_bm25", "cold"),
            ("ours", "cold"),
            ("ours", "first_search_per_user"),
            ("ours", "later_searches"),
        ]
        for side, phase in phases:
            st = api[side][phase]
            print(
                f"{side:<11}{phase:<22} p50 {st['p50_ms']:>8.1f} ms  p95 {st['p95_ms']:>8.1f} ms  ({st['calls']} calls)"
            )
    steady = results.get("steady")
    if steady:
        print(
            f"\n== steady publishing: {steady['achieved_turns_per_s']} turns/s for {steady['publish_s']} s "
            f"({steady['publishes']} publishes, {steady['publish_errors']} errors)"
        )
        print(f"first publish on the fresh service (cold start): {steady['first_publish_from_cold']}")
        for what in ("publish_to_indexed", "publish_to_learned"):
            print(f"{what:<20} {steady[what]}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7, help="corpus draw (names, facts, chit-chat; same templates)")
    parser.add_argument("--big-turns", type=int, default=100_000, help="turns of the large user (0: skip)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None, help=f"default {RESULTS} ({LIVE_RESULTS.name} live)")
    parser.add_argument("--through-api", action="store_true", help="publish and search through a live service")
    parser.add_argument(
        "--corpus",
        choices=("template", "realtalk"),
        default="template",
        help="--through-api: our template corpus (--seed) or real people's chats (benchmarks/interaction_realtalk_corpus.py)",
    )
    parser.add_argument("--split", choices=("dev", "heldout"), default="dev", help="the realtalk corpus's chats")
    parser.add_argument("--wait", type=float, default=60.0, help="seconds after publishing ends before searching")
    parser.add_argument("--steady-rate", type=float, default=0.0, help="turns/s of steady publishing (0: skip)")
    parser.add_argument("--steady-seconds", type=float, default=60.0)
    parser.add_argument("--learned-sample", type=int, default=100, help="publishes followed until learned")
    parser.add_argument("--follow-timeout", type=float, default=300.0, help="s to follow publishes after the load")
    args = parser.parse_args(argv)
    if args.through_api or args.steady_rate:
        return main_live(args)
    args.output = args.output or RESULTS
    conversations = corpus(args.users, args.seed)
    results: dict[str, Any] = {"corpus": "benchmarks/interaction_corpus.py", "seed": args.seed}
    results["long_conversations"] = run_size(conversations, 1, args.trials, with_baseline=True)
    report("long conversations", results["long_conversations"])
    if args.big_turns:
        per_copy = sum(len(s) for s in conversations[0].sessions)
        copies = max(1, round(args.big_turns / per_copy))
        results["large_user"] = run_size(conversations[:1], copies, args.trials, with_baseline=True, http=True)
        report("large user (latency only)", results["large_user"])
    print(f"\nwritten to {write_result(args.output, results)}")
    return results


def main_live(args: argparse.Namespace) -> dict[str, Any]:
    """The live modes: each on its own fresh service (benchmarks/interaction_search_live.py)."""
    from benchmarks import interaction_search_live as live

    if args.corpus == "realtalk":
        from benchmarks import interaction_realtalk_corpus

        results: dict[str, Any] = {"corpus": "benchmarks/interaction_realtalk_corpus.py", "split": args.split}
        conversations = interaction_realtalk_corpus.corpus(min(args.users, 5), split=args.split)
    else:
        results = {"corpus": "benchmarks/interaction_corpus.py", "seed": args.seed}
        conversations = corpus(args.users, args.seed)
    if args.through_api:
        with tempfile.TemporaryDirectory(prefix="reflexio-search-live-") as tmp:
            results["through_api"] = live.through_api(conversations, Path(tmp), args.wait, evaluate)
    if args.steady_rate:
        with tempfile.TemporaryDirectory(prefix="reflexio-steady-") as tmp:
            results["steady"] = live.steady(
                Path(tmp), args.steady_rate, args.steady_seconds, args.learned_sample, args.follow_timeout
            )
    report_live(results)
    output = args.output or LIVE_RESULTS
    print(f"\nwritten to {write_result(output, results)}")
    return results


if __name__ == "__main__":
    main()
