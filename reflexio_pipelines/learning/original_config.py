"""The original Reflexio Config's legacy field names (migrated on load) and its fields this pipeline has no
counterpart for (accepted only at their default value), so a config read through the original client round-trips.
The renames of its 2026 shape (window_size, singular extractors) are in learning/config_shapes.py.
"""

from __future__ import annotations

from typing import Any

#: Legacy field names of the original and what they became.
LEGACY_TOP = {
    "extraction_window_size": "batch_size",
    "extraction_window_stride": "batch_interval",
    "playbook_configs": "user_playbook_extractor_configs",
    "agent_feedback_configs": "user_playbook_extractor_configs",
}
LEGACY_EXTRACTOR = {
    "feedback_name": "extractor_name",
    "playbook_name": "extractor_name",
    "feedback_definition_prompt": "extraction_definition_prompt",
    "playbook_definition_prompt": "extraction_definition_prompt",
    "profile_content_definition_prompt": "extraction_definition_prompt",
}
#: Legacy names of the original's PlaybookAggregatorConfig fields.
LEGACY_AGGREGATION = {
    "min_feedback_threshold": "min_cluster_size",
    "refresh_count": "reaggregation_trigger_count",
    "similarity_threshold": "clustering_similarity",
}
#: The original's DeduplicationConfig defaults: what this pipeline's dedup does (top 5 neighbours closer than 0.4).
_DEDUP_DEFAULTS = {"search_threshold": 0.4, "search_top_k": 5}


def _is_null(value: Any) -> bool:
    return value is None


def _is_false(value: Any) -> bool:
    return value is None or value is False


def _is_default_dedup(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and {**_DEDUP_DEFAULTS, **value} == _DEDUP_DEFAULTS)


def _is_unknown_test(value: Any) -> bool:
    return value in (None, 0, "UNKNOWN", "unknown")  # StorageConfigTest.UNKNOWN as the client serialises it


def _matches(defaults: dict[str, Any]) -> Any:
    """A check that a nested settings object is null or states only its defaults."""
    return lambda value: value is None or (isinstance(value, dict) and {**defaults, **value} == defaults)


def _is_off(flag: str) -> Any:
    """A check that a feature's settings are null or leave it switched off (its other knobs are then inert)."""
    return lambda value: value is None or (isinstance(value, dict) and not value.get(flag, False))


def _equals(default: Any) -> Any:
    return lambda value: value is None or value == default


#: Fields of the original's Config this pipeline has no counterpart for: accepted (and dropped) at their default
#: value, so a config read from the original client (which serialises every field) round-trips; any other value
#: would change behaviour this pipeline does not have, so it is an error naming the field. field -> (is it the
#: default, the default as the error shows it).
ORIGINAL_ONLY: dict[str, tuple[Any, str]] = {
    # deployment settings: environment / reflexio.yaml here (serving's set_config ignores them before parsing)
    "storage_config": (_is_null, "null"),
    "storage_config_test": (_is_unknown_test, "null"),
    "api_key_config": (_is_null, "null"),
    "llm_config": (_is_null, "null"),
    "skip_should_run_check": (_is_false, "false"),
    "enable_document_expansion": (_is_false, "false"),
    # per extractor / evaluator
    "context_prompt": (_is_null, "null"),
    "metadata_definition_prompt": (_is_null, "null"),
    "should_extract_profile_prompt_override": (_is_null, "null"),
    "manual_trigger": (_is_false, "false"),
    "deduplication_config": (_is_default_dedup, "null or {search_threshold: 0.4, search_top_k: 5}"),
    "tagging_definition_prompt": (_is_null, "null"),
    # added by the original's 0.2.3x Config (reflexio-client 0.2.16): features of its hosted service
    "retrieval_floor": (_is_off("enabled"), "null or {enabled: false}"),
    "playbook_optimizer_config": (_is_off("enabled"), "null or {enabled: false}"),
    "lineage_gc": (
        _matches({"enabled": True, "tombstone_grace_window_days": 90, "poll_interval_seconds": 86400}),
        "null or {enabled: true, tombstone_grace_window_days: 90, poll_interval_seconds: 86400}",
    ),
    "expiry_reclamation": (_is_off("enabled"), "null or {enabled: false}"),
    "governance_retention": (
        _is_off("audit_events_retention_enabled"),
        "null or {audit_events_retention_enabled: false}",
    ),
    "pending_tool_call_config": (_is_off("enabled"), "null or {enabled: false}"),
    "shadow_mode_enabled": (_is_false, "false"),
    "eval_sample_n_per_stratum": (_equals(200), "200"),
    "eval_concurrency_limit": (_equals(10), "10"),
    "shadow_comparison_judge_prompt_version": (_equals("v1.1.0"), "v1.1.0"),
    "retrieval_experiment_config": (_is_null, "null (start experiments with POST /api/retrieval_experiments)"),
    "retrieval_experiment_history": (_equals([]), "[] (the experiments routes keep it)"),
}
#: Which of them may appear where (anything else is an unknown field).
ORIGINAL_TOP = (
    "storage_config",
    "storage_config_test",
    "api_key_config",
    "llm_config",
    "skip_should_run_check",
    "enable_document_expansion",
    "retrieval_floor",
    "playbook_optimizer_config",
    "lineage_gc",
    "expiry_reclamation",
    "governance_retention",
    "pending_tool_call_config",
    "shadow_mode_enabled",
    "eval_sample_n_per_stratum",
    "eval_concurrency_limit",
    "shadow_comparison_judge_prompt_version",
    "retrieval_experiment_config",
    "retrieval_experiment_history",
)
ORIGINAL_EXTRACTOR = (
    "context_prompt",
    "metadata_definition_prompt",
    "should_extract_profile_prompt_override",
    "manual_trigger",
    "deduplication_config",
    "tagging_definition_prompt",
)
ORIGINAL_EVALUATOR = (
    "metadata_definition_prompt",
    "batch_size_override",
    "batch_interval_override",
    "tagging_definition_prompt",
    "request_sources_enabled",
    "evaluation_only_sampling_rate",
    "retrieved_learning_sampling_rate",
)


def drop_original_defaults(data: Any, fields: tuple[str, ...]) -> Any:
    """`data` without the original-only `fields` that hold their default (non-defaults stay and fail as unknown
    fields, with `ORIGINAL_ONLY`'s explanation)."""
    if not isinstance(data, dict):
        return data
    is_default = {name: ORIGINAL_ONLY.get(name, (_is_null, "null"))[0] for name in fields}
    return {k: v for k, v in data.items() if not (k in is_default and is_default[k](v))}
