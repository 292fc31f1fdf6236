"""search_interactions: one user's turns ranked against a question, from the precomputed index plus recent turns.

Legs, fused by reciprocal rank (k=60) like every search here:
- the served index version's hybrid ranking of the user's turns (BM25 + vectors over each turn with its window of
  neighbours and session date, search/conversation.py);
- turns published since that version took in turns (serving/recent_turns.py), ranked as the index ranks them (the
  same documents, BM25 and vectors fused with the same weights; their lines embedded once, on first search), so the
  fallback is a bridge, not a second ranker: on benchmarks/interaction_ranking.py recall@10 from landing files vs
  from the index 0.591 vs 0.596 on real people's chats (realtalk dev; held-out 0.538 vs 0.546), 0.845 vs 0.860 on
  our template corpus. The user's newest `Settings.recent_turns_per_user` of them by words and meaning, up to twice
  as many older ones by words only, their ranking kept for the next search over the same turns (serving/
  recent_ranking.py): the bound on the fallback's cost, whatever the backlog (benchmarks/interaction_fallback_cost.py);
- heuristic boosts from the question (search/turn_query.py): the same ranking restricted to the time range the
  question names (index and recent turns), and the candidates spoken by the speakers it names, each an extra
  ranked leg, so a wrong parse reorders results but never hides one.

Each leg raises recall@10 on our template corpus, on one built from public conversations and on real people's chats,
or leaves it as it is (benchmarks/interaction_ranking.py --ablation; overall, realtalk dev / held-out: 0.596 / 0.546
with every leg, 0.497 / 0.526 without the speaker leg, 0.589 / 0.529 without neighbours, 0.497 / 0.464 vectors only,
0.571 / 0.517 BM25 only, 0.596 / 0.547 without the time leg, which its questions seldom use; public dev / held-out:
0.58 / 0.41 with every leg, 0.53 / 0.36 without the time leg; figures of the weights as they were until 2026-12-07).

Each result is the original's InteractionView plus `neighbours`: the turns around it in its conversation.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from reflexio_pipelines.search.conversation import ENTITY, NEIGHBOURS_KEY
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.turn_query import TurnQuery, parse_turn_query, speakers_in, time_range, topic_of
from reflexio_pipelines.search.types import SearchFilters
from serving.recent_ranking import BM25_WEIGHT, RRF_K, RecentCorpus
from serving.state import ServiceState

POOL = 50  # candidates per leg: the boosts reorder these
# A request_id filter is applied to the candidates (the index holds no request column): a wider pool then.
POOL_WITH_REQUEST = 500
#: The heuristic boost legs a search adds (all, as served); a benchmark's ablation turns them off one at a time
#: (benchmarks/interaction_ranking.py --ablation).
BOOSTS = frozenset({"time", "speaker"})
#: Where a question's time leg searches the index while the request's thread runs the main leg (the index is
#: thread-safe; tantivy and faiss release the GIL). Shared by every request: two, for the machine's two cores.
_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="interaction-leg")


def search_turns(
    state: ServiceState,
    user_id: str,
    query: str,
    top_k: int,
    mode: str,
    start: int | None,
    end: int | None,
    request_id: str | None = None,
    boosts: frozenset[str] = BOOSTS,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The user's turns best matching `query` (views with `neighbours`), and notes for the answer's message.
    `boosts`: which heuristic legs (`BOOSTS`) the question's parse may add."""
    served = state.index.index  # one version for the whole request, even if a swap happens meanwhile
    watermark = state.turns_watermark(served)
    deleted = state.curation.excluded(ENTITY)
    waiting = state.recent_turns.newest(user_id, watermark)
    live = [
        (n < waiting.words_only, r)
        for n, r in enumerate(waiting.rows)
        if r["turn_id"] not in deleted
        and (start is None or r["created_at"] >= start)
        and (end is None or r["created_at"] <= end)
    ]
    recent = [r for _, r in live]
    words_only = sum(by_words for by_words, _ in live)  # the oldest come first, so a prefix still
    pool = POOL_WITH_REQUEST if request_id else max(POOL, top_k)
    filters = SearchFilters(user_id=user_id, start_time=start, end_time=end)
    notes: list[str] = []
    if waiting.words_only:
        notes.append(f"{waiting.words_only} older turns not indexed yet were searched by their words only")
    if waiting.left_out:
        notes.append(
            f"{waiting.left_out} older turns not indexed yet were not searched (the next index builds take them in)"
        )
    legs: list[list[str]] = []
    candidates: dict[str, dict[str, Any]] = {}

    def leg(hits: list) -> None:
        legs.append([h.doc_id for h in hits])
        candidates.update((h.doc_id, h.payload) for h in hits if h.doc_id not in candidates)

    def index_leg(within: SearchFilters) -> list:
        return served.search(
            ENTITY,
            query,
            vector,
            top_k=pool,
            threshold=0.0,
            mode=leg_mode,
            filters=within,
            exclude_ids=deleted,
            bm25_weight=BM25_WEIGHT,
        )

    vector = None
    if mode != "fts" and (served is not None or recent):
        model = served.embedder_model_id if served is not None else state.embedder.model_id
        vector = state.query_vector(topic_of(query), model)
        if vector is None:
            notes.append("vector search unavailable (index built with another embedding model); used fts")
    leg_mode = mode if vector is not None else "fts"
    # The question's time range, read against the conversation's newest turn (it is asked after it; looked up only
    # for a question that names a time); the speakers it names, once the candidates say which roles there are.
    parsed = TurnQuery()
    if "time" in boosts and time_range(query, 0)[1] is not None:
        newest = [r["created_at"] for r in recent]
        if served is not None:
            newest.append(served.newest(ENTITY, filters, deleted) or 0)
        parsed = parse_turn_query(query, (), reference=max(newest, default=0))
    low, high = _later(parsed.start, start), _earlier(parsed.end, end)
    timed_hits = None
    if served is not None:
        if parsed.timed:  # the heuristic time leg's index search runs beside the main one (a core each: 10 -> 6 ms)
            timed_hits = _LEGS.submit(index_leg, replace(filters, start_time=low, end_time=high))
        leg(index_leg(filters))
    corpus = state.recent_turns.corpus(user_id, recent, words_only)
    recent_docs = corpus.docs
    fresh = [recent_docs[i] for i in _rank_recent(state, corpus, query, vector, leg_mode, pool)]
    legs.append([d.doc_id for d in fresh if d.doc_id not in candidates])
    candidates.update((d.doc_id, d.payload) for d in fresh if d.doc_id not in candidates)
    if timed_hits is not None:
        leg(timed_hits.result())
    if not candidates:
        return [], notes
    if "speaker" in boosts:
        parsed = replace(parsed, speakers=speakers_in(query, {p["role"] for p in candidates.values()}))
    if parsed.timed:  # the heuristic time leg: the same ranking within the question's range, index and recent
        inside = [
            i
            for i, d in enumerate(recent_docs)
            if (low is None or d.created_at >= low) and (high is None or d.created_at <= high)
        ]
        ranked_inside = _rank_recent(state, corpus.subset(inside), query, vector, leg_mode, pool)
        timed = [recent_docs[inside[i]].doc_id for i in ranked_inside]
        legs.append([d for d in timed if d in candidates])
    if request_id:
        candidates = {k: p for k, p in candidates.items() if p["request_id"] == request_id}
    if parsed.speakers:  # the heuristic speaker leg: the candidates the named speakers said, in fused order
        speakers = {s.casefold() for s in parsed.speakers}
        legs.append([d for d in _fuse(legs, candidates) if candidates[d]["role"].casefold() in speakers])
    if parsed.speakers or parsed.timed:
        notes.append(
            "heuristic boosts: "
            + ", ".join([*(f"speaker {s}" for s in parsed.speakers), *(["time range"] if parsed.timed else [])])
        )
    ranked = _fuse(legs, candidates)[:top_k]
    recent_views = {d.doc_id: d.payload for d in recent_docs}
    return [_with_neighbours(candidates[d], served, recent_views, deleted) for d in ranked], notes


def _rank_recent(
    state: ServiceState, corpus: RecentCorpus, query: str, vector: np.ndarray | None, mode: str, pool: int
) -> list[int]:
    """Positions of the corpus's best `pool` recent turn documents, ranked as the index ranks indexed ones."""
    model_id = state.embedder.model_id
    return corpus.rank(
        query, vector, mode, pool, model_id, lambda lines: state.recent_turns.vectors(state.embedder, lines)
    )


def _later(a: int | None, b: int | None) -> int | None:
    return max((t for t in (a, b) if t is not None), default=None)


def _earlier(a: int | None, b: int | None) -> int | None:
    return min((t for t in (a, b) if t is not None), default=None)


def _fuse(legs: list[list[str]], candidates: dict[str, dict[str, Any]]) -> list[str]:
    """Candidate ids by summed reciprocal rank over the legs (ties: newest first, then id)."""
    scores: dict[str, float] = {}
    for leg in legs:
        for rank, doc_id in enumerate(leg, start=1):
            if doc_id in candidates:
                scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda d: (-scores[d], -candidates[d]["created_at"], d))


def _with_neighbours(
    payload: dict[str, Any],
    served: LoadedIndex | None,
    recent_views: dict[str, dict[str, Any]],
    deleted: frozenset[str],
) -> dict[str, Any]:
    """The served view: the turn's InteractionView plus `neighbours`, the live turns of its window in order."""
    view = dict(payload)
    ids = view.pop(NEIGHBOURS_KEY, [])
    neighbours = []
    for turn_id in ids:
        if turn_id in deleted:
            continue
        found = served.payload(ENTITY, turn_id) if served is not None else None
        found = found or recent_views.get(turn_id)
        if found is not None:
            neighbours.append({k: v for k, v in found.items() if k != NEIGHBOURS_KEY})
    view["neighbours"] = neighbours
    return view
