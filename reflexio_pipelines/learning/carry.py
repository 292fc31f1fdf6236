"""A window's rows after an incremental run: what earlier runs of the window wrote, plus what this run added.

A run of a window replaces the window's rows in one commit (lake/io.py `replace_window`), so an incremental run
must write back everything earlier runs of the window learned (those items are the users' state, never recomputed)
with this run's rows after them. Bookmarks are one row per (user, extractor group): this run's row replaces the
earlier one. An item this run found again under an id the window already holds (the judge kept it rather than
calling it a duplicate) is folded into the stored row — its evidence joined — instead of being written twice.
"""

from __future__ import annotations

from typing import Any

from reflexio_pipelines.learning.batch import LearnOutput

Rows = list[dict[str, Any]]

#: table -> id column of the learned items a window holds
ITEM_TABLES = {"user_profiles": "profile_id", "user_playbooks": "user_playbook_id"}
#: every table the learning step writes per window
WINDOW_TABLES = ("user_profiles", "user_playbooks", "change_log", "extraction_bookmarks")


def window_rows(previous: dict[str, Rows], output: LearnOutput) -> dict[str, Rows]:
    """The window's rows to write: `previous` (this window's rows before the run, by table) carried forward, with
    the run's `output` added."""
    new = {"user_profiles": output.profiles, "user_playbooks": output.playbooks}
    rows: dict[str, Rows] = {}
    folded: set[str] = set()
    for table, id_column in ITEM_TABLES.items():
        rows[table], folded_here = _items(previous.get(table, []), new[table], id_column)
        folded |= folded_here
    # a folded item was not added again: its "added" change is already in the log from the run that added it
    changes = [c for c in output.change_log if not (c["change"] == "added" and c["item_id"] in folded)]
    rows["change_log"] = [*previous.get("change_log", []), *changes]
    replaced = {(b["user_id"], b["extractor"]) for b in output.bookmarks}
    kept = [b for b in previous.get("extraction_bookmarks", []) if (b["user_id"], b["extractor"]) not in replaced]
    rows["extraction_bookmarks"] = sorted([*kept, *output.bookmarks], key=lambda b: (b["user_id"], b["extractor"]))
    return rows


def _items(previous: Rows, new: Rows, id_column: str) -> tuple[Rows, set[str]]:
    """`previous` then `new`, a new row whose id `previous` already holds folded into it; returns the rows and
    the folded ids."""
    out = [dict(r) for r in previous]
    at = {str(r[id_column]): i for i, r in enumerate(out)}
    folded: set[str] = set()
    for row in new:
        key = str(row[id_column])
        if key not in at:
            at[key] = len(out)
            out.append(row)
            continue
        stored = out[at[key]]
        for column in ("source_turn_ids", "source_interaction_ids", "supersedes"):
            stored[column] = sorted({*(stored.get(column) or []), *(row.get(column) or [])})
        folded.add(key)
    return out, folded
