"""The extractor as a Dagster resource: LiteLLM when a model is configured, else the built-in rules, plus the
extraction config (extractors, definitions, windows) the learning asset runs with. It carries every LLM setting and
is the one place the LLM stages get their endpoint from: `llm_settings()` → `endpoint()` → extractor, dedup judge,
session/shadow judge (assets/evaluation.py) and consolidator (assets/aggregation.py)."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.config_loading import resolve_extraction_config
from reflexio_pipelines.learning.dedup import RuleDedupJudge
from reflexio_pipelines.learning.extract import Extractor, make_extractor
from reflexio_pipelines.learning.learn import JudgeFactory
from reflexio_pipelines.learning.llm_call import LLMEndpoint, preload_litellm
from reflexio_pipelines.settings import LLMSettings


class ExtractorResource(dg.ConfigurableResource):
    """Which model extracts, how it is called, and the extraction config. `api_key` is bound to an environment
    variable (EnvVar) in definitions.py so the secret never appears in the Dagster UI or run config.

    The LLM fields are those of `LLMSettings` (same names and defaults), except `llm_concurrency` for
    `LLMSettings.concurrency`: `concurrency` is the property the learning step sizes its workers by.

    `shards` is how many parallel steps a fanned-out learning run splits a window into (assets/learning_shards.py;
    1 = one step, assets/learning.py). Calls in flight (`llm_concurrency`) hold per step process, since each
    machine brings its own workers; the provider's per-minute limits (`rpm`, `tpm`) are the whole deployment's,
    so each process takes its share of them.

    `extraction_config` is the validated config as JSON (what definitions.py puts here, so a run records exactly
    the config it used, and a file edited after start-up cannot change a run halfway), or a file path, or empty
    for the built-in default config.
    """

    model: str = ""
    api_base: str = ""
    api_key: str = ""
    api_version: str = ""
    timeout_s: float = 120.0
    max_retries: int = 2
    backoff_base_s: float = 1.0
    temperature: float = 0.0
    gate_model: str = ""
    builtin: str = "learned"
    llm_concurrency: int = 32
    rpm: int = 0
    tpm: int = 0
    extraction_config: str = ""
    shards: int = 1

    def llm_settings(self) -> LLMSettings:
        """The LLM settings this resource carries, validated (one object for every LLM stage)."""
        # the fields named alike are read by name, so a setting added to both reaches every stage
        alike = LLMSettings.model_fields.keys() - {"concurrency", "rpm", "tpm"}
        shares = {"rpm": _share(self.rpm, self.shards), "tpm": _share(self.tpm, self.shards)}
        return LLMSettings.model_validate(
            {name: getattr(self, name) for name in alike} | shares | {"concurrency": self.llm_concurrency}
        )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """With a model configured, LiteLLM's import and warm-up start now, in the background, while earlier steps
        run."""
        if self.model.strip():
            preload_litellm(self.model, api_base=self.api_base, api_version=self.api_version)

    def endpoint(self) -> LLMEndpoint:
        """The LLM endpoint of these settings (raises ValueError when no model is configured). Endpoints of the
        same model and api_base share one process-wide throttle, so building one per use is cheap and safe."""
        return LLMEndpoint.from_settings(self.llm_settings())

    @property
    def concurrency(self) -> int:
        """How many extractions to run at once: the LLM's concurrency, or 1 for the built-in extractor (no remote
        calls to overlap, and CPU-bound work gains nothing from threads)."""
        return self.llm_concurrency if self.model.strip() else 1

    def get(self) -> Extractor:
        """A ready extractor for this configuration."""
        return make_extractor(self.llm_settings())

    def get_config(self, lake: Lake | None = None) -> ExtractionConfig:
        """The extraction config this resource carries (raises `ConfigError` if it is invalid). With `lake`, the
        config that lake's organisation stored through `set_config` wins: a scheduled run pointed at an
        organisation's lake (schedules.py) carries the code location's config, not the organisation's."""
        stored = lake.extraction_config(None) if lake is not None else None
        return resolve_extraction_config(stored or self.extraction_config)

    def dedup_judge_factory(self) -> JudgeFactory:
        """The dedup judge per entity: the offline rule judge, or the LLM judge when a model is configured."""
        if not self.model.strip():
            return lambda entity, vectors: RuleDedupJudge(vectors)
        from reflexio_pipelines.learning.llm_dedup import PLAYBOOK_ITEMS, PROFILE_ITEMS, LiteLLMDedupJudge

        kinds = {"profile": PROFILE_ITEMS, "user_playbook": PLAYBOOK_ITEMS}
        endpoint = self.endpoint()
        return lambda entity, vectors: LiteLLMDedupJudge(endpoint=endpoint, item_kind=kinds[entity])


def _share(per_minute: int, shards: int) -> int:
    """One of `shards` processes' share of a per-minute limit (0 = unlimited stays unlimited; never below 1)."""
    return per_minute if per_minute <= 0 or shards <= 1 else max(1, per_minute // shards)
