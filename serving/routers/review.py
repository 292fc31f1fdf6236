"""`POST /api/review_user_playbooks`: the original's bulk re-review of current user playbooks, decided here by each
playbook's outcome counters (learning/playbook_review.py). Report only: the decisions are answered, not applied."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter

from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.learning.playbook_review import review_by_outcomes
from serving.deps import ServiceDep
from serving.models.review import ReviewUserPlaybooksRequest, ReviewUserPlaybooksResponse

router = APIRouter()


@router.post("/api/review_user_playbooks", response_model=ReviewUserPlaybooksResponse, response_model_exclude_none=True)
def review_user_playbooks(body: ReviewUserPlaybooksRequest, state: ServiceDep) -> dict[str, Any]:
    start, end = int(body.start_time.timestamp()), int(body.end_time.timestamp())
    rows = live_rows(state.lake, "user_playbook", filters=[("created_at", ">=", start), ("created_at", "<=", end)])
    rows.sort(key=lambda r: (-(r["created_at"] or 0), r["user_playbook_id"]))
    selected = state.outcomes.annotate("user_playbook", rows[: body.top_k])
    results = []
    for row in selected:
        review = review_by_outcomes(row["outcomes"])
        results.append({"user_playbook_id": row["user_playbook_id"], **review._asdict()})
    counts = Counter(r["decision"] for r in results)
    return {
        "success": True,
        "report_only": True,
        "selected_count": len(results),
        "accepted_count": counts["accept"],
        "edited_count": counts["edit"],
        "rejected_count": counts["reject"],
        "skipped_count": counts["skip"],
        "results": results,
        "msg": "" if results else "no current user playbook was created in that window",
    }
