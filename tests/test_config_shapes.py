"""Both shapes of the original's config (learning/config_shapes.py): the 2026 shape (window_size / stride_size,
singular extractor fields) and the older one (batch_size / batch_interval, lists of extractors) are read from files
and API bodies, get_config answers in both, and each client's round trip changes nothing it did not mean to."""

from __future__ import annotations

import pytest

from reflexio_pipelines.learning.config import ConfigError
from reflexio_pipelines.learning.config_loading import parse_extraction_config
from reflexio_pipelines.learning.config_shapes import patched, reported, singleton_alias, with_stored

PROFILES = {"extractor_name": "facts", "extraction_definition_prompt": "Stable facts about the user."}
MORE_PROFILES = {"extractor_name": "tastes", "extraction_definition_prompt": "What the user likes."}
PLAYBOOKS = {
    "extractor_name": "rules",
    "extraction_definition_prompt": "How the agent should behave.",
    "aggregation_config": {"min_cluster_size": 3, "min_distinct_users": 4},
}


def stored_config() -> dict:
    """A stored config (this pipeline's shape, as get_config dumps it) with two profile extractors."""
    config = parse_extraction_config(
        {
            "batch_size": 12,
            "batch_interval": 6,
            "profile_extractor_configs": [PROFILES, MORE_PROFILES],
            "user_playbook_extractor_configs": [PLAYBOOKS],
            "session_quiet_period_seconds": 123,
        }
    )
    return config.model_dump(mode="json", exclude_none=True)


def test_the_new_shape_reads_as_the_old_one() -> None:
    new = parse_extraction_config(
        {
            "window_size": 9,
            "stride_size": 3,
            "profile_extractor_config": {
                "extractor_name": None,
                "extraction_definition_prompt": "Facts.",
                "window_size_override": 6,
                "tagging_definition_prompt": None,
            },
            "user_playbook_extractor_config": {
                "extraction_definition_prompt": "Rules.",
                "aggregation_config": {"min_cluster_size": 2, "clustering_similarity": None},
            },
            "agent_success_config": {"evaluation_name": "agent_success", "success_definition_prompt": "Done."},
            "shadow_mode_enabled": False,
            "pending_tool_call_config": {"enabled": False, "hmac_secrets": []},
        }
    )
    assert (new.batch_size, new.batch_interval) == (9, 3)
    (profile,) = new.profile_extractor_configs
    assert (profile.extractor_name, profile.batch_size_override) == ("default_profile_extractor", 6)
    (playbook,) = new.user_playbook_extractor_configs
    assert playbook.aggregation_config.clustering_similarity == 0.5  # null = this pipeline's default
    assert [e.evaluation_name for e in new.agent_success_configs] == ["agent_success"]
    assert parse_extraction_config({"agent_success_config": None}).agent_success_configs == []


def test_both_shapes_in_one_body_must_agree() -> None:
    assert parse_extraction_config({"batch_size": 8, "window_size": 8}).batch_size == 8
    with pytest.raises(ConfigError) as conflict:
        parse_extraction_config({"batch_size": 8, "window_size": 9})
    assert "window_size: 9 disagrees with batch_size 8" in str(conflict.value)
    with pytest.raises(ConfigError) as extractor:
        parse_extraction_config(
            {"profile_extractor_configs": [PROFILES], "profile_extractor_config": dict(PROFILES, extractor_name="x")}
        )
    assert "profile_extractor_config: disagrees with the first item of profile_extractor_configs" in str(
        extractor.value
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("shadow_mode_enabled", True),
        ("pending_tool_call_config", {"enabled": True}),
        ("playbook_optimizer_config", {"enabled": True}),
        ("eval_concurrency_limit", 3),
        ("retrieval_experiment_config", {"experiment_id": "x", "holdout_percentage": 10.0}),
    ],
)
def test_a_new_original_feature_is_accepted_only_switched_off(field: str, value: object) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_extraction_config({field: value})
    assert f"{field}: a field of the original Reflexio Config that this pipeline supports only at its default" in str(
        refused.value
    )


def test_reported_config_holds_both_shapes_and_reads_back_unchanged() -> None:
    stored = stored_config()
    both = reported(stored)
    assert (both["batch_size"], both["window_size"], both["batch_interval"], both["stride_size"]) == (12, 12, 6, 6)
    assert both["profile_extractor_config"]["extractor_name"] == "facts"  # the first of the list
    assert both["agent_success_config"]["evaluation_name"] == "default_evaluation"
    # what a raw client sends back unchanged (both shapes at once) is the same config
    assert parse_extraction_config(both).model_dump(mode="json", exclude_none=True) == stored


def test_a_new_client_round_trip_keeps_what_its_shape_cannot_say() -> None:
    stored = stored_config()
    both = reported(stored)
    # The new client keeps its own fields only: singular extractors with a null name, no lists, no own fields.
    new_client = {
        "window_size": 20,
        "stride_size": 10,
        "profile_extractor_config": dict(both["profile_extractor_config"], extractor_name=None),
        "user_playbook_extractor_config": {
            "extractor_name": None,
            "extraction_definition_prompt": "How the agent should behave.",
            "aggregation_config": {"min_cluster_size": 5, "clustering_similarity": None},
        },
        "agent_success_config": both["agent_success_config"],
    }
    saved = parse_extraction_config(with_stored(new_client, stored))
    assert (saved.batch_size, saved.batch_interval) == (20, 10)
    assert [e.extractor_name for e in saved.profile_extractor_configs] == ["facts", "tastes"]  # the second one kept
    (playbook,) = saved.user_playbook_extractor_configs
    assert playbook.extractor_name == "rules"  # the stored name, so its bookmarks stay
    assert (playbook.aggregation_config.min_cluster_size, playbook.aggregation_config.min_distinct_users) == (5, 4)
    assert saved.session_quiet_period_seconds == 123


def test_an_old_client_round_trip_keeps_this_pipelines_aggregation_settings() -> None:
    stored = stored_config()
    old_client = {
        "batch_size": 12,
        "batch_interval": 6,
        "profile_extractor_configs": [PROFILES],
        "user_playbook_extractor_configs": [
            dict(PLAYBOOKS, aggregation_config={"min_cluster_size": 3, "clustering_similarity": 0.5})
        ],
    }
    saved = parse_extraction_config(with_stored(old_client, stored))
    assert [e.extractor_name for e in saved.profile_extractor_configs] == ["facts"]  # a list replaces the list
    assert saved.user_playbook_extractor_configs[0].aggregation_config.min_distinct_users == 4


def test_update_config_replaces_the_named_top_level_fields_whichever_shape_names_them() -> None:
    stored = stored_config()
    updated = parse_extraction_config(patched({"stride_size": 4}, stored))
    assert (updated.batch_size, updated.batch_interval) == (12, 4)
    replaced = parse_extraction_config(
        patched({"profile_extractor_config": {"extraction_definition_prompt": "Only names."}}, stored)
    )
    assert [(e.extractor_name, e.extraction_definition_prompt) for e in replaced.profile_extractor_configs] == [
        ("facts", "Only names."),
        ("tastes", "What the user likes."),
    ]
    with pytest.raises(ConfigError) as unknown:
        parse_extraction_config(patched({"no_such_field": 1}, stored))
    assert "no_such_field: unknown field" in str(unknown.value)


@pytest.mark.e2e
def test_both_clients_shapes_through_the_service(client) -> None:
    new = {"window_size": 14, "stride_size": 7, "profile_extractor_config": {"extraction_definition_prompt": "Facts."}}
    assert client.post("/api/set_config", json=new).json()["success"]
    config = client.get("/api/get_config").json()
    assert (config["window_size"], config["stride_size"], config["batch_size"], config["batch_interval"]) == (
        14,
        7,
        14,
        7,
    )
    assert config["profile_extractor_config"]["extraction_definition_prompt"] == "Facts."
    assert config["profile_extractor_configs"][0]["extraction_definition_prompt"] == "Facts."
    assert (config["retrieval_experiment_config"], config["retrieval_experiment_history"]) == (None, [])

    assert client.post("/api/update_config", json={"batch_interval": 5}).json()["success"]
    assert client.get("/api/get_config").json()["stride_size"] == 5

    unknown = client.post("/api/update_config", json={"window_sise": 3})
    assert unknown.status_code == 422 and "window_sise: unknown field" in unknown.json()["msg"]
    experiment = {"retrieval_experiment_config": {"experiment_id": "x", "holdout_percentage": 10.0}}
    conflict = client.post("/api/update_config", json=experiment)
    assert conflict.status_code == 409 and "/api/retrieval_experiments" in conflict.json()["msg"]
    assert client.get("/api/get_config").json()["stride_size"] == 5  # nothing saved by a refused write


def test_the_idle_timeout_is_the_extraction_quiet_period() -> None:
    config = parse_extraction_config({"extraction_idle_timeout_seconds": 21600})
    assert config.extraction_quiet_period_seconds == 21600
    # a get_config echoed back: the timeout reported for a sub-second quiet period agrees with it
    echoed = parse_extraction_config({"extraction_quiet_period_seconds": 0.5, "extraction_idle_timeout_seconds": 1})
    assert echoed.extraction_quiet_period_seconds == 0.5
    with pytest.raises(ConfigError, match="extraction_idle_timeout_seconds.*disagrees"):
        parse_extraction_config({"extraction_quiet_period_seconds": 30, "extraction_idle_timeout_seconds": 60})
    with pytest.raises(ConfigError, match="extraction_idle_timeout_seconds.*not supported"):
        parse_extraction_config({"extraction_idle_timeout_seconds": 0})
    # set_config's body names the setting by its new name: the stored quiet period does not come back to disagree
    body = with_stored(
        {"extraction_idle_timeout_seconds": 60}, {**stored_config(), "extraction_quiet_period_seconds": 5}
    )
    assert parse_extraction_config(body).extraction_quiet_period_seconds == 60
    assert patched({"extraction_idle_timeout_seconds": 90}, body)["extraction_idle_timeout_seconds"] == 90


def test_the_singleton_playbook_name_is_the_first_playbook_extractor() -> None:
    assert singleton_alias("playbook", "user_playbook_extractor_configs", ["rules", "other"]) == "rules"
    assert singleton_alias("playbook", "user_playbook_extractor_configs", ["playbook", "rules"]) == "playbook"
    assert singleton_alias("rules", "user_playbook_extractor_configs", ["other"]) == "rules"


@pytest.mark.e2e
def test_the_new_clients_whole_config_and_its_idle_timeout_through_the_service(client) -> None:
    assert client.get("/api/get_config").json()["extraction_idle_timeout_seconds"] == 1  # rules: learned at once
    body = {"window_size": 10, "stride_size": 4, "extraction_idle_timeout_seconds": 600, "retrieval_floor": None}
    assert client.post("/api/set_config", json=body).json()["success"]
    config = client.get("/api/get_config").json()
    assert (config["extraction_idle_timeout_seconds"], config["extraction_quiet_period_seconds"]) == (600, 600)
    refused = client.post("/api/update_config", json={"extraction_idle_timeout_seconds": 0})
    assert refused.status_code == 422 and "extraction_idle_timeout_seconds" in refused.json()["msg"]
    echoed = dict(config, extraction_quiet_period_seconds=30)  # get_config echoed with this pipeline's name edited
    assert client.post("/api/set_config", json=echoed).json()["success"]
    assert client.get("/api/get_config").json()["extraction_idle_timeout_seconds"] == 30
    both_edited = dict(echoed, extraction_quiet_period_seconds=40, extraction_idle_timeout_seconds=50)
    assert client.post("/api/set_config", json=both_edited).status_code == 422
