"""search_interactions: one user's turns ranked against a question, from the precomputed index plus recent turns.

Legs, fused by reciprocal rank (k=60) like every search here:
- the served index version's hybrid ranking of the user's turns (BM25 + vectors over each turn with its window of
  neighbours and session date, search/conversation.py);
- turns published since that version took in turns (serving/recent_turns.py), ranked as the index ranks them (the
  same documents, BM25 and vectors fused with the same weights; their lines embedded once, on first search), so the
  fallback is a bridge, not a second ranker: on benchmarks/interaction_ranking.py recall@10 0.823 from landing
  files vs 0.860 from the index (dev draw);
- heuristic boosts from the question (search/turn_query.py): the same ranking restricted to the time range the
  question names (index and recent turns), and the candidates spoken by the speakers it names, each an extra
  ranked leg, so a wrong parse reorders results but never hides one.

Each result is the original's InteractionView plus `neighbours`: the turns around it in its conversation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from reflexio_pipelines.search.conversation import ENTITY, NEIGHBOURS_KEY, turn_docs
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.search.turn_query import parse_turn_query, topic_of
from reflexio_pipelines.search.turns import rank_texts
from reflexio_pipelines.search.types import SearchDoc, SearchFilters
from serving.state import ServiceState

RRF_K = 60
POOL = 50  # candidates per leg: the boosts reorder these
# The BM25 leg's weight in the fusion (the vector leg's is 1): questions paraphrase what was said, and everyday
# words ("cook", "work", "trip") match chit-chat. On benchmarks/interaction_search.py recall@10 was 0.80 at 1.0,
# 0.885 at 0.5, 0.892 at 0.3, 0.87 at 0 (multi-hop 0.70 there: names and titles need the keywords).
BM25_WEIGHT = 0.3
# A request_id filter is applied to the candidates (the index holds no request column): a wider pool then.
POOL_WITH_REQUEST = 500


def search_turns(
    state: ServiceState,
    user_id: str,
    query: str,
    top_k: int,
    mode: str,
    start: int | None,
    end: int | None,
    request_id: str | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The user's turns best matching `query` (views with `neighbours`), and notes for the answer's message."""
    served = state.index.index  # one version for the whole request, even if a swap happens meanwhile
    watermark = state.turns_watermark(served)
    deleted = state.curation.excluded(ENTITY)
    recent = [
        r
        for r in state.recent_turns.rows(user_id, watermark)
        if r["turn_id"] not in deleted
        and (start is None or r["created_at"] >= start)
        and (end is None or r["created_at"] <= end)
    ]
    pool = POOL_WITH_REQUEST if request_id else max(POOL, top_k)
    filters = SearchFilters(user_id=user_id, start_time=start, end_time=end)
    notes: list[str] = []
    legs: list[list[str]] = []
    candidates: dict[str, dict[str, Any]] = {}

    def leg(hits: list) -> None:
        legs.append([h.doc_id for h in hits])
        candidates.update((h.doc_id, h.payload) for h in hits if h.doc_id not in candidates)

    def index_leg(within: SearchFilters) -> None:
        leg(
            served.search(
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
        )

    vector = None
    if mode != "fts" and (served is not None or recent):
        model = served.embedder_model_id if served is not None else state.embedder.model_id
        vector = state.query_vector(topic_of(query), model)
        if vector is None:
            notes.append("vector search unavailable (index built with another embedding model); used fts")
    leg_mode = mode if vector is not None else "fts"
    if served is not None:
        index_leg(filters)
    recent_docs = turn_docs(recent)
    fresh = [recent_docs[i] for i in _rank_recent(state, recent_docs, query, vector, leg_mode, pool)]
    legs.append([d.doc_id for d in fresh if d.doc_id not in candidates])
    candidates.update((d.doc_id, d.payload) for d in fresh if d.doc_id not in candidates)
    if not candidates:
        return [], notes
    parsed = parse_turn_query(
        query, {p["role"] for p in candidates.values()}, reference=max(p["created_at"] for p in candidates.values())
    )
    if parsed.timed:  # the heuristic time leg: the same ranking within the question's range, index and recent
        low, high = _later(parsed.start, start), _earlier(parsed.end, end)
        if served is not None:
            index_leg(replace(filters, start_time=low, end_time=high))
        inside = [
            d for d in recent_docs if (low is None or d.created_at >= low) and (high is None or d.created_at <= high)
        ]
        timed = [inside[i].doc_id for i in _rank_recent(state, inside, query, vector, leg_mode, pool)]
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
    state: ServiceState, docs: list[SearchDoc], query: str, vector: np.ndarray | None, mode: str, pool: int
) -> list[int]:
    """Positions of the best `pool` recent turn documents, ranked as `LoadedIndex.search` ranks indexed ones: the
    same texts, BM25 and vectors (each the weighted sum of its lines' embeddings, as the index build makes it)
    fused by reciprocal rank with the same weights, so a turn ranks the same before and after an index build."""
    bm25 = rank_texts([d.text for d in docs], query, pool) if mode in ("fts", "hybrid") else []
    similar: list[int] = []
    if vector is not None and docs:
        lines = state.recent_turns.vectors(state.embedder, [p for d in docs for p, _ in d.vector_parts])
        doc_vectors = np.stack([_doc_vector(d, lines, vector.shape[0]) for d in docs])
        cosine = doc_vectors @ vector
        order = sorted((i for i in range(len(docs)) if cosine[i] > 0.0), key=lambda i: (-cosine[i], i))
        similar = order[:pool]
    scores: dict[int, float] = {}
    for weight, leg in ((BM25_WEIGHT if similar else 1.0, bm25), (1.0, similar)):
        for rank, position in enumerate(leg, start=1):
            scores[position] = scores.get(position, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))[:pool]


def _doc_vector(doc: SearchDoc, lines: dict[str, np.ndarray], dim: int) -> np.ndarray:
    total = np.zeros(dim, dtype=np.float32)
    for part, weight in doc.vector_parts:
        found = lines.get(normalize_text(part))
        if found is not None:
            total += weight * found
    norm = float(np.linalg.norm(total))
    return total / norm if norm else total


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
