"""Assets `playbook_embeddings` and `agent_playbooks` (+ `aggregation_change_log`): "what one user teaches, every
user benefits from". Current user playbooks are embedded, clustered per (agent version, playbook name), and each
cluster that recurs across users becomes one agent playbook, subject to human approval (see learning/aggregate.py
for how clusters map to playbooks across runs, lake/control.py for decisions, and lake/aggregation.py for the
runs against the lake)."""

import time
from functools import partial

import dagster as dg

from reflexio_pipelines.assets.metadata import preview, table_specs
from reflexio_pipelines.lake.aggregation import (
    Scope,
    aggregate_playbooks,
    commit_aggregation,
    refresh_playbook_embeddings,
)
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.learning.aggregate import Consolidator, RepresentativeConsolidator
from reflexio_pipelines.learning.llm_aggregate import LiteLLMConsolidator
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource


class AggregationConfig(dg.Config):
    """An optional scope (one agent version / playbook name), clustering parameters and auto-approval. A parameter
    left unset comes from the playbook extractor's `aggregation_config` in the organisation's extraction config (set
    through `set_config` or the config file), else from the defaults (2 members, cosine 0.5, 3 distinct users, new
    rules pending until approved)."""

    agent_version: str | None = None
    playbook_name: str | None = None
    min_cluster_size: int | None = None
    similarity: float | None = None
    min_distinct_users: int | None = None
    auto_approve: bool | None = None


@dg.asset(
    deps=["user_playbooks"],
    group_name="aggregation",
    kinds={"deltalake"},
    description="Embeddings of every current user playbook (trigger + content); unchanged texts are reused.",
)
def playbook_embeddings(lake: LakeResource, embedder: EmbedderResource) -> dg.MaterializeResult:
    store, model = lake.get(), embedder.get()
    written = refresh_playbook_embeddings(store, model)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": written.rows,
            "embedded_now": written.embedded_now,
            "reused": written.rows - written.embedded_now,
            "model": model.model_id,
            "delta_version": written.version,
        }
    )


@dg.multi_asset(
    specs=table_specs(
        "aggregation",
        {
            "agent_playbooks": (
                ["playbook_embeddings"],
                "Shared rules consolidated from user playbooks that recur across users.",
            ),
            "aggregation_change_log": (
                ["playbook_embeddings"],
                "Every added / updated / removed agent playbook, before and after.",
            ),
        },
    )
)
def agent_playbook_aggregation(
    context: dg.AssetExecutionContext, config: AggregationConfig, lake: LakeResource, extractor: ExtractorResource
):
    store = lake.get()
    run_id, now = context.run.run_id, int(time.time())
    extraction = extractor.get_config(store)
    scope = Scope(config.agent_version, config.playbook_name)
    # Consolidation calls land in `llm_calls` (cross-user: no user_id), also when a group fails: they were paid for.
    with ledger_written(store, run_id=run_id, asset=context.op_def.name, window=None) as ledger:
        run = aggregate_playbooks(
            store,
            extraction,
            scope,
            partial(consolidator_for, extractor),
            run_id=run_id,
            now=now,
            auto_approve=config.auto_approve,
            min_cluster_size=config.min_cluster_size,
            similarity=config.similarity,
            min_distinct_users=config.min_distinct_users,
        )
    metadata = {**run.stats.metadata(), "llm_calls_recorded": len(ledger.calls())}
    version = commit_aggregation(store, scope, run)
    table = store.read_table("agent_playbooks")
    yield dg.MaterializeResult(
        asset_key="agent_playbooks",
        metadata={
            "dagster/row_count": table.num_rows,
            "delta_version": version,
            **metadata,
            "cluster_params": dg.MetadataValue.json(run.params_used),
            "preview": preview(
                table,
                ["agent_playbook_id", "agent_version", "playbook_status", "status", "content"],
                enabled=lake.metadata_previews,
            ),
        },
    )
    yield dg.MaterializeResult(asset_key="aggregation_change_log", metadata={"changes_this_run": len(run.changes)})


def consolidator_for(extractor: ExtractorResource, vectors: dict, agent_version: str) -> Consolidator:
    if not extractor.model:
        return RepresentativeConsolidator(vectors)
    # the one endpoint: every LLM setting, the shared throttle
    return LiteLLMConsolidator(endpoint=extractor.endpoint(), agent_version=agent_version)
