"""The text of shared rows: erasure re-words it without the erased user, export narrows it to the requester's words.

Shared rows (`scope.py`: agent playbooks, their aggregation change log, curation of them) hold text consolidated
from several users' playbooks. Aggregation already keeps one person's words out of them (`aggregate.shared_rule`),
but a rule consolidated before that rule existed, or an approved rule a person worded, can still quote a member.
Words are compared as `learning/wording.py` does (normalised; function words always stay):

- **erasure** re-consolidates the wording without the erased user: a content word stays only if a remaining
  contributor wrote it (at least two of them when two or more remain, the test aggregation applies), or if neither a
  contributor nor the erased user ever wrote it (the consolidator's own words). An agent playbook whose content
  keeps no content word is deleted with everything about it, like one only the erased user supported;
- **export** shows the requester a shared row with only their own words and the consolidator's: a content word some
  other contributor wrote and the requester never did is left out.

The text columns are `TEXT_COLUMNS`, also inside the JSON objects of `JSON_COLUMNS` (change-log snapshots, curation
fields); other columns are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.learning.wording import Support, keep_words, without_personal_facts
from reflexio_pipelines.privacy.scope import Scope, agent_playbook_of

#: Columns (and keys of the JSON objects below) that hold consolidated text.
TEXT_COLUMNS = ("content", "trigger", "rationale", "blocking_issue_details")
#: JSON object columns whose `TEXT_COLUMNS` keys hold consolidated text.
JSON_COLUMNS = ("before", "after", "fields")
#: The member playbooks' fields a contributor's words are taken from.
_MEMBER_FIELDS = ("trigger", "content", "rationale", "blocking_issue_details")


@dataclass(frozen=True)
class SharedWording:
    """Who wrote which word of every agent playbook the user contributed to, and every word of the user's own."""

    user_id: str
    contributors: dict[int, Support]  # agent playbook id -> each member user's words (the user included)
    own: frozenset[str]  # every content word of the user's own rows (`Scope.words`)
    emptied: frozenset[int] = frozenset()  # agent playbooks whose content erasure would leave without content

    def for_erasure(self, row: dict) -> dict:
        """A shared row with the erased user's words taken out (see the module docstring)."""
        support = self._support(row)
        remaining = support.without(self.user_id) if support else Support({})
        need = min(2, remaining.users) or 1

        def keep(word: str) -> bool:
            writers = remaining.writers(word)
            return writers >= need if writers else word not in self.own

        return reworded(row, keep)

    def for_export(self, row: dict) -> dict:
        """A shared row as the user may see it: their own words and the consolidator's only."""
        support = self._support(row) or Support({})
        return reworded(row, lambda word: word in self.own or not support.writers(word))

    def _support(self, row: dict) -> Support | None:
        """The words of the agent playbook `row` belongs to, by member user (None: none the user contributed to)."""
        playbook = agent_playbook_of(row)
        return None if playbook is None else self.contributors.get(playbook)


def shared_wording(lake: Lake, scope: Scope) -> SharedWording:
    """Collect, for every agent playbook the user contributed to, each member user's words from the member user
    playbooks (every version the lake holds) named by the agent playbook's rows and its change log."""
    members: dict[int, set[int]] = {}
    agent_rows = [
        r for r in lake.read_table("agent_playbooks").to_pylist() if r["agent_playbook_id"] in scope.agent_playbook_ids
    ]
    changes = lake.read_table("aggregation_change_log").select(["agent_playbook_id", "member_ids"]).to_pylist()
    for row in [*agent_rows, *changes]:
        if row["agent_playbook_id"] in scope.agent_playbook_ids:
            members.setdefault(row["agent_playbook_id"], set()).update(row["member_ids"] or [])
    wanted = {i for ids in members.values() for i in ids}
    playbooks: dict[int, list[dict]] = {}
    for row in lake.read_table("user_playbooks").select(["user_playbook_id", "user_id", *_MEMBER_FIELDS]).to_pylist():
        if row["user_playbook_id"] in wanted:
            playbooks.setdefault(row["user_playbook_id"], []).append(row)
    contributors = {}
    for agent_id, ids in members.items():
        texts: dict[str, list[str | None]] = {}
        for row in (r for i in sorted(ids) for r in playbooks.get(i, [])):
            texts.setdefault(row["user_id"], []).extend(row[f] for f in _MEMBER_FIELDS)
        contributors[agent_id] = Support(texts)
    wording = SharedWording(scope.user_id, contributors, scope.words)
    emptied = {r["agent_playbook_id"] for r in agent_rows if r["content"] and not wording.for_erasure(r)["content"]}
    return SharedWording(scope.user_id, contributors, scope.words, frozenset(emptied))


def reworded(row: dict, keep: Callable[[str], bool]) -> dict:
    """`row` with clauses stating a fact about a person and the words `keep` refuses taken out of its text columns
    (and of the text keys of its JSON columns), as consolidation words a shared rule; a JSON column is rewritten
    only when its text changed."""
    out = dict(row)
    for column in TEXT_COLUMNS:
        if isinstance(out.get(column), str):
            out[column] = keep_words(without_personal_facts(out[column]), keep) or None
    for column in JSON_COLUMNS:
        value = out.get(column)
        if not isinstance(value, str) or not value:
            continue
        try:
            decoded = json.loads(value)
        except ValueError:
            continue
        if not isinstance(decoded, dict):
            continue
        changed = reworded(decoded, keep)
        if changed != decoded:
            out[column] = json.dumps(changed, ensure_ascii=False, sort_keys=True)
    return out
