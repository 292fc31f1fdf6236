"""Turn lake rows into search documents whose payloads are the original API's view shapes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from reflexio_pipelines.lake.control import decisions
from reflexio_pipelines.lake.curation import MANUAL_WINDOW, live_agent_playbooks
from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.lake.user_windows import history_windows
from reflexio_pipelines.learning.lifecycle import LIFECYCLE_STATUSES
from reflexio_pipelines.search.conversation import turn_docs
from reflexio_pipelines.search.incremental import served_doc_ids
from reflexio_pipelines.search.types import SearchDoc
from reflexio_pipelines.search.versions import TURNS_WATERMARK, turns_watermark


def _lifecycle(status: str | None) -> str | None:
    # The original API reports the current version as status None.
    return None if status in (None, "", "current") else status


def profile_view(row: dict[str, Any]) -> dict[str, Any]:
    """The original's ProfileView plus our provenance block."""
    return {
        "profile_id": row["profile_id"],
        "user_id": row["user_id"],
        "content": row["content"],
        "last_modified_timestamp": row["last_modified_timestamp"],
        "generated_from_request_id": row["generated_from_request_id"],
        "profile_time_to_live": row["profile_time_to_live"],
        "expiration_timestamp": row["expiration_timestamp"],
        "custom_features": json.loads(row["custom_features"] or "{}") or None,
        "source": row["source"] or None,
        "status": _lifecycle(row["status"]),
        "extractor_names": row["extractor_names"],
        "provenance": _provenance(row),
    }


def user_playbook_view(row: dict[str, Any]) -> dict[str, Any]:
    """The original's UserPlaybookView plus our provenance block."""
    return {
        "user_playbook_id": row["user_playbook_id"],
        "user_id": row["user_id"],
        "agent_version": row["agent_version"] or "",
        "request_id": row["request_id"] or "",
        "playbook_name": row["playbook_name"] or "",
        **_rule(row),
        "status": _lifecycle(row["status"]),
        "source": row["source"] or None,
        "source_interaction_ids": row["source_interaction_ids"] or [],
        "kind": row["kind"],
        "provenance": _provenance(row),
    }


def _blocking(row: dict[str, Any]) -> dict[str, str] | None:
    if not row["blocking_issue_kind"]:
        return None
    return {"kind": row["blocking_issue_kind"], "details": row["blocking_issue_details"] or ""}


def _rule(row: dict[str, Any]) -> dict[str, Any]:
    """A playbook's rule as both playbook views carry it, in their key order."""
    blocking = _blocking(row)
    return {
        "created_at": row["created_at"],
        "content": row["content"],
        "trigger": row["trigger"],
        "rationale": row["rationale"],
        "blocking_issue": blocking,
        # Newer clients read trigger / rationale / blocking_issue from `structured_data`; the snapshot API top-level.
        "structured_data": {"trigger": row["trigger"], "rationale": row["rationale"], "blocking_issue": blocking},
    }


def patch_view(payload: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """A served view with edited table columns applied (an edit made after the index version was built)."""
    out = dict(payload)
    for name, value in fields.items():
        if name == "custom_features":
            out[name] = json.loads(value or "{}") or None
        elif name in ("trigger", "rationale") and "structured_data" in out:
            out[name] = value
            out["structured_data"] = dict(out["structured_data"], **{name: value})
        elif name in ("blocking_issue_kind", "blocking_issue_details"):
            continue
        elif name in out:
            out[name] = value
    if "blocking_issue_kind" in fields:
        blocking = {"kind": fields["blocking_issue_kind"], "details": fields.get("blocking_issue_details") or ""}
        out["blocking_issue"] = blocking
        if "structured_data" in out:
            out["structured_data"] = dict(out["structured_data"], blocking_issue=blocking)
    return out


def _provenance(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "source_turn_ids": row["source_turn_ids"] or [],
        "window": row["window"],
        "extraction_window_id": row["extraction_window_id"],
        "extractor": row["extractor"],
        "prompt_version": row["prompt_version"],
        "model": row["model"],
        "run_id": row["run_id"],
    }


def profile_docs(rows: Iterable[dict[str, Any]]) -> list[SearchDoc]:
    """Search documents for current profiles (embedded and BM25-indexed on their content)."""
    return [
        SearchDoc(
            entity_type="profile",
            doc_id=row["profile_id"],
            text=row["content"],
            payload=profile_view(row),
            user_id=row["user_id"],
            status=row["status"] or "current",
            created_at=row["last_modified_timestamp"] or 0,
            expires_at=row["expiration_timestamp"],
        )
        for row in rows
    ]


def user_playbook_docs(rows: Iterable[dict[str, Any]]) -> list[SearchDoc]:
    """Search documents for user playbooks; the text is trigger + content so either side of a rule matches."""
    return [
        SearchDoc(
            entity_type="user_playbook",
            doc_id=str(row["user_playbook_id"]),
            text=" ".join(part for part in (row["trigger"], row["content"]) if part),
            payload=user_playbook_view(row),
            user_id=row["user_id"],
            agent_version=row["agent_version"],
            playbook_name=row["playbook_name"],
            status=row["status"] or "current",
            created_at=row["created_at"] or 0,
        )
        for row in rows
    ]


def agent_playbook_view(row: dict[str, Any], playbook_status: str) -> dict[str, Any]:
    """The original's AgentPlaybookView plus the member user playbooks (→ their source turns)."""
    return {
        "agent_playbook_id": row["agent_playbook_id"],
        "playbook_name": row["playbook_name"],
        "agent_version": row["agent_version"],
        **_rule(row),
        "playbook_status": playbook_status,
        "playbook_metadata": "",
        "status": _lifecycle(row["status"]),
        "member_user_playbook_ids": row["member_ids"] or [],
        "member_user_count": len(row["member_user_ids"] or []),
    }


def agent_playbook_docs(rows: Iterable[dict[str, Any]], decided: dict[str, str]) -> list[SearchDoc]:
    """Search documents for current agent playbooks, with the approval status the control log decided."""
    docs = []
    for row in rows:
        if row["status"] != "current":
            continue
        status = decided.get(str(row["agent_playbook_id"]), row["playbook_status"])
        docs.append(
            SearchDoc(
                entity_type="agent_playbook",
                doc_id=str(row["agent_playbook_id"]),
                text=" ".join(part for part in (row["trigger"], row["content"]) if part),
                payload=agent_playbook_view(row, status),
                agent_version=row["agent_version"],
                playbook_name=row["playbook_name"],
                playbook_status=status,
                created_at=row["created_at"] or 0,
                contributors=tuple(row["member_user_ids"] or ()),
            )
        )
    return docs


def _rows_of(store: Lake, users: frozenset[str]) -> list[tuple]:
    """Filters for the profile and playbook rows of `users`: only the windows that hold their turns (and manual adds)
    are read when the lake's user directory can tell which (lake/user_windows.py)."""
    only = [("user_id", "in", sorted(users))]
    windows = history_windows(store, users)
    return only if windows is None else [*only, ("window", "in", [MANUAL_WINDOW, *windows])]


def index_documents(
    store: Lake, new_turns: bool = False, max_new_turns: int = 0, users: frozenset[str] | None = None
) -> tuple[list[SearchDoc], dict[str, int], dict[str, int]]:
    """Every document an index version holds, how many of each entity type, and the version's watermarks; shared
    with per-user erasure, which publishes a version without the erased user through the same path. With `users`,
    the profiles and user playbooks of those users only (a build scoped to the users whose rows changed,
    search/incremental.py `stage_update`; the counts are then of what was read), and the turns of those users and
    of the users with turns new to the version (`scoped_turn_rows`).

    Turns: those ingested up to the current version's watermark (`TURNS_WATERMARK`), or with `new_turns` every
    live turn (the watermark then moves to the newest one) — with `max_new_turns` > 0, only the oldest that many
    turns past the watermark (those ingested in the same microsecond as the last one too), the rest left to the
    next build. Turns deleted or erased since leave either way."""
    if users is not None and not users:
        profiles, playbooks = [], []
    else:
        only = None if users is None else _rows_of(store, users)
        profiles = profile_docs(live_rows(store, "profile", filters=only, statuses=LIFECYCLE_STATUSES))
        playbooks = user_playbook_docs(live_rows(store, "user_playbook", filters=only, statuses=LIFECYCLE_STATUSES))
    agent = agent_playbook_docs(live_agent_playbooks(store), decisions(store))
    through = turns_watermark(store.index_root)
    # Nothing to read while no version holds turns and none are taken in (learning runs before the first turn
    # indexing run); otherwise every live turn (of the scope's users), as for the other entity types.
    if not (new_turns or through):
        rows = []
    elif users is None:
        rows = turn_rows(store)
    else:
        rows = scoped_turn_rows(store, users, through, max_new_turns if new_turns else None)
    if new_turns:
        through = intake_through(rows, through, max_new_turns)
    turns = turn_docs(r for r in rows if r["ingested_at_us"] <= through)
    counts = {
        "profile": len(profiles),
        "user_playbook": len(playbooks),
        "agent_playbook": len(agent),
        "interaction": len(turns),
    }
    return profiles + playbooks + agent + turns, counts, {TURNS_WATERMARK: through}


def intake_through(rows: Iterable[dict[str, Any]], through: int, max_new_turns: int) -> int:
    """The turn watermark after a build takes in the turns of `rows` ingested after `through`: the newest of them, or
    with `max_new_turns` > 0 the oldest that many (those ingested in the same microsecond as the last one too)."""
    newer = sorted(r["ingested_at_us"] for r in rows if r["ingested_at_us"] > through)
    if not newer:
        return through
    return newer[max_new_turns - 1] if 0 < max_new_turns < len(newer) else newer[-1]


#: How far below the served version's turn watermark a scoped build still looks for turns the version lacks: a turn
#: is stamped before its landing file becomes visible, so one can land just after a build read a later one (two
#: publishes in flight at once) and sit below the watermark that build recorded.
LATE_TURN_MARGIN_US = 120_000_000


def scoped_turn_rows(
    store: Lake, users: frozenset[str], through: int, max_new_turns: int | None
) -> list[dict[str, Any]]:
    """The live turns of the users whose turn documents can differ from the served version's: `users` (their rows
    changed, a deletion of their turns included: curation records the turn's user) and, when new turns are taken in
    (`max_new_turns` not None; 0 = no bound), the users of the new turns this build takes in (after `through`, the
    oldest `max_new_turns` of them) and of turns stamped shortly before `through` that the version lacks. Reads the
    recent turns and those users' windows, not the lake's every turn: a learning run's build under steady
    publishing read all 15,000 turns of a 5-minute run's lake (0.34-0.49 s, growing with the lake)."""
    scope = set(users)
    if max_new_turns is not None:
        recent = turn_rows(store, filters=[("ingested_at_us", ">", through - LATE_TURN_MARGIN_US)])
        upto = intake_through(recent, through, max_new_turns)
        scope.update(r["user_id"] for r in recent if through < r["ingested_at_us"] <= upto)
        below = {r["turn_id"]: r["user_id"] for r in recent if r["ingested_at_us"] <= through}
        held = served_doc_ids(store.index_root, "interaction", below)
        scope.update(user for turn_id, user in below.items() if turn_id not in held)
    if not scope:
        return []
    only = sorted(scope)
    windows = history_windows(store, frozenset(only))
    filters = [("user_id", "in", only)]
    return turn_rows(store, filters if windows is None else [*filters, ("window", "in", windows)])
