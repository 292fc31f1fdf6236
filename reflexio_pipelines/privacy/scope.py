"""Which rows of every lake table concern one user: the single definition that export and erasure share.

Rows are found by their columns, not by table name, so a table added to `lake.schemas.TABLES` later is covered as
soon as it carries one of the identifying columns below; a table with none of them must be declared an aggregate
(`AGGREGATE_TABLES`, with the reason), otherwise `check_rules()` raises and export/erasure refuse to run.

- **direct** rows belong to the user and nobody else: `user_id` equals the user, or `turn_id` / `profile_id` /
  `user_playbook_id` is one of the user's ids, or (`entity`, `item_id`) names one of the user's turns ("interaction"),
  profiles or user playbooks. Erasure deletes them.
- **shared** rows belong to an agent playbook (`agent_playbook_id`, or `entity` = "agent_playbook") that the user's
  playbooks contributed to, or list the user in `member_ids` / `member_user_ids`. Erasure deletes them when no other
  user supports that agent playbook, otherwise removes the user from the member lists and the user's words from
  their text (`shared.py`) and keeps them; export narrows their member lists to the user's own and their text to
  the user's words (other users' ids and words never leave in someone else's export).
- **owned** rows list the user in `owner_user_ids`: derived copies of text several users' words can be in (the
  embedding cache). They count as shared for export (owner lists narrowed to the user); erasure deletes them
  whoever else is listed (`lake.embedding_cache.erase_owner`), and the next index build recreates them for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.quarantine import read_landing
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.lake.windows import configured_granularity, key_of_landing_hour, window_of_key
from reflexio_pipelines.learning.wording import vocabulary
from reflexio_pipelines.storage import LakePath, read_parquet

#: Tables without per-user rows, and why nothing in them identifies a user.
AGGREGATE_TABLES = {
    "impact_metrics": "counts and rates per agent version and day; rewritten from session_evaluations by every "
    "evaluation run",
    "impact_before_after": "rates per agent version before/after a first retrieval; rewritten by every evaluation run",
    "quarantine": "one row per unreadable file moved aside: paths, size, hash and the decoder's error, no content; "
    "the quarantined files themselves are deleted by every erasure (lake/quarantine.py)",
    "impact_holdout": "treated vs control rates and means per agent version, evaluation and metric; rewritten by "
    "every evaluation run",
}

#: Columns that tie a row to a user directly, or to an agent playbook the user's playbooks are members of.
DIRECT_COLUMNS = ("user_id", "turn_id", "profile_id", "user_playbook_id")
SHARED_COLUMNS = ("agent_playbook_id", "member_ids", "member_user_ids")
OWNER_COLUMNS = ("owner_user_ids",)
ENTITY_COLUMNS = ("entity", "item_id")


class MissingErasureRule(RuntimeError):
    """A lake table has no column that identifies a user and is not declared an aggregate."""


def check_rules(tables: dict[str, pa.Schema] = TABLES) -> None:
    """Raise MissingErasureRule naming every table that neither carries an identifying column nor is an aggregate."""
    missing = [name for name, schema in tables.items() if name not in AGGREGATE_TABLES and not _identifying(schema)]
    if missing:
        raise MissingErasureRule(
            f"no erasure rule for lake table(s) {missing}: give them a user_id (or another identifying column, see "
            "reflexio_pipelines/privacy/scope.py) or declare them in AGGREGATE_TABLES"
        )


def _identifying(schema: pa.Schema) -> bool:
    names = set(schema.names)
    return bool(names & {*DIRECT_COLUMNS, *SHARED_COLUMNS, *OWNER_COLUMNS}) or set(ENTITY_COLUMNS) <= names


@dataclass(frozen=True)
class Scope:
    """Everything that identifies one user's rows, gathered from the whole lake before anything is changed."""

    user_id: str
    turn_ids: frozenset[str]
    profile_ids: frozenset[str]
    playbook_ids: frozenset[int]
    agent_playbook_ids: frozenset[int]  # agent playbooks the user's playbooks are (or were) members of
    sole_agent_playbook_ids: frozenset[int]  # ... that no other user supports: erasure deletes them
    held: int = 0  # rows naming the user (landing, `user_id` columns, member lists) when the scope was taken
    words: frozenset[str] = frozenset()  # every content word of the user's own rows (`learning/wording.py`)

    def entity_ids(self, entity: str) -> set[str]:
        """Ids (as the strings `item_id` columns hold) of the user's items of one entity kind."""
        return {
            "interaction": set(self.turn_ids),
            "profile": set(self.profile_ids),
            "user_playbook": {str(i) for i in self.playbook_ids},
            "agent_playbook": {str(i) for i in self.agent_playbook_ids},
        }.get(entity, set())


@dataclass(frozen=True)
class Matches:
    """Row masks of one table: `direct` rows are the user's own, `shared` rows mention them as a contributor."""

    direct: pa.Array
    shared: pa.Array

    @property
    def any(self) -> pa.Array:
        return pc.or_(self.direct, self.shared)


@dataclass(frozen=True)
class LandingHit:
    """A committed landing file holding some of the user's turns, the window it belongs to and those rows."""

    path: LakePath
    window: str
    rows: pa.Table


def landing_rows(lake: Lake, user_id: str) -> list[LandingHit]:
    """Every committed landing file that holds turns of the user (only the user_id column is read of the others)."""
    out = []
    granularity = configured_granularity()
    for date, hour, hour_dir in lake.landing_hours():
        window = window_of_key(key_of_landing_hour(date, hour, granularity), granularity)
        for path in lake.landing_files([hour_dir]):
            users = read_landing(lake, path, columns=["user_id"])
            if users is None:
                continue  # unreadable: quarantined, and deleted by the erasure (lake/quarantine.py)
            if pc.any(pc.equal(users.column("user_id"), user_id)).as_py():
                table = read_parquet(path)
                out.append(LandingHit(path, window, table.filter(pc.equal(table.column("user_id"), user_id))))
    return out


def scope_of(lake: Lake, user_id: str) -> Scope:
    """Collect the user's ids from every table (and the landing files), whichever of them still hold rows.

    Ids are gathered from all tables that carry them, so an erasure interrupted after some tables still finds the
    user's rows in the rest when it is retried (erasure visits the tables that only reference ids first).
    """
    turn_ids: set[str] = set()
    profile_ids: set[str] = set()
    playbook_ids: set[int] = set()
    held = 0
    texts: list[str] = []  # the user's words, for re-wording the shared rows they contributed to (privacy/shared.py)
    for hit in landing_rows(lake, user_id):
        turn_ids.update(hit.rows.column("turn_id").to_pylist())
        held += hit.rows.num_rows
        texts.extend(_strings(hit.rows))
    for name, schema in TABLES.items():
        names = set(schema.names)
        if "user_id" not in names:
            continue
        rows = lake.read_table(name, filters=[("user_id", "=", user_id)])
        held += rows.num_rows
        texts.extend(_strings(rows))
        if "turn_id" in names:
            turn_ids.update(rows.column("turn_id").to_pylist())
        if "profile_id" in names:
            profile_ids.update(rows.column("profile_id").to_pylist())
        if "user_playbook_id" in names:
            playbook_ids.update(rows.column("user_playbook_id").to_pylist())
        if set(ENTITY_COLUMNS) <= names:
            for entity, item_id in zip(rows.column("entity").to_pylist(), rows.column("item_id").to_pylist()):
                if entity == "interaction":
                    turn_ids.add(item_id)
                elif entity == "profile":
                    profile_ids.add(item_id)
                elif entity == "user_playbook" and item_id.lstrip("-").isdigit():
                    playbook_ids.add(int(item_id))
    agent_ids: set[int] = set()
    sole: set[int] = set()
    for name, schema in TABLES.items():
        if "agent_playbook_id" not in schema.names or not {"member_ids", "member_user_ids"} & set(schema.names):
            continue
        for row in lake.read_table(name).to_pylist():
            members = set(row.get("member_ids") or [])
            users = set(row.get("member_user_ids") or [])
            if user_id not in users and not members & playbook_ids:
                continue
            agent_ids.add(row["agent_playbook_id"])
            held += user_id in users
            # Only the latest state (a table that lists member users) decides whether anybody else supports it.
            if "member_user_ids" in row and (not users - {user_id} or not members - playbook_ids):
                sole.add(row["agent_playbook_id"])
    return Scope(
        user_id,
        frozenset(turn_ids),
        frozenset(profile_ids),
        frozenset(playbook_ids),
        frozenset(agent_ids),
        frozenset(sole),
        held,
        vocabulary(texts),
    )


def _strings(table: pa.Table) -> list[str]:
    """Every string value of a table (its text columns, and the ids, which are words the user's rows hold too)."""
    return [v for column in table.columns if pa.types.is_string(column.type) for v in column.to_pylist() if v]


def matches(table: pa.Table, scope: Scope) -> Matches:
    """Which rows of `table` concern the user (see the module docstring)."""
    direct = shared = _mask(False for _ in range(table.num_rows))
    names = set(table.column_names)
    if "user_id" in names:
        direct = pc.or_(direct, _is(table, "user_id", {scope.user_id}))
    if "turn_id" in names:
        direct = pc.or_(direct, _is(table, "turn_id", scope.turn_ids))
    if "profile_id" in names:
        direct = pc.or_(direct, _is(table, "profile_id", scope.profile_ids))
    if "user_playbook_id" in names:
        direct = pc.or_(direct, _is(table, "user_playbook_id", scope.playbook_ids, pa.int64()))
    if set(ENTITY_COLUMNS) <= names:
        entities = table.column("entity").to_pylist()
        items = table.column("item_id").to_pylist()
        own = {e: scope.entity_ids(e) for e in ("interaction", "profile", "user_playbook", "agent_playbook")}
        direct = pc.or_(direct, _mask(e != "agent_playbook" and i in own.get(e, ()) for e, i in zip(entities, items)))
        shared = pc.or_(shared, _mask(e == "agent_playbook" and i in own[e] for e, i in zip(entities, items)))
    if "agent_playbook_id" in names:
        shared = pc.or_(shared, _is(table, "agent_playbook_id", scope.agent_playbook_ids, pa.int64()))
    if "member_ids" in names:
        shared = pc.or_(
            shared, _mask(bool(set(m or []) & scope.playbook_ids) for m in table.column("member_ids").to_pylist())
        )
    for column in ("member_user_ids", *OWNER_COLUMNS):
        if column in names:
            shared = pc.or_(shared, _mask(scope.user_id in (m or []) for m in table.column(column).to_pylist()))
    return Matches(pc.fill_null(direct, False), pc.and_not(pc.fill_null(shared, False), pc.fill_null(direct, False)))


def _mask(values) -> pa.Array:
    return pa.array(list(values), pa.bool_())


def _is(table: pa.Table, column: str, values, type_: pa.DataType = pa.string()) -> pa.Array:
    return pc.is_in(table.column(column).combine_chunks(), value_set=pa.array(sorted(values), type_))


def owned_by_user(row: dict, scope: Scope) -> bool:
    """Whether a row lists the user among its owners (`OWNER_COLUMNS`): erasure deletes such rows."""
    return any(scope.user_id in (row.get(column) or []) for column in OWNER_COLUMNS)


def agent_playbook_of(row: dict) -> int | None:
    """The agent playbook a shared row belongs to (its `agent_playbook_id`, or an `agent_playbook` item id)."""
    if row.get("agent_playbook_id") is not None:
        return int(row["agent_playbook_id"])
    if row.get("entity") == "agent_playbook" and row.get("item_id") is not None:
        return int(row["item_id"])
    return None


def without_user(row: dict, scope: Scope) -> dict:
    """A shared row with the user's playbooks and id removed from its member lists."""
    out = dict(row)
    if "member_ids" in out:
        out["member_ids"] = [m for m in out["member_ids"] or [] if m not in scope.playbook_ids]
    if "member_user_ids" in out:
        out["member_user_ids"] = [u for u in out["member_user_ids"] or [] if u != scope.user_id]
    return out


def only_user(row: dict, scope: Scope) -> dict:
    """A shared row as the user may see it: member lists narrowed to the user's own playbooks and id."""
    out = dict(row)
    if "member_ids" in out:
        out["member_ids"] = [m for m in out["member_ids"] or [] if m in scope.playbook_ids]
    for column in ("member_user_ids", *OWNER_COLUMNS):
        if column in out:
            out[column] = [u for u in out[column] or [] if u == scope.user_id]
    return out
