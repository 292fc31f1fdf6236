"""Learned items as lake rows: ids derived from (user, normalised content), profile and playbook rows with their
provenance, change-log rows and extraction bookmarks.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any, Literal, TypeVar

from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.lifecycle import FORGOTTEN, TOMBSTONE_STATUSES
from reflexio_pipelines.learning.types import (
    NEVER_EXPIRES_TIMESTAMP,
    TTL_SECONDS,
    ExtractedPlaybook,
    ExtractedProfile,
    ExtractionResult,
    Turn,
    Window,
    stable_int_id,
    stable_uuid,
)

_ASCII_WORD = re.compile(r"[a-z0-9]+")
_Item = TypeVar("_Item", ExtractedProfile, ExtractedPlaybook)
#: Unicode categories that make up a word: letters (L*), numbers (N*) and marks (M*: Devanagari, Thai, Arabic…
#: vowel signs and viramas, which `\w` alone would treat as separators, making "काम" and "कम" collide).
_WORD_CATEGORIES = frozenset("LNM")


def content_key(text: str) -> str:
    """Normalised text used for identity: case, punctuation and spacing differences don't make a new item.

    Words are runs of Unicode letters, marks and numbers after NFKC + casefold + NFKC (so "Ｆｕｌｌ" = "full" and
    "STRASSE" = "straße"); everything else (punctuation, symbols, the underscore, spaces) separates words. Text in
    any script keeps its own key ("用户对花生过敏" and "Пользователь веган" are two items, not one empty key).
    ASCII text keeps exactly the key it always had (runs of `[a-z0-9]` after casefold), so existing lakes keep
    their ids; text with non-ASCII Latin letters ("São Paulo") now keeps them in its key instead of dropping them.
    """
    if text.isascii():
        return " ".join(_ASCII_WORD.findall(text.casefold()))
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    spaced = "".join(ch if unicodedata.category(ch)[0] in _WORD_CATEGORIES else " " for ch in folded)
    return " ".join(spaced.split())


def profile_id(user_id: str, content: str) -> str:
    return stable_uuid(user_id, "profile", content_key(content))


def playbook_id(user_id: str, trigger: str | None, content: str) -> int:
    return stable_int_id(user_id, "playbook", content_key(f"{trigger or ''} {content}"))


def playbook_text(row: dict[str, Any]) -> str:
    return f"{row['trigger']}: {row['content']}" if row["trigger"] else row["content"]


def merge(items: dict, key: Any, row: dict[str, Any]) -> None:
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


def content_part(row: dict[str, Any], text: str) -> str:
    # A merged playbook text may come back as "trigger: content"; the trigger is kept from the surviving row.
    prefix = f"{row['trigger']}: " if row["trigger"] else ""
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text


def row_time(row: dict[str, Any]) -> int:
    return int(row.get("created_at") or row.get("last_modified_timestamp") or 0)


def change_rows(entity: str, rows: list[dict[str, Any]], id_column: str, window: str, run_id: str) -> list[dict]:
    changes: list[dict[str, Any]] = []
    for row in rows:
        base = {
            "entity": entity,
            "user_id": row["user_id"],
            "window": window,
            "run_id": run_id,
            "request_id": row.get("generated_from_request_id") or row.get("request_id"),
            "created_at": row_time(row),
        }
        if row["status"] in TOMBSTONE_STATUSES:  # a tombstone is not an item: only what it removed is a change
            change = FORGOTTEN if row["status"] == FORGOTTEN else "superseded"
            changes.extend(
                dict(base, item_id=str(old), change=change, superseded_by=str(row[id_column]), content=None)
                for old in row["supersedes"]
            )
            continue
        changes.append(
            dict(base, item_id=str(row[id_column]), change="added", superseded_by=None, content=row["content"])
        )
        for old in row["supersedes"]:
            changes.append(
                dict(base, item_id=str(old), change="superseded", superseded_by=str(row[id_column]), content=None)
            )
    return changes


def bookmark(
    previous: dict[str, Any] | None,
    user_id: str,
    group_name: str,
    ready: list[Turn],
    held: list[Turn],
    due_at_us: int | None,
    windows: list[Window],
    items: int,
    window: str,
    run_id: str,
) -> dict:
    """The group's bookmark after this run, carrying on from the one an earlier run of this partition left: counts
    are the partition's totals, `processed_turn_ids` every turn of the partition extracted so far."""
    previous = previous or {}
    last = windows[-1].turns[-1] if windows else None
    return {
        "user_id": user_id,
        "extractor": group_name,
        "last_turn_id": last.turn_id if last else previous.get("last_turn_id"),
        "last_created_at": last.created_at if last else previous.get("last_created_at"),
        "new_turns": (previous.get("new_turns") or 0) + len(ready),
        "extraction_windows": (previous.get("extraction_windows") or 0) + len(windows),
        "items_extracted": (previous.get("items_extracted") or 0) + items,
        "processed_turn_ids": sorted({*(previous.get("processed_turn_ids") or []), *(t.turn_id for t in ready)}),
        "held_turns": len(held),
        "due_at_us": due_at_us,
        "run_id": run_id,
        "window": window,
    }


def _evidence(win: Window, ids: list[str], by_id: dict[str, Turn]) -> list[Turn]:
    chosen = [by_id[i] for i in ids if i in by_id]
    return chosen or list(win.turns)


def provenance(win: Window, evidence: list[Turn], result: ExtractionResult, window: str, run_id: str) -> dict:
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


def _placed(
    items: list[_Item], kind: Literal["profile", "playbook"], group: ExtractorGroup, win: Window, by_id: dict
) -> Iterator[tuple[_Item, str, list[Turn], Turn]]:
    """Each item with the group extractor it is stored under (items with none are dropped), its evidence turns and
    the latest of them, whose time, request and source the item's row takes."""
    for item in items:
        name = _extractor_name(item, group, kind)
        if name is None:
            continue
        evidence = _evidence(win, item.source_turn_ids, by_id)
        yield item, name, evidence, max(evidence, key=lambda t: (t.created_at, t.turn_id))


def profile_rows(
    win: Window, result: ExtractionResult, group: ExtractorGroup, by_id: dict, window: str, run_id: str
) -> list[dict]:
    rows = []
    for item, name, evidence, last in _placed(result.profiles, "profile", group, win, by_id):
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
                **provenance(win, evidence, result, window, run_id),
            }
        )
    return rows


def playbook_rows(
    win: Window, result: ExtractionResult, group: ExtractorGroup, by_id: dict, window: str, run_id: str
) -> list[dict]:
    rows = []
    for item, name, evidence, last in _placed(result.playbooks, "playbook", group, win, by_id):
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
                **provenance(win, evidence, result, window, run_id),
            }
        )
    return rows
