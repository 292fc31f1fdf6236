"""The unified search's filters of the original's 2026 request (reflexio-client 0.2.16) that the index does not
hold, applied around the searches: each accepted filter is honoured, none is ignored.

- `entity_types`: which of profiles, user playbooks and agent playbooks are searched (null = all three).
- `source`: profiles and user playbooks whose `source` is that value; agent playbooks with a member user playbook of
  that source (the original matches them "through linked user playbooks"). Candidates are widened before the cut,
  like the per-entity searches' post-filters.
The refused ones (`tags`, `enable_agent_answer`) are refused by the request model (serving/models/search.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reflexio_pipelines.lake.io import Lake

ENTITY_TYPES = ("profiles", "user_playbooks", "agent_playbooks")
#: How many candidates per wanted result a source filter searches (the index has no source column).
WIDEN = 10


def selected(entity_types: Sequence[str] | None) -> set[str]:
    """The entity fields to search: the ones named, else all three."""
    return set(entity_types) if entity_types is not None else set(ENTITY_TYPES)


def _source_ids(lake: Lake, source: str) -> set[int]:
    """Ids of the user playbooks published from `source`."""
    table = lake.read_table("user_playbooks", filters=[("source", "=", source)])
    return set(table.column("user_playbook_id").to_pylist())


def by_source(lake: Lake, source: str, results: dict[str, list[dict[str, Any]]], top_k: int) -> None:
    """Keep, in place, the results of `source` (at most `top_k` of each entity type)."""
    for field in ("profiles", "user_playbooks"):
        if field in results:
            results[field] = [r for r in results[field] if r.get("source") == source][:top_k]
    if "agent_playbooks" in results:
        members = _source_ids(lake, source)
        results["agent_playbooks"] = [
            r for r in results["agent_playbooks"] if members.intersection(r.get("member_user_playbook_ids") or [])
        ][:top_k]
