"""The extractor as a Dagster resource: LiteLLM when a model is configured, else the built-in rules, plus the
extraction config (extractors, definitions, windows) the learning asset runs with."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.learning.config import ExtractionConfig, resolve_extraction_config
from reflexio_pipelines.learning.dedup import RuleDedupJudge
from reflexio_pipelines.learning.extract import Extractor, make_extractor
from reflexio_pipelines.learning.learn import JudgeFactory
from reflexio_pipelines.settings import LLMSettings


class ExtractorResource(dg.ConfigurableResource):
    """Which model extracts, and the extraction config. `api_key` is bound to an environment variable (EnvVar)
    in definitions.py so the secret never appears in the Dagster UI or run config.

    `extraction_config` is the validated config as JSON (what definitions.py puts here, so a run records exactly
    the config it used, and a file edited after start-up cannot change a run halfway), or a file path, or empty
    for the built-in default config.
    """

    model: str = ""
    api_base: str = ""
    api_key: str = ""
    timeout_s: float = 120.0
    max_retries: int = 2
    backoff_base_s: float = 1.0
    gate_model: str = ""
    extraction_config: str = ""

    def get(self) -> Extractor:
        """A ready extractor for this configuration."""
        return make_extractor(
            LLMSettings(
                model=self.model,
                api_base=self.api_base,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
                backoff_base_s=self.backoff_base_s,
                gate_model=self.gate_model,
            )
        )

    def get_config(self) -> ExtractionConfig:
        """The extraction config this resource carries (raises `ConfigError` if it is invalid)."""
        return resolve_extraction_config(self.extraction_config)

    def dedup_judge_factory(self) -> JudgeFactory:
        """The dedup judge per entity: the offline rule judge, or the LLM judge when a model is configured."""
        if not self.model:
            return lambda entity, vectors: RuleDedupJudge(vectors)
        from reflexio_pipelines.learning.llm_dedup import LiteLLMDedupJudge

        kinds = {"profile": "user profile facts", "user_playbook": "behavioural rules (playbooks)"}
        return lambda entity, vectors: LiteLLMDedupJudge(
            self.model,
            api_base=self.api_base,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            backoff_base_s=self.backoff_base_s,
            item_kind=kinds[entity],
        )
