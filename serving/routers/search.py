"""POST /api/search: unified hybrid search over the precomputed index (no LLM, no pipeline in the path)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request

from reflexio_pipelines.search.index import LoadedIndex, SearchFilters
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
    state: ServiceState = request.app.state.svc
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
            hits = _search(index, entity, body, vector, mode, base)
        except Exception:
            log.exception("search of %s failed", entity)
            notes.append(f"{entity} search failed; partial results")
            continue
        setattr(response, field, [hit.payload for hit in hits])
    response.msg = "; ".join(notes)
    return response


def _search(index: LoadedIndex, entity: str, body: UnifiedSearchRequest, vector, mode: str, filters: SearchFilters):
    if entity == "profile":
        # Profiles carry no agent version or playbook name: only the user filter applies.
        filters = SearchFilters(user_id=filters.user_id)
    return index.search(
        entity, body.query, vector, top_k=body.top_k, threshold=body.threshold, mode=mode, filters=filters
    )
