"""`GET /api/evaluations/shadow_comparisons/recent`: the newest head-to-head verdicts of the evaluation run
(`shadow_comparisons`, judged when a turn carries `shadow_content`), in the original's verdict shape.

Mapping: the regular answer is the one with Reflexio's learnings (the original's "reflexio" side), so
`reflexio_is_request_1` is `presented_first == "regular"`; the verdict, stored from the regular side, becomes the
position the judge preferred (`tied` → `tie`), significant unless "slightly". The time and judge prompt version are
those of the session's evaluation row (the run that judged the pair); the original's 30-day look-back applies. The
judge gives no per-turn reason here (`comparison_reason` null)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, Query

from reflexio_pipelines.learning.types import stable_int_id
from serving.deps import ServiceDep
from serving.models.shadow import RecentShadowComparisonsResponse

router = APIRouter()
LOOKBACK_S = 30 * 86_400


def verdict(pair: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
    """One `shadow_comparisons` row (and its session's evaluation row) as the original's verdict."""
    regular_first = pair["presented_first"] == "regular"
    outcome = pair["regular_vs_shadow"]
    if outcome == "tied":
        better = "tie"
    else:
        regular_wins = outcome.startswith("regular")
        better = "1" if regular_wins == regular_first else "2"
    return {
        "verdict_id": stable_int_id(pair["session_id"], pair["turn_id"], pair["evaluation_name"] or ""),
        "interaction_id": str(stable_int_id(pair["turn_id"])),
        "session_id": pair["session_id"],
        "agent_version": pair["agent_version"] or "",
        "reflexio_is_request_1": regular_first,
        "output": {"better_request": better, "is_significantly_better": better != "tie" and "slightly" not in outcome},
        "judge_prompt_version": evaluation["prompt_version"] or "",
        "created_at": datetime.fromtimestamp(evaluation["created_at"] or 0, timezone.utc),
    }


@router.get("/api/evaluations/shadow_comparisons/recent", response_model=RecentShadowComparisonsResponse)
def recent_shadow_comparisons(state: ServiceDep, limit: Annotated[int, Query()] = 10) -> dict[str, Any]:
    """Newest first, at most `limit` (clamped to 1..100, as the original)."""
    limit = max(1, min(limit, 100))
    since = int(time.time()) - LOOKBACK_S
    evaluations = {
        (r["session_id"], r["evaluation_name"]): r
        for r in state.lake.read_table("session_evaluations", filters=[("created_at", ">=", since)]).to_pylist()
    }
    pairs = [
        (pair, evaluations[key])
        for pair in state.lake.read_table("shadow_comparisons").to_pylist()
        if (key := (pair["session_id"], pair["evaluation_name"])) in evaluations
    ]
    pairs.sort(key=lambda p: (-(p[1]["created_at"] or 0), p[0]["session_id"], p[0]["turn_id"]))
    return {"verdicts": [verdict(pair, evaluation) for pair, evaluation in pairs[:limit]]}
