"""The results of a retrieval experiment (the original's RetrievalExperimentResultsResponse), pure over rows.

The experiment's arms are the holdout's (learning/holdout.py): `treated` sessions are the original's `treatment`,
`control` sessions its `holdout`. A session counts when it closed within the experiment's period; its success is
the client's reported outcome where there is one, else the judge's verdict (lake/reported_outcomes.py), and
`unknown` outcomes are not evaluated. Sessions where a caller switched the holdout off are unattributed. The 95 %
interval of the success-rate difference is Newcombe's (learning/stats.py), in percentage points.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from reflexio_pipelines.learning.holdout import CONTROL
from reflexio_pipelines.learning.stats import newcombe_difference

ARMS = {"treatment": "treated", "holdout": CONTROL}


def in_period(row: dict[str, Any], started_at: int, ended_at: int | None) -> bool:
    """Whether a `session_outcomes` row's session closed within [started_at, ended_at]."""
    closed = row["session_closed_at"] or 0
    return closed >= started_at and (ended_at is None or closed <= ended_at)


def _arm_metrics(
    arm: str, sessions: list[dict], verdicts: dict[str, dict], evaluations: dict[str, dict]
) -> tuple[dict[str, Any], int, int]:
    """(the arm's RetrievalExperimentArmMetrics, successes, evaluated sessions)."""
    judged = [s for s in sessions if verdicts.get(s["session_id"], {}).get("outcome") in ("success", "failure")]
    successes = sum(1 for s in judged if verdicts[s["session_id"]]["outcome"] == "success")
    graded = [evaluations[s["session_id"]] for s in sessions if s["session_id"] in evaluations]
    turns = [e["user_turns_to_resolution"] for e in graded if e["user_turns_to_resolution"] is not None]
    escalated = [bool(e["is_escalated"]) for e in graded if e["is_escalated"] is not None]
    metrics = {
        "arm": arm,
        "assigned_user_count": len({s["user_id"] for s in sessions}),
        "published_session_count": len(sessions),
        "evaluated_user_count": len({s["user_id"] for s in judged}),
        "evaluated_session_count": len(judged),
        "success_rate": successes / len(judged) if judged else None,
        "average_corrections": mean(s["corrections"] or 0 for s in sessions) if sessions else None,
        "average_turns_to_resolution": mean(turns) if turns else None,
        "escalation_rate": mean(escalated) if escalated else None,
        "average_output_tokens": None,
        "output_token_session_count": 0,
    }
    return metrics, successes, len(judged)


def experiment_results(
    experiment: dict[str, Any],
    sessions: Sequence[dict[str, Any]],
    verdicts: dict[str, dict[str, Any]],
    evaluations: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Both arms, the lift and its interval, from `session_outcomes` rows (`sessions`), each session's outcome
    (`verdicts`) and its judge's evaluation row (`evaluations`), all keyed by session id."""
    window = [s for s in sessions if in_period(s, experiment["started_at"], experiment.get("ended_at"))]
    attributed = [s for s in window if not s["holdout_override"]]
    by_arm = {name: [s for s in attributed if s["arm"] == arm] for name, arm in ARMS.items()}
    treatment, t_success, t_n = _arm_metrics("treatment", by_arm["treatment"], verdicts, evaluations)
    holdout, h_success, h_n = _arm_metrics("holdout", by_arm["holdout"], verdicts, evaluations)
    diff = newcombe_difference(t_success, t_n, h_success, h_n)
    lift = diff.difference
    evaluated = sum(1 for s in window if verdicts.get(s["session_id"], {}).get("outcome") in ("success", "failure"))
    return {
        "experiment": experiment,
        "treatment": treatment,
        "holdout": holdout,
        "success_rate_lift_percentage_points": lift * 100 if lift is not None else None,
        "relative_success_lift": (
            lift / holdout["success_rate"] if lift is not None and holdout["success_rate"] else None
        ),
        "confidence_interval_95_percentage_points": (
            (diff.ci_low * 100, diff.ci_high * 100) if diff.ci_low is not None and diff.ci_high is not None else None
        ),
        "evaluated_session_coverage": (t_n + h_n) / evaluated if evaluated else None,
        "unattributed_evaluated_session_count": evaluated - t_n - h_n,
    }
