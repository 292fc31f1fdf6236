"""Runtime settings: one place that reads the config file and the environment.

Precedence (highest first): environment variables, the YAML config file, defaults. The config file is
`$REFLEXIO_CONFIG` if set, else `reflexio.yaml` in the working directory if it exists. Secrets (API keys) are
only ever read from the environment or the file and are never logged or written to the lake.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError


class LLMSettings(BaseModel):
    """Which model extracts. An empty model means the built-in deterministic extractor."""

    model_config = ConfigDict(extra="forbid")
    model: str = ""
    api_base: str = ""
    api_key: SecretStr = SecretStr("")
    timeout_s: float = 120.0
    max_retries: int = 2
    temperature: float = 0.0


class EmbedderSettings(BaseModel):
    """Which model embeds. `local` is the bundled all-MiniLM-L6-v2 (int8 ONNX, 384-d, no network)."""

    model_config = ConfigDict(extra="forbid")
    model: str = "local"
    api_base: str = ""
    api_key: SecretStr = SecretStr("")
    dimensions: int | None = None


class WindowSettings(BaseModel):
    """Extraction window per user: `size` turns per LLM call, advancing by `stride` turns."""

    model_config = ConfigDict(extra="forbid")
    size: int = Field(10, gt=0)
    stride: int = Field(5, gt=0)


class Settings(BaseModel):
    """Everything configurable. See docs/configuration.md."""

    model_config = ConfigDict(extra="forbid")
    lake: str = "./lake"
    partition: Literal["hourly", "daily"] = "hourly"
    partition_start: str = "2026-01-01"
    llm: LLMSettings = LLMSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    window: WindowSettings = WindowSettings()
    #: Most rows one landing file (one fsync) may hold; 1 disables group commit (benchmark baseline).
    landing_max_batch_rows: int = Field(50_000, gt=0)


class SettingsError(ValueError):
    """The config file or an environment variable holds an invalid value; the message names the field."""


_ENV_MAP: dict[str, tuple[str, ...]] = {
    "REFLEXIO_LAKE": ("lake",),
    "REFLEXIO_PARTITION": ("partition",),
    "REFLEXIO_PARTITION_START": ("partition_start",),
    "REFLEXIO_LLM_MODEL": ("llm", "model"),
    "REFLEXIO_LLM_API_BASE": ("llm", "api_base"),
    "REFLEXIO_LLM_API_KEY": ("llm", "api_key"),
    "REFLEXIO_LLM_TIMEOUT": ("llm", "timeout_s"),
    "REFLEXIO_EMBEDDING_MODEL": ("embedder", "model"),
    "REFLEXIO_EMBEDDING_API_BASE": ("embedder", "api_base"),
    "REFLEXIO_EMBEDDING_API_KEY": ("embedder", "api_key"),
    "REFLEXIO_WINDOW_SIZE": ("window", "size"),
    "REFLEXIO_WINDOW_STRIDE": ("window", "stride"),
    "REFLEXIO_LANDING_MAX_BATCH_ROWS": ("landing_max_batch_rows",),
}


def _config_path() -> Path | None:
    explicit = os.environ.get("REFLEXIO_CONFIG")
    if explicit:
        return Path(explicit)
    default = Path("reflexio.yaml")
    return default if default.exists() else None


def load_settings(overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from file, environment and explicit overrides (e.g. a `--lake` flag), validated."""
    raw: dict[str, Any] = {}
    path = _config_path()
    if path is not None:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsError(f"config file {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise SettingsError(f"config file {path}: top level must be a mapping")
    for env, keys in _ENV_MAP.items():
        value = os.environ.get(env)
        if value is None or value == "":
            continue
        node = raw
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    for key, value in (overrides or {}).items():
        if value is not None:
            raw[key] = value
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise SettingsError(f"invalid setting {field}: {first['msg']}") from exc
