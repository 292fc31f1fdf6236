"""Assets `session_evaluations` (+ `shadow_comparisons`) and `impact_metrics`: does learning measurably help?

Sessions are rebuilt from the lake on every run and closed after a quiet period, so nothing lives in memory and a
restart loses nothing (the original kept its timers in memory). A deterministic sample of closed sessions (5 % by
default, per evaluator) is judged once each; turns carrying `shadow_content` are compared head to head
(learning/evaluation.py). The impact tables are computed from the evaluation tables by learning/impact.py. The
tables are read and written by lake/evaluations.py.
"""

import time

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview, table_specs
from reflexio_pipelines.lake.evaluations import append_evaluations, evaluated_ids, write_impact
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.records import live_turns
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.evaluation import judge_sessions
from reflexio_pipelines.learning.impact import SIGNALS_EVALUATION
from reflexio_pipelines.learning.judge import HEURISTIC_JUDGE, HeuristicJudge, Judge
from reflexio_pipelines.learning.llm_judge import LiteLLMJudge
from reflexio_pipelines.learning.sessions import closed_sessions, group_sessions
from reflexio_pipelines.resources import ExtractorResource, LakeResource


class EvaluationConfig(dg.Config):
    """`now` pins the clock (tests, backfills); unset = the run's wall-clock time. `sessions` names sessions to grade
    now (grade on demand, regeneration): only those are judged, closed or not, sampled or not."""

    now: int | None = None
    sessions: list[str] = []


def judge_for(extractor: ExtractorResource) -> Judge:
    if not extractor.model:
        return HeuristicJudge()
    return LiteLLMJudge(endpoint=extractor.endpoint())  # the one endpoint: every LLM setting, the shared throttle


@dg.multi_asset(
    specs=table_specs(
        "evaluation",
        {
            "session_evaluations": (
                ["turns"],
                "Per sampled closed session and evaluator: success, failure type, escalation, "
                "corrections, turns to resolution, judge and prompt version.",
            ),
            "shadow_comparisons": (
                ["turns"],
                "Per turn with shadow_content: regular vs shadow, order randomised and mapped back.",
            ),
        },
    )
)
def session_evaluation(
    context: dg.AssetExecutionContext, config: EvaluationConfig, lake: LakeResource, extractor: ExtractorResource
):
    store = lake.get()
    now = config.now or int(time.time())
    settings = extractor.get_config(store)
    judge = judge_for(extractor)
    done = evaluated_ids(store)
    forced = frozenset(config.sessions)
    grouped = group_sessions(live_turns(store))
    if forced:
        sessions = [s for s in grouped if s.session_id in forced]
    else:
        sessions = closed_sessions(grouped, now, settings.session_quiet_period_seconds)
    # Every judge call lands in `llm_calls`, also when judging fails half-way: those calls were paid for.
    with ledger_written(store, run_id=context.run.run_id, asset=context.op_def.name, window=None) as ledger:
        judged = judge_sessions(judge, sessions, settings.agent_success_configs, done, now, forced)
    stats, pairs = judged.stats, judged.pairs
    stats["llm_calls_recorded"] = len(ledger.calls())
    results = append_evaluations(store, judged.results, pairs)
    table = pa.Table.from_pylist(results, schema=TABLES["session_evaluations"])
    rate = sum(r["is_success"] for r in results) / len(results) if results else None
    yield dg.MaterializeResult(
        asset_key="session_evaluations",
        metadata={
            "evaluated_now": len(results),
            "success_rate_now": rate,
            "judge": judge.name + (" (rule-based heuristic)" if judge.name == HEURISTIC_JUDGE else ""),
            **{k: int(v) for k, v in stats.items()},
            "preview": preview(
                table,
                ["session_id", "agent_version", "is_success", "failure_type", "judge"],
                enabled=lake.metadata_previews,
            ),
        },
    )
    yield dg.MaterializeResult(asset_key="shadow_comparisons", metadata={"compared_now": len(pairs)})


@dg.multi_asset(
    specs=table_specs(
        "evaluation",
        {
            "impact_metrics": (
                ["session_evaluations", "shadow_comparisons", "agent_playbooks", "session_outcomes"],
                "Per agent version, day, evaluation and judge: success rate with a 95 % Wilson "
                "interval, regular win rate over shadow, corrections per session, turns to "
                "resolution, playbooks approved / rejected; `session_signals` rows (heuristic): "
                "corrections and tool failures per session, correction recurrence.",
            ),
            "impact_before_after": (
                ["session_evaluations"],
                "Per agent version: sessions before vs after a learned playbook was first served "
                "(time-confounded; impact_holdout is the controlled comparison).",
            ),
            "impact_holdout": (
                ["session_evaluations", "session_outcomes"],
                "Treated vs control (holdout) per agent version, evaluation, judge and metric over "
                "the same period, with 95 % intervals for the difference.",
            ),
        },
    )
)
def impact(lake: LakeResource):
    written = write_impact(lake.get())
    rows, before_after, holdout = written.metrics, written.before_after, written.holdout
    latest = {}
    for row in rows:
        latest[(row["agent_version"], row["evaluation_name"], row["judge"])] = row
    metadata = {
        f"success_rate[{v} · {e} · judge {j}]": r["success_rate"]
        for (v, e, j), r in latest.items()
        if r["success_rate"] is not None
    }
    metadata |= {
        f"correction_recurrence[{v}] (heuristic)": r["correction_recurrence"]
        for (v, e, j), r in latest.items()
        if e == SIGNALS_EVALUATION and r["correction_recurrence"] is not None
    }
    table = pa.Table.from_pylist(rows, schema=TABLES["impact_metrics"])
    yield dg.MaterializeResult(
        asset_key="impact_metrics",
        metadata={
            "dagster/row_count": len(rows),
            "delta_version": written.version,
            **metadata,
            # Aggregates per agent version and day hold no user data: shown whatever metadata_previews says.
            "preview": preview(
                table,
                [
                    "agent_version",
                    "day",
                    "evaluation_name",
                    "judge",
                    "sessions_evaluated",
                    "success_rate",
                    "regular_win_rate",
                    "correction_recurrence",
                ],
                enabled=True,
            ),
        },
    )
    yield dg.MaterializeResult(
        asset_key="impact_before_after",
        metadata={
            f"success_rate_after_minus_before[{r['agent_version']}]": round(
                r["success_rate_after"] - r["success_rate_before"], 4
            )
            for r in before_after
            if r["success_rate_after"] is not None and r["success_rate_before"] is not None
        },
    )
    yield dg.MaterializeResult(
        asset_key="impact_holdout",
        metadata={
            "dagster/row_count": len(holdout),
            **{
                f"{r['metric']}[{r['agent_version']} · {r['evaluation_name']} · judge {r['judge']}] treated−control": r[
                    "difference"
                ]
                for r in holdout
                if r["difference"] is not None
            },
        },
    )
