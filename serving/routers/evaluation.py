"""Evaluation reads: impact metrics (treated vs control, correction recurrence) and outcome counters for the
dashboard, the review of flagged items, the original's dashboard stats and evaluation results."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone

from fastapi import APIRouter, Query

from reflexio_pipelines.lake.curation import live_agent_playbooks
from reflexio_pipelines.lake.llm_calls import llm_usage as usage_per_day
from reflexio_pipelines.lake.outcomes import change_log_entries
from reflexio_pipelines.lake.records import every_item, live_rows
from reflexio_pipelines.learning.extract import describe_extractor
from reflexio_pipelines.learning.outcome_types import ID_FIELDS
from reflexio_pipelines.learning.types import stable_int_id
from serving.deps import ServiceDep
from serving.errors import not_found
from serving.models.evaluation import (
    DashboardStatsRequest,
    DashboardStatsResponse,
    EvaluationResultsRequest,
    EvaluationResultsResponse,
    ExtractorInfo,
    ImpactMetricsResponse,
    ItemOutcomesResponse,
    LLMUsageResponse,
    OutcomeChangeLogResponse,
    ReviewFlaggedItemRequest,
    ReviewFlaggedItemResponse,
)
from serving.state import ServiceState

router = APIRouter()

DAY = 86_400


@router.get("/api/impact_metrics", response_model=ImpactMetricsResponse)
def impact_metrics(state: ServiceDep, agent_version: str | None = Query(None)):
    """The impact assets. `metrics`: per agent version, day, evaluation and judge — success rate with its 95 %
    interval, regular win rate over shadow, corrections per session, turns to resolution; rows named
    `session_signals` (judge `heuristic`) carry corrections and tool failures per session, correction recurrence
    and the approval decisions. `holdout`: treated vs control per agent version, evaluation, judge and metric, with
    the 95 % interval of the difference. `before_after`: the (time-confounded) comparison around the first serve."""

    def rows_of(table: str) -> list[dict]:
        return [
            r
            for r in state.lake.read_table(table).to_pylist()
            if agent_version is None or r["agent_version"] == agent_version
        ]

    rows = sorted(
        rows_of("impact_metrics"),
        key=lambda r: (r["agent_version"], r["day"], r["evaluation_name"] or "", r["judge"] or ""),
    )
    holdout = sorted(
        rows_of("impact_holdout"), key=lambda r: (r["agent_version"], r["evaluation_name"], r["judge"], r["metric"])
    )
    return {
        "success": True,
        "metrics": rows,
        "holdout": holdout,
        "before_after": rows_of("impact_before_after"),
        "msg": "" if rows else "no evaluations yet",
    }


@router.get("/api/item_outcomes", response_model=ItemOutcomesResponse)
def item_outcomes(
    state: ServiceDep,
    entity: str | None = Query(None),
    flagged: bool | None = Query(None),
    limit: int = Query(100, ge=1, le=10_000),
):
    """Outcome counters per learned item (most served first) with the item's text: served, helpful, harmful,
    missed, flagged, held_out. Counted by heuristic matching rules (`rules`)."""
    texts = _item_texts(state)
    out = []
    for row in state.lake.read_table("item_outcomes").to_pylist():
        if (entity and row["entity"] != entity) or (flagged is not None and row["flagged"] != flagged):
            continue
        text = texts.get((row["entity"], row["item_id"]), {})
        item = {
            "entity": row["entity"],
            "item_id": row["item_id"],
            "agent_version": row["agent_version"],
            "content": text.get("content"),
            "trigger": text.get("trigger"),
        }
        (annotated,) = state.outcomes.annotate(row["entity"], [{ID_FIELDS[row["entity"]]: row["item_id"]}])
        out.append(item | annotated["outcomes"] | {"user_id": row["user_id"]})
    out.sort(key=lambda r: (-r["served"], -r["harmful"], r["entity"], r["item_id"]))
    return {"success": True, "items": out[:limit], "msg": "" if out else "no learned item has been served yet"}


@router.get("/api/outcome_change_log", response_model=OutcomeChangeLogResponse)
def outcome_change_log(state: ServiceDep, entity: str | None = Query(None), item_id: str | None = Query(None)):
    """Every flag action on a learned item (flagged, held_out, unflagged, kept), newest first, with its evidence
    session ids."""
    return {"success": True, "entries": change_log_entries(state.lake, entity, item_id), "msg": ""}


@router.post("/api/review_flagged_item", response_model=ReviewFlaggedItemResponse)
def review_flagged_item(body: ReviewFlaggedItemRequest, state: ServiceDep):
    """A reviewer keeps an item its counters flagged: it is served again at once (also when flagged items are held
    out of search), and is flagged again only on new harmful evidence. The decision is in the outcome change log."""
    if state.outcomes.row(body.entity, body.item_id) is None:
        return not_found(f"outcome counters of {body.entity} {body.item_id}")
    row = state.outcomes.keep(body.entity, body.item_id, actor="api", reason=body.reason)
    return {"success": True, "msg": f"{body.entity} {body.item_id} kept", "action_id": row["action_id"]}


def _item_texts(state: ServiceState) -> dict[tuple[str, str], dict]:
    """(entity, id) -> content and trigger of every learned item (superseded and archived ones included)."""
    texts: dict[tuple[str, str], dict] = {}
    for r in every_item(state.lake, "profile"):
        texts[("profile", str(r["profile_id"]))] = {"content": r["content"], "trigger": None}
    for r in every_item(state.lake, "user_playbook"):
        texts[("user_playbook", str(r["user_playbook_id"]))] = {"content": r["content"], "trigger": r["trigger"]}
    for r in live_agent_playbooks(state.lake, ("current", "archived")):
        texts[("agent_playbook", str(r["agent_playbook_id"]))] = {"content": r["content"], "trigger": r["trigger"]}
    return texts


@router.get("/api/llm_usage", response_model=LLMUsageResponse)
def llm_usage(state: ServiceDep, days: int = Query(30, ge=1, le=3650)) -> LLMUsageResponse:
    """The LLM call ledger (`llm_calls`) per UTC day of the last `days`: calls, failed attempts, prompt and
    completion tokens, cost in USD (calls of models missing from LiteLLM's cost map counted apart), each also per
    1,000 turns. Reads the caller's organisation's lake only."""
    rows = usage_per_day(state.lake, days=days)
    return LLMUsageResponse(
        days=rows,
        extractor=ExtractorInfo(**describe_extractor(state.settings.llm)),
        msg="" if any(r.calls for r in rows) else "no LLM calls recorded yet",
    )


@router.post("/api/get_agent_success_evaluation_results", response_model=EvaluationResultsResponse)
def get_agent_success_evaluation_results(body: EvaluationResultsRequest, state: ServiceDep):
    """The original's shape: newest first, optionally one agent version."""
    rows = [
        r
        for r in state.lake.read_table("session_evaluations").to_pylist()
        if body.agent_version is None or r["agent_version"] == body.agent_version
    ]
    rows.sort(key=lambda r: (-(r["created_at"] or 0), r["result_id"]))
    # The original's result ids are integers (its clients parse them so): the lake's uuid in its integer form, the
    # same one grade_on_demand answers.
    rows = [r | {"result_id": stable_int_id(r["result_id"])} for r in rows[: body.limit]]
    return {"success": True, "agent_success_evaluation_results": rows, "msg": ""}


@router.post("/api/get_dashboard_stats", response_model=DashboardStatsResponse)
def get_dashboard_stats(body: DashboardStatsRequest, state: ServiceDep):
    """The original's DashboardStats: this period vs the one before, and daily series (the original sent one raw
    point per row; these are bucketed per UTC day)."""
    now = int(time.time())
    start, previous_start = now - body.days_back * DAY, now - 2 * body.days_back * DAY
    turns = (
        state.lake.read_table("turns", filters=[("created_at", ">=", previous_start)]).column("created_at").to_pylist()
    )
    profiles = [r["last_modified_timestamp"] or 0 for r in live_rows(state.lake, "profile")]
    playbooks = [r["created_at"] or 0 for r in live_rows(state.lake, "user_playbook")]
    playbooks += [r["created_at"] or 0 for r in state.lake.read_table("agent_playbooks").to_pylist()]
    evaluations = [
        (r["session_closed_at"] or r["created_at"] or 0, r["is_success"])
        for r in state.lake.read_table("session_evaluations").to_pylist()
    ]

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
