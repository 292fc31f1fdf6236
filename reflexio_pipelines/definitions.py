"""The one Definitions object of the code location (`dagster dev -w workspace.yaml` loads `defs`)."""

from __future__ import annotations

import os

import dagster as dg
from pydantic import SecretStr

from reflexio_pipelines.assets import aggregation, evaluation, learning, learning_shards, outcomes, search_index, turns
from reflexio_pipelines.checks import search_index_is_servable
from reflexio_pipelines.jobs import aggregation_job, evaluation_job, extract_job, index_job, learn_job
from reflexio_pipelines.operations import lifecycle_job, rerun_job
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource
from reflexio_pipelines.schedules import aggregation_schedule, evaluation_schedule, index_compaction_schedule
from reflexio_pipelines.sensors import interaction_index_sensor, landing_sensor
from reflexio_pipelines.settings import Settings, load_settings


def _secret(env_name: str, configured: SecretStr) -> str | dg.EnvVar:
    # A key from the environment is bound as an EnvVar so the Dagster UI and run records show the variable's name,
    # never its value; a key given in code or the config file is passed through.
    return dg.EnvVar(env_name) if os.environ.get(env_name) else configured.get_secret_value()


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """Resources for the given settings (tests pass their own, e.g. a temporary lake). The extraction config file
    is read and validated here, so a bad file fails at start-up (`ConfigError` naming the field), and the resource
    carries its validated JSON. A config stored through the API (`set_config`) takes precedence over the file."""
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.learning.config_loading import resolve_extraction_config

    lake = Lake.at(settings.lake)

    return {
        "lake": LakeResource(root=str(lake.root), metadata_previews=settings.metadata_previews),
        "extractor": ExtractorResource(
            model=settings.llm.model,
            api_base=settings.llm.api_base,
            api_key=_secret("REFLEXIO_LLM_API_KEY", settings.llm.api_key),
            api_version=settings.llm.api_version,
            timeout_s=settings.llm.timeout_s,
            max_retries=settings.llm.max_retries,
            backoff_base_s=settings.llm.backoff_base_s,
            temperature=settings.llm.temperature,
            gate_model=settings.llm.gate_model,
            builtin=settings.llm.builtin,
            llm_concurrency=settings.llm.concurrency,
            rpm=settings.llm.rpm,
            tpm=settings.llm.tpm,
            extraction_config=resolve_extraction_config(lake.extraction_config(settings.extraction_config)).to_json(),
            shards=settings.learning_shards,
        ),
        "embedder": EmbedderResource(
            model=settings.embedder.model,
            api_base=settings.embedder.api_base,
            api_key=_secret("REFLEXIO_EMBEDDING_API_KEY", settings.embedder.api_key),
            api_version=settings.embedder.api_version,
            dimensions=settings.embedder.dimensions,
        ),
    }


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    """Assets, checks, jobs, sensor and resources, configured from `settings` (default: file + environment)."""
    settings = settings or load_settings()
    sharded = settings.learning_shards > 1
    return dg.Definitions(
        assets=dg.load_assets_from_modules(
            [turns, learning_shards if sharded else learning, aggregation, evaluation, outcomes, search_index]
        ),
        asset_checks=[search_index_is_servable],
        jobs=[learn_job, extract_job, index_job, aggregation_job, evaluation_job, rerun_job, lifecycle_job],
        schedules=[aggregation_schedule, evaluation_schedule, index_compaction_schedule],
        sensors=[landing_sensor, interaction_index_sensor],
        resources=build_resources(settings),
        executor=executor(settings),
    )


def executor(settings: Settings) -> dg.ExecutorDefinition:
    """In-process for an unsharded deployment: its steps are small and sequential, and a process per step (the
    multiprocess default under the daemon) costs seconds each on a 2-core box. Fanned-out learning needs its
    shards in parallel processes: the multiprocess executor, as many at once as there are shards, forking each
    step from a server that has imported the code location (and LiteLLM when a model is configured) once, so a
    step starts in well under a second instead of paying those imports again. A Kubernetes deployment may
    override this with `k8s_job_executor` (deployment.md)."""
    if settings.learning_shards <= 1:
        return dg.in_process_executor
    preload = ["reflexio_pipelines.definitions", *(["litellm"] if settings.llm.model.strip() else [])]
    return dg.multiprocess_executor.configured(
        {"max_concurrent": settings.learning_shards, "start_method": {"forkserver": {"preload_modules": preload}}},
        name="sharded_multiprocess",
    )


defs = build_definitions()
