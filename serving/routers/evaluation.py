"""Evaluation reads: impact metrics for the dashboard, the original's dashboard stats and evaluation results."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone

from fastapi import APIRouter, Query, Request

from reflexio_pipelines.lake.llm_calls import llm_usage as usage_per_day
from reflexio_pipelines.lake.records import live_rows
from serving.deps import service
from serving.models import DashboardStatsRequest, EvaluationResultsRequest, LLMUsageResponse
from serving.state import ServiceState

router = APIRouter()

DAY = 86_400


@router.get("/api/impact_metrics")
def impact_metrics(request: Request, agent_version: str | None = Query(None)):
    """Per agent version and day: success rate with its 95 % interval, shadow win rate, corrections per session,
    turns to resolution, playbooks approved / rejected (the `impact_metrics` asset)."""
    state: ServiceState = service(request)
    rows = [r for r in state.lake.read_table("impact_metrics").to_pylist()
            if agent_version is None or r["agent_version"] == agent_version]  # fmt: skip
    rows.sort(key=lambda r: (r["agent_version"], r["day"]))
    before_after = [r for r in state.lake.read_table("impact_before_after").to_pylist()
                    if agent_version is None or r["agent_version"] == agent_version]  # fmt: skip
    return {"success": True, "metrics": rows, "before_after": before_after, "msg": "" if rows else "no evaluations yet"}


@router.get("/api/llm_usage", response_model=LLMUsageResponse)
def llm_usage(request: Request, days: int = Query(30, ge=1, le=3650)) -> LLMUsageResponse:
    """The LLM call ledger (`llm_calls`) per UTC day of the last `days`: calls, failed attempts, prompt and
    completion tokens, cost in USD (calls of models missing from LiteLLM's cost map counted apart), each also per
    1,000 turns. Reads the caller's organisation's lake only."""
    state: ServiceState = service(request)
    rows = usage_per_day(state.lake, days=days)
    return LLMUsageResponse(days=rows, msg="" if any(r.calls for r in rows) else "no LLM calls recorded yet")


@router.post("/api/get_agent_success_evaluation_results")
def get_agent_success_evaluation_results(body: EvaluationResultsRequest, request: Request):
    """The original's shape: newest first, optionally one agent version."""
    state: ServiceState = service(request)
    rows = [r for r in state.lake.read_table("session_evaluations").to_pylist()
            if body.agent_version is None or r["agent_version"] == body.agent_version]  # fmt: skip
    rows.sort(key=lambda r: (-(r["created_at"] or 0), r["result_id"]))
    return {"success": True, "agent_success_evaluation_results": rows[: body.limit], "msg": ""}


@router.post("/api/get_dashboard_stats")
def get_dashboard_stats(body: DashboardStatsRequest, request: Request):
    """The original's DashboardStats: this period vs the one before, and daily series (the original sent one raw
    point per row; these are bucketed per UTC day)."""
    state: ServiceState = service(request)
    now = int(time.time())
    start, previous_start = now - body.days_back * DAY, now - 2 * body.days_back * DAY
    turns = state.lake.read_table("turns", filters=[("created_at", ">=", previous_start)]).column("created_at").to_pylist()
    profiles = [r["last_modified_timestamp"] or 0 for r in live_rows(state.lake, "profile")]
    playbooks = [r["created_at"] or 0 for r in live_rows(state.lake, "user_playbook")]
    playbooks += [r["created_at"] or 0 for r in state.lake.read_table("agent_playbooks").to_pylist()]
    evaluations = [(r["session_closed_at"] or r["created_at"] or 0, r["is_success"])
                   for r in state.lake.read_table("session_evaluations").to_pylist()]  # fmt: skip

    def period(lo: int, hi: int) -> dict:
        evaluated = [ok for at, ok in evaluations if lo <= at < hi]
        return {
            "total_interactions": sum(lo <= t < hi for t in turns),
            "total_profiles": sum(lo <= t < hi for t in profiles),
            "total_playbooks": sum(lo <= t < hi for t in playbooks),
            "success_rate": round(100.0 * sum(evaluated) / len(evaluated), 1) if evaluated else 0.0,
        }

    stats = {
        "current_period": period(start, now + 1),
        "previous_period": period(previous_start, start),
        "interactions_time_series": _daily_counts(turns, start),
        "profiles_time_series": _daily_counts(profiles, start),
        "playbooks_time_series": _daily_counts(playbooks, start),
        "evaluations_time_series": _daily_success(evaluations, start),
    }
    return {"success": True, "stats": stats, "msg": ""}


def _day_start(ts: int) -> int:
    moment = datetime.fromtimestamp(ts, timezone.utc)
    return int(datetime(moment.year, moment.month, moment.day, tzinfo=timezone.utc).timestamp())


def _daily_counts(timestamps: list[int], since: int) -> list[dict]:
    counts = Counter(_day_start(t) for t in timestamps if t >= since)
    return [{"timestamp": day, "value": counts[day]} for day in sorted(counts)]


def _daily_success(evaluations: list[tuple[int, bool]], since: int) -> list[dict]:
    days: dict[int, list[bool]] = {}
    for at, ok in evaluations:
        if at >= since:
            days.setdefault(_day_start(at), []).append(ok)
    return [{"timestamp": day, "value": round(100.0 * sum(v) / len(v), 1)} for day, v in sorted(days.items())]
