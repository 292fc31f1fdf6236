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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from reflexio_pipelines.learning.types import stable_int_id

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
        """(rule or None, llm calls, prompt tokens, completion tokens)."""
        ...


def new_agent_playbook_id(agent_version: str, playbook_name: str, fingerprint: str) -> int:
    return stable_int_id("agent_playbook", agent_version, playbook_name, fingerprint)


def plan(clusters: dict[str, list[int]], prior: Sequence[PriorPlaybook], agent_version: str,
         playbook_name: str) -> tuple[list[ClusterAction], list[PriorPlaybook]]:  # fmt: skip
    """Actions for this run's clusters, and the prior pending playbooks that no cluster maps to any more."""
    by_fingerprint = {fp: p for p in prior for fp in p.fingerprints}
    claimed: set[int] = set()
    actions = []
    for fingerprint, members in sorted(clusters.items(), key=lambda kv: min(kv[1])):
        if fingerprint in by_fingerprint:
            match = by_fingerprint[fingerprint]
            claimed.add(match.agent_playbook_id)
            actions.append(ClusterAction(fingerprint, members, "keep", match.agent_playbook_id, match))
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
        if score > best_score or (score == best_score and best is not None
                                  and candidate.agent_playbook_id < best.agent_playbook_id):  # fmt: skip
            best, best_score = candidate, score
    return best if best_score >= SAME_CLUSTER_OVERLAP else None


class RepresentativeConsolidator:
    """The offline consolidator (a heuristic, not a model): the member closest to the cluster's centroid, its
    wording generalised mechanically (first-person and user-specific phrasing removed). Never returns None: the
    offline path has no judgement about whether an approved rule already covers a cluster."""

    def __init__(self, vectors: dict[int, np.ndarray]) -> None:
        self._vectors = vectors

    def consolidate(self, members: list[Member], approved: list[Rule]) -> tuple[Rule | None, int, int, int]:
        chosen = representative(members, self._vectors)
        users = len({m.user_id for m in members})
        rationale = f"Consolidated from {len(members)} user playbooks of {users} users"
        kinds = {m.blocking_issue_kind for m in members}
        shared_issue = next(iter(kinds)) if len(kinds) == 1 else None
        return (
            Rule(
                content=generalise(chosen.content),
                trigger=generalise(chosen.trigger) if chosen.trigger else None,
                rationale=rationale + (f"; e.g. {chosen.rationale}" if chosen.rationale else "") + ".",
                blocking_issue_kind=shared_issue,
                blocking_issue_details=chosen.blocking_issue_details if shared_issue else None,
            ),
            0,
            0,
            0,
        )


def representative(members: list[Member], vectors: dict[int, np.ndarray]) -> Member:
    """The member with the highest mean cosine similarity to the others (ties: lowest id)."""
    ordered = sorted(members, key=lambda m: m.user_playbook_id)
    matrix = np.stack([vectors[m.user_playbook_id] for m in ordered])
    scores = (matrix @ matrix.T).mean(axis=1)
    return ordered[int(np.argmax(scores))]


_USER_SPECIFIC = [
    (re.compile(r"\b(?:the user|this user|the customer)'s\b", re.I), "the user's"),
    (re.compile(r"\b(?:my|our)\b", re.I), "the"),
    (re.compile(r"\bwe\b", re.I), "the team"),
    (re.compile(r"\bI\b"), "the user"),
]


def generalise(text: str) -> str:
    """Mechanical generalisation: first-person words replaced so the rule reads as agent-wide guidance."""
    for pattern, replacement in _USER_SPECIFIC:
        text = pattern.sub(replacement, text)
    return text
