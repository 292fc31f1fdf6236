"""Search over the precomputed index (no LLM, no pipeline in the path): unified and per entity type.

Defaults fix the original's retrieval bugs: current items only; agent playbooks approved or pending (a rejected
one is never served unless asked for); the similarity threshold applies to the vector leg; search_mode is
honoured everywhere; one entity type failing yields partial results and a message instead of a failed response.
Curated deletions and edits made since the index version was built apply at once (serving/curation.py), and
manual adds the served version does not hold yet are searched in a small second index (serving/fresh.py), so an
add is found by the very next search.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Request

from reflexio_pipelines.learning.holdout import HOLDOUT_HEADER
from reflexio_pipelines.search.index import LoadedIndex, SearchFilters, SearchHit
from serving.deps import service
from serving.models import (
    SearchAgentPlaybooksRequest,
    SearchProfilesRequest,
    SearchUserPlaybooksRequest,
    UnifiedSearchRequest,
    UnifiedSearchResponse,
)
from serving.outcomes import HoldoutDecision
from serving.state import ServiceState

router = APIRouter()
log = logging.getLogger(__name__)

SERVED_PLAYBOOK_STATUSES = ("approved", "pending")
NO_INDEX = "no index published yet: publish turns and run the pipeline"
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

    def __init__(self, state: ServiceState, indexes: list[LoadedIndex], query: str, mode: str,
                 reformulate: bool = False) -> None:  # fmt: skip
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

    def _hits(self, index: LoadedIndex, q: EntityQuery) -> list[SearchHit]:
        state = self.state
        # Flagged by their outcome counters and held out pending review (only with outcomes.hold_out_flagged).
        exclude = state.curation.excluded(q.entity) | state.outcomes.excluded(q.entity)
        filters = q.filters
        if q.entity == "agent_playbook":
            # Approval decisions made since this index was built apply now, in both directions.
            exclude = exclude | overlay_exclusions(index, state.control.snapshot(), q.playbook_statuses)
            filters = replace(filters, playbook_statuses=None)
        return index.search(q.entity, q.query, self.vector, top_k=q.top_k, threshold=q.threshold, mode=self.mode,
                            filters=filters, exclude_ids=exclude)  # fmt: skip

    def run(self, q: EntityQuery) -> list[dict[str, Any]]:
        """Hits of one entity type as served payloads (overlays applied), best first over all indexes. Each index
        ranks by its own fused score; an item is taken once, from the first index that holds it."""
        state, seen, hits = self.state, set(), []
        for index in self.indexes:
            fresh = [h for h in self._hits(index, q) if h.doc_id not in seen]
            seen.update(h.doc_id for h in fresh)
            hits += fresh
        hits = sorted(hits, key=lambda h: (-h.score, h.doc_id))[: q.top_k]
        payloads = [state.curation.patched(q.entity, h.doc_id, h.payload) for h in hits]
        if q.entity == "agent_playbook":
            payloads = [dict(p, playbook_status=state.control.status(h.doc_id, p["playbook_status"]))
                        for p, h in zip(payloads, hits)]  # fmt: skip
        return state.outcomes.annotate(q.entity, payloads)  # every item carries its outcome counters

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


@router.post("/api/search", response_model=UnifiedSearchResponse)
def unified_search(body: UnifiedSearchRequest, request: Request) -> UnifiedSearchResponse:
    """Profiles (only with a user_id), user playbooks and agent playbooks matching the query. A user in the holdout
    control group gets the same shape with no learned items and `holdout: true` (serving/outcomes.py), unless the
    request carries `X-Reflexio-Holdout: off`; every answer to a user is logged (serving/retrievals.py)."""
    state: ServiceState = service(request)
    if (misdirected := state.misdirected(body.user_id)) is not None:
        return misdirected
    holdout = state.policy.holdout(body.user_id, body.agent_version, request.headers.get(HOLDOUT_HEADER))
    if holdout is not None and holdout.held_out:
        _log_search(state, body, holdout, {})
        return UnifiedSearchResponse(success=True, index_version=state.index.version, holdout=True,
                                     msg="holdout: this user is in the control group and gets no learned context")  # fmt: skip
    indexes = state.searchable()
    if not indexes:
        return UnifiedSearchResponse(success=True, msg=NO_INDEX)
    plan = QueryPlan(state, indexes, body.query, body.search_mode, body.enable_reformulation)
    common = dict(query=body.query, top_k=body.top_k, threshold=body.threshold)
    queries = [
        ("user_playbooks", EntityQuery("user_playbook", filters=SearchFilters(
            user_id=body.user_id, agent_version=body.agent_version, playbook_name=body.playbook_name), **common)),
        ("agent_playbooks", EntityQuery("agent_playbook", filters=SearchFilters(
            agent_version=body.agent_version, playbook_name=body.playbook_name), **common)),
    ]  # fmt: skip
    if body.user_id:
        # Profiles carry no agent version or playbook name: only the user filter applies.
        queries.insert(0, ("profiles", EntityQuery("profile", filters=SearchFilters(user_id=body.user_id), **common)))
    results = plan.run_many(queries)
    for entity_field, payloads in results.items():
        state.retrievals.served(_ENTITY_OF[entity_field], payloads)
    if holdout is not None:
        _log_search(state, body, holdout, results)
    return UnifiedSearchResponse(success=True, index_version=state.index.version, msg="; ".join(plan.notes), **results)


_ENTITY_OF = {"profiles": "profile", "user_playbooks": "user_playbook", "agent_playbooks": "agent_playbook"}


def _log_search(state: ServiceState, body: UnifiedSearchRequest, holdout: HoldoutDecision,
                results: dict[str, list[dict[str, Any]]]) -> None:  # fmt: skip
    state.retrievals.searched(user_id=body.user_id, session_id=body.session_id, agent_version=body.agent_version,
                              arm=holdout.arm, holdout=holdout.held_out, override=holdout.override, results=results,
                              index_version=state.index.version)  # fmt: skip


@router.post("/api/search_profiles")
def search_profiles(body: SearchProfilesRequest, request: Request) -> dict:
    """One user's profiles (current unless the lifecycle says otherwise), with the original's extra filters."""
    post = _profile_post_filters(body)
    hits = _single(request, "user_profiles", body, EntityQuery(
        "profile", query=body.query or "", top_k=body.top_k * 10 if post else body.top_k, threshold=body.threshold,
        filters=SearchFilters(user_id=body.user_id, start_time=body.start_unix,
                                                     end_time=body.end_unix)))  # fmt: skip
    if post and hits["success"]:
        hits["user_profiles"] = [p for p in hits["user_profiles"] if all(f(p) for f in post)][: body.top_k]
    return hits


@router.post("/api/search_user_playbooks")
def search_user_playbooks(body: SearchUserPlaybooksRequest, request: Request) -> dict:
    """User playbooks (all users unless `user_id`), current unless `status_filter` asks for others."""
    return _single(request, "user_playbooks", body, EntityQuery(
        "user_playbook", query=body.query or "", top_k=body.top_k, threshold=body.threshold,
        filters=SearchFilters(user_id=body.user_id, agent_version=body.agent_version, playbook_name=body.playbook_name,
                              statuses=statuses_of(body.status_filter), start_time=body.start_unix,
                              end_time=body.end_unix)))  # fmt: skip


@router.post("/api/search_agent_playbooks")
def search_agent_playbooks(body: SearchAgentPlaybooksRequest, request: Request) -> dict:
    """Agent playbooks; approved and pending unless `playbook_status_filter` names others (e.g. rejected)."""
    wanted = body.playbook_status_filter
    approval = SERVED_PLAYBOOK_STATUSES if wanted is None else tuple([wanted] if isinstance(wanted, str) else wanted)
    return _single(request, "agent_playbooks", body, EntityQuery(
        "agent_playbook", query=body.query or "", top_k=body.top_k, threshold=body.threshold,
        filters=SearchFilters(agent_version=body.agent_version, playbook_name=body.playbook_name,
                              statuses=statuses_of(body.status_filter), start_time=body.start_unix,
                              end_time=body.end_unix), playbook_statuses=approval))  # fmt: skip


def _single(request: Request, field: str, body: SearchProfilesRequest | SearchUserPlaybooksRequest
            | SearchAgentPlaybooksRequest, q: EntityQuery) -> dict:  # fmt: skip
    state: ServiceState = service(request)
    if (misdirected := state.misdirected(getattr(body, "user_id", None))) is not None:
        return misdirected
    indexes = state.searchable()
    if not indexes:
        return {"success": True, field: [], "msg": NO_INDEX}
    plan = QueryPlan(state, indexes, body.query or "", body.search_mode, body.enable_reformulation)
    results = plan.run_many([(field, q)])
    return {"success": field in results, field: results.get(field, []), "msg": "; ".join(plan.notes)}


def statuses_of(status_filter: list[str | None] | None) -> tuple[str, ...]:
    """The original's status filter (None = current) as index lifecycle statuses; default current only."""
    if not status_filter:
        return ("current",)
    return tuple(dict.fromkeys("current" if s is None else s for s in status_filter))


def _profile_post_filters(body: SearchProfilesRequest) -> list:
    """The original's profile filters the index does not hold, applied to a widened candidate list."""
    checks = []
    if body.source:
        checks.append(lambda p: (p.get("source") or "").lower() == body.source.lower())
    if body.custom_feature:
        checks.append(lambda p: body.custom_feature in str(p.get("custom_features") or {}))
    if body.extractor_name:
        checks.append(lambda p: body.extractor_name in (p.get("extractor_names") or []))
    if body.generated_from_request_id:
        checks.append(lambda p: p.get("generated_from_request_id") == body.generated_from_request_id)
    return checks


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
