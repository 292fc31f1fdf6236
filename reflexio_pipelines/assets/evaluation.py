"""Assets `session_evaluations` (+ `shadow_comparisons`) and `impact_metrics`: does learning measurably help?

Sessions are rebuilt from the lake on every run and closed after a quiet period, so nothing lives in memory and a
restart loses nothing (the original kept its timers in memory). A deterministic sample of closed sessions (5 % by
default, per evaluator) is judged once each; turns carrying `shadow_content` are compared head to head.
"""

import time
from collections import defaultdict
from datetime import datetime, timezone

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.records import live_turns
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.config import DEFAULT_EVALUATION, RESERVED_EVALUATION
from reflexio_pipelines.learning.holdout import CONTROL, TREATED
from reflexio_pipelines.learning.judge import HEURISTIC_JUDGE, HeuristicJudge, Judge, session_verdict_from_pairs
from reflexio_pipelines.learning.llm_ledger import about_user
from reflexio_pipelines.learning.llm_judge import JudgeFailed, LiteLLMJudge
from reflexio_pipelines.learning.sessions import (
    corrections_in,
    group_sessions,
    is_closed,
    is_sampled,
    user_turns_to_resolution,
)
from reflexio_pipelines.learning.stats import Difference, newcombe_difference, welch_difference, wilson
from reflexio_pipelines.learning.types import stable_uuid
from reflexio_pipelines.resources import ExtractorResource, LakeResource


#: The `evaluation_name` of impact rows that no evaluator judged: the rule-based signals of every closed session
#: (corrections, tool failures, correction recurrence; judge `heuristic`) and the approval decisions.
SIGNALS_EVALUATION = RESERVED_EVALUATION


class EvaluationConfig(dg.Config):
    """`now` pins the clock (tests, backfills); unset = the run's wall-clock time."""

    now: int | None = None


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def _judge(extractor: ExtractorResource) -> Judge:
    if not extractor.model:
        return HeuristicJudge()
    return LiteLLMJudge(endpoint=extractor.endpoint())  # the one endpoint: every LLM setting, the shared throttle


@dg.multi_asset(
    specs=[
        dg.AssetSpec("session_evaluations", deps=["turns"], group_name="evaluation", kinds={"deltalake"},
                     description="Per sampled closed session and evaluator: success, failure type, escalation, "
                                 "corrections, turns to resolution, judge and prompt version."),
        dg.AssetSpec("shadow_comparisons", deps=["turns"], group_name="evaluation", kinds={"deltalake"},
                     description="Per turn with shadow_content: regular vs shadow, order randomised and mapped back."),
    ]  # fmt: skip
)
def session_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, lake: LakeResource,
                       extractor: ExtractorResource):  # fmt: skip
    store = lake.get()
    now = config.now or int(time.time())
    settings = extractor.get_config(store)
    judge = _judge(extractor)
    done = set(store.read_table("session_evaluations").column("result_id").to_pylist())
    sessions = [s for s in group_sessions(live_turns(store))
                if is_closed(s, now, settings.session_quiet_period_seconds)]  # fmt: skip
    results, pairs, stats = [], [], defaultdict(int)
    stats["sessions_closed"] = len(sessions)
    # Every judge call lands in `llm_calls`, also when judging fails half-way: those calls were paid for.
    with ledger_written(store, run_id=context.run.run_id, asset=context.op_def.name, window=None) as ledger:
        for evaluator in settings.agent_success_configs:
            for session in sessions:
                result_id = stable_uuid(evaluator.evaluation_name, session.session_id)
                sampled = is_sampled(session.session_id, evaluator.evaluation_name, evaluator.sampling_rate)
                if result_id in done or not sampled:
                    stats["already_evaluated" if result_id in done else "not_sampled"] += 1
                    continue
                try:
                    with about_user(session.user_id):  # a session's judge calls go when its user is erased
                        row, shadow_rows = _evaluate(judge, session, evaluator, result_id, now, stats)
                except JudgeFailed:  # nothing written: the session is judged again by the next run
                    stats["judge_failed"] += 1
                    continue
                results.append(row)
                pairs.extend(shadow_rows)
    stats["llm_calls_recorded"] = len(ledger.calls())
    with store.lock("evaluations"):
        fresh_done = set(store.read_table("session_evaluations").column("result_id").to_pylist())
        results = [r for r in results if r["result_id"] not in fresh_done]  # a racing run already wrote them
        if results:
            store.append("session_evaluations", pa.Table.from_pylist(results, schema=TABLES["session_evaluations"]))
            kept = {r["session_id"] for r in results}
            shadow = [p for p in pairs if p["session_id"] in kept]
            if shadow:
                store.append("shadow_comparisons", pa.Table.from_pylist(shadow, schema=TABLES["shadow_comparisons"]))
    table = pa.Table.from_pylist(results, schema=TABLES["session_evaluations"])
    rate = sum(r["is_success"] for r in results) / len(results) if results else None
    yield dg.MaterializeResult(asset_key="session_evaluations", metadata={
        "evaluated_now": len(results), "success_rate_now": rate, "judge": judge.name + (" (rule-based heuristic)" if judge.name == HEURISTIC_JUDGE else ""),
        **{k: int(v) for k, v in stats.items()},
        "preview": preview(table, ["session_id", "agent_version", "is_success", "failure_type", "judge"],
                           enabled=lake.metadata_previews)})  # fmt: skip
    yield dg.MaterializeResult(asset_key="shadow_comparisons", metadata={"compared_now": len(pairs)})


def _evaluate(judge: Judge, session, evaluator, result_id: str, now: int, stats) -> tuple[dict, list[dict]]:
    verdict, calls, prompt_tokens, completion_tokens = judge.evaluate(session, evaluator.success_definition_prompt)
    stats["llm_calls"] += calls
    stats["prompt_tokens"] += prompt_tokens
    stats["completion_tokens"] += completion_tokens
    day = _day(session.last_at)
    shadow_rows, verdicts = [], []
    for turn in session.turns:
        if not turn.shadow_content:
            continue
        pair, calls, prompt_tokens, completion_tokens = judge.compare(session, turn)
        stats["llm_calls"] += calls
        stats["prompt_tokens"] += prompt_tokens
        stats["completion_tokens"] += completion_tokens
        verdicts.append(pair)
        shadow_rows.append({"session_id": session.session_id, "turn_id": turn.turn_id,
                            "agent_version": session.agent_version, "presented_first": pair.presented_first,
                            "regular_vs_shadow": pair.regular_vs_shadow, "judge": getattr(judge, "name", "heuristic"),
                            "model": getattr(judge, "model", "builtin"), "day": day,
                            "evaluation_name": evaluator.evaluation_name})  # fmt: skip
    row = {
        "result_id": result_id,
        "session_id": session.session_id,
        "user_id": session.user_id,
        "agent_version": session.agent_version,
        "evaluation_name": evaluator.evaluation_name,
        "is_success": verdict.is_success,
        "failure_type": None if verdict.is_success else verdict.failure_type,
        "failure_reason": None if verdict.is_success else verdict.failure_reason,
        "is_escalated": verdict.is_escalated,
        "regular_vs_shadow": session_verdict_from_pairs(verdicts),
        "shadow_pairs": len(verdicts),
        "number_of_correction_per_session": corrections_in(session),
        "user_turns_to_resolution": user_turns_to_resolution(session) if verdict.is_success else None,
        "judge": getattr(judge, "name", "heuristic"),
        "model": getattr(judge, "model", "builtin"),
        "prompt_version": getattr(judge, "prompt_version", "heuristic-v1"),
        "session_started_at": session.started_at,
        "session_closed_at": session.last_at,
        "created_at": now,
        "day": day,
    }
    return row, shadow_rows


@dg.multi_asset(
    specs=[
        dg.AssetSpec("impact_metrics", deps=["session_evaluations", "shadow_comparisons", "agent_playbooks",
                                             "session_outcomes"],
                     group_name="evaluation", kinds={"deltalake"},
                     description="Per agent version, day, evaluation and judge: success rate with a 95 % Wilson "
                                 "interval, regular win rate over shadow, corrections per session, turns to "
                                 "resolution, playbooks approved / rejected; `session_signals` rows (heuristic): "
                                 "corrections and tool failures per session, correction recurrence."),
        dg.AssetSpec("impact_before_after", deps=["session_evaluations"], group_name="evaluation", kinds={"deltalake"},
                     description="Per agent version: sessions before vs after a learned playbook was first served "
                                 "(time-confounded; impact_holdout is the controlled comparison)."),
        dg.AssetSpec("impact_holdout", deps=["session_evaluations", "session_outcomes"], group_name="evaluation",
                     kinds={"deltalake"},
                     description="Treated vs control (holdout) per agent version, evaluation, judge and metric over "
                                 "the same period, with 95 % intervals for the difference."),
    ]  # fmt: skip
)
def impact(lake: LakeResource):
    store = lake.get()
    rows = compute_impact(store)
    before_after = compute_before_after(store)
    holdout = compute_holdout(store)
    with store.lock("evaluations"):
        version = store.replace_where("impact_metrics", None, pa.Table.from_pylist(rows, schema=TABLES["impact_metrics"]))
        store.replace_where("impact_before_after", None,
                            pa.Table.from_pylist(before_after, schema=TABLES["impact_before_after"]))  # fmt: skip
        store.replace_where("impact_holdout", None, pa.Table.from_pylist(holdout, schema=TABLES["impact_holdout"]))
    latest = {}
    for row in rows:
        latest[(row["agent_version"], row["evaluation_name"], row["judge"])] = row
    metadata = {f"success_rate[{v} · {e} · judge {j}]": r["success_rate"] for (v, e, j), r in latest.items()
                if r["success_rate"] is not None}  # fmt: skip
    metadata |= {f"correction_recurrence[{v}] (heuristic)": r["correction_recurrence"] for (v, e, j), r in latest.items()
                 if e == SIGNALS_EVALUATION and r["correction_recurrence"] is not None}  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=TABLES["impact_metrics"])
    yield dg.MaterializeResult(asset_key="impact_metrics", metadata={
        "dagster/row_count": len(rows), "delta_version": version, **metadata,
        # Aggregates per agent version and day hold no user data: shown whatever metadata_previews says.
        "preview": preview(table, ["agent_version", "day", "evaluation_name", "judge", "sessions_evaluated",
                                   "success_rate", "regular_win_rate", "correction_recurrence"], enabled=True)})  # fmt: skip
    yield dg.MaterializeResult(asset_key="impact_before_after", metadata={
        f"success_rate_after_minus_before[{r['agent_version']}]": round(r["success_rate_after"] - r["success_rate_before"], 4)
        for r in before_after if r["success_rate_after"] is not None and r["success_rate_before"] is not None})  # fmt: skip
    yield dg.MaterializeResult(asset_key="impact_holdout", metadata={
        "dagster/row_count": len(holdout),
        **{f"{r['metric']}[{r['agent_version']} · {r['evaluation_name']} · judge {r['judge']}] treated−control":
           r["difference"] for r in holdout if r["difference"] is not None}})  # fmt: skip


def compute_before_after(store: Lake) -> list[dict]:
    """Sessions closed before vs after the first time a learned playbook was served for their agent version."""
    first: dict[str, int] = {}
    for r in store.read_table("retrievals").to_pylist():
        version = r["agent_version"] or ""
        first[version] = min(first.get(version, r["first_served_at"]), r["first_served_at"])
    sides: dict[str, dict[str, list]] = defaultdict(lambda: {"before": [], "after": []})
    for r in store.read_table("session_evaluations").to_pylist():
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


def compute_impact(store: Lake) -> list[dict]:
    """Impact metrics per (agent version, day, evaluation, judge) from the evaluation tables and the approval
    decisions, plus one `session_signals` row (judge `heuristic`) per (agent version, day) from `session_outcomes`."""
    groups: dict[tuple[str, str, str, str], dict] = defaultdict(lambda: defaultdict(list))
    for r in store.read_table("session_evaluations").to_pylist():
        g = groups[(r["agent_version"] or "", r["day"], r["evaluation_name"], r["judge"] or HEURISTIC_JUDGE)]
        g["success"].append(r["is_success"])
        g["corrections"].append(r["number_of_correction_per_session"] or 0)
        if r["user_turns_to_resolution"] is not None:
            g["turns"].append(r["user_turns_to_resolution"])
    for r in store.read_table("shadow_comparisons").to_pylist():
        # Pairs written before evaluation_name was recorded belong to the default evaluator.
        evaluation = r["evaluation_name"] or DEFAULT_EVALUATION
        groups[(r["agent_version"] or "", r["day"], evaluation, r["judge"] or HEURISTIC_JUDGE)]["shadow"].append(
            r["regular_vs_shadow"])
    for r in store.read_table("session_outcomes").to_pylist():
        g = groups[(r["agent_version"] or "", r["day"], SIGNALS_EVALUATION, HEURISTIC_JUDGE)]
        g["signal_corrections"].append(r["corrections"] or 0)
        g["tool_failures"].append(r["tool_failures"] or 0)
        g["repeated_learned"].append(r["repeated_learned_corrections"] or 0)
        if r["arm"] != CONTROL:  # only the treated are served anything to repeat
            g["treated_corrections"].append(r["corrections"] or 0)
            g["recurring"].append(r["recurring_corrections"] or 0)
    playbook_version = {str(r["agent_playbook_id"]): r["agent_version"] for r in store.read_table("agent_playbooks").to_pylist()}
    for r in store.read_table("control_log").to_pylist():
        if r["entity"] == "agent_playbook" and r["value"] in ("approved", "rejected") and r["item_id"] in playbook_version:
            # Decisions are nobody's judgement of a session: they go on the version's session_signals row.
            key = (playbook_version[r["item_id"]], _day(r["at"]), SIGNALS_EVALUATION, HEURISTIC_JUDGE)
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
        rows.append({
            "agent_version": agent_version, "day": day, "evaluation_name": evaluation, "judge": judge,
            "sessions_evaluated": n, "successes": None if signals else ok,
            "success_rate": round(ok / n, 4) if n and not signals else None, "success_ci_low": low,
            "success_ci_high": high, "shadow_comparisons": len(g["shadow"]),
            "regular_win_rate": round(regular / (regular + shadow), 4) if regular + shadow else None,
            "corrections_per_session": round(sum(corrections) / n, 3) if n else None,
            "turns_to_resolution": round(sum(g["turns"]) / len(g["turns"]), 3) if g["turns"] else None,
            "tool_failures_per_session": round(sum(g["tool_failures"]) / n, 3) if signals and n else None,
            "corrections": treated_corrections if signals else None,
            "recurring_corrections": sum(g["recurring"]) if signals else None,
            "correction_recurrence": round(sum(g["recurring"]) / treated_corrections, 4) if treated_corrections else None,
            "repeated_learned_corrections": sum(g["repeated_learned"]) if signals else None,
            "playbooks_approved": len(set(g["approved"])), "playbooks_rejected": len(set(g["rejected"])),
        })  # fmt: skip
    return rows


def compute_holdout(store: Lake) -> list[dict]:
    """Treated vs control per agent version: success rate and turns to resolution per (evaluation, judge), and the
    heuristic session signals (corrections and tool failures per session) over every closed session. The period is
    the same for both arms: from the version's first logged search (before it, nobody was served anything, so the
    arms cannot differ) to its last closed session. Sessions where a caller switched the holdout off are left out."""
    outcomes = [r for r in store.read_table("session_outcomes").to_pylist() if not r["holdout_override"]]
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

    def add(version: str, evaluation: str, judge: str, metric: str, days: list[str], treated_n: int, control_n: int,
            diff: Difference) -> None:  # fmt: skip
        rows.append({"agent_version": version, "evaluation_name": evaluation, "judge": judge, "metric": metric,
                     "period_start": min(days) if days else None, "period_end": max(days) if days else None,
                     "treated_sessions": treated_n, "control_sessions": control_n, "treated_value": diff.treated,
                     "control_value": diff.control, "difference": diff.difference, "ci_low": diff.ci_low,
                     "ci_high": diff.ci_high, "interval": diff.method})  # fmt: skip

    for version, sessions in sorted(by_version.items()):
        days = [r["day"] for r in sessions]
        side = {arm: [r for r in sessions if (r["arm"] == CONTROL) == (arm == CONTROL)] for arm in (TREATED, CONTROL)}
        for metric, column in (("corrections_per_session", "corrections"), ("tool_failures_per_session", "tool_failures")):
            values = {arm: [r[column] or 0 for r in side[arm]] for arm in side}
            add(version, SIGNALS_EVALUATION, HEURISTIC_JUDGE, metric, days, len(side[TREATED]), len(side[CONTROL]),
                welch_difference(values[TREATED], values[CONTROL]))  # fmt: skip
    judged: dict[tuple[str, str, str], dict[str, list[dict]]] = defaultdict(lambda: {TREATED: [], CONTROL: []})
    for r in store.read_table("session_evaluations").to_pylist():
        arm = arms.get((r["user_id"] or "", r["session_id"]))
        if arm is not None:
            judged[(r["agent_version"] or "", r["evaluation_name"], r["judge"] or HEURISTIC_JUDGE)][arm].append(r)
    for (version, evaluation, judge), side in sorted(judged.items()):
        days = [r["day"] for arm in side for r in side[arm]]
        ok = {arm: sum(r["is_success"] for r in side[arm]) for arm in side}
        add(version, evaluation, judge, "success_rate", days, len(side[TREATED]), len(side[CONTROL]),
            newcombe_difference(ok[TREATED], len(side[TREATED]), ok[CONTROL], len(side[CONTROL])))  # fmt: skip
        turns = {arm: [r["user_turns_to_resolution"] for r in side[arm] if r["user_turns_to_resolution"] is not None]
                 for arm in side}  # fmt: skip
        add(version, evaluation, judge, "turns_to_resolution", days, len(turns[TREATED]), len(turns[CONTROL]),
            welch_difference(turns[TREATED], turns[CONTROL]))  # fmt: skip
    return rows
