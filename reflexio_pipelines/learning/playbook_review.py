"""Re-reviewing user playbooks by what serving them led to (the original's review_user_playbooks, whose reviewer is
an LLM re-reading each playbook's evidence): here the evidence is the item's outcome counters, counted by the
evaluation run's heuristic matching rules (learning/outcomes.py). Pure: counters in, decision out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Review(NamedTuple):
    """The original's decision vocabulary: `accept` (keep as is), `reject` (retire), `skip` (no evidence to judge
    by); `edit` is never proposed here (rewording needs a model)."""

    decision: str
    reason_code: str
    reason: str


def review_by_outcomes(counters: Mapping[str, Any]) -> Review:
    """Flagged or held out by its counters: reject; never served: skip (nothing shows whether it helps); served and
    not flagged: accept."""
    served, helpful, harmful = counters["served"], counters["helpful"], counters["harmful"]
    tally = f"served {served} times: {helpful} helpful, {harmful} harmful, {counters['missed']} missed"
    if counters["flagged"] or counters["held_out"]:
        return Review("reject", "unsupported_evidence", f"flagged by its outcome counters ({tally})")
    if served == 0:
        return Review("skip", "evidence_unavailable", "never served: no session shows what it led to")
    return Review("accept", "grounded_useful", tally)
