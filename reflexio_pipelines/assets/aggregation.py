"""Assets `playbook_embeddings` and `agent_playbooks` (+ `aggregation_change_log`): "what one user teaches, every
user benefits from". Current user playbooks are embedded, clustered per (agent version, playbook name), and each
cluster that recurs across users becomes one agent playbook, subject to human approval (see learning/aggregate.py
for how clusters map to playbooks across runs, and lake/control.py for decisions)."""

import json
import time
from collections import defaultdict

import dagster as dg
import numpy as np
import pyarrow as pa

from reflexio_pipelines.assets.metadata import preview
from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.llm_calls import ledger_written
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.aggregate import (
    ClusterAction,
    Consolidator,
    Member,
    NothingShared,
    PriorPlaybook,
    RepresentativeConsolidator,
    Rule,
    plan,
)
from reflexio_pipelines.learning.cluster import ClusterParams, cluster_playbooks, clusters_from_labels, fingerprint
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.llm_aggregate import ConsolidationFailed, LiteLLMConsolidator
from reflexio_pipelines.resources import EmbedderResource, ExtractorResource, LakeResource


_UNCHANGED = object()  # a cluster that could not be consolidated this run keeps its previous state


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
    rows_out, changes, stats = [], [], defaultdict(int)
    params_used: dict[str, dict] = {}  # playbook name -> the clustering parameters its groups ran with
    # Consolidation calls land in `llm_calls` (cross-user: no user_id), also when a group fails: they were paid for.
    with ledger_written(store, run_id=run_id, asset=context.op_def.name, window=None) as ledger:
        for agent_version, playbook_name in sorted(groups):
            prior = [r for r in in_scope if (r["agent_version"], r["playbook_name"]) == (agent_version, playbook_name)]
            params = cluster_params(config, extraction, playbook_name)
            params_used[playbook_name] = {"min_cluster_size": params.min_cluster_size, "similarity": params.similarity,
                                          "min_distinct_users": params.min_distinct_users}  # fmt: skip
            rows, group_changes = _aggregate_group(members.get((agent_version, playbook_name), []), prior, status_of,
                                                   params, extractor, config.auto_approve, agent_version,
                                                   playbook_name, run_id, now, stats)  # fmt: skip
            rows_out.extend(rows)
            changes.extend(group_changes)
    stats["llm_calls_recorded"] = len(ledger.calls())
    with store.lock("aggregation"):
        version = store.replace_where("agent_playbooks", _scope_predicate(config),
                                      pa.Table.from_pylist(rows_out, schema=TABLES["agent_playbooks"]))  # fmt: skip
        if changes:
            store.append("aggregation_change_log", pa.Table.from_pylist(changes, schema=TABLES["aggregation_change_log"]))
    table = store.read_table("agent_playbooks")
    metadata = {k: int(v) for k, v in stats.items()}
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


def _aggregate_group(group, prior_rows, status_of, params, extractor, auto_approve, agent_version, playbook_name,
                     run_id, now, stats) -> tuple[list[dict], list[dict]]:  # fmt: skip
    group = sorted(group, key=lambda mv: mv[0].user_playbook_id)
    by_id = {m.user_playbook_id: m for m, _ in group}
    vectors = {m.user_playbook_id: v for m, v in group}
    matrix = np.stack([v for _, v in group]) if group else np.zeros((0, 1), np.float32)
    labels = cluster_playbooks(matrix, [m.user_id for m, _ in group], params)
    ids = [m.user_playbook_id for m, _ in group]
    clusters = {fingerprint(members): sorted(members) for members in clusters_from_labels(labels, ids).values()}
    stats["clusters"] += len(clusters)
    stats["noise"] += int((labels == -1).sum())
    current = [r for r in prior_rows if r["status"] == "current"]
    prior = [PriorPlaybook(r["agent_playbook_id"], frozenset(r["member_ids"] or []),
                           status_of.get(str(r["agent_playbook_id"]), r["playbook_status"]),
                           frozenset(r["fingerprints"] or []), r) for r in current]  # fmt: skip
    actions, orphaned = plan(clusters, prior, agent_version, playbook_name)
    approved = [_rule_of(p.row) for p in prior if p.playbook_status == "approved"]
    consolidator = _consolidator(extractor, vectors, agent_version)
    rows = {r["agent_playbook_id"]: dict(r) for r in prior_rows}
    changes = []
    for action in actions:
        stats[action.action] += 1
        row = rows.get(action.agent_playbook_id)
        if action.action in ("keep", "keep_approved", "keep_rejected"):
            row["fingerprints"] = sorted(set(row["fingerprints"] or []) | {action.fingerprint})
            continue
        members = [by_id[i] for i in action.member_ids]
        try:
            rule, calls, prompt_tokens, completion_tokens = consolidator.consolidate(members, approved)
        except ConsolidationFailed as failed:  # nothing half-made: the cluster is retried by the next run
            stats["consolidation_failed"] += 1
            rule, calls, prompt_tokens, completion_tokens = _UNCHANGED, failed.calls, failed.prompt_tokens, failed.completion_tokens
        except NothingShared as nothing:  # every content word was one user's: no shared rule (a prior one stays)
            stats["nothing_shared"] += 1
            rule, calls, prompt_tokens, completion_tokens = _UNCHANGED, nothing.calls, nothing.prompt_tokens, nothing.completion_tokens
        stats["llm_calls"] += calls
        stats["prompt_tokens"] += prompt_tokens
        stats["completion_tokens"] += completion_tokens
        if rule is _UNCHANGED:
            continue
        if rule is None:  # an approved rule already covers this cluster
            stats["covered_by_approved"] += 1
            if row is not None:
                changes.append(_change(run_id, now, row, "removed", _snapshot(row), None))
                row["status"] = "archived"
            continue
        new_row = _row(action, rule, members, agent_version, playbook_name, run_id, now, auto_approve, consolidator, row)
        changes.append(_change(run_id, now, new_row, "updated" if row else "added", _snapshot(row) if row else None,
                               _snapshot(new_row)))  # fmt: skip
        rows[action.agent_playbook_id] = new_row
    for gone in orphaned:
        row = rows[gone.agent_playbook_id]
        changes.append(_change(run_id, now, row, "removed", _snapshot(row), None))
        row["status"] = "archived"
    return list(rows.values()), changes


def _consolidator(extractor: ExtractorResource, vectors: dict, agent_version: str) -> Consolidator:
    if not extractor.model:
        return RepresentativeConsolidator(vectors)
    # the one endpoint: every LLM setting, the shared throttle
    return LiteLLMConsolidator(endpoint=extractor.endpoint(), agent_version=agent_version)


def _rule_of(row: dict) -> Rule:
    return Rule(row["content"], row["trigger"], row["rationale"], row["blocking_issue_kind"], row["blocking_issue_details"])


def _row(action: ClusterAction, rule: Rule, members: list[Member], agent_version: str, playbook_name: str, run_id: str,
         now: int, auto_approve: bool, consolidator, previous: dict | None) -> dict:  # fmt: skip
    return {
        "agent_playbook_id": action.agent_playbook_id,
        "playbook_name": playbook_name,
        "agent_version": agent_version,
        "created_at": previous["created_at"] if previous else now,
        "updated_at": now,
        "content": rule.content,
        "trigger": rule.trigger,
        "rationale": rule.rationale,
        "blocking_issue_kind": rule.blocking_issue_kind,
        "blocking_issue_details": rule.blocking_issue_details,
        "playbook_status": previous["playbook_status"] if previous else ("approved" if auto_approve else "pending"),
        "status": "current",
        "fingerprints": sorted(set(previous["fingerprints"] or []) | {action.fingerprint}) if previous else [action.fingerprint],
        "member_ids": [m.user_playbook_id for m in members],
        "member_user_ids": sorted({m.user_id for m in members}),
        "consolidator": type(consolidator).__name__,
        "model": getattr(consolidator, "model", "builtin"),
        "prompt_version": getattr(consolidator, "prompt_version", "representative-v2"),
        "run_id": run_id,
    }


def _snapshot(row: dict) -> str:
    keys = ("agent_playbook_id", "playbook_name", "agent_version", "content", "trigger", "rationale",
            "blocking_issue_kind", "blocking_issue_details", "playbook_status", "created_at")  # fmt: skip
    return json.dumps({k: row.get(k) for k in keys}, sort_keys=True)


def _change(run_id: str, now: int, row: dict, change: str, before: str | None, after: str | None) -> dict:
    return {"run_id": run_id, "created_at": now, "agent_version": row["agent_version"],
            "playbook_name": row["playbook_name"], "run_mode": "incremental", "change": change,
            "agent_playbook_id": row["agent_playbook_id"], "before": before, "after": after,
            "member_ids": row["member_ids"]}  # fmt: skip
