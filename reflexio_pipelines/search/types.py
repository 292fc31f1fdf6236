"""The search index's value types: the entity types, documents as the pipeline hands them over, query filters, hits
and the errors of building, loading and querying."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: "interaction": published turns with their conversational context (search/conversation.py), served by
#: search_interactions only; the other three are learned items.
ENTITY_TYPES: tuple[str, ...] = ("profile", "user_playbook", "agent_playbook", "interaction")
SearchMode = Literal["hybrid", "vector", "fts"]
SEARCH_MODES: tuple[str, ...] = ("hybrid", "vector", "fts")
STRING_FILTER_FIELDS = ("user_id", "agent_version", "playbook_name", "status", "playbook_status")


class SearchIndexError(RuntimeError):
    """The index cannot be built, loaded or queried as asked."""


class IndexModelMismatch(SearchIndexError):
    """Vectors from a different embedding model (or dimension) than the index's were offered."""


class IndexCorrupt(SearchIndexError):
    """An index version on disk is incomplete or does not match its manifest."""


@dataclass(frozen=True)
class SearchDoc:
    """One searchable entity as the pipeline hands it to the index."""

    entity_type: str  # one of ENTITY_TYPES
    doc_id: str  # unique within entity_type
    text: str  # what BM25 indexes and what gets embedded
    payload: dict  # the API view returned to clients as-is (JSON-serialisable)
    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    status: str = "current"  # lifecycle: current | pending | archived | superseded
    playbook_status: str | None = None  # approval, agent playbooks: pending | approved | rejected
    created_at: int = 0  # unix seconds
    expires_at: int | None = None  # unix seconds; expired docs are hidden at query time
    # Users whose words the text holds besides `user_id` (an agent playbook's member users). Not stored in the
    # index: the embedding cache records them, so erasing any of them removes the text's cached vector.
    contributors: tuple[str, ...] = ()
    # (text, weight) pairs whose weighted sum of embeddings, normalised, is the doc's vector; empty = embed `text`.
    # A turn's vector is its own text's plus its neighbours' (search/conversation.py): each text is embedded once
    # (through the cache), however many windows it appears in.
    vector_parts: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class SearchFilters:
    """Which rows a query may return; every field narrows the set."""

    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    statuses: tuple[str, ...] = ("current",)
    # Agent playbooks only; None = any. Approved only by default: a pending rule waits in the approval queue.
    playbook_statuses: tuple[str, ...] | None = ("approved",)
    start_time: int | None = None  # created_at >= start_time
    end_time: int | None = None  # created_at <= end_time
    now: int | None = None  # for expiry; default time.time()


@dataclass(frozen=True)
class SearchHit:
    """One result. `score` is the RRF score in every mode; ranks are 1-based within each leg (None = absent)."""

    doc_id: str
    entity_type: str
    score: float
    payload: dict
    bm25_rank: int | None
    vector_rank: int | None
    similarity: float | None  # cosine to the query vector whenever one was used
