"""Asset `learned_item_outcomes`: what happened after each learned item was served (the outcome counters).

Joins the service's retrieval log (`retrieval_events`) with the sessions rebuilt from `turns` (closed ones only, as
the evaluation does) and the evaluation's verdicts, and writes, all recomputed from the lake on every run:

- `session_outcomes`: per closed session, its holdout arm and the rule-based signals (corrections, tool failures,
  correction recurrence) — the treated-vs-control comparison and the recurrence metric read it (assets/evaluation.py);
- `item_outcome_events`: per (closed session, served item), helpful / harmful / missed or no signal, with the rule
  that decided;
- `item_outcomes`: the counters per item (served, sessions, helpful, harmful, missed, flagged, held_out) that read
  and search answers carry;
- `outcome_change_log`: every change of an item's flag state, with its evidence sessions.

The matching rules are a HEURISTIC (learning/outcomes.py, labelled `outcome-heuristic-v1` in every row). Pure logic
lives there, the lake's reads and writes in lake/outcomes.py; this module wires them to the run's config and
resources.
"""

import time
from collections import Counter as Tally

import dagster as dg

from reflexio_pipelines.assets.metadata import table_specs
from reflexio_pipelines.lake.outcomes import commit_outcomes, outcomes_now
from reflexio_pipelines.learning.outcome_types import HARMFUL, HELPFUL, MISSED, RULES_VERSION
from reflexio_pipelines.resources import ExtractorResource, LakeResource


class OutcomeConfig(dg.Config):
    """`now` pins the clock (tests, backfills); unset = the run's wall-clock time."""

    now: int | None = None


@dg.multi_asset(
    specs=table_specs(
        "evaluation",
        {
            "session_outcomes": (
                ["turns", "session_evaluations"],
                "Per closed session: holdout arm, searches, items served and "
                "the rule-based signals (corrections, recurrence, tool failures). Heuristic.",
            ),
            "item_outcome_events": (
                ["turns", "session_evaluations", "user_profiles", "user_playbooks", "agent_playbooks"],
                "Per closed session and served learned item: helpful / harmful / missed (heuristic "
                "matching rules) and the rule that decided.",
            ),
            "item_outcomes": (
                ["item_outcome_events"],
                "Per learned item: served, helpful, harmful, missed, flagged (harmful > helpful "
                "after a minimum count), held out pending review.",
            ),
            "outcome_change_log": (
                ["item_outcomes"],
                "Every flag action on a learned item with its evidence sessions (append-only).",
            ),
        },
    )
)
def learned_item_outcomes(
    context: dg.AssetExecutionContext, config: OutcomeConfig, lake: LakeResource, extractor: ExtractorResource
):
    store = lake.get()
    now = config.now or int(time.time())
    settings = extractor.get_config(store)
    closed, result = outcomes_now(store, settings, now)
    written_at = int(time.time())  # audit times are wall-clock, also when `now` pins which sessions are closed
    states, actions = commit_outcomes(store, result, settings.outcomes, at=written_at, run_id=context.run.run_id)
    outcomes = Tally(e.outcome for e in result.events)
    common = {"rules": f"{RULES_VERSION} (heuristic)"}
    yield dg.MaterializeResult(
        asset_key="session_outcomes",
        metadata={
            **common,
            "sessions_closed": len(closed),
            "recurring_corrections": sum(s.recurring_corrections for s in result.sessions),
            "corrections": sum(s.corrections for s in result.sessions),
            "control_sessions": sum(s.arm == "control" for s in result.sessions),
        },
    )
    yield dg.MaterializeResult(
        asset_key="item_outcome_events",
        metadata={
            **common,
            "served_in_closed_sessions": len(result.events),
            "helpful": outcomes[HELPFUL],
            "harmful": outcomes[HARMFUL],
            "missed": outcomes[MISSED],
            "no_signal": outcomes[None],
        },
    )
    yield dg.MaterializeResult(
        asset_key="item_outcomes",
        metadata={**common, "items": len(result.counters), "flagged": sum(1 for s in states.values() if s != "clear")},
    )
    yield dg.MaterializeResult(asset_key="outcome_change_log", metadata={**common, "actions_now": len(actions)})
