"""Assets `playbook_embeddings` and `agent_playbooks` (+ `aggregation_change_log`): "what one user teaches, every
user benefits from". Current user playbooks are embedded, clustered per (agent version, playbook name), and each
cluster that recurs across users becomes one agent playbook, subject to human approval (see learning/aggregate.py
for how clusters map to playbooks across runs, and lake/control.py for decisions)."""

import time
from collections import defaultdict
from functools import partial

import dagster as dg
import numpy as np
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.aggregate import Consolidator, Member, RepresentativeConsolidator
from reflexio_pipelines.learning.aggregate_group import AggregationStats, Group, aggregate_group
from reflexio_pipelines.learning.cluster import ClusterParams
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.llm_aggregate import LiteLLMConsolidator
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource


class AggregationConfig(dg.Config):
    """An optional scope (one agent version / playbook name) and clustering parameters. A parameter left unset
    comes from the playbook extractor's `aggregation_config` in the organisation's extraction config (set through
    `set_config` or the config file), else from the defaults (2 members, cosine 0.5, 2 distinct users)."""

    agent_version: str | None = None
    playbook_name: str | None = None
    min_cluster_size: int | None = None
    similarity: float | None = None
    min_distinct_users: int | None = None
    auto_approve: bool = False


def cluster_params(config: AggregationConfig, extraction: ExtractionConfig, playbook_name: str) -> ClusterParams:
    """The clustering parameters of one playbook name's groups: the run's where given, else its extractor's."""
    configured = extraction.aggregation_settings(playbook_name)

    def pick(given, fallback):
        return fallback if given is None else given

    return ClusterParams(min_cluster_size=pick(config.min_cluster_size, configured.min_cluster_size),
                         similarity=pick(config.similarity, configured.clustering_similarity),
                         min_distinct_users=pick(config.min_distinct_users, configured.min_distinct_users))  # fmt: skip


def embedding_text(row: dict) -> str:
    """What a user playbook is clustered on: its trigger (the situation) and its content (the lesson) together.

    The trigger alone (the original's choice) groups different lessons learned in similar situations, and misses
    one lesson taught in differently worded situations; with both, the same lesson clusters across users."""
    return f"{row['trigger']}: {row['content']}" if row["trigger"] else row["content"]


@dg.asset(
    deps=["user_playbooks"],
    group_name="aggregation",
    kinds={"deltalake"},
    description="Embeddings of every current user playbook (trigger + content); unchanged texts are reused.",
)
def playbook_embeddings(lake: LakeResource, embedder: EmbedderResource) -> dg.MaterializeResult:
    store, model = lake.get(), embedder.get()
    rows = live_rows(store, "user_playbook")
    previous = {(r["user_playbook_id"], r["text"], r["model_id"]): r["embedding"]
                for r in store.read_table("playbook_embeddings").to_pylist()}  # fmt: skip
    texts = [embedding_text(r) for r in rows]
    missing = [i for i, (r, t) in enumerate(zip(rows, texts)) if (r["user_playbook_id"], t, model.model_id) not in previous]
    fresh = model.embed([texts[i] for i in missing]) if missing else np.zeros((0, 0), np.float32)
    computed = {i: fresh[k].tolist() for k, i in enumerate(missing)}
    out = [
        {"user_playbook_id": r["user_playbook_id"], "user_id": r["user_id"], "agent_version": r["agent_version"],
         "playbook_name": r["playbook_name"], "text": t, "model_id": model.model_id,
         "embedding": computed[i] if i in computed else previous[(r["user_playbook_id"], t, model.model_id)]}
        for i, (r, t) in enumerate(zip(rows, texts))
    ]  # fmt: skip
    with store.lock("aggregation"):
        version = store.replace_where("playbook_embeddings", None, pa.Table.from_pylist(out, schema=TABLES["playbook_embeddings"]))
    return dg.MaterializeResult(metadata={"dagster/row_count": len(out), "embedded_now": len(missing),
                                          "reused": len(out) - len(missing), "model": model.model_id,
                                          "delta_version": version})  # fmt: skip


@dg.multi_asset(
    specs=[
        dg.AssetSpec("agent_playbooks", deps=["playbook_embeddings"], group_name="aggregation", kinds={"deltalake"},
                     description="Shared rules consolidated from user playbooks that recur across users."),
        dg.AssetSpec("aggregation_change_log", deps=["playbook_embeddings"], group_name="aggregation",
                     kinds={"deltalake"}, description="Every added / updated / removed agent playbook, before and after."),
    ]  # fmt: skip
)
def agent_playbook_aggregation(
    context: dg.AssetExecutionContext, config: AggregationConfig, lake: LakeResource, extractor: ExtractorResource
):
    store = lake.get()
    run_id, now = context.run.run_id, int(time.time())
    extraction = extractor.get_config(store)
    members = _members_by_group(store, config)
    status_of = decisions(store)
    prior_rows = store.read_table("agent_playbooks").to_pylist()
    in_scope = [r for r in prior_rows if _in_scope(r, config)]
    # Groups with members now, and groups that had agent playbooks before (their members may all be gone).
    groups = set(members) | {(r["agent_version"], r["playbook_name"]) for r in in_scope}
    rows_out, changes, stats = [], [], AggregationStats()
    params_used: dict[str, dict] = {}  # playbook name -> the clustering parameters its groups ran with
    # Consolidation calls land in `llm_calls` (cross-user: no user_id), also when a group fails: they were paid for.
    with ledger_written(store, run_id=run_id, asset=context.op_def.name, window=None) as ledger:
        for agent_version, playbook_name in sorted(groups):
            prior = [r for r in in_scope if (r["agent_version"], r["playbook_name"]) == (agent_version, playbook_name)]
            params = cluster_params(config, extraction, playbook_name)
            params_used[playbook_name] = {"min_cluster_size": params.min_cluster_size, "similarity": params.similarity,
                                          "min_distinct_users": params.min_distinct_users}  # fmt: skip
            group = Group(agent_version, playbook_name, members.get((agent_version, playbook_name), []), prior,
                          status_of, params, run_id, now, config.auto_approve)
            rows, group_changes = aggregate_group(group, partial(_consolidator, extractor, agent_version=agent_version),
                                                  stats)
            rows_out.extend(rows)
            changes.extend(group_changes)
    metadata = {**stats.metadata(), "llm_calls_recorded": len(ledger.calls())}
    with store.lock("aggregation"):
        version = store.replace_where("agent_playbooks", _scope_predicate(config),
                                      pa.Table.from_pylist(rows_out, schema=TABLES["agent_playbooks"]))  # fmt: skip
        if changes:
            store.append("aggregation_change_log", pa.Table.from_pylist(changes, schema=TABLES["aggregation_change_log"]))
    table = store.read_table("agent_playbooks")
    yield dg.MaterializeResult(asset_key="agent_playbooks", metadata={
        "dagster/row_count": table.num_rows, "delta_version": version, **metadata,
        "cluster_params": dg.MetadataValue.json(params_used),
        "preview": preview(table, ["agent_playbook_id", "agent_version", "playbook_status", "status", "content"],
                           enabled=lake.metadata_previews)})  # fmt: skip
    yield dg.MaterializeResult(asset_key="aggregation_change_log", metadata={"changes_this_run": len(changes)})


def _members_by_group(store: Lake, config: AggregationConfig) -> dict[tuple[str, str], list[tuple[Member, np.ndarray]]]:
    playbooks = {r["user_playbook_id"]: r for r in live_rows(store, "user_playbook")}
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for e in store.read_table("playbook_embeddings").to_pylist():
        row = playbooks.get(e["user_playbook_id"])
        if row is None or not _in_scope(row, config):
            continue
        member = Member(row["user_playbook_id"], row["user_id"], row["content"], row["trigger"], row["rationale"],
                        row["blocking_issue_kind"], row["blocking_issue_details"])  # fmt: skip
        groups[(row["agent_version"] or "", row["playbook_name"] or "")].append((member, np.asarray(e["embedding"], np.float32)))
    return groups


def _in_scope(row: dict, config: AggregationConfig) -> bool:
    return all(getattr(config, c) is None or row.get(c) == getattr(config, c) for c in ("agent_version", "playbook_name"))


def _scope_predicate(config: AggregationConfig) -> str | None:
    parts = [f"{c} = '{str(getattr(config, c)).replace(chr(39), chr(39) * 2)}'"
             for c in ("agent_version", "playbook_name") if getattr(config, c) is not None]  # fmt: skip
    return " AND ".join(parts) or None


def _consolidator(extractor: ExtractorResource, vectors: dict, agent_version: str) -> Consolidator:
    if not extractor.model:
        return RepresentativeConsolidator(vectors)
    # the one endpoint: every LLM setting, the shared throttle
    return LiteLLMConsolidator(endpoint=extractor.endpoint(), agent_version=agent_version)
