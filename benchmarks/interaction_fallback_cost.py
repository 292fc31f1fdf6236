"""search_interactions answered from landing files (issue #41 item 2): the cost of the fallback for turns no index
version holds yet, at 1x, 3x and 10x the backlog the issue measured (272 unindexed landing files, 10 conversations).

Corpus: benchmarks/interaction_corpus.py, 10 users of 26 sessions x 27 turns; backlog multiple m lands every
session m times (copy c's lines end in "take c", so every copy's lines are new to the embedder: ~260 m landing files,
~700 m unindexed turns per user), one publish per session through the service's group-commit writer (`LandingWriter`
with `publish.landing_rows`, as benchmarks/interaction_search.py lands them). No index version exists: every search is
answered by the fallback (serving/recent_turns.py, serving/interaction_search.py).

Per backlog size, in one process, each configuration on a fresh `ServiceState` over the same lake:
- `bounded`: the service as configured (`Settings.recent_turns_per_user`, the newest turns per user the fallback
  ranks);
- `unbounded` (the baseline): the same code with no bound (`recent_turns_per_user=0`: every unindexed turn).
Each on its own copy of the lake: the watcher tick that lists and parses the landing files (`refresh`, once), then
`--questions` questions of each of `--searchers` users through `search_turns` (the service layer of
`POST /api/search_interactions`): the first search of a user is `cold` (its lines are embedded), the rest `warm` (other
questions, each embedded: the query cache is cleared per configuration); then each searcher publishes one more
session as the publish route does and searches once (`after_publish`: the user's turns changed). p50/p95 of each;
`parsed_per_search` / `embedded` count the landing files parsed and the lines embedded during the searches (the
searches parse only the files of those publishes, as the service reads its own publishes at the next search).

`components` breaks the unbounded per-search work down for one user (what a search paid before the bound): listing
the landing hours, parsing every file, building the user's turn documents, embedding their lines, BM25 (an in-memory
tantivy index built per query), the documents' vectors and the cosine ranking.

    .venv/bin/python -m benchmarks.interaction_fallback_cost [--multiples 1 3 10] [--searchers 2] [--questions 10]

Results: benchmarks/results/interaction_fallback_cost.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import percentile
from benchmarks.interaction_corpus import Conversation, corpus
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import LANDING_TURNS
from reflexio_pipelines.pending import landing_files_after
from reflexio_pipelines.search.conversation import turn_docs
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.search.turns import rank_texts
from reflexio_pipelines.settings import Settings
from serving.interaction_search import search_turns
from serving.landing import LandingWriter
from serving.models.publish import PublishUserInteractionRequest
from serving.routers.publish import landing_rows
from serving.state import ServiceState

RESULTS = Path(__file__).resolve().parent / "results" / "interaction_fallback_cost.json"


def land(lake: Lake, conversations: list[Conversation], copies: int) -> int:
    """Publish every session `copies` times (one publish, hence one landing file, each), copy c an hour later with
    its lines marked "take c"; returns the files written."""
    writer = LandingWriter(lake)
    writer.start()
    try:
        for copy in range(copies):
            for c in conversations:
                for n, (session, date) in enumerate(zip(c.sessions, c.dates, strict=True)):
                    at = date + timedelta(hours=copy)
                    request_id = f"{c.user_id}-c{copy}-s{n}"
                    body = PublishUserInteractionRequest.model_validate(
                        {
                            "user_id": c.user_id,
                            "session_id": request_id,
                            "source": "benchmark",
                            "interaction_data_list": [
                                {
                                    "role": speaker,
                                    "content": text if copy == 0 else f"{text} take {copy}",
                                    "created_at": int(at.timestamp()) + 30 * i,
                                }
                                for i, (speaker, text) in enumerate(session)
                            ],
                        }
                    )
                    # one at a time: one landing file per publish, as a client publishing session by session makes
                    writer.submit(request_id, landing_rows(body, request_id)).result(timeout=60)
        return writer.files_written
    finally:
        writer.close()


def measure(lake: Lake, searchers: list[Conversation], questions: int, per_user: int | None) -> dict[str, Any]:
    """One configuration on a fresh service state: the watcher tick, then cold and warm searches."""
    overrides = {} if per_user is None else {"recent_turns_per_user": per_user}
    state = ServiceState.create(Settings(lake=str(lake.root), **overrides))
    try:
        state.embedder.embed(["warm up the model"])
        state.embedder.clear_query_cache()  # every configuration embeds its questions (the embedder is per process)
        started = time.perf_counter()
        state.recent_turns.refresh(0)
        tick_ms = (time.perf_counter() - started) * 1000
        parsed_before, embedded_before = _counts(state)
        cold, warm = [], []
        for c in searchers:
            for n, q in enumerate(c.questions[:questions]):
                started = time.perf_counter()
                views, _ = search_turns(state, c.user_id, q.question, 10, "hybrid", None, None)
                (warm if n else cold).append(time.perf_counter() - started)
                assert views, "the fallback found nothing"
        state.writer.start()  # the publish route's writer (not timed: it reads the idempotency keys first)
        after_publish = [_publish_then_search(state, c) for c in searchers]
        searches = len(cold) + len(warm) + len(after_publish)
        parsed, embedded = _counts(state)
        return {
            "recent_turns_per_user": getattr(state.settings, "recent_turns_per_user", 0),
            "tick_ms": round(tick_ms, 1),
            "cold": _stats(cold),
            "warm": _stats(warm),
            "after_publish": _stats(after_publish),
            "parsed_per_search": round((parsed - parsed_before) / searches, 2),
            "embedded": embedded - embedded_before,
            "searched_turns_per_user": len(state.recent_turns.rows(searchers[0].user_id, 0)),
        }
    finally:
        state.close()


def _publish_then_search(state: ServiceState, c: Conversation) -> float:
    """One more session published as the publish route does (the writer, then `landed`), then one search (s): the
    user's turns changed, so their ranking is built again."""
    request_id = f"{c.user_id}-late"
    body = PublishUserInteractionRequest.model_validate(
        {
            "user_id": c.user_id,
            "session_id": request_id,
            "interaction_data_list": [{"role": s, "content": f"{t} late"} for s, t in c.sessions[-1]],
        }
    )
    state.recent_turns.landed(state.writer.submit(request_id, landing_rows(body, request_id)).result(60).landing_file)
    started = time.perf_counter()
    search_turns(state, c.user_id, c.questions[-1].question, 10, "hybrid", None, None)
    return time.perf_counter() - started


def _counts(state: ServiceState) -> tuple[int, int]:
    """Landing files parsed and turn lines embedded by the fallback so far (-1: the service does not count them)."""
    recent = state.recent_turns
    return getattr(recent, "files_parsed", -1), getattr(recent, "lines_embedded", -1)


def components(lake: Lake, user: Conversation, embedder: Any) -> dict[str, float]:
    """The unbounded fallback's per-search work for one user, piece by piece (ms): what a search cost before."""
    out: dict[str, float] = {}

    def timed(name: str, work: Any) -> Any:
        started = time.perf_counter()
        value = work()
        out[name] = round((time.perf_counter() - started) * 1000, 1)
        return value

    paths = timed("list_files_ms", lambda: landing_files_after(lake, 0))
    tables = timed("parse_files_ms", lambda: [read_landing(lake, p, schema=LANDING_TURNS).to_pylist() for p in paths])
    rows = [r for t in tables for r in t if r["user_id"] == user.user_id]
    docs = timed("turn_docs_ms", lambda: turn_docs(rows))
    lines = sorted({normalize_text(p) for d in docs for p, _ in d.vector_parts} - {""})
    vectors = dict(zip(lines, timed("embed_lines_ms", lambda: embedder.embed(lines)), strict=True))
    question = user.questions[0].question
    timed("bm25_ms", lambda: rank_texts([d.text for d in docs], question, 50))

    def doc_vectors() -> np.ndarray:
        return np.stack(
            [sum((w * vectors[normalize_text(p)] for p, w in d.vector_parts), np.zeros(384, np.float32)) for d in docs]
        )

    matrix = timed("doc_vectors_ms", doc_vectors)
    query = embedder.embed([question])[0]
    timed("cosine_ms", lambda: np.argsort(-(matrix @ query))[:50])
    return {"files": len(paths), "turns": len(rows), "lines": len(lines), **out}


def _stats(seconds: list[float]) -> dict[str, float | int | None]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "p50_ms": round(statistics.median(ms), 1) if ms else None,
        "p95_ms": percentile(ms, 0.95, digits=1),
        "calls": len(ms),
    }


def run(multiple: int, conversations: list[Conversation], args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="reflexio-fallback-") as tmp:
        lake = Lake.at(Path(tmp) / "lake")
        started = time.perf_counter()
        files = land(lake, conversations, multiple)
        out: dict[str, Any] = {"multiple": multiple, "files": files, "landing_s": round(time.perf_counter() - started)}
        searchers = conversations[: args.searchers]
        configurations = {"bounded": None} if args.skip_baseline else {"unbounded": 0, "bounded": None}
        for name, per_user in configurations.items():
            # each on its own copy: the late publishes of one must not be in the other's backlog
            copy = Lake.at(shutil.copytree(lake.root, Path(tmp) / name))
            out[name] = measure(copy, searchers, args.questions, per_user)
        if args.components:
            state = ServiceState.create(Settings(lake=str(lake.root)))
            out["components"] = components(lake, conversations[-1], state.embedder)
            state.close()
        return out


def report(result: dict[str, Any]) -> None:
    print(f"\n== {result['multiple']}x backlog: {result['files']} landing files")
    for name in ("unbounded", "bounded"):
        if name in result:
            r = result[name]
            print(
                f"{name:<10} (per user {r['recent_turns_per_user']}, searched {r['searched_turns_per_user']} turns) "
                f"tick {r['tick_ms']} ms | cold p50 {r['cold']['p50_ms']} p95 {r['cold']['p95_ms']} ms | warm p50 "
                f"{r['warm']['p50_ms']} p95 {r['warm']['p95_ms']} ms | after a publish p50 "
                f"{r['after_publish']['p50_ms']} "
                f"p95 {r['after_publish']['p95_ms']} ms | parsed/search {r['parsed_per_search']} | "
                f"lines embedded {r['embedded']}"
            )
    if "components" in result:
        print("unbounded per-search work for one user:", result["components"])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--multiples", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--searchers", type=int, default=2, help="users whose searches are timed")
    parser.add_argument("--questions", type=int, default=10, help="questions per searching user")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-baseline", action="store_true", help="only the bounded configuration")
    parser.add_argument("--no-components", dest="components", action="store_false")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    conversations = corpus(args.users, args.seed)
    results: dict[str, Any] = {"corpus": "benchmarks/interaction_corpus.py", "seed": args.seed, "sizes": []}
    for multiple in args.multiples:
        results["sizes"].append(run(multiple, conversations, args))
        report(results["sizes"][-1])
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.output}")
    return results


if __name__ == "__main__":
    main()
