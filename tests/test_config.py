"""The extraction config file: parsing, presets, overrides, validation messages, legacy names, loading; extractor
groups in learn() (one call per window and group, source filters, tags, bookmarks) and the optional LLM gate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmarks.extraction_quality import HashEmbedder  # the benchmark smoke runs' embedder: deterministic, no model
from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.config import DEFAULT_CONFIG, PRESETS, ConfigError
from reflexio_pipelines.learning.config_loading import (
    load_extraction_config,
    parse_extraction_config,
    resolve_extraction_config,
)
from reflexio_pipelines.learning.dedup import RuleDedupJudge
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup, NamedProfile
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.llm_extract import LiteLLMExtractor, named_items
from reflexio_pipelines.learning.rules.extractor import RuleExtractor
from reflexio_pipelines.learning.types import ExtractedPlaybook, ExtractedProfile, ExtractionResult, Turn, Window
from reflexio_pipelines.learning.windows import plan_windows
from reflexio_pipelines.settings import Settings, SettingsError, load_settings
from tests.support.openai_stub import StubBehaviour, fake_llm_reply, make_openai_stub
from tests.support.servers import serve_app


def extractor_cfg(name: str, prompt: str = "things", **extra) -> dict:
    return {"extractor_name": name, "extraction_definition_prompt": prompt, **extra}


# ---------------------------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------------------------


def test_default_config_is_one_group_of_the_two_default_extractors() -> None:
    assert (DEFAULT_CONFIG.batch_size, DEFAULT_CONFIG.batch_interval) == (10, 5)
    (group,) = DEFAULT_CONFIG.groups()
    assert group.name == "default"  # the bookmark name used before the config file existed
    assert [d.name for d in group.profile_extractors] == ["default_profile_extractor"]
    assert [d.name for d in group.playbook_extractors] == ["default_playbook_extractor"]
    assert "name, role, preferences" in group.profile_extractors[0].prompt
    assert (group.batch_size, group.batch_interval, group.sources) == (10, 5, None)
    assert parse_extraction_config({}) == DEFAULT_CONFIG


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_fills_only_unset_fields(preset: str) -> None:
    size, interval = PRESETS[preset]
    config = parse_extraction_config({"extraction_preset": preset})
    assert (config.batch_size, config.batch_interval) == (size, interval)
    config = parse_extraction_config({"extraction_preset": preset, "batch_size": 40})
    assert (config.batch_size, config.batch_interval) == (40, interval)  # the explicit value wins
    config = parse_extraction_config({"extraction_preset": preset, "batch_interval": 1})
    assert (config.batch_size, config.batch_interval) == (size, 1)


def test_presets_have_the_originals_numbers() -> None:
    assert PRESETS == {"quick_chat": (5, 3), "standard": (10, 5), "long_form": (25, 10), "high_volume": (15, 8)}


def test_overrides_and_sources_split_extractors_into_groups() -> None:
    config = parse_extraction_config(
        {
            "batch_size": 8,
            "batch_interval": 4,
            "profile_extractor_configs": [
                extractor_cfg("facts"),
                extractor_cfg("support_facts", request_sources_enabled=[" support ", "chat", "support", ""]),
                extractor_cfg("long_facts", batch_size_override=20, batch_interval_override=10),
            ],
            "user_playbook_extractor_configs": [
                extractor_cfg("rules"),
                extractor_cfg("support_rules", request_sources_enabled=["chat", "support"]),
                extractor_cfg("same_as_default", batch_size_override=8),  # an override equal to the global: same group
            ],
        }
    )
    groups = {g.name: g for g in config.groups()}
    assert list(groups) == ["facts+rules+same_as_default", "support_facts+support_rules", "long_facts"]
    main, support, long = groups.values()
    assert (main.batch_size, main.batch_interval, main.sources) == (8, 4, None)
    assert [d.name for d in main.playbook_extractors] == ["rules", "same_as_default"]
    assert support.sources == ("chat", "support")  # trimmed, deduplicated, sorted: [" support ", "chat"] == [...]
    assert (long.batch_size, long.batch_interval, long.playbook_extractors) == (20, 10, ())
    assert config.profile_extractor_configs[0].request_sources_enabled is None
    assert (
        parse_extraction_config({"profile_extractor_configs": [extractor_cfg("p", request_sources_enabled=[])]})
        .profile_extractor_configs[0]
        .request_sources_enabled
        is None
    )  # [] = every source, like null


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"batch_size": 4, "batch_interval": 5}, "batch_interval: must be <= batch size 4"),
        ({"extraction_preset": "quick_chat", "batch_interval": 6}, "batch_interval: must be <= batch size 5"),
        (
            {"profile_extractor_configs": [extractor_cfg("p", batch_size_override=4, batch_interval_override=5)]},
            "profile_extractor_configs.0.batch_interval_override: must be <= batch size 4",
        ),
        (
            {"user_playbook_extractor_configs": [extractor_cfg("p", batch_size_override=4)]},
            "user_playbook_extractor_configs.0.batch_size_override: must be >= batch interval 5",
        ),
        ({"batch_size": 0}, "batch_size: Input should be greater than 0"),
        (
            {"profile_extractor_configs": [extractor_cfg("p", batch_interval_override=-1)]},
            "profile_extractor_configs.0.batch_interval_override: Input should be greater than 0",
        ),
        ({"batch_sise": 10}, "batch_sise: unknown field (allowed: config_version, agent_context_prompt"),
        (
            {"profile_extractor_configs": [extractor_cfg("p", sources=["x"])]},
            "profile_extractor_configs.0.sources: unknown field (allowed: extractor_name,",
        ),
        ({"tool_can_use": [{"tool_name": "t", "description": "d"}]}, "tool_can_use.0.description: unknown field"),
        ({"storage_config": {"db_path": "x"}}, "storage_config: a field of the original Reflexio Config"),
        (
            {"profile_extractor_configs": [extractor_cfg("  ")]},
            "profile_extractor_configs.0.extractor_name: must not be empty",
        ),
        (
            {"profile_extractor_configs": [extractor_cfg("a+b")]},
            "profile_extractor_configs.0.extractor_name: use letters",
        ),
        (
            {"profile_extractor_configs": [extractor_cfg("p", "\x00\x07 ")]},
            "profile_extractor_configs.0.extraction_definition_prompt: must not be empty",
        ),
        (
            {"profile_extractor_configs": [{"extractor_name": "p"}]},
            "profile_extractor_configs.0.extraction_definition_prompt: Field required",
        ),
        (
            {
                "profile_extractor_configs": [extractor_cfg("same")],
                "user_playbook_extractor_configs": [extractor_cfg("same")],
            },
            "user_playbook_extractor_configs.0.extractor_name: duplicate name 'same' (also profile_extractor_configs.0)",
        ),
        (
            {"profile_extractor_configs": [], "user_playbook_extractor_configs": []},
            "profile_extractor_configs: at least one profile or playbook extractor is required",
        ),
        ({"extraction_preset": "huge"}, "extraction_preset: Input should be 'quick_chat', 'standard', 'long_form'"),
        ({"config_version": 2}, "config_version: unsupported version 2 (this build reads 1)"),
        ({"extraction_window_size": 12, "batch_size": 12}, "extraction_window_size: legacy name of batch_size"),
        ({"agent_context_prompt": "x" * 9_000}, "agent_context_prompt: at most 8000 characters"),
    ],
)
def test_validation_errors_name_the_field_and_the_reason(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_extraction_config(data)
    assert message in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_extraction_config({"batch_sise": 1, "extraction_preset": "huge"})
    assert "batch_sise: unknown field" in str(info.value) and "extraction_preset:" in str(info.value)


def test_legacy_field_names_are_migrated() -> None:
    config = parse_extraction_config(
        {
            "extraction_window_size": 12,
            "extraction_window_stride": 6,
            "profile_extractor_configs": [{"extractor_name": "p", "profile_content_definition_prompt": "facts"}],
            "agent_feedback_configs": [
                {"feedback_name": "fb", "feedback_definition_prompt": "rules"},
                {"playbook_name": "pb", "playbook_definition_prompt": "more rules"},
            ],
        }
    )
    assert (config.batch_size, config.batch_interval) == (12, 6)
    assert config.profile_extractor_configs[0].extraction_definition_prompt == "facts"
    assert [(c.extractor_name, c.extraction_definition_prompt) for c in config.user_playbook_extractor_configs] == [
        ("fb", "rules"),
        ("pb", "more rules"),
    ]
    assert [
        c.extractor_name
        for c in parse_extraction_config({"playbook_configs": [extractor_cfg("x")]}).user_playbook_extractor_configs
    ] == ["x"]


def test_control_characters_are_stripped_from_prompts() -> None:
    config = parse_extraction_config(
        {
            "agent_context_prompt": "  An ops\x00 agent\u202e.\n Second line\t ",
            "tool_can_use": [{"tool_name": "create_issue", "tool_description": "files\x1b a ticket"}],
            "profile_extractor_configs": [extractor_cfg("p", "Team\x07 facts\u200b only")],
        }
    )
    assert config.agent_context_prompt == "An ops agent.\n Second line"  # newline and tab kept, edges trimmed
    assert config.tool_can_use[0].tool_description == "files a ticket"
    assert config.profile_extractor_configs[0].extraction_definition_prompt == "Team facts only"
    assert parse_extraction_config({"agent_context_prompt": " \x00 "}).agent_context_prompt is None


YAML_CONFIG = """\
config_version: 1
agent_context_prompt: "You are an ops agent for Acme"
tool_can_use:
  - {tool_name: create_issue, tool_description: "files a ticket"}
extraction_preset: quick_chat
batch_interval: 2
profile_extractor_configs:
  - extractor_name: default_profile_extractor
    extraction_definition_prompt: "Extract key information about the user"
    request_sources_enabled: null
    batch_size_override: null
    batch_interval_override: null
user_playbook_extractor_configs:
  - extractor_name: default_playbook_extractor
    extraction_definition_prompt: "Extract playbook rules about agent performance"
    request_sources_enabled: [ops]
"""


def test_yaml_and_json_files_load_to_the_same_config(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(YAML_CONFIG)
    config = load_extraction_config(tmp_path / "c.yaml")
    assert (config.batch_size, config.batch_interval) == (5, 2)
    assert config.tool_can_use[0].tool_name == "create_issue"
    assert [g.name for g in config.groups()] == ["default_profile_extractor", "default_playbook_extractor"]
    (tmp_path / "c.yml").write_text(YAML_CONFIG)
    (tmp_path / "c.json").write_text(json.dumps(config.model_dump(mode="json")))
    assert load_extraction_config(tmp_path / "c.yml") == config == load_extraction_config(tmp_path / "c.json")
    # canonical JSON round-trips, and every way of naming a config resolves
    assert parse_extraction_config(json.loads(config.to_json())) == config
    assert resolve_extraction_config(config.to_json()) == config
    assert resolve_extraction_config(str(tmp_path / "c.yaml")) == config
    assert resolve_extraction_config(None) is DEFAULT_CONFIG and resolve_extraction_config("") is DEFAULT_CONFIG


def test_the_documented_example_is_valid() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    section = docs[docs.index("## Extraction config file") :]
    example = section[section.index("```yaml") + len("```yaml") : section.index("```", section.index("```yaml") + 7)]
    config = parse_extraction_config(yaml.safe_load(example))
    assert [g.name for g in config.groups()] == ["default"] and config.tool_can_use


def test_file_problems_are_config_errors_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("x = 1")
    with pytest.raises(ConfigError, match=r"c\.toml: expected a \.yaml, \.yml or \.json file"):
        load_extraction_config(tmp_path / "c.toml")
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        load_extraction_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("batch_size: [unclosed")
    with pytest.raises(ConfigError, match=r"bad\.yaml"):
        load_extraction_config(tmp_path / "bad.yaml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"list\.json: the top level must be a mapping"):
        load_extraction_config(tmp_path / "list.json")
    (tmp_path / "typo.yaml").write_text("batch_size: 4\nbatch_interval: 5\n")
    with pytest.raises(ConfigError, match=r"typo\.yaml: batch_interval: must be <= batch size 4"):
        load_extraction_config(tmp_path / "typo.yaml")
    with pytest.raises(ConfigError, match="inline extraction config"):
        resolve_extraction_config("{not json")


def test_settings_point_at_the_file_and_reject_the_old_window_settings(tmp_path: Path, monkeypatch) -> None:
    from reflexio_pipelines.definitions import build_resources

    monkeypatch.delenv("REFLEXIO_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(YAML_CONFIG)
    monkeypatch.setenv("REFLEXIO_EXTRACTION_CONFIG", str(tmp_path / "c.yaml"))
    monkeypatch.setenv("REFLEXIO_LLM_GATE_MODEL", "openai/gpt-4o-mini")
    settings = load_settings()
    assert settings.extraction_config == str(tmp_path / "c.yaml") and settings.llm.gate_model == "openai/gpt-4o-mini"
    resource = build_resources(settings.model_copy(update={"lake": str(tmp_path / "lake")}))["extractor"]
    assert resource.get_config() == load_extraction_config(tmp_path / "c.yaml")  # carried as validated JSON
    assert resource.gate_model == "openai/gpt-4o-mini"
    assert build_resources(Settings(lake=str(tmp_path / "lake")))["extractor"].get_config() == DEFAULT_CONFIG
    (tmp_path / "c.yaml").write_text("batch_size: 4\nbatch_interval: 5\n")
    with pytest.raises(ConfigError, match="batch_interval: must be <= batch size 4"):  # fails at start-up
        build_resources(settings)
    monkeypatch.setenv("REFLEXIO_WINDOW_SIZE", "12")
    with pytest.raises(SettingsError, match="REFLEXIO_WINDOW_SIZE moved to the extraction config file"):
        load_settings()
    monkeypatch.delenv("REFLEXIO_WINDOW_SIZE")
    (tmp_path / "reflexio.yaml").write_text("window:\n  size: 12\n")
    with pytest.raises(SettingsError, match=r"window\.size/window\.stride moved to the extraction config file"):
        load_settings()


# ---------------------------------------------------------------------------------------------------------------
# learn() with extractor groups
# ---------------------------------------------------------------------------------------------------------------


def rule_judges(entity: str, vectors: dict[str, np.ndarray]) -> RuleDedupJudge:
    return RuleDedupJudge(vectors)


class CountingExtractor:
    """Records every call (group name, turn sources); returns nothing unless `reply` says otherwise."""

    name = "counting"

    def __init__(self, reply=None) -> None:
        self.calls: list[tuple[str, Window]] = []
        self.groups: list[ExtractorGroup] = []
        self.reply = reply

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> ExtractionResult:
        assert group is not None
        self.calls.append((group.name, window))
        self.groups.append(group)
        return self.reply(window, group) if self.reply else ExtractionResult(extractor=self.name)


def turns_for(user: str, n: int, sources: tuple[str, ...] = ("app",), start: int = 0, **fields) -> list[Turn]:
    """n alternating user/assistant turns; the i-th turn's source is sources[i % len(sources)]."""
    return [
        Turn(
            turn_id=f"{user}-t{i:03d}",
            interaction_id=i,
            request_id=f"{user}-r{i // 2}",
            user_id=user,
            role="user" if i % 2 == 0 else "assistant",
            content=fields.get("content", f"message {i}"),
            created_at=1_767_225_600 + i,
            session_id=f"{user}-s",
            source=sources[i % len(sources)],
            turn_index=i % 2,
        )
        for i in range(start, start + n)
    ]


def run(turns: list[Turn], extractor, config=DEFAULT_CONFIG, states: dict[str, UserState] | None = None):
    return learn(
        turns,
        states or {},
        extractor,
        HashEmbedder(),
        rule_judges,
        window="2026-01-01T00",
        run_id="run-1",
        config=config,
    )


def test_the_default_config_makes_one_call_per_window() -> None:
    fake = CountingExtractor()
    history = turns_for("ana", 7)
    new = turns_for("ana", 23, start=7) + turns_for("ben", 3)
    out = run(new, fake, states={"ana": UserState(history=history)})
    expected = len(plan_windows(history, new[:23], 10, 5)) + len(plan_windows([], new[23:], 10, 5))
    assert len(fake.calls) == out.stats.windows == expected == 4
    assert {name for name, _ in fake.calls} == {"default"}
    assert [(b["user_id"], b["extractor"], b["new_turns"]) for b in out.bookmarks] == [
        ("ana", "default", 23),
        ("ben", "default", 3),
    ]
    assert out.bookmarks[0]["last_turn_id"] == "ana-t029"


TWO_GROUPS = {
    "batch_size": 6,
    "batch_interval": 3,
    "profile_extractor_configs": [
        extractor_cfg(
            "support_facts", request_sources_enabled=["support"], batch_size_override=4, batch_interval_override=2
        ),
    ],
    "user_playbook_extractor_configs": [extractor_cfg("ops_rules", request_sources_enabled=["ops", "app"])],
}


def test_groups_with_different_sources_and_windows_are_separate_calls_on_their_own_turns() -> None:
    config = parse_extraction_config(TWO_GROUPS)
    fake = CountingExtractor()
    turns = turns_for("cy", 20, sources=("support", "ops", "app", "web"))
    out = run(turns, fake, config)
    seen: dict[str, list[Window]] = {}
    for name, win in fake.calls:
        seen.setdefault(name, []).append(win)
    assert set(seen) == {"support_facts", "ops_rules"}
    support = [t for t in turns if t.source == "support"]
    ops = [t for t in turns if t.source in {"ops", "app"}]
    assert {t.source for w in seen["support_facts"] for t in w.turns} == {"support"}
    assert {t.source for w in seen["ops_rules"] for t in w.turns} == {"ops", "app"}
    assert [w.turns for w in seen["support_facts"]] == [w.turns for w in plan_windows([], support, 4, 2)]
    assert [w.turns for w in seen["ops_rules"]] == [w.turns for w in plan_windows([], ops, 6, 3)]
    # every turn of a group's sources is covered; "web" turns are read by no group
    assert {t.turn_id for w in seen["support_facts"] for t in w.turns} == {t.turn_id for t in support}
    bookmarks = {b["extractor"]: b for b in out.bookmarks}
    assert set(bookmarks) == {"support_facts", "ops_rules"}
    assert (bookmarks["support_facts"]["new_turns"], bookmarks["support_facts"]["extraction_windows"]) == (5, 2)
    assert (bookmarks["ops_rules"]["new_turns"], bookmarks["ops_rules"]["last_turn_id"]) == (10, "cy-t018")
    # a user whose new turns match no group's sources gets no bookmark (nothing was processed)
    assert run(turns_for("dee", 2, sources=("web",)), CountingExtractor(), config).bookmarks == []


CORRECTION_TURNS = [
    ("user", "Hi, I'm Dana and I prefer short answers. Deploy the billing service."),
    ("assistant", "Deploying the billing service to us-east-1."),
    ("user", "No, we never deploy to us-east-1, always use us-west-2."),
]


def conversation(user: str, source: str, turns=CORRECTION_TURNS, start: int = 0) -> list[Turn]:
    return [
        Turn(
            turn_id=f"{user}-{source}-{start + i}",
            interaction_id=start + i,
            request_id=f"{user}-{source}-{start}",
            user_id=user,
            role=role,
            content=content,
            created_at=1_767_225_600 + start + i,
            session_id=f"{user}-{source}",
            source=source,
            turn_index=i,
        )
        for i, (role, content) in enumerate(turns)
    ]


def test_items_are_tagged_with_their_extractor_names() -> None:
    config = parse_extraction_config(TWO_GROUPS)
    turns = conversation("eve", "support") + conversation("eve", "ops", start=10)
    out = run(turns, RuleExtractor(), config)
    assert out.profiles and out.playbooks
    # profiles come only from the support group (it has the only profile extractor) and name it
    assert {tuple(p["extractor_names"]) for p in out.profiles} == {("support_facts",)}
    assert all(set(p["source_turn_ids"]) <= {t.turn_id for t in turns if t.source == "support"} for p in out.profiles)
    # playbooks come only from the ops group, on ops turns
    assert {p["playbook_name"] for p in out.playbooks} == {"ops_rules"}
    assert all(set(p["source_turn_ids"]) <= {t.turn_id for t in turns if t.source == "ops"} for p in out.playbooks)
    items = {b["extractor"]: b["items_extracted"] for b in out.bookmarks}
    assert items == {"support_facts": len(out.profiles), "ops_rules": len(out.playbooks)}


def test_named_items_in_one_group_keep_their_own_names_and_merge_when_equal() -> None:
    config = parse_extraction_config(
        {
            "profile_extractor_configs": [extractor_cfg("facts"), extractor_cfg("prefs")],
            "user_playbook_extractor_configs": [extractor_cfg("rules"), extractor_cfg("escalations")],
        }
    )
    (group,) = config.groups()
    assert group.name == "facts+prefs+rules+escalations"

    def reply(window: Window, group: ExtractorGroup) -> ExtractionResult:
        ids = [window.turns[0].turn_id]
        return ExtractionResult(
            profiles=[
                NamedProfile("Prefers short answers", source_turn_ids=ids, extractor_name="prefs"),
                NamedProfile("Prefers short answers", source_turn_ids=ids, extractor_name="facts"),
                ExtractedProfile("Works at Acme", source_turn_ids=ids),  # untagged: the group's first
            ],
            playbooks=[
                group.tag_playbook(ExtractedPlaybook("Escalate outages", source_turn_ids=ids), "escalations"),
                ExtractedPlaybook("Use us-west-2", source_turn_ids=ids),
            ],
            extractor="fake",
        )

    out = run(conversation("fay", "app"), CountingExtractor(reply), config)
    names = {p["content"]: p["extractor_names"] for p in out.profiles}
    assert names == {"Prefers short answers": ["prefs", "facts"], "Works at Acme": ["facts"]}
    assert {p["content"]: p["playbook_name"] for p in out.playbooks} == {
        "Escalate outages": "escalations",
        "Use us-west-2": "rules",
    }


def test_llm_items_name_their_definition_and_unknown_names_fall_back() -> None:
    config = parse_extraction_config(
        {
            "profile_extractor_configs": [extractor_cfg("facts"), extractor_cfg("prefs")],
            "user_playbook_extractor_configs": [],
        }
    )
    (group,) = config.groups()
    window = Window("u", tuple(conversation("u", "app")))
    reply = {
        "profiles": [
            {"content": "Prefers short answers", "extractor": "prefs", "evidence": ["T1"]},
            {"content": "Is named Dana", "extractor": "nonsense", "evidence": ["T1"]},
            {"content": "Works at Acme", "evidence": ["T1"], "team": "billing"},
            {"content": ""},
        ],
        "playbooks": [{"content": "Use us-west-2", "extractor": "prefs"}],
    }
    profiles, playbooks, problems = named_items(reply, window, group)
    assert [(p.content, p.extractor_name) for p in profiles] == [
        ("Prefers short answers", "prefs"),
        ("Is named Dana", "facts"),
        ("Works at Acme", "facts"),
    ]
    assert profiles[2].custom_features == {"team": "billing"}  # the extractor key is not a custom feature
    assert playbooks == []  # this group has no playbook extractor
    assert any("profiles[1]: unknown extractor 'nonsense'" in p for p in problems)
    assert any("profiles[3]: empty content" in p for p in problems)
    assert any("no playbook extractor" in p for p in problems)


def test_prompt_tokens_of_the_default_group_stay_close_to_the_previous_prompt() -> None:
    """The definitions now travel in the prompt; the fixed text was shortened to pay for them."""
    from reflexio_pipelines.learning.prompts import load_prompt

    window = Window("u", tuple(conversation("u", "app")))
    LiteLLMExtractor(model="openai/none")  # builds with the definitions in its prompt

    def size(version: str | None) -> int:
        prompt = load_prompt("extraction", version) if version else None
        extractor = LiteLLMExtractor(model="openai/none", **({"prompt": prompt} if prompt else {}))
        return sum(len(m["content"]) for m in extractor.messages(window))

    assert size("1.1.0") - size("1.0.0") < 150  # characters (~35 tokens) per window: named definitions, tools line
    assert size(None) - size("1.1.0") < 400  # ~90 tokens per window for the forget channel (1.2.0)


# ---------------------------------------------------------------------------------------------------------------
# The optional gate, against the OpenAI-compatible stub over HTTP
# ---------------------------------------------------------------------------------------------------------------

GATE_MODEL = "stub-gate"


@pytest.fixture
def gated_stub() -> Iterator[tuple]:
    answers = {"gate": "false"}

    def responder(body: dict) -> str:
        if body["model"] == GATE_MODEL:
            return answers["gate"]
        return fake_llm_reply(body)

    app = make_openai_stub(StubBehaviour(responder=responder))
    with serve_app(app) as base_url:
        yield app, base_url, answers


def gated_extractor(base_url: str) -> LiteLLMExtractor:
    return LiteLLMExtractor(
        model="openai/stub",
        api_base=f"{base_url}/v1",
        api_key="k",
        max_retries=0,
        gate_model=f"openai/{GATE_MODEL}",
        sleep=lambda s: None,
    )


@pytest.mark.e2e
def test_a_false_gate_skips_extraction_but_the_bookmark_advances(gated_stub) -> None:
    app, base_url, _ = gated_stub
    turns = conversation("gil", "app") + conversation("gil", "app", turns=CORRECTION_TURNS * 3, start=3)
    out = run(turns, gated_extractor(base_url))
    windows = out.stats.windows
    assert windows == 2 and out.stats.gate_skipped == windows == out.stats.gate_calls == out.stats.llm_calls
    assert [r["body"]["model"] for r in app.state.requests] == [GATE_MODEL] * windows  # no extraction call at all
    assert out.profiles == [] and out.playbooks == []
    (bookmark,) = out.bookmarks
    assert bookmark["last_turn_id"] == turns[-1].turn_id and bookmark["extraction_windows"] == windows
    assert out.stats.prompt_tokens > 0  # the gate's tokens are paid for and counted
    gate_request = app.state.requests[0]["body"]
    assert "response_format" not in gate_request  # a bare true/false answer, not JSON mode
    assert "Answer with one word: true or false." in gate_request["messages"][0]["content"]


@pytest.mark.e2e
def test_a_true_gate_extracts_and_both_calls_are_counted(gated_stub) -> None:
    app, base_url, answers = gated_stub
    answers["gate"] = "True."
    window = Window("hal", tuple(conversation("hal", "app")))
    result = gated_extractor(base_url).extract(window)
    assert [r["body"]["model"] for r in app.state.requests] == [GATE_MODEL, "stub"]
    assert result.playbooks and not result.gate_skipped
    assert (result.gate_calls, result.llm_calls) == (1, 2)
    assert 0 < result.gate_prompt_tokens < result.prompt_tokens
    assert result.completion_tokens > result.gate_completion_tokens > 0


@pytest.mark.e2e
def test_gate_errors_and_unclear_answers_extract_anyway(gated_stub) -> None:
    app, base_url, answers = gated_stub
    window = Window("ivy", tuple(conversation("ivy", "app")))
    app.state.behaviour = StubBehaviour(error_first=1, responder=app.state.behaviour.responder)
    result = gated_extractor(base_url).extract(window)  # the gate call gets HTTP 500
    assert result.playbooks and result.gate_calls == 1 and not result.gate_skipped
    answers["gate"] = "It depends."
    result = gated_extractor(base_url).extract(window)
    assert result.playbooks and result.gate_calls == 1 and not result.gate_skipped
    assert [r["body"]["model"] for r in app.state.requests] == [GATE_MODEL, "stub"] * 2


# ---------------------------------------------------------------------------------------------------------------
# Through Dagster: the asset runs with the config the resource carries
# ---------------------------------------------------------------------------------------------------------------


def test_the_learning_asset_uses_the_configured_extractors(lake, instance, landed, tmp_path: Path) -> None:
    import dagster as dg

    from reflexio_pipelines.assets.learning import user_learning
    from reflexio_pipelines.assets.turns import turns as turns_asset
    from reflexio_pipelines.definitions import build_resources
    from reflexio_pipelines.lake.windows import key_of_moment, window_of_key
    from reflexio_pipelines.partitions import GRANULARITY

    path = tmp_path / "extraction.json"
    path.write_text(
        json.dumps(
            {
                "extraction_preset": "quick_chat",
                "profile_extractor_configs": [extractor_cfg("team_facts")],
                "user_playbook_extractor_configs": [extractor_cfg("team_rules")],
            }
        )
    )
    resources = build_resources(Settings(lake=str(lake.root), extraction_config=str(path)))
    key = key_of_moment(datetime.now(timezone.utc), GRANULARITY)  # `landed` committed the samples just now
    window = window_of_key(key, GRANULARITY)
    for asset in (turns_asset, user_learning):
        assert dg.materialize([asset], partition_key=key, resources=resources, instance=instance).success
    profiles = lake.read_table("user_profiles", window).to_pylist()
    playbooks = lake.read_table("user_playbooks", window).to_pylist()
    assert profiles and {tuple(p["extractor_names"]) for p in profiles} == {("team_facts",)}
    assert playbooks and {p["playbook_name"] for p in playbooks} == {"team_rules"}
    bookmarks = lake.read_table("extraction_bookmarks", window).to_pylist()
    assert bookmarks and {b["extractor"] for b in bookmarks} == {"team_facts+team_rules"}
    # quick_chat windows (5 turns): with no history a user's n new turns take ceil(n / 5) windows
    assert all(b["extraction_windows"] == -(-b["new_turns"] // 5) for b in bookmarks)
    assert any(b["extraction_windows"] > 1 for b in bookmarks)  # the preset, not the default 10, cut the windows
