"""Evaluation regeneration jobs (the original's `/api/evaluations/regenerate`): grade every session with turns in
a time window now, as one `evaluation_job` run with those sessions named, in a background thread.

Like the original's REGEN_JOBS, the registry lives in the serving process (one per organisation's service state):
a job is a handle on a run in flight, and what the run grades is durable in `session_evaluations` whatever happens
to the handle. One job runs per organisation at a time (the original's singleton). A cancel before the run has started stops it from starting;
once started, the Dagster run finishes (one run grades all the window's sessions), so a cancel then only marks the
job `cancelled` — what was graded stays graded, as in the original, whose worker checks its flag between sessions.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_turns
from reflexio_pipelines.learning.sessions import Session, group_sessions


@dataclass
class RegenerationJob:
    """One regeneration: its window, the sessions it grades and how far it got."""

    job_id: str
    sessions: list[str]
    status: str = "running"  # running | completed | cancelled | error
    completed: int = 0
    failed: int = 0
    failures: list[dict] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)


class JobRunning(RuntimeError):
    """Another regeneration of the organisation is still running."""


def sessions_in_window(lake: Lake, from_ts: int, to_ts: int) -> list[Session]:
    """The sessions with a turn created in [from_ts, to_ts] (unix seconds), every turn of each."""
    touched = {
        t.user_id for t in live_turns(lake, filters=[("created_at", ">=", from_ts), ("created_at", "<=", to_ts)])
    }
    if not touched:
        return []
    turns = live_turns(lake, filters=[("user_id", "in", sorted(touched))])
    return [s for s in group_sessions(turns) if any(from_ts <= t.created_at <= to_ts for t in s.turns)]


class RegenerationJobs:
    """One organisation's regeneration jobs, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, RegenerationJob] = {}

    def get(self, job_id: str) -> RegenerationJob | None:
        return self._jobs.get(job_id)

    def start(self, sessions: list[str], evaluate: Callable[[list[str]], dict]) -> RegenerationJob:
        """Register a job over `sessions` and run `evaluate(sessions)` in a thread; JobRunning if one is running."""
        with self._lock:
            if any(j.status == "running" for j in self._jobs.values()):
                raise JobRunning("a regenerate job is already running for this organisation")
            job = RegenerationJob(job_id=uuid.uuid4().hex, sessions=sessions)
            self._jobs[job.job_id] = job
        threading.Thread(target=self._run, args=(job, evaluate), name="evaluation-regenerate", daemon=True).start()
        return job

    def cancel(self, job: RegenerationJob) -> None:
        """Ask the job to stop: it does not start its run if it has not yet, and is reported cancelled."""
        with self._lock:
            job.cancel.set()
            if job.status == "running":
                job.status = "cancelled"

    def _run(self, job: RegenerationJob, evaluate: Callable[[list[str]], dict]) -> None:
        status = "completed"
        try:
            if job.sessions and not job.cancel.is_set():
                result = evaluate(job.sessions)
                if not result.get("success", True):
                    raise RuntimeError(f"evaluation run {result.get('run_id')} failed")
                job.completed = len(job.sessions)
        except Exception as exc:  # the worker boundary: the job reports the failure instead of vanishing
            status = "error"
            job.failed = len(job.sessions)
            job.failures = [{"session_id": s, "reason": type(exc).__name__} for s in job.sessions[:20]]
        with self._lock:  # against a cancel deciding the status at the same moment
            job.finished_at = time.time()
            if job.status == "running":
                job.status = "cancelled" if job.cancel.is_set() else status
