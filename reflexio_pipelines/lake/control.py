"""The control log: human decisions (approve / reject / un-reject an agent playbook) as append-only rows.

The service writes a decision here and applies it to retrieval at once (an in-memory overlay); every pipeline run
reads the same log, so a decision survives re-aggregation and index rebuilds.
"""

from __future__ import annotations

import time

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES

PLAYBOOK_STATUSES = ("pending", "approved", "rejected")


def record_decision(lake: Lake, entity: str, item_id: str, value: str, actor: str = "api") -> dict:
    """Append one decision (serialised across processes); returns the row written."""
    with lake.lock("control-log"):
        seq = lake.read_table("control_log").num_rows
        row = {
            "seq": seq,
            "at": int(time.time()),
            "entity": entity,
            "item_id": str(item_id),
            "action": "playbook_status",
            "value": value,
            "actor": actor,
        }
        lake.append("control_log", pa.Table.from_pylist([row], schema=TABLES["control_log"]))
    return row


def decisions(lake: Lake, entity: str = "agent_playbook") -> dict[str, str]:
    """item id -> the latest decided value for `entity`."""
    rows = sorted(lake.read_table("control_log").to_pylist(), key=lambda r: r["seq"])
    return {r["item_id"]: r["value"] for r in rows if r["entity"] == entity}


def log_version(lake: Lake) -> int | None:
    """The control log's Delta version (None before the first decision): a cheap change check for replicas."""
    return lake.table_version("control_log")
