"""The ranking of one user's unindexed turns (the landing-file fallback of search_interactions), built once and kept
across searches.

The fallback ranks turns as `LoadedIndex.search` ranks indexed ones (serving/interaction_search.py): each turn's
document with its window of neighbours, BM25 and vectors (each the weighted sum of its lines' embeddings, as the index
build makes it) fused by reciprocal rank with the same weights. Built per query, that was linear in the user's
backlog on every search: at 2,106 unindexed turns a warm search took 327 ms p50, 0.32 s of it the BM25 index and the
documents' vectors (benchmarks/interaction_fallback_cost.py). A `RecentCorpus` holds the documents, the BM25 index and
the vector matrix of one set of turns; `serving/recent_turns.py` keeps the corpora of recent searches, keyed by the
user and the turn ids they were built from (a turn's row never changes while its id lives: landing files are
written once), so the next search over the same turns pays the query only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from reflexio_pipelines.search.conversation import turn_docs
from reflexio_pipelines.search.query import CANDIDATES_PER_RESULT
from reflexio_pipelines.search.text import normalize_text
from reflexio_pipelines.search.turns import TextIndex
from reflexio_pipelines.search.types import SearchDoc

RRF_K = 60
# The BM25 leg's weight in the fusion (the vector leg's is 1): questions paraphrase what was said, and everyday
# words ("cook", "work", "trip") match chit-chat, but people's questions also share the rare words of their answers.
# Chosen on the dev draws of benchmarks/interaction_ranking.py's three corpora, index path, recall@10 (@1) at the
# weight 0.3 (as it was) -> 0.6 -> 0.6 with the turn's own line twice in its BM25 text (conversation.bm25_text):
# real people's chats (realtalk) 0.538 (0.204) -> 0.591 (0.230) -> 0.596 (0.249), plain BM25 0.468 (0.228): at 0.3
# recall@1 was below BM25's; our template corpus 0.860 (0.525) -> 0.873 (0.497) -> 0.858 (0.492); the SPC corpus,
# whose questions avoid their answers' words by construction, 0.578 (0.193) -> 0.552 (0.214) -> 0.531 (0.203); 1.0
# lost template recall@10 (0.757). Held out, once: realtalk 0.520 (0.284) -> 0.546 (0.299), BM25 0.466 (0.274);
# template 0.897 (0.547) -> 0.885 (0.500); SPC 0.411 (0.139) -> 0.414 (0.139).
BM25_WEIGHT = 0.6
#: Time-range subsets (the heuristic time leg) a corpus keeps: questions naming the same range reuse theirs.
SUBSETS = 8

#: Normalised lines -> their unit vectors (embedding the ones not embedded yet): RecentTurns.vectors bound to a model.
LineVectors = Callable[[Sequence[str]], dict[str, np.ndarray]]


class RecentCorpus:
    """Turn documents with their BM25 index and vectors, built on first use. Thread-safe."""

    def __init__(
        self,
        docs: list[SearchDoc],
        parent: tuple[RecentCorpus, list[int]] | None = None,
        embedded: np.ndarray | None = None,
    ) -> None:
        self.docs = docs
        self._text = TextIndex([d.text for d in docs])
        self._parent = parent  # (corpus, positions): a subset takes its rows of the parent's vectors
        # which documents the vector leg ranks (the others are ranked by their words only: no vector is made)
        self._embedded = np.ones(len(docs), dtype=bool) if embedded is None else embedded
        self._matrices: dict[str, np.ndarray] = {}  # embedder model id -> (docs, dim) unit rows
        self._subsets: dict[tuple[int, ...], RecentCorpus] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_rows(cls, rows: list[dict[str, Any]], words_only: int = 0) -> RecentCorpus:
        """The corpus of landing rows: their turn documents (windows of neighbours among `rows`); the turns of the
        first `words_only` rows are ranked by their words only."""
        docs = turn_docs(rows)
        skipped = {r["turn_id"] for r in rows[:words_only]}
        return cls(docs, embedded=np.asarray([d.doc_id not in skipped for d in docs], dtype=bool))

    def subset(self, positions: list[int]) -> RecentCorpus:
        """The documents at `positions`, ranked among themselves (BM25 statistics of the subset, as the index's
        filtered search has them), sharing this corpus's vectors."""
        key = tuple(positions)
        with self._lock:
            found = self._subsets.get(key)
            if found is None:
                if len(self._subsets) >= SUBSETS:
                    self._subsets.pop(next(iter(self._subsets)))
                found = self._subsets[key] = RecentCorpus(
                    [self.docs[i] for i in positions], (self, positions), self._embedded[positions]
                )
            return found

    def rank(
        self, query: str, vector: np.ndarray | None, mode: str, pool: int, model_id: str, lines: LineVectors
    ) -> list[int]:
        """Positions of the best `pool` documents, ranked as `LoadedIndex.search` ranks indexed ones (each leg's
        `pool * CANDIDATES_PER_RESULT` best fused, as there: with `pool` per leg, a turn 60th by BM25 and 5th by its
        vector lost its BM25 share, and recall@10 from landing files was 0.823 against the index's 0.860)."""
        limit = pool * CANDIDATES_PER_RESULT
        bm25 = self._text.rank(query, limit) if mode in ("fts", "hybrid") else []
        similar: list[int] = []
        if vector is not None and self.docs:
            cosine = self.matrix(model_id, vector.shape[0], lines) @ vector
            positive = np.flatnonzero((cosine >= 0.0) & self._embedded)
            # best first, ties by position (lexsort's last key is the primary one)
            similar = positive[np.lexsort((positive, -cosine[positive]))][:limit].tolist()
        scores: dict[int, float] = {}
        for weight, leg in ((BM25_WEIGHT if similar else 1.0, bm25), (1.0, similar)):
            for rank, position in enumerate(leg, start=1):
                scores[position] = scores.get(position, 0.0) + weight / (RRF_K + rank)
        if similar:
            # A document ranked by words only has no vector rank: it takes its word rank for both legs, else any
            # embedded document the vector leg ranked among its first ~40 would outrank the best match by words.
            for rank, position in enumerate(bm25, start=1):
                if not self._embedded[position]:
                    scores[position] += 1.0 / (RRF_K + rank)
        return sorted(scores, key=lambda i: (-scores[i], i))[:pool]

    def matrix(self, model_id: str, dim: int, lines: LineVectors) -> np.ndarray:
        """The documents' vectors for `model_id`, one unit row each (computed once per model)."""
        with self._lock:
            found = self._matrices.get(model_id)
        if found is not None:
            return found
        if self._parent is not None:
            parent, positions = self._parent
            found = parent.matrix(model_id, dim, lines)[positions]
        else:
            # Only the embedded documents' own lines: a neighbour ranked by words only is left out of the vector
            # of the document beside it (`_doc_vector` skips lines it has no vector for), so no line of those
            # turns is embedded.
            own = [d.vector_parts[0][0] for d, kept in zip(self.docs, self._embedded, strict=True) if kept]
            vectors = lines(own)
            zero = np.zeros(dim, dtype=np.float32)
            found = np.stack(
                [
                    _doc_vector(d, vectors, dim) if kept else zero
                    for d, kept in zip(self.docs, self._embedded, strict=True)
                ]
            )
        with self._lock:
            self._matrices[model_id] = found
        return found


def _doc_vector(doc: SearchDoc, lines: dict[str, np.ndarray], dim: int) -> np.ndarray:
    total = np.zeros(dim, dtype=np.float32)
    for part, weight in doc.vector_parts:
        found = lines.get(normalize_text(part))
        if found is not None:
            total += weight * found
    norm = float(np.linalg.norm(total))
    return total / norm if norm else total
