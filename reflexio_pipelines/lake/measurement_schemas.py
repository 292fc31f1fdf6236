"""Arrow schemas of the tables that measure the loop: session evaluations and impact, retrievals, outcome counters
and the LLM call ledger (registered in `lake.schemas.TABLES`).
"""

from __future__ import annotations

import pyarrow as pa

#: One row per evaluated (sampled, closed) session and evaluator (the original's AgentSuccessEvaluationResult).
SESSION_EVALUATIONS = pa.schema(
    [
        pa.field("result_id", pa.string(), nullable=False),  # deterministic from session and evaluator
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string()),
        pa.field("agent_version", pa.string()),
        pa.field("evaluation_name", pa.string(), nullable=False),
        pa.field("is_success", pa.bool_(), nullable=False),
        pa.field("failure_type", pa.string()),
        pa.field("failure_reason", pa.string()),
        pa.field("is_escalated", pa.bool_()),
        pa.field("regular_vs_shadow", pa.string()),  # session-level verdict over its shadow pairs, else null
        pa.field("shadow_pairs", pa.int64()),
        pa.field("number_of_correction_per_session", pa.int64()),
        pa.field("user_turns_to_resolution", pa.int64()),
        pa.field("judge", pa.string()),  # heuristic | litellm
        pa.field("model", pa.string()),
        pa.field("prompt_version", pa.string()),
        pa.field("session_started_at", pa.int64()),
        pa.field("session_closed_at", pa.int64()),
        pa.field("created_at", pa.int64()),
        pa.field("day", pa.string(), nullable=False),  # UTC day the session closed: YYYY-MM-DD
    ]
)

#: One row per turn that carried `shadow_content`: the head-to-head verdict, mapped back to regular/shadow.
SHADOW_COMPARISONS = pa.schema(
    [
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("turn_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("presented_first", pa.string()),  # regular | shadow: the randomised order the judge saw
        pa.field("regular_vs_shadow", pa.string(), nullable=False),
        pa.field("judge", pa.string()),
        pa.field("model", pa.string()),
        pa.field("day", pa.string(), nullable=False),
        pa.field("evaluation_name", pa.string()),  # the evaluator whose sampled session held the pair
    ]
)

#: Per agent version, day, evaluation and judge (the impact dashboard's data). Rows of an evaluator
#: (`agent_success_configs[].evaluation_name`) carry its judge's rates; rows named `session_signals` (judge
#: `heuristic`) carry the rule-based signals of every closed session: corrections and tool failures per session and
#: correction recurrence (learning/outcomes.py).
IMPACT_METRICS = pa.schema(
    [
        pa.field("agent_version", pa.string(), nullable=False),
        pa.field("day", pa.string(), nullable=False),
        pa.field("evaluation_name", pa.string()),
        pa.field("judge", pa.string()),  # heuristic | litellm: what produced this row's rates
        pa.field("sessions_evaluated", pa.int64()),
        pa.field("successes", pa.int64()),
        pa.field("success_rate", pa.float64()),
        pa.field("success_ci_low", pa.float64()),  # Wilson 95 % interval
        pa.field("success_ci_high", pa.float64()),
        pa.field("shadow_comparisons", pa.int64()),
        pa.field("regular_win_rate", pa.float64()),  # share of decisive shadow pairs the REGULAR (live) answer won
        pa.field("corrections_per_session", pa.float64()),
        pa.field("turns_to_resolution", pa.float64()),
        pa.field("tool_failures_per_session", pa.float64()),
        pa.field("corrections", pa.int64()),  # session_signals: corrections in treated sessions
        pa.field("recurring_corrections", pa.int64()),  # ... repeating an item learned and served before them
        pa.field("correction_recurrence", pa.float64()),  # recurring_corrections / corrections
        pa.field(
            "repeated_learned_corrections", pa.int64()
        ),  # every arm: repeating an item learned before, served or not
        pa.field("playbooks_approved", pa.int64()),
        pa.field("playbooks_rejected", pa.int64()),
    ]
)

#: Treated vs control (the holdout), per agent version, evaluation, judge and metric, over the period the holdout was
#: active for the version (its first logged search to its last closed session): each arm's value and sessions, the
#: difference treated − control and its 95 % interval (Newcombe for rates, Welch for means).
IMPACT_HOLDOUT = pa.schema(
    [
        pa.field("agent_version", pa.string(), nullable=False),
        pa.field("evaluation_name", pa.string(), nullable=False),  # an evaluator, or session_signals
        pa.field("judge", pa.string(), nullable=False),
        pa.field(
            "metric", pa.string(), nullable=False
        ),  # success_rate | turns_to_resolution | corrections_per_session | tool_failures_per_session
        pa.field("period_start", pa.string()),  # UTC days, inclusive
        pa.field("period_end", pa.string()),
        pa.field("treated_sessions", pa.int64()),
        pa.field("control_sessions", pa.int64()),
        pa.field("treated_value", pa.float64()),
        pa.field("control_value", pa.float64()),
        pa.field("difference", pa.float64()),  # treated − control
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("interval", pa.string()),  # newcombe | welch
    ]
)

#: When a learned item was first served by /api/search (per serving process; the earliest row per item counts).
RETRIEVALS = pa.schema(
    [
        pa.field("entity", pa.string(), nullable=False),  # user_playbook | agent_playbook
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("first_served_at", pa.int64(), nullable=False),
    ]
)

#: One row per /api/search answer to a named user (the retrieval log of the holdout and the outcome counters): who
#: was answered, in which session (when the caller named it), which arm of the holdout the user is in, whether the
#: answer was held out (or the caller switched the holdout off) and which learned items it served. Partitioned by the
#: `window` of `served_at_us`; appended by the service (lock `retrievals`).
RETRIEVAL_EVENTS = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("served_at_us", pa.int64(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string()),
        pa.field("agent_version", pa.string()),
        pa.field("arm", pa.string(), nullable=False),  # treated | control
        pa.field("holdout", pa.bool_(), nullable=False),  # the answer held no learned items because of the holdout
        pa.field("holdout_override", pa.bool_(), nullable=False),  # the caller asked for the holdout to be off
        pa.field("profile_ids", pa.list_(pa.string())),
        pa.field("user_playbook_ids", pa.list_(pa.int64())),
        pa.field("agent_playbook_ids", pa.list_(pa.int64())),
        pa.field("index_version", pa.string()),
        pa.field("window", pa.string(), nullable=False),
    ]
)

#: Per closed session (every one, not a sample): its holdout arm, what it was served and the rule-based signals
#: (learning/outcomes.py). Rewritten by every outcome run.
SESSION_OUTCOMES = pa.schema(
    [
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("arm", pa.string(), nullable=False),  # treated | control
        pa.field("holdout_override", pa.bool_()),  # a search asked for the holdout to be off: not compared
        pa.field("searches", pa.int64()),
        pa.field("items_served", pa.int64()),
        pa.field("first_search_at", pa.int64()),
        pa.field("corrections", pa.int64()),
        pa.field("recurring_corrections", pa.int64()),
        pa.field("repeated_learned_corrections", pa.int64()),
        pa.field("tool_failures", pa.int64()),
        pa.field("user_turns", pa.int64()),
        pa.field("session_started_at", pa.int64()),
        pa.field("session_closed_at", pa.int64()),
        pa.field("day", pa.string(), nullable=False),
        pa.field("rules", pa.string()),  # the heuristic's version (outcomes.RULES_VERSION)
    ]
)

#: Per (closed session, learned item served in it): the outcome by the heuristic matching rules. Rewritten by every
#: outcome run.
ITEM_OUTCOME_EVENTS = pa.schema(
    [
        pa.field("entity", pa.string(), nullable=False),  # profile | user_playbook | agent_playbook
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),  # the session's user
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("outcome", pa.string()),  # helpful | harmful | missed | null (served, no signal)
        pa.field("reason", pa.string()),  # which rule decided (turn ids, never text)
        pa.field("served_at_us", pa.int64()),
        pa.field("turn_index", pa.int64()),  # the first turn of the session after the serve
        pa.field("day", pa.string(), nullable=False),
        pa.field("rules", pa.string()),
    ]
)

#: Per learned item that was ever served: the outcome counters (what read and search APIs return with each item).
ITEM_OUTCOMES = pa.schema(
    [
        pa.field("entity", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string()),  # owner of a profile or user playbook; null for agent playbooks
        pa.field("agent_version", pa.string()),
        pa.field("served", pa.int64(), nullable=False),  # search answers that held it
        pa.field("sessions", pa.int64(), nullable=False),  # closed sessions it was served in
        pa.field("helpful", pa.int64(), nullable=False),
        pa.field("harmful", pa.int64(), nullable=False),
        pa.field("missed", pa.int64(), nullable=False),
        pa.field("flagged", pa.bool_(), nullable=False),  # harmful > helpful after outcomes.min_outcomes outcomes
        pa.field("held_out", pa.bool_(), nullable=False),  # flagged and outcomes.hold_out_flagged when computed
        pa.field("computed_at", pa.int64()),
        pa.field("rules", pa.string()),
    ]
)

#: Every flag action on a learned item (flagged, held out of search pending review, unflagged by new evidence, kept
#: by a reviewer), one row per evidence session (`session_id` / `user_id`; null on a row without evidence), so an
#: erasure removes exactly the user's evidence. Append-only (lock `outcomes`).
OUTCOME_CHANGE_LOG = pa.schema(
    [
        pa.field("action_id", pa.string(), nullable=False),
        pa.field("at", pa.int64(), nullable=False),
        pa.field("entity", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),  # flagged | held_out | unflagged | kept
        pa.field("reason", pa.string()),
        pa.field("served", pa.int64()),
        pa.field("helpful", pa.int64()),
        pa.field("harmful", pa.int64()),
        pa.field("missed", pa.int64()),
        pa.field("session_id", pa.string()),  # one evidence session (a harmful outcome)
        pa.field("user_id", pa.string()),  # that session's user
        pa.field("actor", pa.string()),  # outcome_counters | the reviewer
        pa.field("run_id", pa.string()),
    ]
)

#: Per agent version: sessions before vs after the first retrieval of a learned playbook for that version.
IMPACT_BEFORE_AFTER = pa.schema(
    [
        pa.field("agent_version", pa.string(), nullable=False),
        pa.field("first_retrieval_at", pa.int64(), nullable=False),
        pa.field("sessions_before", pa.int64()),
        pa.field("success_rate_before", pa.float64()),
        pa.field("corrections_per_session_before", pa.float64()),
        pa.field("sessions_after", pa.int64()),
        pa.field("success_rate_after", pa.float64()),
        pa.field("corrections_per_session_after", pa.float64()),
    ]
)

#: The LLM call ledger: one row per provider attempt (retries included), appended by the run that paid for it (a
#: re-run's calls really happened, so nothing is ever replaced). No prompt or reply text: stage, model, tokens,
#: latency, outcome and cost only. `user_id` is set where the call was about one user (erasure removes those rows)
#: and null for cross-user calls such as consolidation.
LLM_CALLS = pa.schema(
    [
        pa.field("call_id", pa.string(), nullable=False),  # deterministic from run, asset and the record itself
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("asset", pa.string(), nullable=False),  # the asset / op that made the call
        pa.field("stage", pa.string(), nullable=False),  # extraction | gate | dedup | session_judge | shadow_judge …
        pa.field("model", pa.string(), nullable=False),
        pa.field("user_id", pa.string()),
        pa.field("outcome", pa.string(), nullable=False),  # ok | timeout | rate_limited | ... (llm_ledger.OUTCOMES)
        pa.field("error_class", pa.string()),
        pa.field("attempt", pa.int64(), nullable=False),  # 1-based within the logical call
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("completion_tokens", pa.int64(), nullable=False),
        pa.field("latency_ms", pa.int64(), nullable=False),
        pa.field("cost_usd", pa.float64()),  # LiteLLM's bundled cost map; null = model not in it
        pa.field("started_at_us", pa.int64(), nullable=False),
        # the partition's window for windowed assets, else the window of started_at_us
        pa.field("window", pa.string(), nullable=False),
    ]
)

#: Session outcomes a client reported (`POST /api/session_outcome`), append-only. A report replaces the judge's
#: inferred verdict for its session in every read (`lake.reported_outcomes`); a session keeps its first report (a
#: retry of the same report is answered as already recorded, a different one is refused).
REPORTED_OUTCOMES = pa.schema(
    [
        pa.field("outcome_id", pa.string(), nullable=False),
        pa.field("outcome_revision", pa.int64(), nullable=False),  # 2 when it displaced an inferred verdict
        pa.field("user_id", pa.string(), nullable=False),  # the session's user (from its turns)
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("outcome", pa.string(), nullable=False),  # success | failure | unknown
        pa.field("occurred_at", pa.int64(), nullable=False),
        pa.field("source", pa.string()),  # the session's publish source
        pa.field("label", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("metadata", pa.string()),  # JSON object
        pa.field("outcome_contract_digest", pa.string(), nullable=False),  # sha256 of the report's fields
        pa.field("finalized_trajectory_digest", pa.string(), nullable=False),  # sha256 of the session's turn ids
        pa.field("created_at", pa.int64(), nullable=False),
    ]
)
