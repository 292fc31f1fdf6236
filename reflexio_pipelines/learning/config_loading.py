"""Reading an extraction config: from a parsed mapping, a YAML or JSON file, or inline JSON, with every invalid field
named in one `ConfigError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from reflexio_pipelines.learning.config import (
    CONFIG_VERSION,
    DEFAULT_CONFIG,
    AgentSuccessConfig,
    AggregationSettings,
    ConfigError,
    ExtractionConfig,
    ExtractorConfig,
    HoldoutSettings,
    OutcomeSettings,
    ToolUseConfig,
    UserPlaybookExtractorConfig,
)
from reflexio_pipelines.learning.original_config import ORIGINAL_EVALUATOR, ORIGINAL_ONLY

_EXTRA_HINT = "unknown field"


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    """Field names allowed at the mapping that holds `loc`'s last element."""
    parent = loc[:-1]
    if not parent:
        model: type[BaseModel] = ExtractionConfig
    elif parent[0] == "tool_can_use":
        model = ToolUseConfig
    elif parent[0] == "agent_success_configs":
        model = AgentSuccessConfig
    elif parent[0] == "holdout":
        model = HoldoutSettings
    elif parent[0] == "outcomes":
        model = OutcomeSettings
    elif "aggregation_config" in parent:
        model = AggregationSettings
    elif parent[0] == "user_playbook_extractor_configs":
        model = UserPlaybookExtractorConfig
    else:
        model = ExtractorConfig
    return list(model.model_fields)


def _describe(exc: ValidationError) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for error in exc.errors():
        if error["type"] == "extraction_config":
            problems.extend(tuple(p) for p in error["ctx"]["problems"])
            continue
        loc = tuple(error["loc"])
        path = ".".join(str(part) for part in loc) or "(top level)"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            field = str(loc[-1])
            if field in ORIGINAL_ONLY:
                default = ORIGINAL_ONLY[field][1]
                message = (
                    f"a field of the original Reflexio Config that this pipeline supports only at its default "
                    f"({default}): it has no such behaviour; remove it or set it to {default}"
                )
            elif field in ORIGINAL_EVALUATOR:
                message = "a field of the original Reflexio Config that this pipeline supports only at null; remove it"
            else:
                message = f"{_EXTRA_HINT} (allowed: {', '.join(_allowed_fields(loc))})"
        elif error["type"] == "literal_error" and loc == ("config_version",):
            message = f"unsupported version {error['input']!r} (this build reads {CONFIG_VERSION})"
        problems.append((path, message))
    return problems


def parse_extraction_config(data: Any, source: str = "extraction config") -> ExtractionConfig:
    """A validated config from a parsed mapping; raises `ConfigError` naming every bad field path."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping, got {type(data).__name__}")
    try:
        return ExtractionConfig.model_validate(data)
    except ValidationError as exc:
        detail = "; ".join(f"{path}: {reason}" for path, reason in _describe(exc))
        raise ConfigError(f"{source}: {detail}") from None


def load_extraction_config(path: str | Path) -> ExtractionConfig:
    """Read and validate a config file (.yaml, .yml or .json); raises `ConfigError`."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix not in {".yaml", ".yml", ".json"}:
        raise ConfigError(f"extraction config {path}: expected a .yaml, .yml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"extraction config {path}: {exc}") from None
    return parse_extraction_config(data, f"extraction config {path}")


def resolve_extraction_config(spec: str | Path | None) -> ExtractionConfig:
    """The config a resource or setting names: empty/None = DEFAULT_CONFIG, text starting with `{` = inline JSON,
    anything else = a file path."""
    text = str(spec).strip() if spec is not None else ""
    if not text:
        return DEFAULT_CONFIG
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"inline extraction config: {exc}") from None
        return parse_extraction_config(data, "inline extraction config")
    return load_extraction_config(text)
