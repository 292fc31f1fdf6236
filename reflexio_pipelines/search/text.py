"""The one text normalisation and BM25 analysis shared by documents and queries, and the query vector."""

from __future__ import annotations

import functools
import threading
import unicodedata
from typing import Any

import numpy as np

from reflexio_pipelines.learning.embedding import Embedder, embed_one

TEXT_NORMALIZATION = "nfkc-casefold-nfkc-strip-controls-collapse-ws/v1"
BM25_TOKENIZER = "en_stem"
_MAX_QUERY_TERMS = 256  # bounds the BM25 query for pathological inputs (a 5,000-char paste)

_WS_CONTROLS = {"\t", "\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x1f", "\x85"}


def normalize_text(text: str) -> str:
    """The one normalisation for documents and queries: NFKC, casefold, drop control/format characters,
    collapse whitespace. Applied before embedding and before BM25 on both sides, so they always agree."""
    text = unicodedata.normalize("NFKC", str(text)).casefold()
    text = unicodedata.normalize("NFKC", text)  # casefolding can leave text that is not NFKC (e.g. "ǰ")
    # Control (Cc), format (Cf: zero-width spaces, BOM, bidi marks) and lone surrogates (Cs) carry no words;
    # surrogates would also break UTF-8 encoding downstream. Line breaks and tabs count as spaces.
    kept = [
        " " if ch in _WS_CONTROLS else ch
        for ch in text
        if ch in _WS_CONTROLS or unicodedata.category(ch) not in ("Cc", "Cf", "Cs")
    ]
    return " ".join("".join(kept).split())


_analyzers = threading.local()


def _analyzer() -> Any:
    """A per-thread tantivy analyzer equal to tantivy's built-in "en_stem" (the index side's tokenizer).

    Per thread because TextAnalyzer tokenises through a mutable borrow.
    """
    analyzer = getattr(_analyzers, "en_stem", None)
    if analyzer is None:
        import tantivy

        analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(40))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )
        _analyzers.en_stem = analyzer
    return analyzer


def query_terms(query: str) -> list[str]:
    """The distinct BM25 terms of a query: normalised, tokenised and stemmed exactly like indexed text.

    Only word tokens survive, so no user text ever reaches a query parser (no syntax errors, no injection).
    """
    return list(analyse_query(query)[0])


@functools.lru_cache(maxsize=1024)
def analyse_query(query: str) -> tuple[tuple[str, ...], bool]:
    """(distinct BM25 terms, is the query blank) of a query. Cached: a unified search analyses one query once
    per entity type, and normalising a long query character by character costs tens of microseconds."""
    text = normalize_text(query)
    terms: dict[str, None] = {}
    for token in _analyzer().analyze(text):
        terms.setdefault(token, None)
        if len(terms) >= _MAX_QUERY_TERMS:
            break
    return tuple(terms), not text


@functools.lru_cache(maxsize=1)
def _function_terms() -> frozenset[str]:
    """The project's function words (rules/text.py FUNCTION_WORDS) as the BM25 analyser stems them."""
    from reflexio_pipelines.learning.rules.text import FUNCTION_WORDS

    return frozenset(term for word in FUNCTION_WORDS for term in _analyzer().analyze(word))


def content_terms(terms: tuple[str, ...]) -> tuple[str, ...]:
    """Query terms without function words. Learned items are a sentence or two, so one shared "the", "to" or "my"
    made any of them a BM25 hit: the original's `search_relevance` scenario served "Always use dark mode in the
    terminal" for "run the test suite" through "the". Conversation turns keep every term (their BM25 is tuned as is)."""
    return tuple(t for t in terms if t not in _function_terms())


def embed_search_query(embedder: Embedder, query: str) -> np.ndarray | None:
    """The query vector for `LoadedIndex.search`: the query normalised exactly as documents were before
    embedding, then embedded (through the embedder's query cache). None for a blank query."""
    text = normalize_text(query)
    return embed_one(embedder, text) if text else None
