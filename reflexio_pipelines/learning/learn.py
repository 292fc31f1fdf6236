"""From one partition's turns to rows of learned items, deduplicated against what each user already has.

For every user and extractor group (extractors sharing window size, stride and source filter, see
learning/config.py): keep the group's sources' turns, plan windows over the user's stream (processed history, then
the new turns), extract each window once for the whole group, merge what overlapping windows found twice; then
deduplicate the user's new items (from every group) against the user's current items (a judge groups duplicates
and contradictions; the newer statement supersedes the older, nothing is deleted).

Ids are derived from (user, normalised content), so re-running a partition yields the same ids, and the same fact
or rule observed again collapses into the existing item. Every row records where it came from: source turns,
extraction window, partition window, run id, extractor, prompt version and model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from reflexio_pipelines.learning.config import (
    DEFAULT_CONFIG,
    ExtractionConfig,
    ExtractorGroup,
)
from reflexio_pipelines.learning.dedup import Candidate, DedupJudge, Resolution, deduplicate, profile_slot
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.learning.extract import Extractor
from reflexio_pipelines.learning.llm_extract import GatedExtractionResult
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

#: Builds the dedup judge for one entity ("profile" or "user_playbook"), given the vectors already computed.
JudgeFactory = Callable[[str, dict[str, np.ndarray]], DedupJudge]


@dataclass
class LearnStats:
    """Counts for Dagster metadata and cost accounting."""

    users: int = 0
    windows: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    dedup_calls: int = 0
    superseded: int = 0
    duplicates_dropped: int = 0
    gate_calls: int = 0  # included in llm_calls
    gate_skipped: int = 0  # windows the gate rejected: processed (bookmark advanced), no extraction call
    extractors: set[str] = field(default_factory=set)


@dataclass
class LearnOutput:
    profiles: list[dict[str, Any]]
    playbooks: list[dict[str, Any]]
    change_log: list[dict[str, Any]]
    bookmarks: list[dict[str, Any]]
    stats: LearnStats


@dataclass
class UserState:
    """What the pipeline knows about one user before this partition."""

    history: list[Turn] = field(default_factory=list)
    profiles: list[dict[str, Any]] = field(default_factory=list)  # current profile rows
    playbooks: list[dict[str, Any]] = field(default_factory=list)  # current user playbook rows


def content_key(text: str) -> str:
    """Normalised text used for identity: case, punctuation and spacing differences don't make a new item."""
    return " ".join(re.findall(r"[a-z0-9]+", text.casefold()))


def profile_id(user_id: str, content: str) -> str:
    return stable_uuid(user_id, "profile", content_key(content))


def playbook_id(user_id: str, trigger: str | None, content: str) -> int:
    return stable_int_id(user_id, "playbook", content_key(f"{trigger or ''} {content}"))


def learn(
    turns: list[Turn],
    states: dict[str, UserState],
    extractor: Extractor,
    embedder: Embedder,
    judge_factory: JudgeFactory,
    *,
    window: str,
    run_id: str,
    config: ExtractionConfig = DEFAULT_CONFIG,
    status: str = "current",
) -> LearnOutput:
    """Learn from one partition's `turns`; `states` holds each user's history and current items; `config` says
    which extractors run (one extraction call per window and extractor group) and how windows are cut.

    `status="pending"` is a rerun: rows are written as pending (not served) until an upgrade promotes them.
    """
    stats = LearnStats()
    out = LearnOutput([], [], [], [], stats)
    groups = config.groups()
    for user_id, user_turns in group_by_user(turns).items():
        state = states.get(user_id, UserState())
        stats.users += 1
        profiles: dict[str, dict[str, Any]] = {}
        playbooks: dict[int, dict[str, Any]] = {}
        planned: list[tuple[ExtractorGroup, list[Turn], list[Window]]] = []
        for group in groups:
            new_turns = [t for t in user_turns if group.accepts(t)]
            if not new_turns:
                continue  # nothing new for this group's sources: its bookmark stays where it was
            history = [t for t in state.history if group.accepts(t)]
            windows = plan_windows(history, new_turns, group.batch_size, group.batch_interval)
            planned.append((group, new_turns, windows))
            fresh = {t.turn_id for t in new_turns}
            for win in windows:
                result = extractor.extract(win, group)
                _count(stats, result)
                by_id = {t.turn_id: t for t in win.turns}
                # Context turns were learned from when they were new: an item resting only on them is a repeat.
                for row in _profile_rows(win, result, group, by_id, window, run_id):
                    if fresh & set(row["source_turn_ids"]):
                        _merge(profiles, row["profile_id"], row)
                for row in _playbook_rows(win, result, group, by_id, window, run_id):
                    if fresh & set(row["source_turn_ids"]):
                        _merge(playbooks, row["user_playbook_id"], row)
        kept_profiles = _dedup(
            "profile", list(profiles.values()), state.profiles, embedder, judge_factory, stats,
            id_column="profile_id", text_of=lambda r: r["content"], slot_of=lambda r: profile_slot(r["content"]),
            key_of=lambda r: r["content"],
            rewrite=lambda r, text: dict(r, content=text, profile_id=profile_id(r["user_id"], text)),
        )  # fmt: skip
        kept_playbooks = _dedup(
            "user_playbook", list(playbooks.values()), state.playbooks, embedder, judge_factory, stats,
            id_column="user_playbook_id", text_of=_playbook_text, slot_of=lambda r: content_key(r["trigger"] or "") or None,
            key_of=lambda r: r["content"],
            rewrite=lambda r, text: dict(r, content=text, user_playbook_id=playbook_id(r["user_id"], r["trigger"], text)),
        )  # fmt: skip
        kept_profiles = [dict(r, status=status) for r in kept_profiles]
        kept_playbooks = [dict(r, status=status) for r in kept_playbooks]
        out.profiles.extend(kept_profiles)
        out.playbooks.extend(kept_playbooks)
        out.change_log.extend(_changes("profile", kept_profiles, "profile_id", window, run_id))
        out.change_log.extend(_changes("user_playbook", kept_playbooks, "user_playbook_id", window, run_id))
        for group, new_turns, windows in planned:
            items = _items_of(group, kept_profiles, kept_playbooks)
            out.bookmarks.append(_bookmark(user_id, group.name, new_turns, windows, items, window, run_id))
    return out


def _items_of(group: ExtractorGroup, profiles: list[dict[str, Any]], playbooks: list[dict[str, Any]]) -> int:
    """Kept items produced by one of the group's extractors (all kept items when there is one group)."""
    names = {d.name for d in group.profile_extractors + group.playbook_extractors}
    profile_items = sum(1 for r in profiles if names & set(r["extractor_names"]))
    playbook_items = sum(1 for r in playbooks if r["playbook_name"] in names)
    return profile_items + playbook_items


def _playbook_text(row: dict[str, Any]) -> str:
    return f"{row['trigger']}: {row['content']}" if row["trigger"] else row["content"]


def _count(stats: LearnStats, result: ExtractionResult) -> None:
    stats.windows += 1
    stats.llm_calls += result.llm_calls
    stats.prompt_tokens += result.prompt_tokens
    stats.completion_tokens += result.completion_tokens
    stats.extractors.add(result.extractor)
    if isinstance(result, GatedExtractionResult):
        stats.gate_calls += result.gate_calls
        stats.gate_skipped += result.gate_skipped


def _merge(items: dict, key: Any, row: dict[str, Any]) -> None:
    """Overlapping windows see the same evidence twice: keep one row, with the union of its source turns. The same
    profile from two extractors is one row naming both; the same playbook keeps the first extractor's name."""
    existing = items.get(key)
    if existing is None:
        items[key] = row
        return
    for column in ("source_turn_ids", "source_interaction_ids"):
        existing[column] = sorted(set(existing[column]) | set(row[column]))
    if "extractor_names" in existing:  # the same fact from two profile extractors: one row naming both
        existing["extractor_names"] += [n for n in row["extractor_names"] if n not in existing["extractor_names"]]


def _dedup(
    entity: str,
    new_rows: list[dict[str, Any]],
    existing_rows: list[dict[str, Any]],
    embedder: Embedder,
    judge_factory: JudgeFactory,
    stats: LearnStats,
    *,
    id_column: str,
    text_of: Callable[[dict[str, Any]], str],
    slot_of: Callable[[dict[str, Any]], str | None],
    key_of: Callable[[dict[str, Any]], str],
    rewrite: Callable[[dict[str, Any], str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Resolve new rows against the user's current rows; returns the rows to write (with `supersedes` set)."""
    if not new_rows:
        return []
    new_rows = sorted(new_rows, key=lambda r: (_time(r), str(r[id_column])))
    texts = [text_of(r) for r in new_rows] + [text_of(r) for r in existing_rows]
    vectors = embedder.embed(texts)
    new_vectors, existing_vectors = vectors[: len(new_rows)], vectors[len(new_rows):]
    new = [Candidate(f"new:{i}", text_of(r), _time(r), slot_of(r), key_of(r)) for i, r in enumerate(new_rows)]
    existing = [Candidate(str(r[id_column]), text_of(r), _time(r), slot_of(r), key_of(r)) for r in existing_rows]
    by_candidate = {c.item_id: v for c, v in zip(new + existing, vectors)}
    resolution: Resolution = deduplicate(new, existing, new_vectors, existing_vectors,
                                         judge_factory(entity, by_candidate))  # fmt: skip
    stats.dedup_calls += resolution.judge_calls
    stats.llm_calls += resolution.judge_calls
    stats.prompt_tokens += resolution.prompt_tokens
    stats.completion_tokens += resolution.completion_tokens
    stats.duplicates_dropped += len(new_rows) - len(resolution.keep)
    id_type = type(new_rows[0][id_column])
    kept = []
    for i in sorted(resolution.keep):
        row = new_rows[i]
        text = resolution.keep[i]
        if text != text_of(row):
            row = rewrite(row, text if entity == "profile" else _content_part(row, text))
        supersedes = [id_type(x) for x in resolution.supersedes.get(i, []) if id_type(x) != row[id_column]]
        stats.superseded += len(supersedes)
        kept.append(dict(row, supersedes=supersedes))
    return kept


def _content_part(row: dict[str, Any], text: str) -> str:
    # A merged playbook text may come back as "trigger: content"; the trigger is kept from the surviving row.
    prefix = f"{row['trigger']}: " if row["trigger"] else ""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def _time(row: dict[str, Any]) -> int:
    return int(row.get("created_at") or row.get("last_modified_timestamp") or 0)


def _changes(entity: str, rows: list[dict[str, Any]], id_column: str, window: str, run_id: str) -> list[dict]:
    changes = []
    for row in rows:
        base = {"entity": entity, "user_id": row["user_id"], "window": window, "run_id": run_id,
                "request_id": row.get("generated_from_request_id") or row.get("request_id"), "created_at": _time(row)}  # fmt: skip
        changes.append(dict(base, item_id=str(row[id_column]), change="added", superseded_by=None, content=row["content"]))
        for old in row["supersedes"]:
            changes.append(dict(base, item_id=str(old), change="superseded", superseded_by=str(row[id_column]), content=None))
    return changes


def _bookmark(
    user_id: str, group_name: str, new_turns: list[Turn], windows: list[Window], items: int, window: str, run_id: str
) -> dict:
    last = windows[-1].turns[-1] if windows else None
    return {
        "user_id": user_id,
        "extractor": group_name,
        "last_turn_id": last.turn_id if last else None,
        "last_created_at": last.created_at if last else None,
        "new_turns": len(new_turns),
        "extraction_windows": len(windows),
        "items_extracted": items,
        "run_id": run_id,
        "window": window,
    }


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


def _extractor_name(item: Any, group: ExtractorGroup, kind: Literal["profile", "playbook"]) -> str | None:
    """The group extractor an item is tagged with (untagged or unknown: the group's first of that kind; None when
    the group has no extractor of that kind, and the item is dropped)."""
    return group.resolve(kind, getattr(item, "extractor_name", None) or None)[0]


def _profile_rows(
    win: Window, result: ExtractionResult, group: ExtractorGroup, by_id: dict, window: str, run_id: str
) -> list[dict]:
    rows = []
    for item in result.profiles:
        name = _extractor_name(item, group, "profile")
        if name is None:
            continue
        evidence = _evidence(win, item.source_turn_ids, by_id)
        last = max(evidence, key=lambda t: (t.created_at, t.turn_id))
        ttl = item.time_to_live if item.time_to_live in TTL_SECONDS else "infinity"
        seconds = TTL_SECONDS[ttl]
        rows.append(
            {
                "profile_id": profile_id(win.user_id, item.content),
                "user_id": win.user_id,
                "content": item.content,
                "profile_time_to_live": ttl,
                "expiration_timestamp": NEVER_EXPIRES_TIMESTAMP if seconds is None else last.created_at + seconds,
                "last_modified_timestamp": last.created_at,
                "generated_from_request_id": last.request_id,
                "source": last.source,
                "status": "current",
                "extractor_names": [name],
                "custom_features": json.dumps(item.custom_features, sort_keys=True),
                **_provenance(win, evidence, result, window, run_id),
            }
        )
    return rows


def _playbook_rows(
    win: Window, result: ExtractionResult, group: ExtractorGroup, by_id: dict, window: str, run_id: str
) -> list[dict]:
    rows = []
    for item in result.playbooks:
        name = _extractor_name(item, group, "playbook")
        if name is None:
            continue
        evidence = _evidence(win, item.source_turn_ids, by_id)
        last = max(evidence, key=lambda t: (t.created_at, t.turn_id))
        rows.append(
            {
                "user_playbook_id": playbook_id(win.user_id, item.trigger, item.content),
                "user_id": win.user_id,
                "agent_version": last.agent_version,
                "request_id": last.request_id,
                "playbook_name": name,
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
