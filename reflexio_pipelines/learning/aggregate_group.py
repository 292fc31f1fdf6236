"""One group's aggregation run: the current user playbooks of one (agent version, playbook name) are clustered, the
clusters planned against the group's earlier agent playbooks (`aggregate.plan`), the changed ones consolidated, and
the outcome written as the group's agent playbook rows and change log entries.

Pure apart from the consolidator (which may call an LLM). A sibling of `aggregate.py` rather than part of it:
consolidation failures are `llm_aggregate.ConsolidationFailed`, and `llm_aggregate` imports `aggregate`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

import numpy as np

from reflexio_pipelines.learning.aggregate import (
    ClusterAction,
    Consolidator,
    Member,
    NothingShared,
    PriorPlaybook,
    Rule,
    plan,
)
from reflexio_pipelines.learning.cluster import ClusterParams, cluster_playbooks, clusters_from_labels, fingerprint
from reflexio_pipelines.learning.llm_aggregate import ConsolidationFailed
from reflexio_pipelines.learning.rule_flags import flag_reason


class _Unchanged(Enum):
    """A cluster that could not be consolidated this run keeps its previous state (a one-member enum rather than a
    bare object(), so the type checker narrows it away after `is _UNCHANGED`)."""

    UNCHANGED = "unchanged"


_UNCHANGED: Final = _Unchanged.UNCHANGED

#: Makes the group's consolidator from its members' vectors (user playbook id -> embedding).
ConsolidatorFactory = Callable[[dict[int, np.ndarray]], Consolidator]


@dataclass(frozen=True)
class Group:
    """One (agent version, playbook name) group of an aggregation run, with what the run decides it against."""

    agent_version: str
    playbook_name: str
    members: Sequence[tuple[Member, np.ndarray]]  # the group's current user playbooks and their embeddings
    prior_rows: Sequence[dict[str, Any]]  # the group's agent playbook rows from earlier runs, every status
    status_of: Mapping[str, str]  # agent playbook id -> the approval status the control log decided
    params: ClusterParams
    run_id: str
    now: int
    auto_approve: bool = False  # a new rule starts approved, unless it is flagged (learning/rule_flags.py)


@dataclass
class AggregationStats:
    """What an aggregation run did, summed over its groups."""

    groups: int = 0
    clusters: int = 0
    noise: int = 0
    actions: Counter[str] = field(default_factory=Counter)  # ClusterAction.action -> how many clusters
    consolidation_failed: int = 0
    nothing_shared: int = 0
    covered_by_approved: int = 0
    flagged: int = 0  # rules written with a flag_reason this run (new or re-consolidated)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def metadata(self) -> dict[str, int]:
        """The counts as materialisation metadata. A count appears once the run counted something in it: no
        cluster counts without a group, no action or outcome that never happened, no cost without a consolidation."""
        out: dict[str, int] = {"clusters": self.clusters, "noise": self.noise} if self.groups else {}
        out.update(self.actions)
        outcomes = {
            "consolidation_failed": self.consolidation_failed,
            "nothing_shared": self.nothing_shared,
            "covered_by_approved": self.covered_by_approved,
            "flagged": self.flagged,
        }
        out.update({name: n for name, n in outcomes.items() if n})
        if self.actions["consolidate_new"] + self.actions["reconsolidate"]:
            out.update(
                llm_calls=self.llm_calls, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens
            )
        return out


def _spent(stopped: ConsolidationFailed | NothingShared) -> tuple[int, int, int]:
    """(llm calls, prompt tokens, completion tokens) a consolidation that made no rule still paid for."""
    return stopped.calls, stopped.prompt_tokens, stopped.completion_tokens


def aggregate_group(
    group: Group, consolidator_for: ConsolidatorFactory, stats: AggregationStats
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The group's agent playbook rows after this run (every prior row, changed ones replaced, new ones added) and
    its change log entries; `stats` gains this group's counts."""
    members = sorted(group.members, key=lambda mv: mv[0].user_playbook_id)
    by_id = {m.user_playbook_id: m for m, _ in members}
    vectors = {m.user_playbook_id: v for m, v in members}
    matrix = np.stack([v for _, v in members]) if members else np.zeros((0, 1), np.float32)
    labels = cluster_playbooks(matrix, [m.user_id for m, _ in members], group.params)
    ids = [m.user_playbook_id for m, _ in members]
    clusters = {fingerprint(ms): sorted(ms) for ms in clusters_from_labels(labels, ids).values()}
    stats.groups += 1
    stats.clusters += len(clusters)
    stats.noise += int((labels == -1).sum())
    current = [r for r in group.prior_rows if r["status"] == "current"]
    prior = [
        PriorPlaybook(
            r["agent_playbook_id"],
            frozenset(r["member_ids"] or []),
            group.status_of.get(str(r["agent_playbook_id"]), r["playbook_status"]),
            frozenset(r["fingerprints"] or []),
            r,
        )
        for r in current
    ]
    actions, orphaned = plan(clusters, prior, group.agent_version, group.playbook_name)
    approved = [rule_of(p.row) for p in prior if p.playbook_status == "approved"]
    consolidator = consolidator_for(vectors)
    rows = {r["agent_playbook_id"]: dict(r) for r in group.prior_rows}
    changes = []
    for action in actions:
        stats.actions[action.action] += 1
        row = rows.get(action.agent_playbook_id)
        if action.action in ("keep", "keep_approved", "keep_rejected"):
            kept = rows[action.agent_playbook_id]  # `plan` keeps only clusters that have a prior row
            kept["fingerprints"] = sorted(set(kept["fingerprints"] or []) | {action.fingerprint})
            continue
        cluster = [by_id[i] for i in action.member_ids]
        rule: Rule | None | _Unchanged
        try:
            rule, calls, prompt_tokens, completion_tokens = consolidator.consolidate(cluster, approved)
        except ConsolidationFailed as failed:  # nothing half-made: the cluster is retried by the next run
            stats.consolidation_failed += 1
            rule, (calls, prompt_tokens, completion_tokens) = _UNCHANGED, _spent(failed)
        except NothingShared as nothing:  # every content word was one user's: no shared rule (a prior one stays)
            stats.nothing_shared += 1
            rule, (calls, prompt_tokens, completion_tokens) = _UNCHANGED, _spent(nothing)
        stats.llm_calls += calls
        stats.prompt_tokens += prompt_tokens
        stats.completion_tokens += completion_tokens
        if rule is _UNCHANGED:
            continue
        if rule is None:  # an approved rule already covers this cluster
            stats.covered_by_approved += 1
            if row is not None:
                changes.append(change_entry(group, row, "removed", snapshot(row), None))
                row["status"] = "archived"
            continue
        new_row = agent_playbook_row(group, action, rule, cluster, consolidator, row)
        stats.flagged += new_row["flag_reason"] is not None
        changes.append(
            change_entry(
                group, new_row, "updated" if row else "added", snapshot(row) if row else None, snapshot(new_row)
            )
        )
        rows[action.agent_playbook_id] = new_row
    for gone in orphaned:
        row = rows[gone.agent_playbook_id]
        changes.append(change_entry(group, row, "removed", snapshot(row), None))
        row["status"] = "archived"
    return list(rows.values()), changes


def rule_of(row: dict[str, Any]) -> Rule:
    """The rule an agent playbook row states."""
    return Rule(
        row["content"], row["trigger"], row["rationale"], row["blocking_issue_kind"], row["blocking_issue_details"]
    )


def agent_playbook_row(
    group: Group,
    action: ClusterAction,
    rule: Rule,
    members: list[Member],
    consolidator: Consolidator,
    previous: dict[str, Any] | None,
) -> dict[str, Any]:
    """The agent playbook row a consolidated cluster becomes (replacing `previous`, the row it re-consolidates).

    The rule and every member are checked for text reaching outside the agent's task (`rule_flags`): a flagged rule
    starts pending even with auto-approve, and the reason shows in the approval queue."""
    flag = flag_reason(
        (rule.content, rule.trigger, rule.rationale, rule.blocking_issue_details),
        [(m.trigger, m.content, m.rationale, m.blocking_issue_details) for m in members],
    )
    return {
        "agent_playbook_id": action.agent_playbook_id,
        "playbook_name": group.playbook_name,
        "agent_version": group.agent_version,
        "created_at": previous["created_at"] if previous else group.now,
        "updated_at": group.now,
        "content": rule.content,
        "trigger": rule.trigger,
        "rationale": rule.rationale,
        "blocking_issue_kind": rule.blocking_issue_kind,
        "blocking_issue_details": rule.blocking_issue_details,
        "playbook_status": previous["playbook_status"]
        if previous
        else ("approved" if group.auto_approve and flag is None else "pending"),
        "status": "current",
        "fingerprints": sorted(set(previous["fingerprints"] or []) | {action.fingerprint})
        if previous
        else [action.fingerprint],
        "member_ids": [m.user_playbook_id for m in members],
        "member_user_ids": sorted({m.user_id for m in members}),
        "consolidator": type(consolidator).__name__,
        "model": getattr(consolidator, "model", "builtin"),
        "prompt_version": getattr(consolidator, "prompt_version", "representative-v2"),
        "run_id": group.run_id,
        "flag_reason": flag,
    }


def snapshot(row: dict[str, Any]) -> str:
    """An agent playbook as the change log records it before and after a change."""
    keys = (
        "agent_playbook_id",
        "playbook_name",
        "agent_version",
        "content",
        "trigger",
        "rationale",
        "blocking_issue_kind",
        "blocking_issue_details",
        "playbook_status",
        "created_at",
    )
    return json.dumps({k: row.get(k) for k in keys}, sort_keys=True)


def change_entry(
    group: Group, row: dict[str, Any], change: str, before: str | None, after: str | None
) -> dict[str, Any]:
    """An `aggregation_change_log` row: `change` (added / updated / removed) made to `row` by this run."""
    return {
        "run_id": group.run_id,
        "created_at": group.now,
        "agent_version": row["agent_version"],
        "playbook_name": row["playbook_name"],
        "run_mode": "incremental",
        "change": change,
        "agent_playbook_id": row["agent_playbook_id"],
        "before": before,
        "after": after,
        "member_ids": row["member_ids"],
    }
