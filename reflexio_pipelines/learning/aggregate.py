"""Aggregation: user playbooks that recur across users become shared agent playbooks.

Pure planning over clusters (computed by `cluster.py`) and the previous run's agent playbooks:

- a cluster's identity is its member set (`fingerprint`); a cluster whose fingerprint already maps to an agent
  playbook is unchanged and costs nothing;
- a changed or new cluster is matched to the previous agent playbook whose members overlap it most (an explicit
  mapping — never by position). If that playbook was *approved* it is kept untouched (a re-run never overwrites an
  approved rule); if it was *rejected* it stays rejected and is not regenerated (a rejection is remembered, and
  un-rejecting restores it); if it was *pending* it is re-consolidated in place (an `updated` change);
- an unmatched cluster is consolidated into a new agent playbook (`added`, pending unless auto-approve is on);
- a previous pending playbook that no cluster maps to any more is archived (`removed`); approved ones stay.

Whatever consolidates a cluster, its rule passes `shared_rule`: a shared item never carries one person's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from reflexio_pipelines.learning.cluster import ClusterParams
from reflexio_pipelines.learning.config import ExtractionConfig
from reflexio_pipelines.learning.types import stable_int_id
from reflexio_pipelines.learning.wording import Support, keep_words, without_personal_facts

#: Two clusters are "the same cluster" across runs when their member sets overlap at least this much (Jaccard).
SAME_CLUSTER_OVERLAP = 0.5


@dataclass(frozen=True)
class Member:
    """A user playbook taking part in aggregation."""

    user_playbook_id: int
    user_id: str
    content: str
    trigger: str | None = None
    rationale: str | None = None
    blocking_issue_kind: str | None = None
    blocking_issue_details: str | None = None


@dataclass(frozen=True)
class PriorPlaybook:
    """An agent playbook from an earlier run, with its effective approval status."""

    agent_playbook_id: int
    member_ids: frozenset[int]
    playbook_status: str  # pending | approved | rejected
    fingerprints: frozenset[str]
    row: dict[str, Any] = field(hash=False, compare=False, default_factory=dict)


@dataclass(frozen=True)
class Rule:
    """A consolidated rule (what an agent playbook says)."""

    content: str
    trigger: str | None = None
    rationale: str | None = None
    blocking_issue_kind: str | None = None
    blocking_issue_details: str | None = None


def embedding_text(row: dict) -> str:
    """What a user playbook is clustered on: its trigger (the situation) and its content (the lesson) together.

    The trigger alone (the original's choice) groups different lessons learned in similar situations, and misses
    one lesson taught in differently worded situations; with both, the same lesson clusters across users."""
    return f"{row['trigger']}: {row['content']}" if row["trigger"] else row["content"]


def cluster_params(
    extraction: ExtractionConfig,
    playbook_name: str,
    *,
    min_cluster_size: int | None = None,
    similarity: float | None = None,
    min_distinct_users: int | None = None,
) -> ClusterParams:
    """The clustering parameters of one playbook name's groups: the run's where given, else its extractor's."""
    configured = extraction.aggregation_settings(playbook_name)

    def pick(given, fallback):
        return fallback if given is None else given

    return ClusterParams(
        min_cluster_size=pick(min_cluster_size, configured.min_cluster_size),
        similarity=pick(similarity, configured.clustering_similarity),
        min_distinct_users=pick(min_distinct_users, configured.min_distinct_users),
    )


@dataclass
class ClusterAction:
    """What to do with one cluster of this run."""

    fingerprint: str
    member_ids: list[int]
    action: str  # keep | consolidate_new | reconsolidate | keep_approved | keep_rejected
    agent_playbook_id: int
    prior: PriorPlaybook | None = None


class Consolidator(Protocol):
    """Turns a cluster's members into one generalised rule, or None when an approved rule already covers it."""

    def consolidate(self, members: list[Member], approved: list[Rule]) -> tuple[Rule | None, int, int, int]:
        """(rule or None, llm calls, prompt tokens, completion tokens); the rule is worded by `shared_rule`, which
        raises NothingShared when the members share nothing a rule could say."""
        ...


class NothingShared(Exception):
    """Every content word of a cluster's rule was one user's: no shared rule this run (carries the cost spent)."""

    def __init__(self, calls: int = 0, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__("the members share no wording")
        self.calls, self.prompt_tokens, self.completion_tokens = calls, prompt_tokens, completion_tokens


def shared_rule(rule: Rule, members: Sequence[Member]) -> Rule:
    """`rule` as a shared item may word it: clauses stating a fact about a person are dropped, first person becomes
    third, and every content word that a member wrote but fewer than two of the contributing users did is taken
    out (all users' when the cluster has one). A word no member wrote is the consolidator's own wording and stays.

    The same test re-words shared items when a contributor is erased (`privacy/shared.py`). Raises NothingShared
    when no content is left."""
    support = Support(
        {
            user: [
                t
                for m in members
                if m.user_id == user
                for t in (m.trigger, m.content, m.rationale, m.blocking_issue_details)
            ]
            for user in {m.user_id for m in members}
        }
    )
    need = min(2, support.users)

    def keep(word: str) -> bool:
        writers = support.writers(word)
        return writers == 0 or writers >= need

    def worded(text: str | None) -> str | None:
        return keep_words(without_personal_facts(text), keep) or None if text else None

    content = worded(rule.content)
    if content is None:
        raise NothingShared()
    return Rule(
        content,
        worded(rule.trigger),
        worded(rule.rationale),
        rule.blocking_issue_kind,
        worded(rule.blocking_issue_details),
    )


def new_agent_playbook_id(agent_version: str, playbook_name: str, fingerprint: str) -> int:
    return stable_int_id("agent_playbook", agent_version, playbook_name, fingerprint)


def plan(
    clusters: dict[str, list[int]], prior: Sequence[PriorPlaybook], agent_version: str, playbook_name: str
) -> tuple[list[ClusterAction], list[PriorPlaybook]]:
    """Actions for this run's clusters, and the prior pending playbooks that no cluster maps to any more."""
    by_fingerprint = {fp: p for p in prior for fp in p.fingerprints}
    claimed: set[int] = set()
    actions = []
    for fingerprint, members in sorted(clusters.items(), key=lambda kv: min(kv[1])):
        if fingerprint in by_fingerprint:
            kept = by_fingerprint[fingerprint]
            claimed.add(kept.agent_playbook_id)
            actions.append(ClusterAction(fingerprint, members, "keep", kept.agent_playbook_id, kept))
            continue
        match = _best_overlap(set(members), [p for p in prior if p.agent_playbook_id not in claimed])
        if match is None:
            new_id = new_agent_playbook_id(agent_version, playbook_name, fingerprint)
            actions.append(ClusterAction(fingerprint, members, "consolidate_new", new_id))
            continue
        claimed.add(match.agent_playbook_id)
        action = {"approved": "keep_approved", "rejected": "keep_rejected"}.get(match.playbook_status, "reconsolidate")
        actions.append(ClusterAction(fingerprint, members, action, match.agent_playbook_id, match))
    orphaned = [p for p in prior if p.agent_playbook_id not in claimed and p.playbook_status == "pending"]
    return actions, orphaned


def _best_overlap(members: set[int], prior: Sequence[PriorPlaybook]) -> PriorPlaybook | None:
    best, best_score = None, 0.0
    for candidate in prior:
        union = members | candidate.member_ids
        score = len(members & candidate.member_ids) / len(union) if union else 0.0
        if score > best_score or (
            score == best_score and best is not None and candidate.agent_playbook_id < best.agent_playbook_id
        ):
            best, best_score = candidate, score
    return best if best_score >= SAME_CLUSTER_OVERLAP else None


class RepresentativeConsolidator:
    """The offline consolidator (a heuristic, not a model): the member closest to the cluster's centroid, worded by
    `shared_rule` (what only that member's user wrote and facts about them left out). Never returns None: the
    offline path has no judgement about whether an approved rule already covers a cluster."""

    def __init__(self, vectors: dict[int, np.ndarray]) -> None:
        self._vectors = vectors

    def consolidate(self, members: list[Member], approved: list[Rule]) -> tuple[Rule | None, int, int, int]:
        chosen = representative(members, self._vectors)
        kinds = {m.blocking_issue_kind for m in members}
        shared_issue = next(iter(kinds)) if len(kinds) == 1 else None
        rule = shared_rule(
            Rule(
                chosen.content,
                chosen.trigger,
                chosen.rationale,
                shared_issue,
                chosen.blocking_issue_details if shared_issue else None,
            ),
            members,
        )
        # The counts are added after the wording: they are this consolidator's words, not a member's.
        rationale = f"Consolidated from {len(members)} user playbooks of {len({m.user_id for m in members})} users"
        rationale += (f"; e.g. {rule.rationale.rstrip('.')}" if rule.rationale else "") + "."
        return replace(rule, rationale=rationale), 0, 0, 0


def representative(members: list[Member], vectors: dict[int, np.ndarray]) -> Member:
    """The member with the highest mean cosine similarity to the others (ties: lowest id)."""
    ordered = sorted(members, key=lambda m: m.user_playbook_id)
    matrix = np.stack([vectors[m.user_playbook_id] for m in ordered])
    scores = (matrix @ matrix.T).mean(axis=1)
    return ordered[int(np.argmax(scores))]
