"""Session outcomes: the judge's inferred verdict per session (`session_evaluations`) and the outcome a client
reported (`reported_outcomes`, the original's `POST /api/session_outcome`), which replaces the inferred one.

The original's contract, kept here: a report needs a session with published turns and may not predate it; a
session's first report is final (the same report again is answered as already recorded, a different one is refused
as `conflicting_finalization`); a report that displaces an inferred verdict is revision 2. Every outcome carries
its identity: an id, a revision and two digests (the report's fields; the session's turns when it was reported).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES

#: How far in the future a report's `occurred_at` may lie (clock skew), as the original allows.
FUTURE_SLACK_S = 86_400


@dataclass(frozen=True)
class Report:
    """One client report (the original's SetSessionOutcomeRequest)."""

    session_id: str
    outcome: str
    occurred_at: int
    label: str | None = None
    value: float | None = None
    metadata: dict[str, Any] | None = None

    def digest(self) -> str:
        fields = [self.session_id, self.outcome, self.occurred_at, self.label, self.value, self.metadata]
        return _sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")))


@dataclass(frozen=True)
class Recorded:
    """What `record` did: the stored (or existing) row, whether this call wrote it, or why it refused."""

    recorded: bool
    row: dict[str, Any] | None = None
    reason: str | None = None
    message: str = ""
    user_id: str | None = None
    source: str | None = None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _session(lake: Lake, session_id: str) -> list[dict[str, Any]]:
    return turn_rows(lake, [("session_id", "=", session_id)])


def record(lake: Lake, report: Report, now: int | None = None) -> Recorded:
    """Store a client's report for its session unless the original's rules refuse it (see the module doc)."""
    now = int(time.time()) if now is None else now
    if report.occurred_at > now + FUTURE_SLACK_S:
        return Recorded(False, reason="occurred_in_future", message="Outcome occurred too far in the future")
    turns = _session(lake, report.session_id)
    if not turns:
        return Recorded(False, reason="unknown_session", message="Session has no published requests")
    user_id, source = turns[-1]["user_id"], turns[-1]["source"] or ""
    if report.occurred_at < min(t["created_at"] for t in turns):
        return Recorded(
            False,
            reason="occurred_before_session",
            message="Outcome occurred before the session began",
            user_id=user_id,
            source=source,
        )
    digest = report.digest()
    existing = reported(lake, [report.session_id]).get(report.session_id)
    if existing is not None:
        if existing["outcome_contract_digest"] == digest:
            return Recorded(False, existing, message="Outcome already recorded", user_id=user_id, source=source)
        return Recorded(
            False,
            existing,
            reason="conflicting_finalization",
            message="A different outcome was already reported for this session",
            user_id=user_id,
            source=source,
        )
    row = {
        "outcome_id": uuid.uuid4().hex,
        "outcome_revision": 2 if inferred(lake, [report.session_id]) else 1,
        "user_id": user_id,
        "session_id": report.session_id,
        "outcome": report.outcome,
        "occurred_at": report.occurred_at,
        "source": source,
        "label": report.label,
        "value": report.value,
        "metadata": json.dumps(report.metadata, sort_keys=True) if report.metadata is not None else None,
        "outcome_contract_digest": digest,
        "finalized_trajectory_digest": _sha256("\n".join(sorted(t["turn_id"] for t in turns))),
        "created_at": now,
    }
    lake.append("reported_outcomes", pa.Table.from_pylist([row], schema=TABLES["reported_outcomes"]))
    return Recorded(True, row, message="Outcome recorded", user_id=user_id, source=source)


def reported(lake: Lake, session_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The first report of each session (of `session_ids`, or every session)."""
    filters = [("session_id", "in", session_ids)] if session_ids else None
    rows = sorted(lake.read_table("reported_outcomes", filters=filters).to_pylist(), key=lambda r: r["created_at"])
    first: dict[str, dict[str, Any]] = {}
    for row in rows:
        first.setdefault(row["session_id"], row)
    return first


def inferred(lake: Lake, session_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """The judge's latest verdict per session as an outcome row (`is_inferred`), from `session_evaluations`."""
    filters = [("session_id", "in", session_ids)] if session_ids else None
    latest: dict[str, dict[str, Any]] = {}
    for row in lake.read_table("session_evaluations", filters=filters).to_pylist():
        kept = latest.get(row["session_id"])
        if kept is None or (row["created_at"] or 0) >= (kept["created_at"] or 0):
            latest[row["session_id"]] = row
    return {sid: _inferred_row(row) for sid, row in latest.items()}


def _inferred_row(evaluation: dict[str, Any]) -> dict[str, Any]:
    verdict = "success" if evaluation["is_success"] else "failure"
    return {
        "outcome_id": evaluation["result_id"],
        "outcome_revision": 1,
        "user_id": evaluation["user_id"] or "",
        "session_id": evaluation["session_id"],
        "outcome": verdict,
        "occurred_at": evaluation["session_closed_at"] or evaluation["created_at"] or 0,
        "source": "",
        "label": f"{evaluation['evaluation_name']} ({evaluation['judge']})",
        "value": None,
        "metadata": None,
        "outcome_contract_digest": _sha256(f"{evaluation['result_id']}\x1f{verdict}"),
        "finalized_trajectory_digest": _sha256(f"{evaluation['session_id']}\x1f{evaluation['session_closed_at']}"),
        "created_at": evaluation["created_at"] or 0,
        "is_inferred": True,
    }


def outcomes(lake: Lake, session_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Every session's outcome, the client's report where there is one, else the judge's verdict; newest first."""
    merged = inferred(lake, session_ids)
    merged.update({sid: dict(row, is_inferred=False) for sid, row in reported(lake, session_ids).items()})
    return sorted(merged.values(), key=lambda r: (-r["occurred_at"], r["session_id"]))
