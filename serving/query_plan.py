"""One search request's plan, shared by every route that searches the index: the indexes to search (the served
version, then the manual adds it lacks), the query vector, and per entity type the filters and the overlays
(curation, approval decisions, held-out items) applied to the hits."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.situations import SCAN_LIMIT, TIER_MAX_THRESHOLD, merged, tier
from reflexio_pipelines.search.types import SearchFilters, SearchHit
from serving.state import ServiceState

log = logging.getLogger(__name__)

#: Agent playbooks reach prompts only once approved: pending ones (flagged or not) wait in the approval queue; a
#: per-entity search may still ask for other statuses by name (`playbook_status_filter`).
SERVED_PLAYBOOK_STATUSES = ("approved",)
#: Entity types held per user: a user's lasting items about the request's situation are served with the hits.
USER_ENTITIES = ("profile", "user_playbook")
# Over large indexes the entity searches of a unified request run side by side (tantivy, numpy and faiss release
# the GIL): at 3x333k rows unified p50 drops from ~20 to ~14 ms. Below PARALLEL_MIN_ROWS the thread hand-off
# costs more than it saves (1.3-1.6 vs 1.5-1.9 ms p50 at 3k), so they run inline.
_POOL = ThreadPoolExecutor(max_workers=3, thread_name_prefix="search")
PARALLEL_MIN_ROWS = 30_000


@dataclass(frozen=True)
class EntityQuery:
    """One entity type's search: what to match, how, and which rows are admissible."""

    entity: str
    query: str
    top_k: int
    threshold: float
    filters: SearchFilters
    playbook_statuses: tuple[str, ...] = SERVED_PLAYBOOK_STATUSES  # agent playbooks only


class QueryPlan:
    """What one request resolved once, shared by its entity searches: the indexes (the served version, then the
    manual adds it lacks; see `ServiceState.searchable`) and the query vector."""

    def __init__(
        self, state: ServiceState, indexes: list[LoadedIndex], query: str, mode: str, reformulate: bool = False
    ) -> None:
        self.state, self.indexes, self.notes = state, indexes, []
        if reformulate:
            self.notes.append("enable_reformulation ignored: the read path runs no LLM, queries are used as given")
        self.mode, self.vector = mode, None
        if mode != "fts" and query.strip():
            # Both indexes hold vectors of the service's embedder unless the served one was built with another
            # model; then no vector may be compared with it, and both are searched by keywords.
            self.vector = state.query_vector(query, indexes[0].embedder_model_id)
            if self.vector is None:
                self.notes.append("vector search unavailable (index built with another embedding model); used fts")
                self.mode = "fts"

    def _hits(self, index: LoadedIndex, q: EntityQuery, mode: str | None = None) -> list[SearchHit]:
        state = self.state
        # Flagged by their outcome counters and held out pending review (only with outcomes.hold_out_flagged).
        exclude = state.curation.excluded(q.entity) | state.outcomes.excluded(q.entity)
        filters = q.filters
        if q.entity == "agent_playbook":
            # Approval decisions made since this index was built apply now, in both directions.
            exclude = exclude | overlay_exclusions(index, state.control.snapshot(), q.playbook_statuses)
            filters = replace(filters, playbook_statuses=None)
        return index.search(
            q.entity,
            q.query,
            self.vector,
            top_k=q.top_k,
            threshold=q.threshold,
            mode=mode or self.mode,
            filters=filters,
            exclude_ids=exclude,
        )

    def run(self, q: EntityQuery) -> list[dict[str, Any]]:
        """Hits of one entity type as served payloads (overlays applied), best first over all indexes. Each index
        ranks by its own fused score; an item is taken once, from the first index that holds it."""
        state, seen, hits = self.state, set(), []
        for index in self.indexes:
            fresh = [h for h in self._hits(index, q) if h.doc_id not in seen]
            seen.update(h.doc_id for h in fresh)
            hits += fresh
        hits = sorted(hits, key=lambda h: (-h.score, h.doc_id))[: q.top_k]
        if (
            q.entity in USER_ENTITIES
            and q.filters.user_id
            and self.vector is not None
            and q.threshold <= TIER_MAX_THRESHOLD
        ):
            hits = merged(hits, self._situational(q), q.top_k)
        payloads = [state.curation.patched(q.entity, h.doc_id, h.payload) for h in hits]
        if q.entity == "agent_playbook":
            payloads = [
                dict(p, playbook_status=state.control.status(h.doc_id, p["playbook_status"]))
                for p, h in zip(payloads, hits)
            ]
        return state.outcomes.annotate(q.entity, payloads)  # every item carries its outcome counters

    def _situational(self, q: EntityQuery) -> list[SearchHit]:
        """The user's always-on tier for this request (search/situations.py)."""
        subjects = self.state.situations.subjects_for(self.vector)
        found: list[SearchHit] = []
        for index in self.indexes:
            scan = replace(q, query="", top_k=SCAN_LIMIT, threshold=-1.0)
            found += self._hits(index, scan, mode="vector")
        return tier(sorted(found, key=lambda h: (-(h.similarity or 0.0), h.doc_id)), subjects)

    def run_many(self, queries: list[tuple[str, EntityQuery]]) -> dict[str, list[dict[str, Any]]]:
        """Run entity searches (in parallel over large indexes); a failing one is left out and noted (partial
        results)."""
        rows = sum(index.count(q.entity) for index in self.indexes for _, q in queries)
        if len(queries) > 1 and rows >= PARALLEL_MIN_ROWS:
            futures = [_POOL.submit(self.run, q) for _, q in queries]
            outcomes = [lambda f=f: f.result(timeout=30) for f in futures]
        else:
            outcomes = [lambda q=q: self.run(q) for _, q in queries]
        out: dict[str, list[dict[str, Any]]] = {}
        for (field, q), outcome in zip(queries, outcomes):
            try:
                out[field] = outcome()
            except Exception:
                log.exception("search of %s failed", q.entity)
                self.notes.append(f"{q.entity} search failed; partial results")
        return out


def statuses_of(status_filter: list[str | None] | None) -> tuple[str, ...]:
    """The original's status filter (None = current) as index lifecycle statuses; default current only."""
    if not status_filter:
        return ("current",)
    return tuple(dict.fromkeys("current" if s is None else s for s in status_filter))


def overlay_exclusions(index: LoadedIndex, overlay: dict[str, str], allowed: tuple[str, ...]) -> frozenset[str]:
    """Agent playbook ids not to serve: decided into a status outside `allowed`, or built with such a status and
    not decided back since."""
    excluded = {i for i in _stored_outside(index, allowed) if overlay.get(i) not in allowed}
    excluded |= {i for i, status in overlay.items() if status not in allowed}
    return frozenset(excluded)


@lru_cache(maxsize=8)
def _stored_outside(index: LoadedIndex, allowed: tuple[str, ...]) -> frozenset[str]:
    values = index.field_values("agent_playbook", "playbook_status")
    return frozenset(doc_id for doc_id, status in values.items() if status not in allowed)
