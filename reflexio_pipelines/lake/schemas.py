"""One Arrow schema per lake table, all registered in `TABLES` (the measurement tables' schemas are in
`lake.measurement_schemas`). Bump SCHEMA_VERSION when a schema changes incompatibly."""

from __future__ import annotations

import pyarrow as pa

from reflexio_pipelines.lake.measurement_schemas import (
    IMPACT_BEFORE_AFTER,
    IMPACT_HOLDOUT,
    IMPACT_METRICS,
    ITEM_OUTCOME_EVENTS,
    ITEM_OUTCOMES,
    LLM_CALLS,
    OUTCOME_CHANGE_LOG,
    REPORTED_OUTCOMES,
    RETRIEVAL_EVENTS,
    RETRIEVALS,
    SESSION_EVALUATIONS,
    SESSION_OUTCOMES,
    SHADOW_COMPARISONS,
)

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

#: Rows of an immutable landing file, exactly as the ingest service wrote them. `idempotency_body_sha256` (landing
#: only, null in files written before it existed) binds a publish's idempotency key to its body: the same key with
#: another body is refused, not answered as a duplicate (serving/landing.py).
LANDING_TURNS = pa.schema([*_TURN_FIELDS, pa.field("idempotency_body_sha256", pa.string())])

#: The compacted turns table (Delta), partitioned by `window`.
TURNS = pa.schema(
    [*_TURN_FIELDS, pa.field("landing_file", pa.string()), pa.field("window", pa.string(), nullable=False)]
)

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
        # Why the rule waits for review whatever auto-approve says (learning/rule_flags.py); null = nothing found.
        pa.field("flag_reason", pa.string()),
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
#: Files moved aside because they could not be decoded (`lake.quarantine`): one row per file, never a user id or any
#: of the file's content. Not partitioned.
QUARANTINE = pa.schema(
    [
        pa.field("quarantined_at_us", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # landing | table
        pa.field("table_name", pa.string()),  # the Delta table a data file belonged to (kind = table)
        pa.field("original_path", pa.string(), nullable=False),  # relative to the lake root
        pa.field("quarantine_path", pa.string(), nullable=False),  # relative to the lake root, under quarantine/
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("error", pa.string(), nullable=False),  # the decoder's error, clipped
        pa.field("status", pa.string(), nullable=False),  # quarantined | erased (the file deleted by an erasure)
        pa.field("erased_at_us", pa.int64()),
    ]
)
#: Which windows hold each user's turns (`lake.user_windows`): a window's run reads its users' history from only
#: those partitions. Not partitioned (a window column would partition it by window); kept sorted by user id.
USER_WINDOWS = pa.schema(
    [
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("turns_window", pa.string(), nullable=False),
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
    "user_windows": USER_WINDOWS,
    "reported_outcomes": REPORTED_OUTCOMES,
    "quarantine": QUARANTINE,
}

#: Tables whose rows a rerun operation writes (replaced per operation, never by a regular window run).
OPERATION_TABLES = ("user_profiles", "user_playbooks")
