"""Supersession by a stated change: "I moved to Denver", "switched to Neovim", "from now on, short paragraphs" replace
the user's earlier items on the same subject, which the offline judge's similarity test misses (dedup.py
`changed_subjects` decides which, learning/subjects.py says what an item is about). The user's own words are read
where the extractor kept them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from reflexio_pipelines.learning.dedup import Resolution, changed_subjects

#: How the built-in extractor opens a playbook's rationale: the user's clause follows, quoted.
SAID_PREFIX = "The user said: "


def said_by_user(row: dict[str, Any]) -> str:
    """The user's own words behind a learned row, where the extractor kept them (the built-in extractor keeps the
    clause in a profile's custom_features and quotes it in a playbook's rationale); else the row's text."""
    features = row.get("custom_features")
    if isinstance(features, str) and features.startswith("{"):
        said = json.loads(features).get("said")
        if isinstance(said, str):
            return said
    rationale = row.get("rationale") or ""
    if rationale.startswith(SAID_PREFIX):
        return rationale[len(SAID_PREFIX) :]
    return row.get("content") or ""


def supersede_stated_changes(
    resolution: Resolution,
    new_rows: list[dict[str, Any]],
    existing_rows: list[dict[str, Any]],
    new_vectors: np.ndarray,
    existing_vectors: np.ndarray,
    text_of: Callable[[dict[str, Any]], str],
    id_column: str,
) -> None:
    """Add to `resolution.supersedes` the existing items that kept new items replace by a stated change."""
    kept = sorted(resolution.keep)
    if not kept or not existing_rows:
        return
    ids = [str(r[id_column]) for r in existing_rows]
    taken = {ids.index(x) for group in resolution.supersedes.values() for x in group if x in ids}
    taken |= {ids.index(x) for x in resolution.duplicate_of.values() if x in ids}
    replaced = changed_subjects(
        [(resolution.keep[i], said_by_user(new_rows[i])) for i in kept],
        [text_of(r) for r in existing_rows],
        new_vectors[kept],
        existing_vectors,
        taken,
    )
    for position, positions in replaced.items():
        i = kept[position]
        resolution.supersedes[i] = list(resolution.supersedes.get(i, [])) + [ids[j] for j in positions]
