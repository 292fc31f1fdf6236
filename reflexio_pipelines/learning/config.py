"""The extraction configuration: which extractors run, what they look for, and how turns are windowed.

A versioned YAML or JSON file in the original's `Config` shape, reduced to what extraction uses:

    config_version: 1
    agent_context_prompt: "You are an ops agent for …"
    tool_can_use: [{tool_name: create_issue, tool_description: "…"}]
    extraction_preset: standard        # fills batch_size / batch_interval only where they are not set
    batch_size: 10                     # turns per extraction window
    batch_interval: 5                  # <= batch_size; sets the lookback: min(2, batch_size - batch_interval) turns
    profile_extractor_configs: [{extractor_name, extraction_definition_prompt, request_sources_enabled,
                                 batch_size_override, batch_interval_override}]
    user_playbook_extractor_configs: [same fields, plus aggregation_config: {min_cluster_size, clustering_similarity,
                                      min_distinct_users, auto_approve}]
    holdout: {share: 0.05, agent_versions: {support-bot-v2: 0.1}}   # the control group (learning/holdout.py)
    outcomes: {min_outcomes: 5, hold_out_flagged: false}             # outcome counters (learning/outcomes.py)

Unknown fields are errors (a typo must not silently fall back to a default); the original's legacy field names are
migrated on load, its 2026 shape is read too (`window_size` / `stride_size`, one `profile_extractor_config`,
`user_playbook_extractor_config` and `agent_success_config`: learning/config_shapes.py), and the original's fields
this pipeline has no counterpart for (`context_prompt`, `llm_config`, ...) are accepted at their default value only, so a config read through the original client round-trips. Extractors whose effective (batch_size, batch_interval, request_sources_enabled) are equal form
one `ExtractorGroup` and share ONE extraction call per window, so the default config (one profile and one playbook
extractor) costs exactly one call per window, like before the config existed.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from reflexio_pipelines.learning.config_shapes import to_pipeline_shape
from reflexio_pipelines.learning.extractor_groups import ExtractorDefinition, ExtractorGroup
from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.original_config import (
    LEGACY_AGGREGATION,
    LEGACY_EXTRACTOR,
    LEGACY_TOP,
    ORIGINAL_EVALUATOR,
    ORIGINAL_EXTRACTOR,
    ORIGINAL_TOP,
    drop_original_defaults,
)

log = logging.getLogger(__name__)

CONFIG_VERSION: Final = 1
DEFAULT_PROFILE_EXTRACTOR = "default_profile_extractor"
DEFAULT_PLAYBOOK_EXTRACTOR = "default_playbook_extractor"
#: Name of the group the default extractors form (the bookmark name used before the config file existed).
DEFAULT_GROUP_NAME = "default"
GROUP_NAME_SEPARATOR = "+"

Preset = Literal["quick_chat", "standard", "long_form", "high_volume"]
#: (batch_size, batch_interval) per preset, as in the original.
PRESETS: dict[str, tuple[int, int]] = {
    "quick_chat": (5, 3),
    "standard": (10, 5),
    "long_form": (25, 10),
    "high_volume": (15, 8),
}

MAX_PROMPT_CHARS = 8_000
MAX_TOOL_DESCRIPTION_CHARS = 1_000
MAX_NAME_CHARS = 100
_NAME_RE = re.compile(r"[\w][\w .:-]*")  # used with fullmatch: `$` would allow a trailing newline
#: Aggregation settings the original had that work differently here: their defaults are accepted so the original's
#: configs load, any other value is an error saying why (silently ignoring it would mislead). Field -> (default, why).
_ORIGINAL_DEFAULT_ONLY: dict[str, tuple[float, str]] = {
    "reaggregation_trigger_count": (
        2,
        "aggregation here re-runs incrementally on the daily schedule or on demand, not after a count of new playbooks",
    ),
    "direction_overlap_threshold": (0.6, "clusters are cut on embeddings here (set clustering_similarity instead)"),
}


class ConfigError(ValueError):
    """The extraction config is invalid; the message names each offending field path and the reason."""


def _problem(problems: list[tuple[str, str]]) -> PydanticCustomError:
    """A validation error carrying field paths (errors raised by model validators otherwise have no location)."""
    return PydanticCustomError(
        "extraction_config", "{summary}", {"summary": "; ".join(f"{p}: {r}" for p, r in problems), "problems": problems}
    )


def _clean_prompt(value: Any, limit: int) -> Any:
    """Control characters stripped (tab and newline kept), trimmed; empty or over-long text is an error."""
    if not isinstance(value, str):
        return value  # the field's type check reports it
    text = clean_text(value, limit=len(value) + 1)
    if len(text) > limit:
        raise ValueError(f"at most {limit} characters (got {len(text)})")
    return text


def _migrate(data: Any, legacy: dict[str, str]) -> Any:
    """Rename legacy keys in a raw mapping; both spellings at once is an error (which one would win is a guess)."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    problems = []
    for old, new in legacy.items():
        if old not in data:
            continue
        if new in data:
            problems.append((old, f"legacy name of {new}, which is also set; keep one"))
            continue
        data[new] = data.pop(old)
        log.info("extraction config: legacy field %s read as %s", old, new)
    if problems:
        raise _problem(problems)
    return data


class ToolUseConfig(BaseModel):
    """A tool the agent can call; listed in extraction prompts so rules can name real tools."""

    model_config = ConfigDict(extra="forbid")
    tool_name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    tool_description: str = ""

    @field_validator("tool_name")
    @classmethod
    def _strip_name(cls, value: str) -> str:
        value = clean_text(value, limit=len(value) + 1)
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("tool_description", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return _clean_prompt(value, MAX_TOOL_DESCRIPTION_CHARS)


class ExtractorConfig(BaseModel):
    """One named extractor: a definition of what to extract, which turns it reads, and optional window overrides."""

    model_config = ConfigDict(extra="forbid")
    extractor_name: str
    extraction_definition_prompt: str
    #: None or [] = every source; else only turns whose `source` is listed.
    request_sources_enabled: list[str] | None = None
    # defaults by keyword throughout: a type checker reads a pydantic field's default only from `default=` (PEP 681)
    batch_size_override: int | None = Field(default=None, gt=0)
    batch_interval_override: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        return drop_original_defaults(_migrate(data, LEGACY_EXTRACTOR), ORIGINAL_EXTRACTOR)

    @field_validator("extractor_name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be empty")
        if len(value) > MAX_NAME_CHARS or not _NAME_RE.fullmatch(value) or GROUP_NAME_SEPARATOR in value:
            raise ValueError(
                f"use letters, digits, space, '_', '-', '.', ':' (at most {MAX_NAME_CHARS} characters), got {value!r}"
            )
        return value

    @field_validator("extraction_definition_prompt", mode="before")
    @classmethod
    def _clean_definition(cls, value: Any) -> Any:
        value = _clean_prompt(value, MAX_PROMPT_CHARS)
        if value == "":
            raise ValueError("must not be empty")
        return value

    @field_validator("request_sources_enabled")
    @classmethod
    def _normalise_sources(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        sources = sorted({s.strip() for s in value if s.strip()})
        return sources or None

    def window(self, config: ExtractionConfig) -> tuple[int, int]:
        """Effective (batch_size, batch_interval): the override where set, else the config's."""
        return (self.batch_size_override or config.batch_size, self.batch_interval_override or config.batch_interval)


class ProfileExtractorConfig(ExtractorConfig):
    """Extracts per-user facts (the original's ProfileExtractorConfig)."""


class AggregationSettings(BaseModel):
    """How the user playbooks of one playbook extractor are aggregated into agent playbooks (the original's
    PlaybookAggregatorConfig). `min_cluster_size` and `clustering_similarity` set the clustering of the next
    aggregation run (learning/cluster.py; a size below 2 acts as 2); `min_distinct_users` and `auto_approve` are
    this pipeline's own: a shared rule must come from that many users (3 by default: two accounts of one person or
    one attacker must not be enough), and `auto_approve` serves new rules without a person approving them (flagged
    ones still wait, learning/rule_flags.py; see docs/configuration.md for the risk). The original's
    `reaggregation_trigger_count` and `direction_overlap_threshold` are accepted at their defaults only: aggregation
    here is incremental (unchanged clusters cost nothing) and runs daily or on demand, and clusters are cut on
    embeddings, not token overlap."""

    model_config = ConfigDict(extra="forbid")
    min_cluster_size: int = Field(default=2, ge=1)
    clustering_similarity: float = Field(default=0.5, ge=0.0, le=1.0)
    min_distinct_users: int = Field(default=3, ge=1)
    auto_approve: bool = False
    reaggregation_trigger_count: int = 2
    direction_overlap_threshold: float = 0.6

    @field_validator(*_ORIGINAL_DEFAULT_ONLY)
    @classmethod
    def _original_default_only(cls, value: float, info: ValidationInfo) -> float:
        default, why = _ORIGINAL_DEFAULT_ONLY[str(info.field_name)]
        if value != default:
            raise ValueError(f"only {default}, the original's default, is accepted: {why}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        return _migrate(data, LEGACY_AGGREGATION)


class UserPlaybookExtractorConfig(ExtractorConfig):
    """Extracts per-user behavioural rules (the original's UserPlaybookExtractorConfig), with how its playbooks
    are aggregated (None = the aggregation run's defaults)."""

    aggregation_config: AggregationSettings | None = None


#: The evaluator of the default config (and of shadow pairs logged before pairs named theirs).
DEFAULT_EVALUATION = "default_evaluation"
#: The evaluation name impact_metrics gives the rule-based signals of every closed session (not an evaluator's).
RESERVED_EVALUATION = "session_signals"


class AgentSuccessConfig(BaseModel):
    """One session evaluator (the original's AgentSuccessConfig). Sampling defaults to 5 % of closed sessions."""

    model_config = ConfigDict(extra="forbid")
    evaluation_name: str = Field(default=DEFAULT_EVALUATION, min_length=1, max_length=MAX_NAME_CHARS)
    success_definition_prompt: str = (
        "The session succeeded if the user's request was fulfilled correctly by the end of the session, "
        "without the user having to give up, repeat themselves in frustration or ask for a human."
    )
    sampling_rate: float = Field(default=0.05, ge=0.0, le=1.0)

    @model_validator(mode="before")
    @classmethod
    def _original_fields(cls, data: Any) -> Any:
        return drop_original_defaults(data, ORIGINAL_EVALUATOR)

    @field_validator("evaluation_name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value.strip() == RESERVED_EVALUATION:
            raise ValueError(
                f"{RESERVED_EVALUATION!r} names the rule-based session signals in impact_metrics; "
                "choose another evaluation name"
            )
        return value


class HoldoutSettings(BaseModel):
    """The control group (learning/holdout.py): the share of users whose searches return no learned context, so
    impact metrics can compare treated and control users over the same period. `share` None = the deployment
    default (`REFLEXIO_HOLDOUT_SHARE`, else 5 %); `agent_versions` sets the share of single agent versions (users
    are drawn by a hash of agent version and user id, so each version has its own control group)."""

    model_config = ConfigDict(extra="forbid")
    share: float | None = Field(default=None, ge=0.0, le=1.0)
    agent_versions: dict[str, float] = Field(default_factory=dict)

    @field_validator("agent_versions")
    @classmethod
    def _shares(cls, value: dict[str, float]) -> dict[str, float]:
        bad = sorted(version for version, share in value.items() if not 0.0 <= share <= 1.0)
        if bad:
            raise ValueError(f"shares must lie within [0, 1] (agent versions {bad})")
        return value


class OutcomeSettings(BaseModel):
    """Outcome counters per learned item (learning/outcomes.py): an item whose `harmful` count exceeds its
    `helpful` count once it has at least `min_outcomes` outcomes is flagged; with `hold_out_flagged` it is also
    left out of search until a reviewer keeps it (POST /api/review_flagged_item)."""

    model_config = ConfigDict(extra="forbid")
    min_outcomes: int = Field(default=5, ge=1)
    hold_out_flagged: bool = False


#: Seconds of quiet before an LLM extractor's sensor runs extract an incomplete window (the issue's "about 30 s": a
#: session pausing longer than this is a new session; shorter pauses keep filling the same window).
DEFAULT_LLM_QUIET_PERIOD_S = 30.0


class ExtractionConfig(BaseModel):
    """The whole extraction configuration. Build it with `parse_extraction_config` / `load_extraction_config`
    (they raise `ConfigError`); direct construction raises pydantic's ValidationError."""

    model_config = ConfigDict(extra="forbid")
    config_version: Literal[1] = CONFIG_VERSION
    agent_context_prompt: str | None = None
    tool_can_use: list[ToolUseConfig] | None = None
    extraction_preset: Preset | None = None
    batch_size: int = Field(default=10, gt=0)
    batch_interval: int = Field(default=5, gt=0)
    profile_extractor_configs: list[ProfileExtractorConfig] = Field(
        default_factory=lambda: [ProfileExtractorConfig.model_validate(_DEFAULT_PROFILE)]
    )
    user_playbook_extractor_configs: list[UserPlaybookExtractorConfig] = Field(
        default_factory=lambda: [UserPlaybookExtractorConfig.model_validate(_DEFAULT_PLAYBOOK)]
    )
    agent_success_configs: list[AgentSuccessConfig] = Field(default_factory=lambda: [AgentSuccessConfig()])
    session_quiet_period_seconds: int = Field(default=600, gt=0)  # a session is closed after this long without a turn
    #: How long a user's stream must be quiet before the sensor's runs extract an incomplete window (fewer than
    #: batch_size new turns); also where a new chunk starts (learning/windows.py). None = the default below.
    extraction_quiet_period_seconds: float | None = Field(default=None, ge=0)
    #: The control group that gets no learned context from search (per agent version).
    holdout: HoldoutSettings = Field(default_factory=HoldoutSettings)
    #: When an item's outcome counters flag it, and whether a flagged item leaves search pending review.
    outcomes: OutcomeSettings = Field(default_factory=OutcomeSettings)

    @model_validator(mode="before")
    @classmethod
    def _legacy_names(cls, data: Any) -> Any:
        try:
            data = to_pipeline_shape(data)  # the original's 2026 shape (window_size, singular extractors)
        except ValueError as exc:
            raise _problem(exc.args[0]) from None
        data = drop_original_defaults(_migrate(data, LEGACY_TOP), ORIGINAL_TOP)
        if isinstance(data, dict):
            # The original's nulls: no extractor list = the default extractors; no evaluators = no evaluation.
            data = {k: v for k, v in data.items() if not (k.endswith("_extractor_configs") and v is None)}
            if "agent_success_configs" in data and data["agent_success_configs"] is None:
                data["agent_success_configs"] = []
        return data

    @field_validator("agent_context_prompt", mode="before")
    @classmethod
    def _clean_context(cls, value: Any) -> Any:
        value = _clean_prompt(value, MAX_PROMPT_CHARS)
        return value or None

    @model_validator(mode="after")
    def _presets_and_consistency(self) -> ExtractionConfig:
        if self.extraction_preset is not None:
            size, interval = PRESETS[self.extraction_preset]
            # a preset only fills what the file leaves unset (explicit values win, as in the original)
            if "batch_size" not in self.model_fields_set:
                self.batch_size = size
            if "batch_interval" not in self.model_fields_set:
                self.batch_interval = interval
        problems: list[tuple[str, str]] = []
        if self.batch_interval > self.batch_size:
            problems.append(("batch_interval", f"must be <= batch size {self.batch_size}"))
        seen: dict[str, str] = {}
        lists: dict[str, list[Any]] = {
            "profile_extractor_configs": self.profile_extractor_configs,
            "user_playbook_extractor_configs": self.user_playbook_extractor_configs,
        }
        for kind, extractors in lists.items():
            for i, extractor in enumerate(extractors):
                path = f"{kind}.{i}"
                size, interval = extractor.window(self)
                overridden = extractor.batch_size_override or extractor.batch_interval_override
                if overridden and interval > size:  # without overrides the global check above covers it
                    if extractor.batch_interval_override is not None:
                        problems.append((f"{path}.batch_interval_override", f"must be <= batch size {size}"))
                    else:
                        problems.append(
                            (
                                f"{path}.batch_size_override",
                                f"must be >= batch interval {interval} (or set batch_interval_override)",
                            )
                        )
                name = extractor.extractor_name
                if name in seen:
                    problems.append((f"{path}.extractor_name", f"duplicate name {name!r} (also {seen[name]})"))
                else:
                    seen[name] = path
        if not seen:
            problems.append(("profile_extractor_configs", "at least one profile or playbook extractor is required"))
        if problems:
            raise _problem(problems)
        return self

    def quiet_period(self, llm: bool) -> float:
        """The extraction quiet period in seconds: as configured, else DEFAULT_LLM_QUIET_PERIOD_S for an LLM
        extractor (an incomplete window costs a call like a full one) and 0 for the built-in rules (a window costs
        nothing, so holding turns back would only delay learning)."""
        if self.extraction_quiet_period_seconds is not None:
            return self.extraction_quiet_period_seconds
        return DEFAULT_LLM_QUIET_PERIOD_S if llm else 0.0

    def aggregation_settings(self, playbook_name: str) -> AggregationSettings:
        """How the user playbooks named `playbook_name` (= their extractor's name) are aggregated: that playbook
        extractor's `aggregation_config`, else the defaults."""
        for extractor in self.user_playbook_extractor_configs:
            if extractor.extractor_name == playbook_name and extractor.aggregation_config is not None:
                return extractor.aggregation_config
        return AggregationSettings()

    def to_json(self) -> str:
        """Canonical JSON (reloads to an equal config); what the Dagster resource carries."""
        return self.model_dump_json(exclude_none=True)

    def groups(self) -> list[ExtractorGroup]:
        """Extractors with equal effective (batch_size, batch_interval, sources), in config order; each group is
        one extraction call per window."""
        members: dict[tuple, list[tuple[str, ExtractorConfig]]] = {}
        for kind, extractors in (
            ("profile", self.profile_extractor_configs),
            ("playbook", self.user_playbook_extractor_configs),
        ):
            for extractor in extractors:
                size, interval = extractor.window(self)
                sources = tuple(extractor.request_sources_enabled or ())
                members.setdefault((size, interval, sources), []).append((kind, extractor))
        tools = tuple((t.tool_name, t.tool_description) for t in self.tool_can_use or ())
        groups = []
        for (size, interval, sources), found in members.items():
            profiles = tuple(
                ExtractorDefinition(e.extractor_name, e.extraction_definition_prompt)
                for kind, e in found
                if kind == "profile"
            )
            playbooks = tuple(
                ExtractorDefinition(e.extractor_name, e.extraction_definition_prompt)
                for kind, e in found
                if kind == "playbook"
            )
            names = [d.name for d in profiles + playbooks]
            default = names == [DEFAULT_PROFILE_EXTRACTOR, DEFAULT_PLAYBOOK_EXTRACTOR]
            groups.append(
                ExtractorGroup(
                    name=DEFAULT_GROUP_NAME if default else GROUP_NAME_SEPARATOR.join(names),
                    batch_size=size,
                    batch_interval=interval,
                    sources=sources or None,
                    profile_extractors=profiles,
                    playbook_extractors=playbooks,
                    agent_context=self.agent_context_prompt or "",
                    tools=tools,
                )
            )
        return groups


# The original's default definitions, paraphrased.
_DEFAULT_PROFILE: dict[str, str] = {
    "extractor_name": DEFAULT_PROFILE_EXTRACTOR,
    "extraction_definition_prompt": (
        "The user and their working environment: name, role, preferences, stable facts, data or schema details, "
        "metric definitions, tool quirks."
    ),
}
_DEFAULT_PLAYBOOK: dict[str, str] = {
    "extractor_name": DEFAULT_PLAYBOOK_EXTRACTOR,
    "extraction_definition_prompt": "How the agent performed: what helped, what to do better, issues it ran into.",
}

#: One profile and one playbook extractor with the original's default definitions, windows 10/5.
DEFAULT_CONFIG = ExtractionConfig()
#: The one group of DEFAULT_CONFIG; what an extractor uses when called without a group.
DEFAULT_GROUP = DEFAULT_CONFIG.groups()[0]
