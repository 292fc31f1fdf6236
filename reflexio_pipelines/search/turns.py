"""BM25 over a handful of texts, built in memory: the turns published since the served index version took in turns
(serving/recent_turns.py), bounded per user by `Settings.recent_turns_per_user`.

Text goes through the same normalisation and stemming as the precomputed index, so a query matches these turns the
way it matches indexed ones.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from reflexio_pipelines.search.text import BM25_TOKENIZER, normalize_text, query_terms


def rank_texts(texts: Sequence[str], query: str, limit: int) -> list[int]:
    """Positions of the `limit` texts best matching `query` by BM25, best first (ties: lower position first);
    [] without query terms."""
    return TextIndex(texts).rank(query, limit)


class TextIndex:
    """BM25 over fixed texts, built on the first query with terms and kept for the next ones: the same texts ranked
    for many queries (serving/recent_ranking.py keeps one per user's unindexed turns) pay the build once. At 2,106
    turns the build was 0.32 s of a search's 0.33 s (benchmarks/interaction_fallback_cost.py). Thread-safe: each
    query takes its own searcher."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._texts = list(texts)
        self._built: tuple[Any, Any] | None = None  # (schema, index)
        self._lock = threading.Lock()

    def rank(self, query: str, limit: int) -> list[int]:
        """Positions of the `limit` texts best matching `query` by BM25, best first (ties: lower position first);
        [] without query terms."""
        terms = query_terms(query)
        if not terms or not self._texts:
            return []
        import tantivy

        schema, index = self._index()
        searcher = index.searcher()
        query_obj = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "text", term)) for term in terms]
        )
        hits = searcher.search(query_obj, limit).hits
        return [
            position for _, position in sorted((-score, searcher.doc(address)["row"][0]) for score, address in hits)
        ]

    def _index(self) -> tuple[Any, Any]:
        with self._lock:
            if self._built is None:
                self._built = _build(self._texts)
            return self._built


def _build(texts: Sequence[str]) -> tuple[Any, Any]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=BM25_TOKENIZER, index_option="freq")
    builder.add_unsigned_field("row", stored=True, fast=True)
    schema = builder.build()
    index = tantivy.Index(schema)  # no path: in memory
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    for position, text in enumerate(texts):
        document = tantivy.Document()
        document.add_text("text", normalize_text(text))
        document.add_unsigned("row", position)  # the schema's u64 (the keyword constructor sends an i64)
        writer.add_document(document)
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return schema, index
