"""From one window's turns to rows of learned items, with deterministic ids and full provenance.

Ids are derived from (user, normalised content), so re-running a window yields the same ids, and the same fact or
rule observed twice collapses to one item. Every row records where it came from: source turns, extraction window,
window (partition), run id, extractor, prompt version and model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reflexio_pipelines.learning.extract import Extractor
from reflexio_pipelines.learning.types import (
    NEVER_EXPIRES_TIMESTAMP,
    TTL_SECONDS,
    ExtractionResult,
    Turn,
    Window,
    stable_int_id,
    stable_uuid,
)
from reflexio_pipelines.learning.windows import group_by_user, plan_windows

DEFAULT_PROFILE_EXTRACTOR = "default_profile_extractor"
DEFAULT_PLAYBOOK_NAME = "default_playbook_extractor"


@dataclass
class LearnStats:
    """Counts for Dagster metadata and cost accounting."""

    users: int = 0
    windows: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extractors: set[str] = field(default_factory=set)


@dataclass
class LearnOutput:
    profiles: list[dict[str, Any]]
    playbooks: list[dict[str, Any]]
    stats: LearnStats


def content_key(text: str) -> str:
    """Normalised text used for identity: case, punctuation and spacing differences don't make a new item."""
    return " ".join(re.findall(r"[a-z0-9]+", text.casefold()))


def learn(
    turns: Iterable[Turn],
    extractor: Extractor,
    *,
    window_size: int,
    window_stride: int,
    window: str,
    run_id: str,
    agent_context: str = "",
) -> LearnOutput:
    """Plan windows per user, extract each once, and return profile and playbook rows (deduplicated by id)."""
    stats = LearnStats()
    profiles: dict[str, dict[str, Any]] = {}
    playbooks: dict[int, dict[str, Any]] = {}
    for user_id, user_turns in sorted(group_by_user(list(turns)).items()):
        stats.users += 1
        for win in plan_windows(user_turns, window_size, window_stride):
            result = extractor.extract(win, agent_context)
            _count(stats, result)
            by_id = {t.turn_id: t for t in win.turns}
            for row in _profile_rows(win, result, by_id, window, run_id):
                _merge(profiles, row["profile_id"], row)
            for row in _playbook_rows(win, result, by_id, window, run_id):
                _merge(playbooks, row["user_playbook_id"], row)
    return LearnOutput(list(profiles.values()), list(playbooks.values()), stats)


def _count(stats: LearnStats, result: ExtractionResult) -> None:
    stats.windows += 1
    stats.llm_calls += result.llm_calls
    stats.prompt_tokens += result.prompt_tokens
    stats.completion_tokens += result.completion_tokens
    stats.extractors.add(result.extractor)


def _merge(items: dict, key: Any, row: dict[str, Any]) -> None:
    """Overlapping windows see the same evidence twice: keep one row, with the union of its source turns."""
    existing = items.get(key)
    if existing is None:
        items[key] = row
        return
    for column in ("source_turn_ids", "source_interaction_ids"):
        existing[column] = sorted(set(existing[column]) | set(row[column]))


def _evidence(win: Window, ids: list[str], by_id: dict[str, Turn]) -> list[Turn]:
    chosen = [by_id[i] for i in ids if i in by_id]
    return chosen or list(win.turns)


def _provenance(win: Window, evidence: list[Turn], result: ExtractionResult, window: str, run_id: str) -> dict:
    return {
        "source_turn_ids": sorted(t.turn_id for t in evidence),
        "source_interaction_ids": sorted(t.interaction_id for t in evidence),
        "extraction_window_id": win.window_id,
        "extractor": result.extractor,
        "prompt_version": result.prompt_version,
        "model": result.model,
        "run_id": run_id,
        "window": window,
    }


def _profile_rows(win: Window, result: ExtractionResult, by_id: dict, window: str, run_id: str) -> list[dict]:
    rows = []
    for item in result.profiles:
        evidence = _evidence(win, item.source_turn_ids, by_id)
        last = max(evidence, key=lambda t: (t.created_at, t.turn_id))
        ttl = item.time_to_live if item.time_to_live in TTL_SECONDS else "infinity"
        seconds = TTL_SECONDS[ttl]
        rows.append(
            {
                "profile_id": stable_uuid(win.user_id, "profile", content_key(item.content)),
                "user_id": win.user_id,
                "content": item.content,
                "profile_time_to_live": ttl,
                "expiration_timestamp": NEVER_EXPIRES_TIMESTAMP if seconds is None else last.created_at + seconds,
                "last_modified_timestamp": last.created_at,
                "generated_from_request_id": last.request_id,
                "source": last.source,
                "status": "current",
                "superseded_by": None,
                "extractor_names": [DEFAULT_PROFILE_EXTRACTOR],
                "custom_features": json.dumps(item.custom_features, sort_keys=True),
                **_provenance(win, evidence, result, window, run_id),
            }
        )
    return rows


def _playbook_rows(win: Window, result: ExtractionResult, by_id: dict, window: str, run_id: str) -> list[dict]:
    rows = []
    for item in result.playbooks:
        evidence = _evidence(win, item.source_turn_ids, by_id)
        last = max(evidence, key=lambda t: (t.created_at, t.turn_id))
        identity = content_key(f"{item.trigger or ''} {item.content}")
        rows.append(
            {
                "user_playbook_id": stable_int_id(win.user_id, "playbook", identity),
                "user_id": win.user_id,
                "agent_version": last.agent_version,
                "request_id": last.request_id,
                "playbook_name": DEFAULT_PLAYBOOK_NAME,
                "created_at": last.created_at,
                "content": item.content,
                "trigger": item.trigger,
                "rationale": item.rationale,
                "kind": item.kind,
                "blocking_issue_kind": item.blocking_issue_kind,
                "blocking_issue_details": item.blocking_issue_details,
                "status": "current",
                "source": last.source,
                **_provenance(win, evidence, result, window, run_id),
            }
        )
    return rows
