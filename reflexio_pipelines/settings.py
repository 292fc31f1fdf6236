"""Runtime settings: one place that reads the config file and the environment.

Precedence (highest first): environment variables, the YAML config file, defaults. The config file is
`$REFLEXIO_CONFIG` if set, else `reflexio.yaml` in the working directory if it exists. Secrets (API keys) are
only ever read from the environment or the file and are never logged or written to the lake.

What extraction looks for and how turns are windowed (batch_size / batch_interval, extractors, agent context) is
not here: it is the extraction config file (`extraction_config`, see learning/config.py), the one source of truth
for windows. The former `window.size` / `window.stride` settings are rejected with a pointer to it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from reflexio_pipelines.search.shards import ShardSelector


class LLMSettings(BaseModel):
    """Which model extracts, judges and consolidates, and how it is called: one endpoint for every LLM stage
    (learning/llm_call.py). An empty model means the built-in deterministic extractor and offline judges."""

    model_config = ConfigDict(extra="forbid")
    model: str = ""
    api_base: str = ""
    api_key: SecretStr = SecretStr("")
    #: Azure OpenAI's `api-version` query parameter (e.g. "2024-10-21"); empty = LiteLLM's (AZURE_API_VERSION, else
    #: its built-in default). Other providers ignore it.
    api_version: str = ""
    timeout_s: float = 120.0
    max_retries: int = 2
    #: First retry waits between base and 2x base seconds, doubling per retry (a 429's Retry-After wins if longer).
    backoff_base_s: float = Field(1.0, ge=0)
    #: Sent only where the model accepts it (reasoning models such as gpt-5 and o3 take none: it is dropped).
    temperature: float = Field(0.0, ge=0, le=2)
    #: A small model asked "anything worth extracting?" before each window's extraction; empty = no gate.
    gate_model: str = ""
    #: Which built-in extractor runs when no model is set: `learned` (the clause classifier, learning/builtin.py) or
    #: `rules` (the previous rule-based baseline, learning/rules/extractor.py, kept for comparison).
    builtin: Literal["learned", "rules"] = "learned"
    #: Most LLM calls in flight at once in this process, per (model, api_base); also the learning step's workers.
    concurrency: int = Field(32, ge=1)
    #: The provider's requests per minute shared by every call of the process (0 = unlimited).
    rpm: int = Field(0, ge=0)
    #: The provider's tokens per minute (prompt tokens, estimated before each call; 0 = unlimited).
    tpm: int = Field(0, ge=0)


class EmbedderSettings(BaseModel):
    """Which model embeds. `local` is the bundled all-MiniLM-L6-v2 (int8 ONNX, 384-d, no network)."""

    model_config = ConfigDict(extra="forbid")
    model: str = "local"
    api_base: str = ""
    api_key: SecretStr = SecretStr("")
    #: Azure OpenAI's `api-version` for an `azure/<deployment>` embedding model; empty = LiteLLM's default.
    api_version: str = ""
    dimensions: int | None = None


class Settings(BaseModel):
    """Everything configurable. See docs/configuration.md."""

    model_config = ConfigDict(extra="forbid")
    lake: str = "./lake"
    partition: Literal["hourly", "daily"] = "hourly"
    partition_start: str = "2026-01-01"
    llm: LLMSettings = LLMSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    #: Path of the extraction config file (.yaml/.yml/.json); None = the built-in default config.
    extraction_config: str | None = None
    #: Most rows one landing file (one fsync) may hold; 1 disables group commit (benchmark baseline).
    landing_max_batch_rows: int = Field(50_000, gt=0)
    #: JSON file of API key hashes (`python -m serving keys create --org ID`). Set = every /api/ request needs a
    #: Bearer key and each organisation gets its own lake under <lake>/orgs/<org>; unset = one open organisation.
    api_keys_file: str | None = None
    #: Asset metadata in the Dagster UI may show rows of user data (previews). False in production: then Dagster's
    #: run storage, which erasure does not reach, holds counts only.
    metadata_previews: bool = True
    #: Seconds without a heartbeat after which a rerun still marked `in_progress` is taken as interrupted (its
    #: process died), so a new one can start. A rerun beats every quarter of this.
    operation_stale_after_s: float = Field(120.0, gt=0)
    #: Host header values the service answers besides loopback (127.0.0.1, localhost, ::1), e.g. a proxy's name;
    #: `*.example.com` matches subdomains, `*` any host. Open mode checks the Host header against these (against
    #: DNS rebinding); keyed mode checks it only when this is set.
    allowed_hosts: list[str] = Field(default_factory=list)
    #: The index shards this serving replica loads ("0,1"), of `index_shard_count`; empty = the whole index. A
    #: shard is a hash bucket of user ids (search/shards.py); searches for other users answer 421.
    index_shards: str = ""
    index_shard_count: int = Field(1, ge=1)
    #: Parallel steps a window's learning is split into (shards of its users, assets/learning_shards.py), run by
    #: the multiprocess executor (or k8s_job_executor); 1 = the window learned in one step.
    learning_shards: int = Field(1, ge=1)
    #: The newest unindexed turns per user a search_interactions answers from landing files (serving/recent_turns.py):
    #: bounds a search's cost whatever the backlog; older unindexed turns are found once a build takes them in (the
    #: oldest first). 0 = every unindexed turn. 1,000 > a user's share of what builds leave waiting when they keep
    #: pace (`MAX_NEW_TURNS_PER_BUILD` = 600 in all), and covers a 689-turn conversation published at once; a user's
    #: first search embeds their distinct lines (~600: 1.8-4.7 s on 2 cores under load, see
    #: benchmarks/interaction_fallback_cost.py).
    recent_turns_per_user: int = Field(1_000, ge=0)

    @model_validator(mode="after")
    def _check_shards(self) -> Settings:
        self.shard_selector()  # a bad shard list fails at start-up, naming the part
        return self

    def shard_selector(self) -> ShardSelector | None:
        """The index shards this replica loads, None for the whole index (search/shards.py)."""
        return ShardSelector.parse(self.index_shards, self.index_shard_count)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        """`REFLEXIO_ALLOWED_HOSTS` is one comma-separated string."""
        if isinstance(value, str):
            return [host.strip() for host in value.split(",") if host.strip()]
        return value


class SettingsError(ValueError):
    """The config file or an environment variable holds an invalid value; the message names the field."""


_ENV_MAP: dict[str, tuple[str, ...]] = {
    "REFLEXIO_LAKE": ("lake",),
    "REFLEXIO_PARTITION": ("partition",),
    "REFLEXIO_PARTITION_START": ("partition_start",),
    "REFLEXIO_LLM_MODEL": ("llm", "model"),
    "REFLEXIO_LLM_API_BASE": ("llm", "api_base"),
    "REFLEXIO_LLM_API_KEY": ("llm", "api_key"),
    "REFLEXIO_LLM_API_VERSION": ("llm", "api_version"),
    "REFLEXIO_LLM_TIMEOUT": ("llm", "timeout_s"),
    "REFLEXIO_LLM_MAX_RETRIES": ("llm", "max_retries"),
    "REFLEXIO_LLM_BACKOFF_BASE": ("llm", "backoff_base_s"),
    "REFLEXIO_LLM_GATE_MODEL": ("llm", "gate_model"),
    "REFLEXIO_LLM_BUILTIN": ("llm", "builtin"),
    "REFLEXIO_LLM_TEMPERATURE": ("llm", "temperature"),
    "REFLEXIO_LLM_CONCURRENCY": ("llm", "concurrency"),
    "REFLEXIO_LLM_RPM": ("llm", "rpm"),
    "REFLEXIO_LLM_TPM": ("llm", "tpm"),
    "REFLEXIO_EMBEDDING_MODEL": ("embedder", "model"),
    "REFLEXIO_EMBEDDING_API_BASE": ("embedder", "api_base"),
    "REFLEXIO_EMBEDDING_API_KEY": ("embedder", "api_key"),
    "REFLEXIO_EMBEDDING_API_VERSION": ("embedder", "api_version"),
    "REFLEXIO_EXTRACTION_CONFIG": ("extraction_config",),
    "REFLEXIO_LANDING_MAX_BATCH_ROWS": ("landing_max_batch_rows",),
    "REFLEXIO_API_KEYS_FILE": ("api_keys_file",),
    "REFLEXIO_METADATA_PREVIEWS": ("metadata_previews",),
    "REFLEXIO_OPERATION_STALE_AFTER": ("operation_stale_after_s",),
    "REFLEXIO_ALLOWED_HOSTS": ("allowed_hosts",),
    "REFLEXIO_INDEX_SHARDS": ("index_shards",),
    "REFLEXIO_LEARNING_SHARDS": ("learning_shards",),
    "REFLEXIO_INDEX_SHARD_COUNT": ("index_shard_count",),
    "REFLEXIO_RECENT_TURNS_PER_USER": ("recent_turns_per_user",),
}


#: Settings that moved to the extraction config file; naming them is an error that says where they went.
_MOVED = {
    "window": "window.size/window.stride moved to the extraction config file (batch_size/batch_interval); "
    "point extraction_config (REFLEXIO_EXTRACTION_CONFIG) at it",
    "REFLEXIO_WINDOW_SIZE": "REFLEXIO_WINDOW_SIZE moved to the extraction config file's batch_size; "
    "point REFLEXIO_EXTRACTION_CONFIG at it",
    "REFLEXIO_WINDOW_STRIDE": "REFLEXIO_WINDOW_STRIDE moved to the extraction config file's batch_interval; "
    "point REFLEXIO_EXTRACTION_CONFIG at it",
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
        if "window" in raw:
            raise SettingsError(f"config file {path}: {_MOVED['window']}")
    for env in ("REFLEXIO_WINDOW_SIZE", "REFLEXIO_WINDOW_STRIDE"):
        if os.environ.get(env):
            raise SettingsError(_MOVED[env])
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
