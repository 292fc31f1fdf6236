"""One Arrow schema per lake table. Bump SCHEMA_VERSION when a schema changes incompatibly."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

_TURN_FIELDS = [
    pa.field("turn_id", pa.string(), nullable=False),  # "{request_id}:{turn_index}"
    pa.field("interaction_id", pa.int64(), nullable=False),  # stable 52-bit int, the original's interaction id
    pa.field("request_id", pa.string(), nullable=False),
    pa.field("turn_index", pa.int32(), nullable=False),
    pa.field("idempotency_key", pa.string()),
    pa.field("user_id", pa.string(), nullable=False),
    pa.field("session_id", pa.string()),
    pa.field("source", pa.string()),
    pa.field("agent_version", pa.string()),
    pa.field("role", pa.string()),
    pa.field("content", pa.string()),
    pa.field("user_action", pa.string()),
    pa.field("user_action_description", pa.string()),
    pa.field("tools_used", pa.string()),  # JSON list of {tool_name, tool_data}
    pa.field("expert_content", pa.string()),
    pa.field("shadow_content", pa.string()),
    pa.field("interacted_image_url", pa.string()),
    pa.field("created_at", pa.int64(), nullable=False),  # unix seconds: client value if given, else receipt time
    pa.field("ingested_at_us", pa.int64(), nullable=False),  # unix microseconds of the durable write
]

#: Rows of an immutable landing file, exactly as the ingest service wrote them.
LANDING_TURNS = pa.schema(_TURN_FIELDS)

#: The compacted turns table (Delta), partitioned by `window`.
TURNS = pa.schema([*_TURN_FIELDS, pa.field("landing_file", pa.string()), pa.field("window", pa.string(), nullable=False)])

_PROVENANCE_FIELDS = [
    pa.field("operation_id", pa.string()),  # set on rows written by a rerun (pending until upgraded), else null
    pa.field("source_turn_ids", pa.list_(pa.string())),
    pa.field("source_interaction_ids", pa.list_(pa.int64())),
    pa.field("extraction_window_id", pa.string()),
    pa.field("extractor", pa.string()),
    pa.field("prompt_version", pa.string()),
    pa.field("model", pa.string()),
    pa.field("run_id", pa.string()),
    pa.field("window", pa.string(), nullable=False),
]

#: Per-user facts (the original's UserProfile), one row per (window, profile_id).
USER_PROFILES = pa.schema(
    [
        pa.field("profile_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("content", pa.string(), nullable=False),
        pa.field("profile_time_to_live", pa.string()),
        pa.field("expiration_timestamp", pa.int64()),
        pa.field("last_modified_timestamp", pa.int64()),
        pa.field("generated_from_request_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("status", pa.string()),  # current | pending | archived
        pa.field("supersedes", pa.list_(pa.string())),  # profile ids this one replaces (they stay, for audit)
        pa.field("extractor_names", pa.list_(pa.string())),
        pa.field("custom_features", pa.string()),  # JSON object
        *_PROVENANCE_FIELDS,
    ]
)

#: Per-user behavioural rules (the original's UserPlaybook), one row per (window, user_playbook_id).
USER_PLAYBOOKS = pa.schema(
    [
        pa.field("user_playbook_id", pa.int64(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("request_id", pa.string()),
        pa.field("playbook_name", pa.string()),
        pa.field("created_at", pa.int64()),
        pa.field("content", pa.string(), nullable=False),
        pa.field("trigger", pa.string()),
        pa.field("rationale", pa.string()),
        pa.field("kind", pa.string()),  # correction | tool_failure | expert | recipe
        pa.field("blocking_issue_kind", pa.string()),
        pa.field("blocking_issue_details", pa.string()),
        pa.field("status", pa.string()),
        pa.field("source", pa.string()),
        pa.field("supersedes", pa.list_(pa.int64())),  # user playbook ids this one replaces
        *_PROVENANCE_FIELDS,
    ]
)

#: Every addition and supersession of a learned item (the original's ProfileChangeLog, for profiles and playbooks).
CHANGE_LOG = pa.schema(
    [
        pa.field("entity", pa.string(), nullable=False),  # profile | user_playbook
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("change", pa.string(), nullable=False),  # added | superseded
        pa.field("superseded_by", pa.string()),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("request_id", pa.string()),
        pa.field("content", pa.string()),
        pa.field("created_at", pa.int64()),
        pa.field("run_id", pa.string()),
        pa.field("window", pa.string(), nullable=False),
    ]
)

#: Where each user's extraction stands after a window: the bookmark advances past every processed window.
EXTRACTION_BOOKMARKS = pa.schema(
    [
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("extractor", pa.string(), nullable=False),
        pa.field("last_turn_id", pa.string()),
        pa.field("last_created_at", pa.int64()),
        pa.field("new_turns", pa.int64()),
        pa.field("extraction_windows", pa.int64()),
        pa.field("items_extracted", pa.int64()),
        # every turn of the window extracted so far (a later run of the window extracts only the others)
        pa.field("processed_turn_ids", pa.list_(pa.string())),
        pa.field("held_turns", pa.int64()),  # new turns held back for a full window or a quiet session
        pa.field("due_at_us", pa.int64()),  # when the held-back turns go through at the latest (their session quiet)
        pa.field("run_id", pa.string()),
        pa.field("window", pa.string(), nullable=False),
    ]
)

#: User batches a learning run could not learn (a window failed after the LLM retries, the dedup judge got no usable
#: answer, or an earlier window of the user was still unresolved). Nothing of that user was written for the window;
#: the next run of the window retries it and marks the row resolved. No prompt content, no secrets: the error is
#: its class and a fixed description.
EXTRACTION_FAILURES = pa.schema(
    [
        pa.field("failure_id", pa.string(), nullable=False),  # deterministic from run, user, extractor group
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("extractor", pa.string()),  # extractor group; "*" = the user's whole batch
        pa.field("stage", pa.string(), nullable=False),  # extract | dedup | blocked
        pa.field("extraction_window_id", pa.string()),  # the failed extraction window (stage extract)
        pa.field("first_turn_id", pa.string()),
        pa.field("last_turn_id", pa.string()),
        pa.field("error_class", pa.string(), nullable=False),  # e.g. RateLimitError, Timeout, SchemaViolation
        pa.field("error_message", pa.string(), nullable=False),  # fixed description, never provider text
        pa.field("attempts", pa.int64()),  # LLM calls spent on the failing step
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("at", pa.int64(), nullable=False),  # unix seconds
        pa.field("resolved_by_run", pa.string()),  # the run that learned the user's batch of this window, else null
        pa.field("resolved_at", pa.int64()),
        pa.field("window", pa.string(), nullable=False),
    ]
)

#: Status changes made by upgrade / downgrade operations (rows are immutable; their status is this overlay).
LIFECYCLE_EVENTS = pa.schema(
    [
        pa.field("operation_id", pa.string(), nullable=False),
        pa.field("op", pa.string(), nullable=False),  # upgrade | downgrade
        pa.field("entity", pa.string(), nullable=False),  # profile | user_playbook
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string()),
        pa.field("from_status", pa.string()),
        pa.field("to_status", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),  # global order of events
        pa.field("at", pa.int64(), nullable=False),
    ]
)

#: Embeddings of current user playbooks (trigger, else content), reused across runs while the text is unchanged.
PLAYBOOK_EMBEDDINGS = pa.schema(
    [
        pa.field("user_playbook_id", pa.int64(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("playbook_name", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("model_id", pa.string(), nullable=False),
        pa.field("embedding", pa.list_(pa.float32()), nullable=False),
    ]
)

#: Shared rules (the original's AgentPlaybook): one row per agent playbook, its latest state.
AGENT_PLAYBOOKS = pa.schema(
    [
        pa.field("agent_playbook_id", pa.int64(), nullable=False),
        pa.field("playbook_name", pa.string(), nullable=False),
        pa.field("agent_version", pa.string(), nullable=False),
        pa.field("created_at", pa.int64()),
        pa.field("updated_at", pa.int64()),
        pa.field("content", pa.string(), nullable=False),
        pa.field("trigger", pa.string()),
        pa.field("rationale", pa.string()),
        pa.field("blocking_issue_kind", pa.string()),
        pa.field("blocking_issue_details", pa.string()),
        pa.field("playbook_status", pa.string()),  # as generated: pending (or approved with auto-approve)
        pa.field("status", pa.string()),  # current | archived
        pa.field("fingerprints", pa.list_(pa.string())),  # member-set fingerprints that map to this playbook
        pa.field("member_ids", pa.list_(pa.int64())),  # user playbook ids (→ their source turns)
        pa.field("member_user_ids", pa.list_(pa.string())),
        pa.field("consolidator", pa.string()),
        pa.field("model", pa.string()),
        pa.field("prompt_version", pa.string()),
        pa.field("run_id", pa.string()),
    ]
)

#: The original's PlaybookAggregationChangeLog, one row per change.
AGGREGATION_CHANGE_LOG = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("created_at", pa.int64(), nullable=False),
        pa.field("agent_version", pa.string()),
        pa.field("playbook_name", pa.string()),
        pa.field("run_mode", pa.string()),  # incremental
        pa.field("change", pa.string(), nullable=False),  # added | removed | updated
        pa.field("agent_playbook_id", pa.int64(), nullable=False),
        pa.field("before", pa.string()),  # JSON snapshot or null
        pa.field("after", pa.string()),
        pa.field("member_ids", pa.list_(pa.int64())),
    ]
)

#: Human decisions (approve / reject / un-reject): written by the service, applied at once as an overlay and
#: read by every pipeline run, so a decision survives re-runs.
CONTROL_LOG = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("at", pa.int64(), nullable=False),
        pa.field("entity", pa.string(), nullable=False),  # agent_playbook
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("action", pa.string(), nullable=False),  # playbook_status
        pa.field("value", pa.string(), nullable=False),
        pa.field("actor", pa.string()),
    ]
)

#: Manual curation through the API (the original's add_*, update_* and delete_* calls): adds carry the whole row,
#: updates the changed fields, deletes nothing. Applied wherever live rows are read (learning, index, reads), so
#: an edit or deletion holds for every later run; physical removal of a user's data is erasure, not this.
CURATION_LOG = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("at", pa.int64(), nullable=False),
        pa.field("entity", pa.string(), nullable=False),  # profile | user_playbook | agent_playbook | interaction
        pa.field("item_id", pa.string(), nullable=False),  # for interactions: the turn_id
        pa.field("user_id", pa.string()),  # owner, where the entity has one (erasure and export find rows by it)
        pa.field("action", pa.string(), nullable=False),  # add | update | delete
        pa.field("fields", pa.string()),  # JSON object: the full row (add) or the changed fields (update)
        pa.field("actor", pa.string()),
    ]
)

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
        pa.field("repeated_learned_corrections", pa.int64()),  # every arm: repeating an item learned before, served or not
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
        pa.field("metric", pa.string(), nullable=False),  # success_rate | turns_to_resolution | corrections_per_session | tool_failures_per_session
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

#: Vectors of index documents by (embedder model, sha256 of the normalised text), so an index build embeds only texts
#: it has not seen (`lake.embedding_cache`). Partitioned by `bucket`; `owner_user_ids` are the users whose words the
#: text holds, and erasure deletes every row that lists the erased user.
EMBEDDING_CACHE = pa.schema(
    [
        pa.field("model_id", pa.string(), nullable=False),
        pa.field("dim", pa.int32(), nullable=False),
        pa.field("text_sha256", pa.string(), nullable=False),  # hex sha256 of the normalised text that was embedded
        pa.field("vector", pa.list_(pa.float32()), nullable=False),  # exactly the row the index version stores
        pa.field("owner_user_ids", pa.list_(pa.string())),
        pa.field("created_at", pa.int64()),  # unix seconds
        pa.field("bucket", pa.int32(), nullable=False),  # partition: first byte of text_sha256 modulo 64
    ]
)

TABLES: dict[str, pa.Schema] = {
    "turns": TURNS,
    "user_profiles": USER_PROFILES,
    "user_playbooks": USER_PLAYBOOKS,
    "change_log": CHANGE_LOG,
    "extraction_bookmarks": EXTRACTION_BOOKMARKS,
    "extraction_failures": EXTRACTION_FAILURES,
    "lifecycle_events": LIFECYCLE_EVENTS,
    "playbook_embeddings": PLAYBOOK_EMBEDDINGS,
    "agent_playbooks": AGENT_PLAYBOOKS,
    "aggregation_change_log": AGGREGATION_CHANGE_LOG,
    "control_log": CONTROL_LOG,
    "curation_log": CURATION_LOG,
    "session_evaluations": SESSION_EVALUATIONS,
    "shadow_comparisons": SHADOW_COMPARISONS,
    "impact_metrics": IMPACT_METRICS,
    "retrievals": RETRIEVALS,
    "retrieval_events": RETRIEVAL_EVENTS,
    "session_outcomes": SESSION_OUTCOMES,
    "item_outcome_events": ITEM_OUTCOME_EVENTS,
    "item_outcomes": ITEM_OUTCOMES,
    "outcome_change_log": OUTCOME_CHANGE_LOG,
    "impact_holdout": IMPACT_HOLDOUT,
    "impact_before_after": IMPACT_BEFORE_AFTER,
    "llm_calls": LLM_CALLS,
    "embedding_cache": EMBEDDING_CACHE,
}

#: Tables whose rows a rerun operation writes (replaced per operation, never by a regular window run).
OPERATION_TABLES = ("user_profiles", "user_playbooks")
