"""The original's manual adds, edits and deletes, as entries in the lake's curation log.

Every change is durable when the call returns and applies at once to reads and to search: added items are found
by the next search (serving/fresh.py), deletions and edited payloads apply at once; the index is rebuilt in the
background so edited text becomes matchable — with `?wait_for_response=true` the call returns only after that
rebuild is served. Manually added agent playbooks are read, edited, approved and deleted like aggregated ones.
Deleting interactions, requests or sessions cascades to the profiles and playbooks learned from them, and to agent
playbooks left without members.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from fastapi import APIRouter, Query

from reflexio_pipelines.lake.curation import (
    CurationOp,
    agent_playbook_row,
    cascade_deletes,
    live_agent_playbooks,
    manual_row,
)
from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.session_turns import session_turn_rows
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES
from reflexio_pipelines.learning.types import NEVER_EXPIRES_TIMESTAMP, TTL_SECONDS, stable_int_id
from reflexio_pipelines.search.types import SearchFilters
from serving.deps import ServiceDep
from serving.errors import not_found
from serving.models.acks import MessageResponse, MsgResponse
from serving.models.curation import (
    AddAgentPlaybookRequest,
    AddResponse,
    AddUserPlaybookRequest,
    AddUserProfileRequest,
    BulkDeleteResponse,
    DeleteAgentPlaybookRequest,
    DeleteAgentPlaybooksByIdsRequest,
    DeleteInteractionRequest,
    DeleteProfileRequest,
    DeleteProfilesByIdsRequest,
    DeleteRequestRequest,
    DeleteRequestsByIdsRequest,
    DeleteSessionRequest,
    DeleteSessionResponse,
    DeleteUserPlaybookRequest,
    DeleteUserPlaybooksByIdsRequest,
    UpdateAgentPlaybookRequest,
    UpdateUserPlaybookRequest,
    UpdateUserProfileRequest,
)
from serving.query_plan import EntityQuery, QueryPlan
from serving.state import ServiceState

router = APIRouter()

WAIT = Query(False, description="return only after the index serving this change is live")
REINDEX_TIMEOUT_S = 300.0
#: Profiles whose similarity to a delete_profile `search_query` is at least this are deleted (vector leg).
DELETE_QUERY_THRESHOLD = 0.5


def _commit(state: ServiceState, ops: list[CurationOp], wait: bool) -> str:
    """Record ops (durable, applied to retrieval at once), ask for a re-index; returns a note for the message."""
    if not ops:
        return ""
    state.curation.record(ops)
    state.searchable()  # index manual adds for immediate search now, so the next search does not wait for it
    ticket = state.reindexer.request()
    if not wait:
        return "; applied to search now, re-indexed in the background (seconds)"
    if state.reindexer.wait(ticket, REINDEX_TIMEOUT_S):
        return f"; index {state.index.version} serves it"
    return "; the re-index did not finish (see the Dagster UI); the change is saved and applies to reads"


def _added(state: ServiceState, ops: list[CurationOp], what: str, wait: bool) -> dict:
    note = _commit(state, ops, wait)
    return {"success": True, "message": f"added {len(ops)} {what}{note}", "added_count": len(ops)}


# -- adds ----------------------------------------------------------------------------------------------------


@router.post("/api/add_user_profile", response_model=AddResponse)
def add_user_profile(body: AddUserProfileRequest, state: ServiceDep, wait_for_response: bool = WAIT) -> dict:
    """Store profiles as given (no LLM): current, with their time to live, attributed to `manual`."""
    now = int(time.time())
    ops = []
    for p in body.user_profiles:
        ttl = TTL_SECONDS[p.profile_time_to_live]
        row = manual_row(
            "user_profiles",
            profile_id=p.profile_id or str(uuid.uuid4()),
            user_id=p.user_id,
            content=p.content,
            profile_time_to_live=p.profile_time_to_live,
            expiration_timestamp=NEVER_EXPIRES_TIMESTAMP if ttl is None else now + ttl,
            last_modified_timestamp=now,
            generated_from_request_id=p.generated_from_request_id,
            source=p.source,
            status="current",
            extractor_names=p.extractor_names or ["manual"],
            custom_features=json.dumps(p.custom_features or {}, sort_keys=True),
        )
        ops.append(CurationOp("profile", row["profile_id"], "add", user_id=p.user_id, fields=row))
    return _added(state, ops, "profile(s)", wait_for_response)


@router.post("/api/add_user_playbook", response_model=AddResponse)
def add_user_playbook(body: AddUserPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT) -> dict:
    """Store user playbooks as given (no LLM), current, attributed to `manual`."""
    now = int(time.time())
    ops = []
    for p in body.user_playbooks:
        row = manual_row(
            "user_playbooks",
            user_playbook_id=stable_int_id("manual", uuid.uuid4().hex),
            user_id=p.user_id,
            agent_version=p.agent_version,
            request_id=p.request_id,
            created_at=now,
            status="current",
            source=p.source,
            kind="manual",
            **{"playbook_name": "", "content": "", **p.text_fields()},
        )
        ops.append(CurationOp("user_playbook", str(row["user_playbook_id"]), "add", user_id=p.user_id, fields=row))
    return _added(state, ops, "user playbook(s)", wait_for_response)


@router.post("/api/add_agent_playbook", response_model=AddResponse)
def add_agent_playbook(body: AddAgentPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT) -> dict:
    """Store agent playbooks as given, with their approval status, attributed to `manual`."""
    now = int(time.time())
    ops = []
    for p in body.agent_playbooks:
        row = manual_row(
            "agent_playbooks",
            agent_playbook_id=stable_int_id("manual", uuid.uuid4().hex),
            agent_version=p.agent_version,
            created_at=now,
            updated_at=now,
            status="current",
            playbook_status=p.playbook_status,
            consolidator="manual",
            **{"playbook_name": "", **p.text_fields()},
        )
        ops.append(CurationOp("agent_playbook", str(row["agent_playbook_id"]), "add", fields=row))
    return _added(state, ops, "agent playbook(s)", wait_for_response)


# -- edits ---------------------------------------------------------------------------------------------------


def _user_playbook(state: ServiceState, playbook_id: int) -> dict[str, Any] | None:
    rows = live_rows(
        state.lake, "user_playbook", filters=[("user_playbook_id", "=", playbook_id)], statuses=LIFECYCLE_STATUSES
    )
    return rows[0] if rows else None


@router.put("/api/update_user_playbook", response_model=MsgResponse)
def update_user_playbook(body: UpdateUserPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Edit a user playbook's text; the edit is re-embedded and re-indexed (unlike the original)."""
    row = _user_playbook(state, body.user_playbook_id)
    if row is None:
        return not_found(f"user_playbook_id {body.user_playbook_id}")
    fields = body.text_fields()
    note = _commit(
        state,
        [CurationOp("user_playbook", str(body.user_playbook_id), "update", user_id=row["user_id"], fields=fields)]
        if fields
        else [],
        wait_for_response,
    )
    return {"success": True, "msg": f"user playbook {body.user_playbook_id} updated{note}"}


@router.put("/api/update_agent_playbook", response_model=MsgResponse)
def update_agent_playbook(body: UpdateAgentPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Edit an agent playbook's text and/or approval status; text edits are re-embedded and re-indexed."""
    if agent_playbook_row(state.lake, body.agent_playbook_id) is None:
        return not_found(f"agent_playbook_id {body.agent_playbook_id}")
    if body.playbook_status is not None:
        state.control.decide(str(body.agent_playbook_id), body.playbook_status)
    fields = body.text_fields()
    note = _commit(
        state,
        [CurationOp("agent_playbook", str(body.agent_playbook_id), "update", fields=fields)] if fields else [],
        wait_for_response,
    )
    return {"success": True, "msg": f"agent playbook {body.agent_playbook_id} updated{note}"}


@router.put("/api/update_user_profile", response_model=MsgResponse)
def update_user_profile(body: UpdateUserProfileRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Edit one of a user's profiles (content and/or custom features); bumps last_modified; re-indexed."""
    rows = live_rows(state.lake, "profile", filters=[("user_id", "=", body.user_id)], statuses=LIFECYCLE_STATUSES)
    if not any(r["profile_id"] == body.profile_id for r in rows):
        return not_found(f"profile_id {body.profile_id} of user {body.user_id}")
    fields: dict[str, Any] = {"last_modified_timestamp": int(time.time())}
    if body.content is not None:
        fields["content"] = body.content
    if body.custom_features is not None:
        fields["custom_features"] = json.dumps(body.custom_features, sort_keys=True)
    note = _commit(
        state,
        [CurationOp("profile", body.profile_id, "update", user_id=body.user_id, fields=fields)],
        wait_for_response,
    )
    return {"success": True, "msg": f"profile {body.profile_id} updated{note}"}


# -- deletes -------------------------------------------------------------------------------------------------


def _delete_turns(state: ServiceState, turns: list[dict[str, Any]]) -> list[CurationOp]:
    """Delete ops for turns and everything learned from them."""
    ops = [CurationOp("interaction", t["turn_id"], "delete", user_id=t["user_id"]) for t in turns]
    learned = {e: live_rows(state.lake, e, statuses=LIFECYCLE_STATUSES) for e in ("profile", "user_playbook")}
    return ops + cascade_deletes({t["turn_id"] for t in turns}, learned, live_agent_playbooks(state.lake))


def _delete_user_playbooks(state: ServiceState, rows: list[dict[str, Any]]) -> list[CurationOp]:
    ops = [CurationOp("user_playbook", str(r["user_playbook_id"]), "delete", user_id=r["user_id"]) for r in rows]
    return ops + cascade_deletes(
        set(), {}, live_agent_playbooks(state.lake), {int(r["user_playbook_id"]) for r in rows}
    )


def _bulk(deleted: int, what: str, note: str) -> dict:
    return {"success": True, "deleted_count": deleted, "message": f"deleted {deleted} {what}{note}"}


@router.delete("/api/delete_profile", response_model=MessageResponse)
def delete_profile(body: DeleteProfileRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete one profile of a user by id, or the user's profiles matching `search_query` (vector similarity at
    least DELETE_QUERY_THRESHOLD; the original accepted the query but deleted nothing)."""
    if body.profile_id:
        rows = live_rows(state.lake, "profile", filters=[("user_id", "=", body.user_id)], statuses=LIFECYCLE_STATUSES)
        targets = [body.profile_id] if any(r["profile_id"] == body.profile_id for r in rows) else []
        if not targets:
            return not_found(f"profile_id {body.profile_id} of user {body.user_id}", "message")
    else:
        targets = _profiles_matching(state, body.user_id, body.search_query)
    ops = [CurationOp("profile", pid, "delete", user_id=body.user_id) for pid in targets]
    note = _commit(state, ops, wait_for_response)
    return {"success": True, "message": f"deleted {len(ops)} profile(s){note}"}


def _profiles_matching(state: ServiceState, user_id: str, query: str) -> list[str]:
    indexes = state.searchable()
    if not indexes:
        return []
    plan = QueryPlan(state, indexes, query, "vector")
    hits = plan.run(
        EntityQuery(
            "profile",
            query=query,
            top_k=100,
            threshold=DELETE_QUERY_THRESHOLD,
            filters=SearchFilters(user_id=user_id, statuses=LIFECYCLE_STATUSES),
        )
    )
    return [h["profile_id"] for h in hits]


@router.delete("/api/delete_interaction", response_model=MessageResponse)
def delete_interaction(body: DeleteInteractionRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete one turn of a user, and what was learned from it."""
    turns = turn_rows(state.lake, [("user_id", "=", body.user_id), ("interaction_id", "=", body.interaction_id)])
    if not turns:
        return not_found(f"interaction_id {body.interaction_id} of user {body.user_id}", "message")
    note = _commit(state, _delete_turns(state, turns), wait_for_response)
    return {"success": True, "message": f"deleted interaction {body.interaction_id}{note}"}


@router.delete("/api/delete_request", response_model=MessageResponse)
def delete_request(body: DeleteRequestRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete a publish call's turns, and what was learned from them."""
    turns = turn_rows(state.lake, [("request_id", "=", body.request_id)])
    if not turns:
        return not_found(f"request_id {body.request_id}", "message")
    note = _commit(state, _delete_turns(state, turns), wait_for_response)
    return {"success": True, "message": f"deleted request {body.request_id}{note}"}


@router.delete("/api/delete_session", response_model=DeleteSessionResponse)
def delete_session(body: DeleteSessionRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every request of a session (a publish without a session id is the session named by its request id),
    and what was learned from them."""
    turns = session_turn_rows(state.lake, body.session_id)
    note = _commit(state, _delete_turns(state, turns), wait_for_response)
    count = len({t["request_id"] for t in turns})
    return {
        "success": True,
        "message": f"deleted {count} request(s) of session {body.session_id}{note}",
        "deleted_requests_count": count,
    }


@router.delete("/api/delete_user_playbook", response_model=MessageResponse)
def delete_user_playbook(body: DeleteUserPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete one user playbook, and the agent playbooks it leaves without members."""
    row = _user_playbook(state, body.user_playbook_id)
    if row is None:
        return not_found(f"user_playbook_id {body.user_playbook_id}", "message")
    note = _commit(state, _delete_user_playbooks(state, [row]), wait_for_response)
    return {"success": True, "message": f"deleted user playbook {body.user_playbook_id}{note}"}


@router.delete("/api/delete_agent_playbook", response_model=MessageResponse)
def delete_agent_playbook(body: DeleteAgentPlaybookRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete an agent playbook; a later aggregation does not bring it back under the same id."""
    if agent_playbook_row(state.lake, body.agent_playbook_id) is None:
        return not_found(f"agent_playbook_id {body.agent_playbook_id}", "message")
    note = _commit(state, [CurationOp("agent_playbook", str(body.agent_playbook_id), "delete")], wait_for_response)
    return {"success": True, "message": f"deleted agent playbook {body.agent_playbook_id}{note}"}


@router.delete("/api/delete_requests_by_ids", response_model=BulkDeleteResponse)
def delete_requests_by_ids(body: DeleteRequestsByIdsRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete publish calls by id, and what was learned from them; unknown ids are skipped."""
    turns = turn_rows(state.lake, [("request_id", "in", body.request_ids)])
    note = _commit(state, _delete_turns(state, turns), wait_for_response)
    return _bulk(len({t["request_id"] for t in turns}), "request(s)", note)


@router.delete("/api/delete_profiles_by_ids", response_model=BulkDeleteResponse)
def delete_profiles_by_ids(body: DeleteProfilesByIdsRequest, state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete profiles by id; unknown ids are skipped."""
    wanted = set(body.profile_ids)
    rows = [r for r in live_rows(state.lake, "profile", statuses=LIFECYCLE_STATUSES) if r["profile_id"] in wanted]
    ops = [CurationOp("profile", r["profile_id"], "delete", user_id=r["user_id"]) for r in rows]
    return _bulk(len(ops), "profile(s)", _commit(state, ops, wait_for_response))


@router.delete("/api/delete_user_playbooks_by_ids", response_model=BulkDeleteResponse)
def delete_user_playbooks_by_ids(
    body: DeleteUserPlaybooksByIdsRequest, state: ServiceDep, wait_for_response: bool = WAIT
):
    """Delete user playbooks by id, and the agent playbooks they leave without members; unknown ids are skipped."""
    wanted = set(body.user_playbook_ids)
    rows = [
        r
        for r in live_rows(state.lake, "user_playbook", statuses=LIFECYCLE_STATUSES)
        if r["user_playbook_id"] in wanted
    ]
    note = _commit(state, _delete_user_playbooks(state, rows), wait_for_response)
    return _bulk(len(rows), "user playbook(s)", note)


@router.delete("/api/delete_agent_playbooks_by_ids", response_model=BulkDeleteResponse)
def delete_agent_playbooks_by_ids(
    body: DeleteAgentPlaybooksByIdsRequest, state: ServiceDep, wait_for_response: bool = WAIT
):
    """Delete agent playbooks by id; unknown ids are skipped."""
    known = {int(r["agent_playbook_id"]) for r in live_agent_playbooks(state.lake)}
    ops = [CurationOp("agent_playbook", str(i), "delete") for i in dict.fromkeys(body.agent_playbook_ids) if i in known]
    return _bulk(len(ops), "agent playbook(s)", _commit(state, ops, wait_for_response))


@router.delete("/api/delete_all_interactions", response_model=BulkDeleteResponse)
def delete_all_interactions(state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every turn of the organisation, and everything learned from them."""
    turns = turn_rows(state.lake)
    note = _commit(state, _delete_turns(state, turns), wait_for_response)
    return _bulk(len({t["request_id"] for t in turns}), "request(s)", note)


@router.delete("/api/delete_all_profiles", response_model=BulkDeleteResponse)
def delete_all_profiles(state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every profile of the organisation."""
    ops = [
        CurationOp("profile", r["profile_id"], "delete", user_id=r["user_id"])
        for r in live_rows(state.lake, "profile", statuses=LIFECYCLE_STATUSES)
    ]
    return _bulk(len(ops), "profile(s)", _commit(state, ops, wait_for_response))


def _all_user_playbook_ops(state: ServiceState) -> list[CurationOp]:
    return _delete_user_playbooks(state, live_rows(state.lake, "user_playbook", statuses=LIFECYCLE_STATUSES))


def _all_agent_playbook_ops(state: ServiceState) -> list[CurationOp]:
    return [
        CurationOp("agent_playbook", str(r["agent_playbook_id"]), "delete") for r in live_agent_playbooks(state.lake)
    ]


@router.delete("/api/delete_all_user_playbooks", response_model=BulkDeleteResponse)
def delete_all_user_playbooks(state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every user playbook, and the agent playbooks they leave without members (counted: user playbooks)."""
    ops = _all_user_playbook_ops(state)
    count = sum(op.entity == "user_playbook" for op in ops)
    return _bulk(count, "user playbook(s)", _commit(state, ops, wait_for_response))


@router.delete("/api/delete_all_agent_playbooks", response_model=BulkDeleteResponse)
def delete_all_agent_playbooks(state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every agent playbook."""
    ops = _all_agent_playbook_ops(state)
    return _bulk(len(ops), "agent playbook(s)", _commit(state, ops, wait_for_response))


@router.delete("/api/delete_all_playbooks", response_model=BulkDeleteResponse)
def delete_all_playbooks(state: ServiceDep, wait_for_response: bool = WAIT):
    """Delete every user and agent playbook."""
    ops = _all_user_playbook_ops(state)
    agent_ids = {op.item_id for op in ops if op.entity == "agent_playbook"}
    ops += [op for op in _all_agent_playbook_ops(state) if op.item_id not in agent_ids]
    return _bulk(len(ops), "playbook(s)", _commit(state, ops, wait_for_response))
