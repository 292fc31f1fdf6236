"""`POST /api/get_learning_provenance`: what a learned item was learned from, from the lake's own provenance
columns — a profile's or user playbook's `source_turn_ids` (the turns its extraction read) and triggering request,
an agent playbook's member user playbooks (`member_ids`) each with their turns — and where the item stands in its
lineage (learning/lineage.py: merged, superseded, expired, forgotten, replaced, or its lifecycle status).

`provenance_status` as the original's: `exact` when every recorded source turn is still there, `best_effort` when
some were deleted or erased since, `unavailable` when none is (or nothing was recorded, e.g. a manual add)."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter

from reflexio_pipelines.lake.curation import live_agent_playbooks
from reflexio_pipelines.lake.interactions import interaction_view, turn_rows
from reflexio_pipelines.lake.records import every_item
from reflexio_pipelines.learning.lineage import lineage_of
from reflexio_pipelines.search.documents import user_playbook_view
from serving.deps import ServiceDep
from serving.models.provenance import GetLearningProvenanceRequest, LearningProvenanceResponse
from serving.state import ServiceState

router = APIRouter()
ID_COLUMN = {"profile": "profile_id", "user_playbook": "user_playbook_id"}


def _turns(state: ServiceState, turn_ids: list[str]) -> list[dict[str, Any]]:
    """The live turns among `turn_ids`, oldest first, as the original's InteractionView."""
    if not turn_ids:
        return []
    rows = turn_rows(state.lake, [("turn_id", "in", sorted(set(turn_ids)))])
    rows.sort(key=lambda r: (r["created_at"], r["request_id"], r["turn_index"]))
    return [interaction_view(r) for r in rows]


def _status(wanted: int, found: int) -> str:
    if wanted and found == wanted:
        return "exact"
    return "best_effort" if found else "unavailable"


def _missing(body: GetLearningProvenanceRequest, what: str) -> dict[str, Any]:
    return {"success": False, "target_kind": body.kind, "target_id": body.id, "msg": what}


def _learned_item(state: ServiceState, body: GetLearningProvenanceRequest) -> dict[str, Any]:
    column = ID_COLUMN[body.kind]
    rows = every_item(state.lake, body.kind)
    key: Any = body.id if body.kind == "profile" else (int(body.id) if body.id.isdecimal() else None)
    row = next((r for r in rows if r[column] == key), None)
    if row is None:
        return _missing(body, f"{body.kind} {body.id} not found")
    turn_ids = list(row["source_turn_ids"] or [])
    interactions = _turns(state, turn_ids)
    trigger = row["generated_from_request_id"] if body.kind == "profile" else row["request_id"]
    return {
        "success": True,
        "target_kind": body.kind,
        "target_id": body.id,
        "provenance_status": _status(len(set(turn_ids)), len(interactions)),
        "trigger_request_id": trigger or None,
        "interactions": interactions,
        "msg": None if interactions else "No source interactions were found",
        "lineage": lineage_of(key, rows, column, int(time.time())),
    }


def _agent_playbook(state: ServiceState, body: GetLearningProvenanceRequest) -> dict[str, Any]:
    key = int(body.id) if body.id.isdecimal() else None
    row = next(
        (r for r in live_agent_playbooks(state.lake, ("current", "archived")) if r["agent_playbook_id"] == key), None
    )
    if row is None:
        return _missing(body, f"agent_playbook {body.id} not found")
    members = set(row.get("member_ids") or [])
    playbooks = [r for r in every_item(state.lake, "user_playbook") if r["user_playbook_id"] in members]
    groups, wanted, found = [], 0, 0
    for playbook in sorted(playbooks, key=lambda r: r["user_playbook_id"]):
        turn_ids = list(playbook["source_turn_ids"] or [])
        interactions = _turns(state, turn_ids)
        wanted, found = wanted + len(set(turn_ids)), found + len(interactions)
        groups.append(
            {
                "user_playbook": user_playbook_view(playbook),
                "interactions": interactions,
                "source_interaction_ids": [i["interaction_id"] for i in interactions],
            }
        )
    if not groups:
        return _missing(body, "Recorded source user playbooks were not found")
    return {
        "success": True,
        "target_kind": body.kind,
        "target_id": body.id,
        "provenance_status": _status(wanted, found),
        "source_user_playbooks": groups,
        "msg": None if found else "No source interactions were found",
        "lineage": {"status": row["status"] or "current"},
    }


@router.post(
    "/api/get_learning_provenance", response_model=LearningProvenanceResponse, response_model_exclude_none=True
)
def get_learning_provenance(body: GetLearningProvenanceRequest, state: ServiceDep) -> dict[str, Any]:
    """An unknown id answers `success: false`, `provenance_status: unavailable` (the original's shape for it)."""
    if body.kind == "agent_playbook":
        return _agent_playbook(state, body)
    return _learned_item(state, body)
