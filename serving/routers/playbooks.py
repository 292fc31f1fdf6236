"""Agent playbooks: on-demand aggregation (a real Dagster run), the approval workflow, reads and the audit log."""

from __future__ import annotations

import json
from collections import defaultdict

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from reflexio_pipelines.lake.curation import agent_playbook_row, live_agent_playbooks
from reflexio_pipelines.search.documents import agent_playbook_view
from serving.deps import ServiceDep
from serving.errors import error, not_found
from serving.models.acks import MsgResponse
from serving.models.playbooks import (
    AgentPlaybooksResponse,
    AggregationChangeLogsResponse,
    AggregationResponse,
    GetAgentPlaybooksRequest,
    RunPlaybookAggregationRequest,
    UpdateAgentPlaybookStatusRequest,
)

router = APIRouter()


@router.post("/api/run_playbook_aggregation", response_model=AggregationResponse)
async def run_playbook_aggregation(body: RunPlaybookAggregationRequest, state: ServiceDep):
    """Cluster current user playbooks into agent playbooks now (a Dagster `aggregation_job` run, visible in the UI),
    then serve the new index. Answers with the run id and what changed."""
    config = body.model_dump(exclude_none=True)
    try:
        result = await run_in_threadpool(state.aggregate, config)
    except Exception as exc:  # the run is recorded in Dagster; its tables are replaced only by a successful commit
        return error(503, f"aggregation run failed ({type(exc).__name__}); see the Dagster UI, then retry", "message")
    await run_in_threadpool(state.index.refresh)
    message = (
        f"aggregation run {result['run_id']}: {result.get('consolidate_new', 0)} new, "
        f"{result.get('reconsolidate', 0)} updated, {result.get('keep', 0)} unchanged clusters"
    )
    return {"success": bool(result["success"]), "message": message, **result}


@router.put("/api/update_agent_playbook_status", response_model=MsgResponse)
def update_agent_playbook_status(body: UpdateAgentPlaybookStatusRequest, state: ServiceDep):
    """Approve, reject or un-reject an aggregated or manually added agent playbook. Takes effect in retrieval
    immediately (a rejected one leaves search in the same request cycle) and is remembered by later runs."""
    if agent_playbook_row(state.lake, body.agent_playbook_id) is None:
        return not_found(f"agent_playbook_id {body.agent_playbook_id}")
    state.control.decide(str(body.agent_playbook_id), body.playbook_status)
    return {"success": True, "msg": f"agent playbook {body.agent_playbook_id} is now {body.playbook_status}"}


@router.post("/api/get_agent_playbooks", response_model=AgentPlaybooksResponse)
def get_agent_playbooks(body: GetAgentPlaybooksRequest, state: ServiceDep):
    """Agent playbooks (aggregated and manual, curation applied) with their decided approval status, newest first;
    current ones unless `status_filter` says otherwise. Each carries what a reviewer needs and search never serves:
    who supported it (`supporting_user_ids`) and why it was flagged for review (`flag_reason`, or null)."""
    wanted = tuple(dict.fromkeys("current" if s is None else s for s in (body.status_filter or [None])))
    rows = []
    for row in sorted(
        live_agent_playbooks(state.lake, wanted), key=lambda r: -(r["updated_at"] or r["created_at"] or 0)
    ):
        status = state.control.status(str(row["agent_playbook_id"]), row["playbook_status"])
        if (
            (body.agent_version is None or row["agent_version"] == body.agent_version)
            and (body.playbook_name is None or row["playbook_name"] == body.playbook_name)
            and (body.playbook_status_filter is None or status == body.playbook_status_filter)
        ):
            rows.append(review_view(row, status))
    return {
        "success": True,
        "agent_playbooks": state.outcomes.annotate("agent_playbook", rows[: body.limit]),
        "msg": "",
    }


def review_view(row: dict, status: str) -> dict:
    """An agent playbook as the approval queue shows it: the served view plus its supporters and flag (a manual
    add has neither)."""
    return {
        **agent_playbook_view(row, status),
        "supporting_user_ids": sorted(row.get("member_user_ids") or []),
        "flag_reason": row.get("flag_reason"),
    }


@router.get("/api/playbook_aggregation_change_logs", response_model=AggregationChangeLogsResponse)
def playbook_aggregation_change_logs(
    state: ServiceDep, playbook_name: str | None = Query(None), agent_version: str | None = Query(None)
):
    """The original's PlaybookAggregationChangeLog entries (one per run and scope), newest first, last 100."""
    runs: dict[tuple, dict] = {}
    grouped: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for row in state.lake.read_table("aggregation_change_log").to_pylist():
        if (playbook_name and row["playbook_name"] != playbook_name) or (
            agent_version and row["agent_version"] != agent_version
        ):
            continue
        key = (row["run_id"], row["agent_version"], row["playbook_name"])
        runs[key] = row
        before = json.loads(row["before"]) if row["before"] else None
        after = json.loads(row["after"]) if row["after"] else None
        entry = {"added": after, "removed": before, "updated": {"before": before, "after": after}}[row["change"]]
        grouped[key][row["change"]].append(
            dict(entry, member_user_playbook_ids=row["member_ids"]) if row["change"] != "updated" else entry
        )
    logs = [
        {
            "id": f"{run_id}:{version}:{name}",
            "created_at": runs[(run_id, version, name)]["created_at"],
            "playbook_name": name,
            "agent_version": version,
            "run_mode": runs[(run_id, version, name)]["run_mode"],
            "added_agent_playbooks": grouped[(run_id, version, name)]["added"],
            "removed_agent_playbooks": grouped[(run_id, version, name)]["removed"],
            "updated_agent_playbooks": grouped[(run_id, version, name)]["updated"],
        }
        for run_id, version, name in runs
    ]
    logs.sort(key=lambda entry: -entry["created_at"])
    return {"success": True, "change_logs": logs[:100]}
