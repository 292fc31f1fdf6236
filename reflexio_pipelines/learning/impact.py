"""The impact maths: does learning measurably help? Pure functions from the evaluation tables' rows to the rows of
`impact_metrics`, `impact_before_after` and `impact_holdout` (assets/evaluation.py reads and writes the lake).

- `compute_impact`: per (agent version, day, evaluation, judge), the success rate with its 95 % Wilson interval, the
  regular win rate over shadow, corrections per session, turns to resolution, playbooks approved / rejected; and
  one `session_signals` row (judge `heuristic`) per (agent version, day) with the rule-based signals.
- `compute_before_after`: sessions before vs after a learned playbook was first served (time-confounded).
- `compute_holdout`: treated vs control over the same period, with 95 % intervals for the difference
  (`learning/stats.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timezone

from reflexio_pipelines.learning.config import DEFAULT_EVALUATION, RESERVED_EVALUATION
from reflexio_pipelines.learning.holdout import CONTROL, TREATED
from reflexio_pipelines.learning.judge import HEURISTIC_JUDGE
from reflexio_pipelines.learning.stats import Difference, newcombe_difference, welch_difference, wilson

#: The `evaluation_name` of impact rows that no evaluator judged: the rule-based signals of every closed session
#: (corrections, tool failures, correction recurrence; judge `heuristic`) and the approval decisions.
SIGNALS_EVALUATION = RESERVED_EVALUATION


def day_of(ts: int) -> str:
    """The UTC day (YYYY-MM-DD) of a unix time: the `day` an evaluated session, a session's outcomes or an approval
    decision counts on."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def compute_before_after(retrievals: Sequence[dict], evaluations: Sequence[dict]) -> list[dict]:
    """`impact_before_after` rows: sessions closed before vs after the first time a learned playbook was served for
    their agent version (`retrievals` and `session_evaluations` rows)."""
    first: dict[str, int] = {}
    for r in retrievals:
        version = r["agent_version"] or ""
        first[version] = min(first.get(version, r["first_served_at"]), r["first_served_at"])
    sides: dict[str, dict[str, list]] = defaultdict(lambda: {"before": [], "after": []})
    for r in evaluations:
        version = r["agent_version"] or ""
        if version in first:
            side = "before" if (r["session_closed_at"] or 0) < first[version] else "after"
            sides[version][side].append(r)
    out = []
    for version, t0 in sorted(first.items()):
        row = {"agent_version": version, "first_retrieval_at": t0}
        for side in ("before", "after"):
            evaluated = sides[version][side]
            n = len(evaluated)
            row[f"sessions_{side}"] = n
            row[f"success_rate_{side}"] = round(sum(e["is_success"] for e in evaluated) / n, 4) if n else None
            row[f"corrections_per_session_{side}"] = (
                round(sum(e["number_of_correction_per_session"] or 0 for e in evaluated) / n, 3) if n else None
            )
        out.append(row)
    return out


def compute_impact(
    evaluations: Sequence[dict],
    comparisons: Sequence[dict],
    outcomes: Sequence[dict],
    playbooks: Sequence[dict],
    control_log: Sequence[dict],
) -> list[dict]:
    """`impact_metrics` rows per (agent version, day, evaluation, judge) from the evaluation tables
    (`session_evaluations`, `shadow_comparisons`) and the approval decisions (`control_log` about `agent_playbooks`),
    plus one `session_signals` row (judge `heuristic`) per (agent version, day) from `session_outcomes`."""
    groups: dict[tuple[str, str, str, str], dict] = defaultdict(lambda: defaultdict(list))
    for r in evaluations:
        g = groups[(r["agent_version"] or "", r["day"], r["evaluation_name"], r["judge"] or HEURISTIC_JUDGE)]
        g["success"].append(r["is_success"])
        g["corrections"].append(r["number_of_correction_per_session"] or 0)
        if r["user_turns_to_resolution"] is not None:
            g["turns"].append(r["user_turns_to_resolution"])
    for r in comparisons:
        # Pairs written before evaluation_name was recorded belong to the default evaluator.
        evaluation = r["evaluation_name"] or DEFAULT_EVALUATION
        groups[(r["agent_version"] or "", r["day"], evaluation, r["judge"] or HEURISTIC_JUDGE)]["shadow"].append(
            r["regular_vs_shadow"]
        )
    for r in outcomes:
        g = groups[(r["agent_version"] or "", r["day"], SIGNALS_EVALUATION, HEURISTIC_JUDGE)]
        g["signal_corrections"].append(r["corrections"] or 0)
        g["tool_failures"].append(r["tool_failures"] or 0)
        g["repeated_learned"].append(r["repeated_learned_corrections"] or 0)
        if r["arm"] != CONTROL:  # only the treated are served anything to repeat
            g["treated_corrections"].append(r["corrections"] or 0)
            g["recurring"].append(r["recurring_corrections"] or 0)
    playbook_version = {str(r["agent_playbook_id"]): r["agent_version"] for r in playbooks}
    for r in control_log:
        if (
            r["entity"] == "agent_playbook"
            and r["value"] in ("approved", "rejected")
            and r["item_id"] in playbook_version
        ):
            # Decisions are nobody's judgement of a session: they go on the version's session_signals row.
            key = (playbook_version[r["item_id"]], day_of(r["at"]), SIGNALS_EVALUATION, HEURISTIC_JUDGE)
            groups[key][r["value"]].append(r["item_id"])
    rows = []
    for (agent_version, day, evaluation, judge), g in sorted(groups.items()):
        signals = evaluation == SIGNALS_EVALUATION
        n = len(g["signal_corrections"]) if signals else len(g["success"])
        ok = sum(g["success"])
        low, high = wilson(ok, n) if not signals else (None, None)
        regular = sum(v.startswith("regular") for v in g["shadow"])
        shadow = sum(v.startswith("shadow") for v in g["shadow"])
        corrections = g["signal_corrections"] if signals else g["corrections"]
        treated_corrections = sum(g["treated_corrections"])
        rows.append(
            {
                "agent_version": agent_version,
                "day": day,
                "evaluation_name": evaluation,
                "judge": judge,
                "sessions_evaluated": n,
                "successes": None if signals else ok,
                "success_rate": round(ok / n, 4) if n and not signals else None,
                "success_ci_low": low,
                "success_ci_high": high,
                "shadow_comparisons": len(g["shadow"]),
                "regular_win_rate": round(regular / (regular + shadow), 4) if regular + shadow else None,
                "corrections_per_session": round(sum(corrections) / n, 3) if n else None,
                "turns_to_resolution": round(sum(g["turns"]) / len(g["turns"]), 3) if g["turns"] else None,
                "tool_failures_per_session": round(sum(g["tool_failures"]) / n, 3) if signals and n else None,
                "corrections": treated_corrections if signals else None,
                "recurring_corrections": sum(g["recurring"]) if signals else None,
                "correction_recurrence": round(sum(g["recurring"]) / treated_corrections, 4)
                if treated_corrections
                else None,
                "repeated_learned_corrections": sum(g["repeated_learned"]) if signals else None,
                "playbooks_approved": len(set(g["approved"])),
                "playbooks_rejected": len(set(g["rejected"])),
            }
        )
    return rows


def compute_holdout(outcomes: Sequence[dict], evaluations: Sequence[dict]) -> list[dict]:
    """`impact_holdout` rows from `session_outcomes` and `session_evaluations` rows. Treated vs control per agent
    version: success rate and turns to resolution per (evaluation, judge), and the heuristic session signals
    (corrections and tool failures per session) over every closed session. The period is the same for both arms:
    from the version's first logged search (before it, nobody was served anything, so the arms cannot differ) to its
    last closed session. Sessions where a caller switched the holdout off are left out."""
    outcomes = [r for r in outcomes if not r["holdout_override"]]
    starts: dict[str, int] = {}
    for r in outcomes:
        if r["first_search_at"] is not None:
            version = r["agent_version"] or ""
            starts[version] = min(starts.get(version, r["first_search_at"]), r["first_search_at"])
    arms: dict[tuple[str, str], str] = {}
    by_version: dict[str, list[dict]] = defaultdict(list)
    for r in outcomes:
        version = r["agent_version"] or ""
        if version in starts and (r["session_closed_at"] or 0) >= starts[version]:
            arms[(r["user_id"], r["session_id"])] = r["arm"]
            by_version[version].append(r)
    rows: list[dict] = []

    def add(
        where: tuple[str, str, str], metric: str, days: list[str], counts: tuple[int, int], diff: Difference
    ) -> None:
        """One row: `where` is (agent version, evaluation, judge), `counts` the (treated, control) sessions."""
        (version, evaluation, judge), (treated_n, control_n) = where, counts
        rows.append(
            {
                "agent_version": version,
                "evaluation_name": evaluation,
                "judge": judge,
                "metric": metric,
                "period_start": min(days) if days else None,
                "period_end": max(days) if days else None,
                "treated_sessions": treated_n,
                "control_sessions": control_n,
                "treated_value": diff.treated,
                "control_value": diff.control,
                "difference": diff.difference,
                "ci_low": diff.ci_low,
                "ci_high": diff.ci_high,
                "interval": diff.method,
            }
        )

    def add_means(where: tuple[str, str, str], metric: str, days: list[str], values: dict[str, list]) -> None:
        """A row comparing the arms' means: each arm counts the sessions it has a value for."""
        counts = (len(values[TREATED]), len(values[CONTROL]))
        add(where, metric, days, counts, welch_difference(values[TREATED], values[CONTROL]))

    for version, sessions in sorted(by_version.items()):
        days = [r["day"] for r in sessions]
        side: dict[str, list[dict]] = {
            arm: [r for r in sessions if (r["arm"] == CONTROL) == (arm == CONTROL)] for arm in (TREATED, CONTROL)
        }
        for metric, column in (
            ("corrections_per_session", "corrections"),
            ("tool_failures_per_session", "tool_failures"),
        ):
            values = {arm: [r[column] or 0 for r in side[arm]] for arm in side}
            add_means((version, SIGNALS_EVALUATION, HEURISTIC_JUDGE), metric, days, values)
    judged: dict[tuple[str, str, str], dict[str, list[dict]]] = defaultdict(lambda: {TREATED: [], CONTROL: []})
    for r in evaluations:
        arm = arms.get((r["user_id"] or "", r["session_id"]))
        if arm is not None:
            judged[(r["agent_version"] or "", r["evaluation_name"], r["judge"] or HEURISTIC_JUDGE)][arm].append(r)
    for (version, evaluation, judge), side in sorted(judged.items()):
        days = [r["day"] for arm in side for r in side[arm]]
        ok = {arm: sum(r["is_success"] for r in side[arm]) for arm in side}
        counts = (len(side[TREATED]), len(side[CONTROL]))
        add(
            (version, evaluation, judge),
            "success_rate",
            days,
            counts,
            newcombe_difference(ok[TREATED], counts[0], ok[CONTROL], counts[1]),
        )
        turns = {
            arm: [r["user_turns_to_resolution"] for r in side[arm] if r["user_turns_to_resolution"] is not None]
            for arm in side
        }
        add_means((version, evaluation, judge), "turns_to_resolution", days, turns)
    return rows
