"""Outcome counters in the lake: the counters an item carries in API payloads, and the outcome change log.

`item_outcomes` (rewritten by every outcome run, assets/outcomes.py) holds the counters; `outcome_change_log` is
append-only and records every flag action with its evidence, one row per evidence session, plus reviewers' "keep"
decisions. Both the pipeline (which decides flags) and the service (which shows counters, holds flagged items out
of search and records reviews) read them through this module.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.outcomes import HARMFUL, HELPFUL, MISSED, RULES_VERSION, FlagAction, ItemRef

#: Serialises the outcome tables' writers (privacy/erasure.WRITER_LOCKS).
LOCK = "outcomes"
#: The counters of an item nothing has been served of yet.
ZERO = {"served": 0, "sessions": 0, "helpful": 0, "harmful": 0, "missed": 0, "flagged": False, "held_out": False}
#: Flag states the change log's actions leave an item in.
STATE_OF_ACTION = {"flagged": "flagged", "held_out": "held_out", "unflagged": "clear", "kept": "clear"}


def counters_payload(row: dict[str, Any] | None, held_out: bool | None = None) -> dict[str, Any]:
    """The `outcomes` block of an item's API payload: its counters, whether it is flagged or held out of search, and
    the (heuristic) rules that produced them."""
    out = dict(ZERO) if row is None else {k: row[k] for k in ZERO}
    if held_out is not None:
        out["held_out"] = held_out
    out["rules"] = f"{RULES_VERSION} (heuristic)"
    return out


def log_state(rows: list[dict[str, Any]]) -> tuple[dict[ItemRef, str], dict[ItemRef, int], dict[ItemRef, int]]:
    """From the change log: each item's flag state after its latest action, the harmful count at its latest "kept"
    review, and when that review was (unix s)."""
    latest: dict[ItemRef, dict[str, Any]] = {}
    kept: dict[ItemRef, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: (r["at"], r["action_id"])):
        ref = ItemRef(row["entity"], row["item_id"])
        latest[ref] = row
        if row["action"] == "kept":
            kept[ref] = row
    states = {ref: STATE_OF_ACTION.get(row["action"], "clear") for ref, row in latest.items()}
    return states, {ref: row["harmful"] or 0 for ref, row in kept.items()}, {ref: row["at"] for ref, row in kept.items()}


def action_rows(action: FlagAction, *, at: int, run_id: str | None, actor: str = "outcome_counters") -> list[dict]:
    """Change log rows of one flag action: one per evidence session (one without evidence when it has none)."""
    c = action.counters
    base = {"action_id": uuid.uuid4().hex, "at": at, "entity": action.ref.entity, "item_id": action.ref.item_id,
            "action": action.action, "reason": action.reason, "served": c.served, "helpful": c.count(HELPFUL),
            "harmful": c.count(HARMFUL), "missed": c.count(MISSED), "actor": actor, "run_id": run_id}  # fmt: skip
    evidence = action.evidence or ((None, None),)
    return [dict(base, user_id=user_id, session_id=session_id) for user_id, session_id in evidence]


def record_review(lake: Lake, entity: str, item_id: str, actor: str, reason: str = "") -> dict[str, Any]:
    """Append a reviewer's "keep" for a flagged item: it is served again, and the outcome runs flag it again only
    on new harmful evidence. Returns the row written."""
    with lake.lock(LOCK):
        found = lake.read_table("item_outcomes", filters=[("entity", "=", entity), ("item_id", "=", str(item_id))])
        counts = found.to_pylist()[0] if found.num_rows else dict(ZERO)
        row = {"action_id": uuid.uuid4().hex, "at": int(time.time()), "entity": entity, "item_id": str(item_id),
               "action": "kept", "reason": reason or "kept by a reviewer", "served": counts["served"],
               "helpful": counts["helpful"], "harmful": counts["harmful"], "missed": counts["missed"],
               "session_id": None, "user_id": None, "actor": actor, "run_id": None}  # fmt: skip
        lake.append("outcome_change_log", pa.Table.from_pylist([row], schema=TABLES["outcome_change_log"]))
    return row


def change_log_entries(lake: Lake, entity: str | None = None, item_id: str | None = None) -> list[dict[str, Any]]:
    """The outcome change log as one entry per action (evidence rows folded into `evidence_session_ids`), newest
    first."""
    actions: dict[str, dict[str, Any]] = {}
    for row in lake.read_table("outcome_change_log").to_pylist():
        if (entity and row["entity"] != entity) or (item_id is not None and row["item_id"] != str(item_id)):
            continue
        entry = actions.setdefault(row["action_id"], {k: row[k] for k in (
            "action_id", "at", "entity", "item_id", "action", "reason", "served", "helpful", "harmful", "missed",
            "actor", "run_id")} | {"evidence_session_ids": []})  # fmt: skip
        if row["session_id"] is not None:
            entry["evidence_session_ids"].append(row["session_id"])
    return sorted(actions.values(), key=lambda e: (-e["at"], e["action_id"]))
