"""The aggregation against the lake: `playbook_embeddings` kept current, every current user playbook of a run's
scope grouped with its embedding per (agent version, playbook name), each group's run (learning/aggregate_group.py)
and the commit of `agent_playbooks` + `aggregation_change_log`. assets/aggregation.py wires these to its config
and resources.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

import numpy as np
import pyarrow as pa

from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.aggregate import Consolidator, Member, cluster_params, embedding_text
from reflexio_pipelines.learning.aggregate_group import AggregationStats, Group, aggregate_group
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.embedding import Embedder

#: Serialises the aggregation tables' writers (privacy/erasure.WRITER_LOCKS).
LOCK = "aggregation"


class ConsolidatorOf(Protocol):
    """Makes a group's consolidator from its members' vectors (user playbook id -> embedding) and its agent
    version (passed as the keyword `agent_version`)."""

    def __call__(self, vectors: dict[int, np.ndarray], /, *, agent_version: str) -> Consolidator: ...


@dataclass(frozen=True)
class Scope:
    """What an aggregation run covers: one agent version and / or playbook name (None: every one)."""

    agent_version: str | None = None
    playbook_name: str | None = None

    def contains(self, row: dict) -> bool:
        """Whether a user or agent playbook row is in the scope."""
        return all(
            getattr(self, c) is None or row.get(c) == getattr(self, c) for c in ("agent_version", "playbook_name")
        )

    def predicate(self) -> str | None:
        """The scope as a SQL predicate over `agent_playbooks` (None: the whole table)."""
        parts = [
            f"{c} = '{str(getattr(self, c)).replace(chr(39), chr(39) * 2)}'"
            for c in ("agent_version", "playbook_name")
            if getattr(self, c) is not None
        ]
        return " AND ".join(parts) or None


@dataclass(frozen=True)
class EmbeddingsWritten:
    """What `refresh_playbook_embeddings` wrote: rows, how many were embedded now (the rest reused), the version."""

    rows: int
    embedded_now: int
    version: int


def refresh_playbook_embeddings(store: Lake, model: Embedder) -> EmbeddingsWritten:
    """Rewrite `playbook_embeddings` for every current user playbook (trigger + content), embedding only the texts
    the table lacks for this model."""
    rows = live_rows(store, "user_playbook")
    previous = {
        (r["user_playbook_id"], r["text"], r["model_id"]): r["embedding"]
        for r in store.read_table("playbook_embeddings").to_pylist()
    }
    texts = [embedding_text(r) for r in rows]
    missing = [
        i for i, (r, t) in enumerate(zip(rows, texts)) if (r["user_playbook_id"], t, model.model_id) not in previous
    ]
    fresh = model.embed([texts[i] for i in missing]) if missing else np.zeros((0, 0), np.float32)
    computed = {i: fresh[k].tolist() for k, i in enumerate(missing)}
    out = [
        {
            "user_playbook_id": r["user_playbook_id"],
            "user_id": r["user_id"],
            "agent_version": r["agent_version"],
            "playbook_name": r["playbook_name"],
            "text": t,
            "model_id": model.model_id,
            "embedding": computed[i] if i in computed else previous[(r["user_playbook_id"], t, model.model_id)],
        }
        for i, (r, t) in enumerate(zip(rows, texts))
    ]
    with store.lock(LOCK):
        version = store.replace_where(
            "playbook_embeddings", None, pa.Table.from_pylist(out, schema=TABLES["playbook_embeddings"])
        )
    return EmbeddingsWritten(len(out), len(missing), version)


@dataclass
class Aggregated:
    """One aggregation run over a scope: the scope's agent playbook rows, the change log entries, what was done,
    and the clustering parameters (and auto-approval) each playbook name's groups ran with."""

    rows: list[dict] = field(default_factory=list)
    changes: list[dict] = field(default_factory=list)
    stats: AggregationStats = field(default_factory=AggregationStats)
    params_used: dict[str, dict] = field(default_factory=dict)


def aggregate_playbooks(
    store: Lake,
    extraction: ExtractionConfig,
    scope: Scope,
    consolidator_of: ConsolidatorOf,
    *,
    run_id: str,
    now: int,
    auto_approve: bool | None = None,
    min_cluster_size: int | None = None,
    similarity: float | None = None,
    min_distinct_users: int | None = None,
) -> Aggregated:
    """Run every group of the scope: the groups with current user playbooks now, and the groups that had agent
    playbooks before (their members may all be gone). Clustering parameters and `auto_approve` left None come from
    the extraction config (`cluster_params`, `aggregation_settings`). Nothing is written (`commit_aggregation`)."""
    members = members_by_group(store, scope)
    status_of = decisions(store)
    in_scope = [r for r in store.read_table("agent_playbooks").to_pylist() if scope.contains(r)]
    groups = set(members) | {(r["agent_version"], r["playbook_name"]) for r in in_scope}
    run = Aggregated()
    for agent_version, playbook_name in sorted(groups):
        prior = [r for r in in_scope if (r["agent_version"], r["playbook_name"]) == (agent_version, playbook_name)]
        params = cluster_params(
            extraction,
            playbook_name,
            min_cluster_size=min_cluster_size,
            similarity=similarity,
            min_distinct_users=min_distinct_users,
        )
        approve = extraction.aggregation_settings(playbook_name).auto_approve if auto_approve is None else auto_approve
        run.params_used[playbook_name] = {
            "min_cluster_size": params.min_cluster_size,
            "similarity": params.similarity,
            "min_distinct_users": params.min_distinct_users,
            "auto_approve": approve,
        }
        group = Group(
            agent_version,
            playbook_name,
            members.get((agent_version, playbook_name), []),
            prior,
            status_of,
            params,
            run_id,
            now,
            approve,
        )
        rows, group_changes = aggregate_group(group, partial(consolidator_of, agent_version=agent_version), run.stats)
        run.rows.extend(rows)
        run.changes.extend(group_changes)
    return run


def commit_aggregation(store: Lake, scope: Scope, run: Aggregated) -> int:
    """Replace the scope's agent playbooks with the run's and append its change log entries; returns the
    `agent_playbooks` version."""
    with store.lock(LOCK):
        version = store.replace_where(
            "agent_playbooks", scope.predicate(), pa.Table.from_pylist(run.rows, schema=TABLES["agent_playbooks"])
        )
        if run.changes:
            store.append(
                "aggregation_change_log", pa.Table.from_pylist(run.changes, schema=TABLES["aggregation_change_log"])
            )
    return version


def members_by_group(store: Lake, scope: Scope) -> dict[tuple[str, str], list[tuple[Member, np.ndarray]]]:
    """The scope's current user playbooks that have an embedding, with it, per (agent version, playbook name)."""
    playbooks = {r["user_playbook_id"]: r for r in live_rows(store, "user_playbook")}
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for e in store.read_table("playbook_embeddings").to_pylist():
        row = playbooks.get(e["user_playbook_id"])
        if row is None or not scope.contains(row):
            continue
        member = Member(
            row["user_playbook_id"],
            row["user_id"],
            row["content"],
            row["trigger"],
            row["rationale"],
            row["blocking_issue_kind"],
            row["blocking_issue_details"],
        )
        groups[(row["agent_version"] or "", row["playbook_name"] or "")].append(
            (member, np.asarray(e["embedding"], np.float32))
        )
    return groups
