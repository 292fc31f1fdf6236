"""Outcome counters in the lake: what an outcome run reads and writes, the counters an item carries in API
payloads, and the outcome change log.

An outcome run (assets/outcomes.py) reads the retrieval log, every learned item and the evaluators' verdicts as the
value types of learning/outcomes.py (`retrieval_events`, `learned_items`, `judged_sessions`, joined by
`outcomes_now`), then `commit_outcomes` rewrites `item_outcomes`, `session_outcomes` and `item_outcome_events` and
appends to `outcome_change_log`. The change log is append-only and records every flag action with its evidence, one
row per evidence session, plus reviewers' "keep" decisions. Both the pipeline (which decides flags) and the service
(which shows counters, holds flagged items out of search and records reviews) read them through this module.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa

from reflexio_pipelines.lake.curation import live_agent_playbooks
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import every_item, live_turns
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.config import ExtractionConfig, OutcomeSettings
from reflexio_pipelines.learning.outcome_types import (
    HARMFUL,
    HELPFUL,
    MISSED,
    RULES_VERSION,
    FlagAction,
    ItemRef,
    LearnedItem,
    OutcomeResult,
    RetrievalEvent,
)
from reflexio_pipelines.learning.outcomes import evaluate, flag_actions
from reflexio_pipelines.learning.sessions import Session, closed_sessions, group_sessions

#: Serialises the outcome tables' writers (privacy/erasure.WRITER_LOCKS).
LOCK = "outcomes"
#: The counters of an item nothing has been served of yet.
ZERO = {"served": 0, "sessions": 0, "helpful": 0, "harmful": 0, "missed": 0, "flagged": False, "held_out": False}
#: Flag states the change log's actions leave an item in.
STATE_OF_ACTION = {"flagged": "flagged", "held_out": "held_out", "unflagged": "clear", "kept": "clear"}


def counters_payload(row: dict[str, Any] | None, held_out: bool | None = None) -> dict[str, Any]:
    """The `outcomes` block of an item's API payload: its counters, whether it is flagged or held out of search, and
    the (heuristic) rules that produced them."""
    out: dict[str, Any] = dict(ZERO) if row is None else {k: row[k] for k in ZERO}
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
    return (
        states,
        {ref: row["harmful"] or 0 for ref, row in kept.items()},
        {ref: row["at"] for ref, row in kept.items()},
    )


def action_rows(action: FlagAction, *, at: int, run_id: str | None, actor: str = "outcome_counters") -> list[dict]:
    """Change log rows of one flag action: one per evidence session (one without evidence when it has none)."""
    c = action.counters
    base = {
        "action_id": uuid.uuid4().hex,
        "at": at,
        "entity": action.ref.entity,
        "item_id": action.ref.item_id,
        "action": action.action,
        "reason": action.reason,
        "served": c.served,
        "helpful": c.count(HELPFUL),
        "harmful": c.count(HARMFUL),
        "missed": c.count(MISSED),
        "actor": actor,
        "run_id": run_id,
    }
    evidence = action.evidence or ((None, None),)
    return [dict(base, user_id=user_id, session_id=session_id) for user_id, session_id in evidence]


def record_review(lake: Lake, entity: str, item_id: str, actor: str, reason: str = "") -> dict[str, Any]:
    """Append a reviewer's "keep" for a flagged item: it is served again, and the outcome runs flag it again only
    on new harmful evidence. Returns the row written."""
    with lake.lock(LOCK):
        found = lake.read_table("item_outcomes", filters=[("entity", "=", entity), ("item_id", "=", str(item_id))])
        counts = found.to_pylist()[0] if found.num_rows else dict(ZERO)
        row = {
            "action_id": uuid.uuid4().hex,
            "at": int(time.time()),
            "entity": entity,
            "item_id": str(item_id),
            "action": "kept",
            "reason": reason or "kept by a reviewer",
            "served": counts["served"],
            "helpful": counts["helpful"],
            "harmful": counts["harmful"],
            "missed": counts["missed"],
            "session_id": None,
            "user_id": None,
            "actor": actor,
            "run_id": None,
        }
        lake.append("outcome_change_log", pa.Table.from_pylist([row], schema=TABLES["outcome_change_log"]))
    return row


def change_log_entries(lake: Lake, entity: str | None = None, item_id: str | None = None) -> list[dict[str, Any]]:
    """The outcome change log as one entry per action (evidence rows folded into `evidence_session_ids`), newest
    first."""
    actions: dict[str, dict[str, Any]] = {}
    for row in lake.read_table("outcome_change_log").to_pylist():
        if (entity and row["entity"] != entity) or (item_id is not None and row["item_id"] != str(item_id)):
            continue
        entry = actions.setdefault(
            row["action_id"],
            {
                k: row[k]
                for k in (
                    "action_id",
                    "at",
                    "entity",
                    "item_id",
                    "action",
                    "reason",
                    "served",
                    "helpful",
                    "harmful",
                    "missed",
                    "actor",
                    "run_id",
                )
            }
            | {"evidence_session_ids": []},
        )
        if row["session_id"] is not None:
            entry["evidence_session_ids"].append(row["session_id"])
    return sorted(actions.values(), key=lambda e: (-e["at"], e["action_id"]))


def outcomes_now(store: Lake, config: ExtractionConfig, now: int) -> tuple[list[Session], OutcomeResult]:
    """The sessions closed at `now` (unix s, after the config's quiet period) and the outcomes of what was served in
    them, from the lake as it is."""
    sessions = group_sessions(live_turns(store))
    closed = closed_sessions(sessions, now, config.session_quiet_period_seconds)
    result = evaluate(
        closed, sessions, retrieval_events(store), learned_items(store), judged_sessions(store), config.holdout
    )
    return closed, result


def commit_outcomes(
    store: Lake, result: OutcomeResult, settings: OutcomeSettings, *, at: int, run_id: str | None
) -> tuple[dict[ItemRef, str], list[FlagAction]]:
    """Rewrite the outcome tables from `result` and append the flag actions it calls for to the change log, at `at`
    (unix s, the audit time). Flags are decided under the outcomes lock against the change log as it is then, so a
    reviewer's "keep" recorded meanwhile counts. Returns each item's flag state after the run, and the actions."""
    with store.lock(LOCK):
        last_state, harmful_when_kept, _ = log_state(store.read_table("outcome_change_log").to_pylist())
        actions = flag_actions(result.counters, settings, last_state, harmful_when_kept)
        states = dict(last_state)
        states.update({a.ref: {"unflagged": "clear"}.get(a.action, a.action) for a in actions})
        tables = _tables(result, states, at)
        for name, table in tables.items():
            store.replace_where(name, None, table)
        log = [row for action in actions for row in action_rows(action, at=at, run_id=run_id)]
        if log:
            store.append("outcome_change_log", pa.Table.from_pylist(log, schema=TABLES["outcome_change_log"]))
    return states, actions


def _tables(result: OutcomeResult, states: dict[ItemRef, str], now: int) -> dict[str, pa.Table]:
    sessions = [
        {
            "session_id": s.session_id,
            "user_id": s.user_id,
            "agent_version": s.agent_version,
            "arm": s.arm,
            "holdout_override": s.override,
            "searches": s.searches,
            "items_served": s.items_served,
            "first_search_at": s.first_search_at,
            "corrections": s.corrections,
            "recurring_corrections": s.recurring_corrections,
            "repeated_learned_corrections": s.repeated_learned_corrections,
            "tool_failures": s.tool_failures,
            "user_turns": s.user_turns,
            "session_started_at": s.started_at,
            "session_closed_at": s.closed_at,
            "day": s.day,
            "rules": RULES_VERSION,
        }
        for s in result.sessions
    ]
    events = [
        {
            "entity": e.ref.entity,
            "item_id": e.ref.item_id,
            "user_id": e.user_id,
            "session_id": e.session_id,
            "agent_version": e.agent_version,
            "outcome": e.outcome,
            "reason": e.reason,
            "served_at_us": e.served_at_us,
            "turn_index": e.turn_index,
            "day": e.day,
            "rules": RULES_VERSION,
        }
        for e in result.events
    ]
    counters = [
        {
            "entity": ref.entity,
            "item_id": ref.item_id,
            "user_id": c.owner,
            "agent_version": c.agent_version,
            "served": c.served,
            "sessions": c.sessions,
            "helpful": c.count(HELPFUL),
            "harmful": c.count(HARMFUL),
            "missed": c.count(MISSED),
            "flagged": states.get(ref, "clear") != "clear",
            "held_out": states.get(ref) == "held_out",
            "computed_at": now,
            "rules": RULES_VERSION,
        }
        for ref, c in sorted(result.counters.items(), key=lambda kv: (kv[0].entity, kv[0].item_id))
    ]
    return {
        name: pa.Table.from_pylist(rows, schema=TABLES[name])
        for name, rows in (("session_outcomes", sessions), ("item_outcome_events", events), ("item_outcomes", counters))
    }


def retrieval_events(store: Lake) -> list[RetrievalEvent]:
    """The retrieval log as value types (items in response order, profiles, then user and agent playbooks)."""
    out = []
    for r in store.read_table("retrieval_events").to_pylist():
        items = (
            [ItemRef("profile", str(i)) for i in r["profile_ids"] or []]
            + [ItemRef("user_playbook", str(i)) for i in r["user_playbook_ids"] or []]
            + [ItemRef("agent_playbook", str(i)) for i in r["agent_playbook_ids"] or []]
        )
        out.append(
            RetrievalEvent(
                r["event_id"],
                r["served_at_us"],
                r["user_id"],
                r["session_id"],
                r["agent_version"] or "",
                r["arm"],
                r["holdout"],
                r["holdout_override"],
                tuple(items),
            )
        )
    return sorted(out, key=lambda e: (e.served_at_us, e.event_id))


def learned_items(store: Lake) -> dict[ItemRef, LearnedItem]:
    """Every learned item that can have been served: profiles, user playbooks (superseded ones too: they were served
    before) and agent playbooks in any lifecycle status, curation applied. Agent playbooks count their member
    playbooks' source turns as their own."""
    items: dict[ItemRef, LearnedItem] = {}
    sources: dict[int, frozenset[str]] = {}
    for r in every_item(store, "user_playbook"):
        ref = ItemRef("user_playbook", str(r["user_playbook_id"]))
        sources[r["user_playbook_id"]] = frozenset(r["source_turn_ids"] or ())
        items[ref] = LearnedItem(
            ref,
            r["user_id"],
            r["agent_version"] or "",
            r["content"] or "",
            r["trigger"] or "",
            r["created_at"] or 0,
            sources[r["user_playbook_id"]],
        )
    for r in every_item(store, "profile"):
        ref = ItemRef("profile", str(r["profile_id"]))
        items[ref] = LearnedItem(
            ref,
            r["user_id"],
            "",
            r["content"] or "",
            "",
            r["last_modified_timestamp"] or 0,
            frozenset(r["source_turn_ids"] or ()),
        )
    for r in live_agent_playbooks(store, ("current", "archived")):
        ref = ItemRef("agent_playbook", str(r["agent_playbook_id"]))
        turns = frozenset().union(*(sources.get(m, frozenset()) for m in r["member_ids"] or []))
        items[ref] = LearnedItem(
            ref, None, r["agent_version"] or "", r["content"] or "", r["trigger"] or "", r["created_at"] or 0, turns
        )
    return items


def judged_sessions(store: Lake) -> dict[tuple[str, str], bool]:
    """(user, session) -> success as the evaluators judged it: successful when at least one evaluator said so and
    none said otherwise."""
    verdicts: dict[tuple[str, str], list[bool]] = {}
    for r in store.read_table("session_evaluations").to_pylist():
        verdicts.setdefault((r["user_id"] or "", r["session_id"]), []).append(r["is_success"])
    return {key: all(v) for key, v in verdicts.items()}
