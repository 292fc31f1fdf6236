"""Asset `learned_item_outcomes`: what happened after each learned item was served (the outcome counters).

Joins the service's retrieval log (`retrieval_events`) with the sessions rebuilt from `turns` (closed ones only, as
the evaluation does) and the evaluation's verdicts, and writes, all recomputed from the lake on every run:

- `session_outcomes`: per closed session, its holdout arm and the rule-based signals (corrections, tool failures,
  correction recurrence) — the treated-vs-control comparison and the recurrence metric read it (assets/evaluation.py);
- `item_outcome_events`: per (closed session, served item), helpful / harmful / missed or no signal, with the rule
  that decided;
- `item_outcomes`: the counters per item (served, sessions, helpful, harmful, missed, flagged, held_out) that read
  and search answers carry;
- `outcome_change_log`: every change of an item's flag state, with its evidence sessions.

The matching rules are a HEURISTIC (learning/outcomes.py, labelled `outcome-heuristic-v1` in every row). Pure logic
lives there; this module reads and writes the lake.
"""

import time
from collections import Counter as Tally

import dagster as dg
import pyarrow as pa

from reflexio_pipelines.lake.curation import live_agent_playbooks
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.outcomes import LOCK, action_rows, log_state
from reflexio_pipelines.lake.records import every_item, live_turns
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.outcomes import (
    HARMFUL,
    HELPFUL,
    MISSED,
    RULES_VERSION,
    ItemRef,
    LearnedItem,
    OutcomeResult,
    RetrievalEvent,
    evaluate,
    flag_actions,
)
from reflexio_pipelines.learning.sessions import group_sessions, is_closed
from reflexio_pipelines.resources import ExtractorResource, LakeResource

OUTCOME_TABLES = ("session_outcomes", "item_outcome_events", "item_outcomes", "outcome_change_log")


class OutcomeConfig(dg.Config):
    """`now` pins the clock (tests, backfills); unset = the run's wall-clock time."""

    now: int | None = None


@dg.multi_asset(
    specs=[
        dg.AssetSpec("session_outcomes", deps=["turns", "session_evaluations"], group_name="evaluation",
                     kinds={"deltalake"}, description="Per closed session: holdout arm, searches, items served and "
                     "the rule-based signals (corrections, recurrence, tool failures). Heuristic."),
        dg.AssetSpec("item_outcome_events", deps=["turns", "session_evaluations", "user_profiles", "user_playbooks",
                                                  "agent_playbooks"], group_name="evaluation", kinds={"deltalake"},
                     description="Per closed session and served learned item: helpful / harmful / missed (heuristic "
                                 "matching rules) and the rule that decided."),
        dg.AssetSpec("item_outcomes", deps=["item_outcome_events"], group_name="evaluation", kinds={"deltalake"},
                     description="Per learned item: served, helpful, harmful, missed, flagged (harmful > helpful "
                                 "after a minimum count), held out pending review."),
        dg.AssetSpec("outcome_change_log", deps=["item_outcomes"], group_name="evaluation", kinds={"deltalake"},
                     description="Every flag action on a learned item with its evidence sessions (append-only)."),
    ]  # fmt: skip
)
def learned_item_outcomes(context: dg.AssetExecutionContext, config: OutcomeConfig, lake: LakeResource,
                          extractor: ExtractorResource):  # fmt: skip
    store = lake.get()
    now = config.now or int(time.time())
    settings = extractor.get_config(store)
    sessions = group_sessions(live_turns(store))
    closed = [s for s in sessions if is_closed(s, now, settings.session_quiet_period_seconds)]
    result = evaluate(closed, sessions, retrieval_events(store), learned_items(store), judged_sessions(store),
                      settings.holdout)  # fmt: skip
    written_at = int(time.time())  # audit times are wall-clock, also when `now` pins which sessions are closed
    with store.lock(LOCK):
        last_state, harmful_when_kept, _ = log_state(store.read_table("outcome_change_log").to_pylist())
        actions = flag_actions(result.counters, settings.outcomes, last_state, harmful_when_kept)
        states = dict(last_state)
        states.update({a.ref: {"unflagged": "clear"}.get(a.action, a.action) for a in actions})
        tables = _tables(result, states, written_at)
        for name, table in tables.items():
            store.replace_where(name, None, table)
        log = [row for action in actions for row in action_rows(action, at=written_at, run_id=context.run.run_id)]
        if log:
            store.append("outcome_change_log", pa.Table.from_pylist(log, schema=TABLES["outcome_change_log"]))
    outcomes = Tally(e.outcome for e in result.events)
    common = {"rules": f"{RULES_VERSION} (heuristic)"}
    yield dg.MaterializeResult(asset_key="session_outcomes", metadata={
        **common, "sessions_closed": len(closed), "recurring_corrections": sum(s.recurring_corrections for s in
                                                                                result.sessions),
        "corrections": sum(s.corrections for s in result.sessions),
        "control_sessions": sum(s.arm == "control" for s in result.sessions)})  # fmt: skip
    yield dg.MaterializeResult(asset_key="item_outcome_events", metadata={
        **common, "served_in_closed_sessions": len(result.events), "helpful": outcomes[HELPFUL],
        "harmful": outcomes[HARMFUL], "missed": outcomes[MISSED], "no_signal": outcomes[None]})  # fmt: skip
    yield dg.MaterializeResult(asset_key="item_outcomes", metadata={
        **common, "items": len(result.counters), "flagged": sum(1 for s in states.values() if s != "clear")})  # fmt: skip
    yield dg.MaterializeResult(asset_key="outcome_change_log", metadata={**common, "actions_now": len(actions)})


def _tables(result: OutcomeResult, states: dict[ItemRef, str], now: int) -> dict[str, pa.Table]:
    sessions = [{
        "session_id": s.session_id, "user_id": s.user_id, "agent_version": s.agent_version, "arm": s.arm,
        "holdout_override": s.override, "searches": s.searches, "items_served": s.items_served,
        "first_search_at": s.first_search_at, "corrections": s.corrections,
        "recurring_corrections": s.recurring_corrections, "repeated_learned_corrections": s.repeated_learned_corrections,
        "tool_failures": s.tool_failures, "user_turns": s.user_turns, "session_started_at": s.started_at,
        "session_closed_at": s.closed_at, "day": s.day, "rules": RULES_VERSION,
    } for s in result.sessions]  # fmt: skip
    events = [{
        "entity": e.ref.entity, "item_id": e.ref.item_id, "user_id": e.user_id, "session_id": e.session_id,
        "agent_version": e.agent_version, "outcome": e.outcome, "reason": e.reason, "served_at_us": e.served_at_us,
        "turn_index": e.turn_index, "day": e.day, "rules": RULES_VERSION,
    } for e in result.events]  # fmt: skip
    counters = [{
        "entity": ref.entity, "item_id": ref.item_id, "user_id": c.owner, "agent_version": c.agent_version,
        "served": c.served, "sessions": c.sessions, "helpful": c.count(HELPFUL), "harmful": c.count(HARMFUL),
        "missed": c.count(MISSED), "flagged": states.get(ref, "clear") != "clear",
        "held_out": states.get(ref) == "held_out", "computed_at": now, "rules": RULES_VERSION,
    } for ref, c in sorted(result.counters.items(), key=lambda kv: (kv[0].entity, kv[0].item_id))]  # fmt: skip
    return {name: pa.Table.from_pylist(rows, schema=TABLES[name]) for name, rows in
            (("session_outcomes", sessions), ("item_outcome_events", events), ("item_outcomes", counters))}  # fmt: skip


def retrieval_events(store: Lake) -> list[RetrievalEvent]:
    """The retrieval log as value types (items in response order, profiles, then user and agent playbooks)."""
    out = []
    for r in store.read_table("retrieval_events").to_pylist():
        items = ([ItemRef("profile", str(i)) for i in r["profile_ids"] or []]
                 + [ItemRef("user_playbook", str(i)) for i in r["user_playbook_ids"] or []]
                 + [ItemRef("agent_playbook", str(i)) for i in r["agent_playbook_ids"] or []])  # fmt: skip
        out.append(RetrievalEvent(r["event_id"], r["served_at_us"], r["user_id"], r["session_id"],
                                  r["agent_version"] or "", r["arm"], r["holdout"], r["holdout_override"],
                                  tuple(items)))  # fmt: skip
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
        items[ref] = LearnedItem(ref, r["user_id"], r["agent_version"] or "", r["content"] or "", r["trigger"] or "",
                                 r["created_at"] or 0, sources[r["user_playbook_id"]])  # fmt: skip
    for r in every_item(store, "profile"):
        ref = ItemRef("profile", str(r["profile_id"]))
        items[ref] = LearnedItem(ref, r["user_id"], "", r["content"] or "", "", r["last_modified_timestamp"] or 0,
                                 frozenset(r["source_turn_ids"] or ()))  # fmt: skip
    for r in live_agent_playbooks(store, ("current", "archived")):
        ref = ItemRef("agent_playbook", str(r["agent_playbook_id"]))
        turns = frozenset().union(*(sources.get(m, frozenset()) for m in r["member_ids"] or []))
        items[ref] = LearnedItem(ref, None, r["agent_version"] or "", r["content"] or "", r["trigger"] or "",
                                 r["created_at"] or 0, turns)  # fmt: skip
    return items


def judged_sessions(store: Lake) -> dict[tuple[str, str], bool]:
    """(user, session) -> success as the evaluators judged it: successful when at least one evaluator said so and
    none said otherwise."""
    verdicts: dict[tuple[str, str], list[bool]] = {}
    for r in store.read_table("session_evaluations").to_pylist():
        verdicts.setdefault((r["user_id"] or "", r["session_id"]), []).append(r["is_success"])
    return {key: all(v) for key, v in verdicts.items()}
