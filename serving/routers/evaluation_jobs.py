"""Grading on demand and evaluation regeneration at the original's paths, backed by real `evaluation_job` runs with
the sessions named (assets/evaluation.py `EvaluationConfig.sessions`): a named session is judged whether or not the
5 % sampler picked it and whether or not its quiet period has passed. A session is judged once per evaluator (its
result id is deterministic), so grading one already graded answers the existing result with `cached` — the
original serves a 24 h cache the same way."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from reflexio_pipelines.lake.records import live_turns
from reflexio_pipelines.learning.config_loading import resolve_extraction_config
from reflexio_pipelines.learning.sessions import Session, group_sessions
from reflexio_pipelines.learning.types import stable_int_id, stable_uuid
from serving.deps import ServiceDep
from serving.errors import error, not_found
from serving.models.evaluation_jobs import (
    GradeOnDemandRequest,
    GradeOnDemandResponse,
    RegenerateCancelResponse,
    RegenerateRequest,
    RegenerateStartResponse,
    RegenerateStatusResponse,
)
from serving.regeneration import JobRunning, RegenerationJob, sessions_in_window
from serving.state import ServiceState

router = APIRouter()


def _session(state: ServiceState, session_id: str, agent_version: str) -> Session | None:
    """The session as the judge sees it (compacted live turns; a publish without a session id is the session named
    by its request id), if its agent version is `agent_version`."""
    for column in ("session_id", "request_id"):
        turns = live_turns(state.lake, filters=[(column, "=", session_id)])
        for session in group_sessions(turns):
            if session.session_id == session_id and session.agent_version == agent_version:
                return session
    return None


def _result_ids(state: ServiceState, session_id: str) -> list[str]:
    """The session's evaluation result ids, one per configured evaluator (deterministic, as the judge makes them)."""
    config = resolve_extraction_config(state.lake.extraction_config(state.settings.extraction_config))
    return [stable_uuid(e.evaluation_name, session_id) for e in config.agent_success_configs]


def _evaluated(state: ServiceState, result_ids: list[str]) -> str | None:
    rows = state.lake.read_table("session_evaluations", filters=[("result_id", "in", result_ids)])
    found = set(rows.column("result_id").to_pylist())
    return next((r for r in result_ids if r in found), None)


@router.post("/api/evaluations/grade_on_demand", response_model=GradeOnDemandResponse)
def grade_on_demand(body: GradeOnDemandRequest, state: ServiceDep) -> dict[str, Any]:
    """Judge one session now (a real evaluation run, in the request's worker thread: the lake reads and the run
    stay off the event loop); its result id, or why it was skipped."""
    answer: dict[str, Any] = {"session_id": body.session_id}
    if _session(state, body.session_id, body.agent_version) is None:
        return answer | {"skipped_reason": "NO_REQUESTS"}
    result_ids = _result_ids(state, body.session_id)
    if not result_ids:
        return answer | {"skipped_reason": "NO_EVALUATOR"}
    cached = _evaluated(state, result_ids)
    if cached is None:
        run = state.evaluate([body.session_id])
        found = _evaluated(state, result_ids)
        if found is None:
            reason = "JUDGE_FAILED" if run.get("success", True) else "RUN_FAILED"
            return answer | {"skipped_reason": reason}
        return answer | {"result_id": stable_int_id(found), "cached": False}
    return answer | {"result_id": stable_int_id(cached), "cached": True}


@router.post("/api/evaluations/regenerate", response_model=RegenerateStartResponse)
def start_regenerate(body: RegenerateRequest, state: ServiceDep) -> Any:
    """Grade every session with a turn in the window, in the background; 409 while another job runs."""
    sessions = sorted({s.session_id for s in sessions_in_window(state.lake, body.from_ts, body.to_ts)})
    try:
        job = state.regenerations.start(sessions, state.evaluate)
    except JobRunning as exc:
        return error(409, str(exc))
    return {"job_id": job.job_id, "total": len(job.sessions)}


def _status(job: RegenerationJob) -> dict[str, Any]:
    total = len(job.sessions)
    return {
        "job_id": job.job_id,
        "status": job.status,
        "total": total,
        "completed": job.completed,
        "failed": job.failed,
        "failures": job.failures,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "total_candidates": total,
        "sampled_count": total,
    }


@router.get("/api/evaluations/regenerate/{job_id}", response_model=RegenerateStatusResponse)
def regenerate_status(job_id: str, state: ServiceDep) -> Any:
    job = state.regenerations.get(job_id)
    return _status(job) if job is not None else not_found("Regenerate job " + job_id[:64])


@router.delete("/api/evaluations/regenerate/{job_id}", response_model=RegenerateCancelResponse)
def cancel_regenerate(job_id: str, state: ServiceDep) -> Any:
    """Cancel: a job not finished yet is reported cancelled (see serving/regeneration.py for what that stops); a
    finished one keeps its final status, which is what is answered."""
    job = state.regenerations.get(job_id)
    if job is None:
        return not_found("Regenerate job " + job_id[:64])
    state.regenerations.cancel(job)
    return {"status": job.status, "job_id": job.job_id}
