"""Search over the precomputed index (no LLM, no pipeline in the path): unified and per entity type.

Defaults fix the original's retrieval bugs: current items only; agent playbooks only once approved (a pending one,
flagged or not, waits in the approval queue; a rejected one is never served unless asked for); no user's items
without a `user_id` (a search without one serves approved agent playbooks only); the similarity threshold applies
to the vector leg; search_mode is
honoured everywhere; one entity type failing yields partial results and a message instead of a failed response.
Curated deletions and edits made since the index version was built apply at once (serving/curation.py), and
manual adds the served version does not hold yet are searched in a small second index (serving/fresh.py), so an
add is found by the very next search.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from reflexio_pipelines.learning.holdout import HOLDOUT_HEADER
from reflexio_pipelines.search.types import SearchFilters
from serving import search_options
from serving.deps import ServiceDep, state_of
from serving.models.playbooks import AgentPlaybooksResponse
from serving.models.reads import ProfilesResponse, UserPlaybooksResponse
from serving.models.search import (
    SearchAgentPlaybooksRequest,
    SearchProfilesRequest,
    SearchUserPlaybooksRequest,
    UnifiedSearchRequest,
    UnifiedSearchResponse,
)
from serving.outcomes import HoldoutDecision
from serving.query_plan import SERVED_PLAYBOOK_STATUSES, EntityQuery, QueryPlan, statuses_of
from serving.state import ServiceState

router = APIRouter()

NO_INDEX = "no index published yet: publish turns and run the pipeline"
#: Without a user id a search cannot tell whose items are whose: it serves no user's items, only shared rules.
NO_USER = "no user_id: approved agent playbooks only (no user's profiles or playbooks)"


@router.post("/api/search", response_model=UnifiedSearchResponse)
def unified_search(body: UnifiedSearchRequest, request: Request, state: ServiceDep) -> UnifiedSearchResponse:
    """The user's profiles and user playbooks (only with a user_id: without one, nobody's) and approved agent
    playbooks matching the query. A user in the holdout
    control group gets the same shape with no learned items and `holdout: true` (serving/outcomes.py), unless the
    request carries `X-Reflexio-Holdout: off`; every answer to a user is logged (serving/retrievals.py)."""
    if (misdirected := state.misdirected(body.user_id)) is not None:
        return misdirected
    holdout = state.policy.holdout(body.user_id, body.agent_version, request.headers.get(HOLDOUT_HEADER))
    if holdout is not None and holdout.held_out:
        _log_search(state, body, holdout, {})
        return UnifiedSearchResponse(
            success=True,
            index_version=state.index.version,
            holdout=True,
            msg="holdout: this user is in the control group and gets no learned context",
        )
    indexes = state.searchable()
    if not indexes:
        return UnifiedSearchResponse(success=True, msg=NO_INDEX)
    plan = QueryPlan(state, indexes, body.query, body.search_mode, body.enable_reformulation)
    top_k = body.top_k * search_options.WIDEN if body.source else body.top_k
    common = dict(query=body.query, top_k=top_k, threshold=body.threshold)
    shared = SearchFilters(agent_version=body.agent_version, playbook_name=body.playbook_name)
    approval = tuple(body.agent_playbook_status_filter or SERVED_PLAYBOOK_STATUSES)
    queries = [("agent_playbooks", EntityQuery("agent_playbook", filters=shared, playbook_statuses=approval, **common))]
    if body.user_id:
        user_playbooks = SearchFilters(
            user_id=body.user_id, agent_version=body.agent_version, playbook_name=body.playbook_name
        )
        # Profiles carry no agent version or playbook name: only the user filter applies.
        queries[:0] = [
            ("profiles", EntityQuery("profile", filters=SearchFilters(user_id=body.user_id), **common)),
            ("user_playbooks", EntityQuery("user_playbook", filters=user_playbooks, **common)),
        ]
    else:
        plan.notes.append(NO_USER)
    wanted = search_options.selected(body.entity_types)
    results = plan.run_many([(field, query) for field, query in queries if field in wanted])
    if body.source:
        search_options.by_source(state.lake, body.source, results, body.top_k)
    for entity_field, payloads in results.items():
        state.retrievals.served(_ENTITY_OF[entity_field], payloads)
    if holdout is not None:
        _log_search(state, body, holdout, results)
    return UnifiedSearchResponse(success=True, index_version=state.index.version, msg="; ".join(plan.notes), **results)


_ENTITY_OF = {"profiles": "profile", "user_playbooks": "user_playbook", "agent_playbooks": "agent_playbook"}


def _log_search(
    state: ServiceState, body: UnifiedSearchRequest, holdout: HoldoutDecision, results: dict[str, list[dict[str, Any]]]
) -> None:
    state.retrievals.searched(
        user_id=body.user_id,
        session_id=body.session_id,
        agent_version=body.agent_version,
        arm=holdout.arm,
        holdout=holdout.held_out,
        override=holdout.override,
        results=results,
        index_version=state.index.version,
    )


@router.post("/api/search_profiles", response_model=ProfilesResponse)
def search_profiles(body: SearchProfilesRequest, state: ServiceDep) -> dict:
    """One user's profiles (current unless the lifecycle says otherwise), with the original's extra filters."""
    post = _profile_post_filters(body)
    hits = _single(
        state,
        "user_profiles",
        body,
        EntityQuery(
            "profile",
            query=body.query or "",
            top_k=body.top_k * 10 if post else body.top_k,
            threshold=body.threshold,
            filters=SearchFilters(user_id=body.user_id, start_time=body.start_unix, end_time=body.end_unix),
        ),
    )
    if post and hits["success"]:
        hits["user_profiles"] = [p for p in hits["user_profiles"] if all(f(p) for f in post)][: body.top_k]
    return hits


@router.post("/api/search_user_playbooks", response_model=UserPlaybooksResponse)
def search_user_playbooks(body: SearchUserPlaybooksRequest, request: Request) -> dict:
    """One user's playbooks (without a `user_id`, none: a search serves no one else's), current unless
    `status_filter` asks for others."""
    if not body.user_id:
        return {"success": True, "user_playbooks": [], "msg": NO_USER}
    # Looked up here, not as a dependency: without a user id the answer needs no organisation state.
    return _single(state_of(request), "user_playbooks", body, _playbook_query("user_playbook", body, body.user_id))


@router.post("/api/search_agent_playbooks", response_model=AgentPlaybooksResponse)
def search_agent_playbooks(body: SearchAgentPlaybooksRequest, state: ServiceDep) -> dict:
    """Agent playbooks; approved ones unless `playbook_status_filter` names others (pending, rejected: a review)."""
    wanted = body.playbook_status_filter
    approval = SERVED_PLAYBOOK_STATUSES if wanted is None else tuple([wanted] if isinstance(wanted, str) else wanted)
    query = _playbook_query("agent_playbook", body, None, playbook_statuses=approval)
    return _single(state, "agent_playbooks", body, query)


def _playbook_query(
    entity: str,
    body: SearchUserPlaybooksRequest | SearchAgentPlaybooksRequest,
    user_id: str | None,
    **extra: Any,
) -> EntityQuery:
    """A playbook search's query: the body's text, size, threshold and filters (narrowed to `user_id` if one)."""
    filters = SearchFilters(
        user_id=user_id,
        agent_version=body.agent_version,
        playbook_name=body.playbook_name,
        statuses=statuses_of(body.status_filter),
        start_time=body.start_unix,
        end_time=body.end_unix,
    )
    return EntityQuery(
        entity, query=body.query or "", top_k=body.top_k, threshold=body.threshold, filters=filters, **extra
    )


def _single(
    state: ServiceState,
    field: str,
    body: SearchProfilesRequest | SearchUserPlaybooksRequest | SearchAgentPlaybooksRequest,
    q: EntityQuery,
) -> dict:
    if (misdirected := state.misdirected(getattr(body, "user_id", None))) is not None:
        return misdirected
    indexes = state.searchable()
    if not indexes:
        return {"success": True, field: [], "msg": NO_INDEX}
    plan = QueryPlan(state, indexes, body.query or "", body.search_mode, body.enable_reformulation)
    results = plan.run_many([(field, q)])
    return {"success": field in results, field: results.get(field, []), "msg": "; ".join(plan.notes)}


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
