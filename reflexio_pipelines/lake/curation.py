"""Manual curation: items added, edited or deleted through the API, kept as an append-only log.

The learned tables are only ever written by pipeline runs; a person's add, edit or delete is a row in
`curation_log` instead. Every reader of live items (`records.live_rows`, the index build, the service's reads)
applies the log, so a curated change holds across re-materialisations and is never relearned:

- add: the whole row, shaped like a row of the entity's table (window `MANUAL_WINDOW`, extractor `manual`);
- update: the changed columns, applied over whatever row currently carries the id;
- delete: the id; the item disappears from reads, search and learning. Deleting turns (interactions) cascades to
  the items learned from them (`cascade_deletes`).

Physically removing a user's bytes is erasure (reflexio_pipelines/privacy), not this.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES

#: The window manual rows carry: sorts before every real window, so learning sees them as prior state.
MANUAL_WINDOW = "0000-manual"
ENTITIES = ("profile", "user_playbook", "agent_playbook", "interaction")
ACTIONS = ("add", "update", "delete")

#: entity -> id column of its rows
ID_COLUMNS = {
    "profile": "profile_id",
    "user_playbook": "user_playbook_id",
    "agent_playbook": "agent_playbook_id",
    "interaction": "turn_id",
}


@dataclass(frozen=True)
class CurationOp:
    """One curated change, before it gets its sequence number."""

    entity: str
    item_id: str
    action: str
    user_id: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.entity not in ENTITIES:
            raise ValueError(f"unknown entity {self.entity!r}; expected one of {ENTITIES}")
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}; expected one of {ACTIONS}")


def record(lake: Lake, ops: Iterable[CurationOp], actor: str = "api") -> list[dict[str, Any]]:
    """Append ops durably, in order, as one commit (serialised across processes). Returns the rows written."""
    ops = list(ops)
    if not ops:
        return []
    with lake.lock("curation-log"):
        seq = lake.read_table("curation_log").num_rows
        now = int(time.time())
        rows = [
            {
                "seq": seq + i,
                "at": now,
                "entity": op.entity,
                "item_id": str(op.item_id),
                "user_id": op.user_id,
                "action": op.action,
                "fields": json.dumps(op.fields, ensure_ascii=False, sort_keys=True),
                "actor": actor,
            }
            for i, op in enumerate(ops)
        ]
        lake.append("curation_log", pa.Table.from_pylist(rows, schema=TABLES["curation_log"]))
    return rows


def read_ops(lake: Lake, entity: str | None = None, filters: list[tuple] | None = None) -> list[dict[str, Any]]:
    """The log in order (optionally one entity's ops, and only rows matching DNF `filters`), `fields` decoded."""
    rows = sorted(lake.read_table("curation_log", filters=filters).to_pylist(), key=lambda r: r["seq"])
    return [dict(r, fields=json.loads(r["fields"] or "{}")) for r in rows if entity is None or r["entity"] == entity]


def deleted_ids(ops: Iterable[dict[str, Any]]) -> frozenset[str]:
    """Ids whose latest add/delete op is a delete (re-adding a deleted id brings it back)."""
    state: dict[str, bool] = {}
    for op in ops:
        if op["action"] in ("add", "delete"):
            state[op["item_id"]] = op["action"] == "delete"
    return frozenset(item for item, gone in state.items() if gone)


def apply_adds_and_updates(
    rows: list[dict[str, Any]], ops: Iterable[dict[str, Any]], id_column: str, filters: list[tuple] | None = None
) -> list[dict[str, Any]]:
    """`rows` plus the added rows that pass `filters`, with every update applied in log order.

    Updates patch each stored row carrying the id (all of its windows), so whichever one is live shows the edit.
    """
    ops = list(ops)
    out = list(rows)
    for op in ops:
        if op["action"] == "add" and row_matches(op["fields"], filters):
            out.append(dict(op["fields"]))
    patches: dict[str, dict[str, Any]] = {}
    for op in ops:
        if op["action"] == "update":
            patches.setdefault(op["item_id"], {}).update(op["fields"])
    if not patches:
        return out
    return [dict(row, **patches[str(row[id_column])]) if str(row[id_column]) in patches else row for row in out]


_COMPARE = {
    "=": lambda a, b: a == b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a is not None and a < b,
    "<=": lambda a, b: a is not None and a <= b,
    ">": lambda a, b: a is not None and a > b,
    ">=": lambda a, b: a is not None and a >= b,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


def row_matches(row: dict[str, Any], filters: list[tuple] | None) -> bool:
    """Whether a row passes conjunctive `(column, op, value)` filters, the form `Lake.read_table` takes."""
    return all(_COMPARE[op](row.get(column), value) for column, op, value in (filters or []))


def manual_row(table: str, **values: Any) -> dict[str, Any]:
    """A full row of `table` for a manual add: the given values, `window` MANUAL_WINDOW, extractor `manual` where
    the table has provenance, empty lists for list columns and None elsewhere."""
    schema = TABLES[table]
    row: dict[str, Any] = {name: [] if pa.types.is_list(schema.field(name).type) else None for name in schema.names}
    if "extractor" in row:
        row["extractor"] = "manual"
    if "window" in row:
        row["window"] = MANUAL_WINDOW
    unknown = set(values) - set(row)
    if unknown:
        raise KeyError(f"{table} has no column(s) {sorted(unknown)}")
    row.update(values)
    return row


def cascade_deletes(
    turn_ids: set[str],
    learned: dict[str, list[dict[str, Any]]],
    agent_playbooks: list[dict[str, Any]],
    user_playbook_ids: AbstractSet[int] = frozenset(),
) -> list[CurationOp]:
    """Delete ops for everything derived from deleted turns or user playbooks: learned items citing any deleted
    turn as a source, and agent playbooks left with no member once their user playbooks are gone. `learned` maps
    profile / user_playbook to their live rows (any status)."""
    ops: list[CurationOp] = []
    gone_playbooks: set[int] = set(user_playbook_ids)
    for entity, rows in learned.items():
        id_column = ID_COLUMNS[entity]
        for row in rows:
            if turn_ids.intersection(row.get("source_turn_ids") or []):
                ops.append(CurationOp(entity, str(row[id_column]), "delete", user_id=row["user_id"]))
                if entity == "user_playbook":
                    gone_playbooks.add(int(row[id_column]))
    for row in agent_playbooks if gone_playbooks else []:
        members = set(row.get("member_ids") or [])
        if members and members <= gone_playbooks:
            ops.append(CurationOp("agent_playbook", str(row["agent_playbook_id"]), "delete"))
    return ops


#: Lifecycle statuses an agent playbook row can have (aggregation archives the ones no cluster maps to any more).
AGENT_PLAYBOOK_STATUSES = ("current", "archived")


def agent_playbook_row(lake: Lake, agent_playbook_id: int) -> dict[str, Any] | None:
    """The live agent playbook with this id in any lifecycle status (aggregated or manual), or None."""
    rows = live_agent_playbooks(lake, AGENT_PLAYBOOK_STATUSES)
    return next((r for r in rows if int(r["agent_playbook_id"]) == int(agent_playbook_id)), None)


def live_agent_playbooks(lake: Lake, statuses: tuple[str, ...] = ("current",)) -> list[dict[str, Any]]:
    """Agent playbooks in `statuses` (lifecycle; default current): the aggregation's rows plus manual adds (always
    current: they are nobody's cluster, so no aggregation archives them), edits applied, deletions removed. The one
    reading of agent playbooks for reads, edits, approval and the index build, so a manual playbook is a playbook
    like any other."""
    ops = read_ops(lake, "agent_playbook")
    rows = [r for r in lake.read_table("agent_playbooks").to_pylist() if r["status"] in statuses]
    rows = apply_adds_and_updates(rows, ops, "agent_playbook_id", [("status", "in", statuses)])
    gone = deleted_ids(ops)
    return [r for r in rows if str(r["agent_playbook_id"]) not in gone]
