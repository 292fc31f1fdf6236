"""POST /api/search: unified hybrid search over the precomputed index (no LLM, no pipeline in the path)."""

from __future__ import annotations

import logging
from functools import lru_cache

from fastapi import APIRouter, Request

from reflexio_pipelines.search.index import LoadedIndex, SearchFilters
from serving.deps import service
from serving.models import UnifiedSearchRequest, UnifiedSearchResponse
from serving.state import ServiceState

router = APIRouter()
log = logging.getLogger(__name__)


@router.post("/api/search", response_model=UnifiedSearchResponse)
def unified_search(body: UnifiedSearchRequest, request: Request) -> UnifiedSearchResponse:
    """Profiles (only with a user_id), user playbooks and agent playbooks matching the query.

    Defaults fix the original's retrieval bugs: current items only; agent playbooks approved or pending (a
    rejected one is never served); the similarity threshold applies to the vector leg; search_mode is honoured.
    One entity type failing yields partial results and a message instead of a failed response.
    """
    state: ServiceState = service(request)
    index = state.index.index  # one version for the whole request, even if a swap happens meanwhile
    if index is None:
        return UnifiedSearchResponse(success=True, msg="no index published yet: publish turns and run the pipeline")
    mode = body.search_mode
    vector = None
    notes: list[str] = []
    if mode != "fts":
        vector = state.query_vector(body.query, index.embedder_model_id)
        if vector is None:
            notes.append("vector search unavailable (index built with another embedding model); used fts")
            mode = "fts"
    base = SearchFilters(user_id=body.user_id, agent_version=body.agent_version, playbook_name=body.playbook_name)
    response = UnifiedSearchResponse(success=True, index_version=index.version)
    entities = [("user_playbook", "user_playbooks"), ("agent_playbook", "agent_playbooks")]
    if body.user_id:
        entities.insert(0, ("profile", "profiles"))
    for entity, field in entities:
        try:
            payloads = _search(state, index, entity, body, vector, mode, base)
        except Exception:
            log.exception("search of %s failed", entity)
            notes.append(f"{entity} search failed; partial results")
            continue
        setattr(response, field, payloads)
        state.retrievals.served(entity, payloads)
    response.msg = "; ".join(notes)
    return response


def _search(state: ServiceState, index: LoadedIndex, entity: str, body: UnifiedSearchRequest, vector, mode: str,
            filters: SearchFilters):  # fmt: skip
    exclude: frozenset[str] = frozenset()
    if entity == "profile":
        # Profiles carry no agent version or playbook name: only the user filter applies.
        filters = SearchFilters(user_id=filters.user_id)
    if entity == "agent_playbook":
        # Approval decisions made since this index version was built apply now, in both directions.
        overlay = state.control.snapshot()
        exclude = overlay_exclusions(index, overlay, SERVED_PLAYBOOK_STATUSES)
        filters = SearchFilters(agent_version=filters.agent_version, playbook_name=filters.playbook_name,
                                playbook_statuses=None)  # fmt: skip
    hits = index.search(entity, body.query, vector, top_k=body.top_k, threshold=body.threshold, mode=mode,
                        filters=filters, exclude_ids=exclude)  # fmt: skip
    if entity == "agent_playbook":
        return [dict(h.payload, playbook_status=state.control.status(h.doc_id, h.payload["playbook_status"])) for h in hits]
    return [hit.payload for hit in hits]


SERVED_PLAYBOOK_STATUSES = ("approved", "pending")


def overlay_exclusions(index: LoadedIndex, overlay: dict[str, str], allowed: tuple[str, ...]) -> frozenset[str]:
    """Agent playbook ids not to serve: decided into a status outside `allowed`, or built with such a status and
    not decided back since."""
    excluded = {i for i in _stored_outside(index, allowed) if overlay.get(i) not in allowed}
    excluded |= {i for i, status in overlay.items() if status not in allowed}
    return frozenset(excluded)


@lru_cache(maxsize=4)
def _stored_outside(index: LoadedIndex, allowed: tuple[str, ...]) -> frozenset[str]:
    values = index.field_values("agent_playbook", "playbook_status")
    return frozenset(doc_id for doc_id, status in values.items() if status not in allowed)
