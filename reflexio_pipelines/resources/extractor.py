"""The extractor as a Dagster resource: LiteLLM when a model is configured, else the built-in rules."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.learning.dedup import RuleDedupJudge
from reflexio_pipelines.learning.extract import Extractor, make_extractor
from reflexio_pipelines.learning.learn import JudgeFactory
from reflexio_pipelines.settings import LLMSettings


class ExtractorResource(dg.ConfigurableResource):
    """Which model extracts and how windows are cut. `api_key` is bound to an environment variable (EnvVar)
    in definitions.py so the secret never appears in the Dagster UI or run config."""

    model: str = ""
    api_base: str = ""
    api_key: str = ""
    timeout_s: float = 120.0
    max_retries: int = 2
    window_size: int = 10
    window_stride: int = 5
    agent_context: str = ""

    def get(self) -> Extractor:
        """A ready extractor for this configuration."""
        return make_extractor(
            LLMSettings(
                model=self.model,
                api_base=self.api_base,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
            )
        )

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
            item_kind=kinds[entity],
        )
