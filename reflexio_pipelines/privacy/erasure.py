"""Erase one user from the lake: landing files, every Delta table (and its history), operation state, the index.

Order matters for crash safety. A marker is written first (`state/erasure_requests/<salted hash>.json` plus an
`active/<salted hash>` entry while in progress; it never holds the user id — an interrupted erasure is resumed by
finding the user whose salted hash it names, `resume_erasure`). Tables that merely *reference* the user's ids
(retrievals, shadow comparisons, change logs, agent playbooks) are erased before the tables those ids are collected
from (user playbooks, profiles, turns), and the landing files last, so a retry after a crash at any point still
finds every remaining row. Each table is rewritten partition by partition without the user's rows (the commit's
predicate names only the `window` partition column, never the user), then its history is purged
(`Lake.purge_history`): removed data files are vacuumed and old commit files, whose column statistics can hold the
user's id or text, are deleted after a checkpoint. Shared rows the user contributed to lose the user from their
member lists and the user's words from their text (`shared.py`); an agent playbook only the user supported, or
worded, goes. The embedding cache is erased after every table index documents are read from (see
`DERIVED_TABLES`). Finally a new index version is published without the user and every older version deleted; the
marker keeps the counts. Running it again is harmless: it finds nothing and says so.

A user who keeps publishing is paused by the service for the erasure (their publishes answer 409, serving/erasures.py);
rows a racing run writes back meanwhile are caught by a further pass (at most `PASSES`).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from reflexio_pipelines.lake import staging
from reflexio_pipelines.lake.embedding_cache import CACHE_TABLE, EmbeddingCache, erase_owner
from reflexio_pipelines.lake.io import ERASURES_ACTIVE, Lake
from reflexio_pipelines.lake.operation_status import SERVICES, read_status, write_status
from reflexio_pipelines.lake.quarantine import erase_quarantined, read_landing
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.privacy.scope import (
    Matches,
    Scope,
    agent_playbook_of,
    check_rules,
    landing_rows,
    matches,
    owned_by_user,
    scope_of,
    without_user,
)
from reflexio_pipelines.privacy.shared import SharedWording, shared_wording
from reflexio_pipelines.search.documents import index_documents
from reflexio_pipelines.search.versions import (
    current_version,
    list_versions,
    local_copy,
    prune_versions,
    publish_index,
    version_doc_files,
)
from reflexio_pipelines.storage import is_remote, read_parquet, sync_dir, write_bytes, write_parquet

#: Tables erased last, in this order: the ones the user's ids are collected from (agent playbook ids and their
#: sole support; profile, playbook and turn ids). Every other table only references those ids and goes first.
ANCHOR_TABLES = (
    "agent_playbooks",
    "change_log",
    "playbook_embeddings",
    "curation_log",
    "user_profiles",
    "user_playbooks",
    "turns",
)

#: Locks the writers of unpartitioned tables hold while they commit (partitioned tables: `window-<window>`).
#: Erasure takes them while it rewrites a table, so no run commits between its read and its rewrite.
WRITER_LOCKS = {
    "lifecycle_events": "lifecycle-events",
    "playbook_embeddings": "aggregation",
    "agent_playbooks": "aggregation",
    "aggregation_change_log": "aggregation",
    "control_log": "control-log",
    "curation_log": "curation-log",
    "retrievals": "retrievals",
    # partitioned by the serve's window, appended by the service under the retrieval log's lock (serving/retrievals.py)
    "retrieval_events": "retrievals",
    # rewritten (and the change log appended) by the outcome step, and by a reviewer's keep (lake/outcomes.py)
    "session_outcomes": "outcomes",
    "item_outcome_events": "outcomes",
    "item_outcomes": "outcomes",
    "outcome_change_log": "outcomes",
    "impact_holdout": "evaluations",
    "session_evaluations": "evaluations",
    "shadow_comparisons": "evaluations",
    "impact_metrics": "evaluations",
    "impact_before_after": "evaluations",
    # partitioned, but its writers hold this lock, not the window's (lake/llm_calls.py); rows about the user go,
    # cross-user calls (user_id null) stay
    "llm_calls": "llm-calls",
    # appended by the turns compaction, rewritten sorted by its compaction (lake/user_windows.py)
    "user_windows": "user-windows",
}

LANDING = "landing"
#: Files in quarantine the erasure deleted (they cannot be read, so none can be shown not to hold the user's rows).
QUARANTINE = "quarantined_files"
#: A run that read the user's rows before a pass can write them back after it; each further pass starts only if
#: the lake still names the user, and erasure gives up (to be retried) after this many.
PASSES = 3


class ErasureIncomplete(RuntimeError):
    """The user's rows kept reappearing (pipeline runs racing the erasure); retrying after they finish completes it."""


MARKER_DIR = ("state", "erasure_requests")
ACTIVE_DIR = ERASURES_ACTIVE
_ERASURE_ID_RE = re.compile(r"[0-9a-f]{64}")
#: List columns that name users (shared rows' contributors, cache rows' owners).
MEMBER_LISTS = ("member_user_ids", "owner_user_ids")


@dataclass
class ErasureResult:
    """What one erasure call removed: rows per table (plus `landing`), rows kept without the user (`redacted`),
    data files physically deleted from table histories, and the index version now served."""

    erased: dict[str, int] = field(default_factory=dict)
    redacted: dict[str, int] = field(default_factory=dict)
    files_purged: int = 0
    index_version: str | None = None

    @property
    def total(self) -> int:
        return sum(self.erased.values())


#: Erased after the anchors: derived from the documents in them. An index build that read those documents before
#: they were erased and stores vectors after this table was erased is stopped by the cache's erasure epoch.
DERIVED_TABLES = (CACHE_TABLE,)


def erase_order(tables: dict[str, pa.Schema] = TABLES) -> list[str]:
    """Every table, referencing tables first, the id sources (`ANCHOR_TABLES`) next, `DERIVED_TABLES` last."""
    late = (*ANCHOR_TABLES, *DERIVED_TABLES)
    return [t for t in tables if t not in late] + [t for t in late if t in tables]


def erase_user(
    lake: Lake, user_id: str, embedder: Embedder, on_table: Callable[[str, int], None] | None = None
) -> ErasureResult:
    """Remove every byte of `user_id`'s data from the lake and the index (see the module docstring).

    `on_table(name, rows)` is called after each table is done (progress logging). Raises MissingErasureRule before
    touching anything if a table has no erasure rule. Safe to call again after a crash or on an erased user.
    """
    check_rules()
    result = ErasureResult()
    with lake.lock("erasure"):
        marker = ErasureMarker.of(lake, user_id)
        marker.begin()
        for attempt in range(PASSES):
            scope = scope_of(lake, user_id)
            if attempt and not scope.held:
                break
            wording = shared_wording(lake, scope)
            # An agent playbook whose content was only the user's words goes, like one only the user supported.
            scope = replace(scope, sole_agent_playbook_ids=scope.sole_agent_playbook_ids | wording.emptied)
            _erase_pass(lake, scope, wording, marker, result, on_table)
        else:
            if scope_of(lake, user_id).held:
                raise ErasureIncomplete(f"pipeline runs kept writing the user's rows back during {PASSES} passes")
        _erase_operation_status(lake, user_id)
        marker.progress(QUARANTINE, erase_quarantined(lake))
        result.redacted = {name: n for name, n in result.redacted.items() if n}
        changed = any(marker.erased_now().values()) or bool(result.redacted)  # an interrupted attempt included
        if changed or _index_mentions(lake, user_id):
            result.index_version = _republish_index(lake, embedder)
        else:  # nothing of the user anywhere (an unknown or already erased user): no need to re-embed everything
            result.index_version = current_version(lake.index_root)
        result.erased = marker.complete()
    return result


def _erase_pass(
    lake: Lake,
    scope: Scope,
    wording: SharedWording,
    marker: "ErasureMarker",
    result: ErasureResult,
    on_table: Callable[[str, int], None] | None,
) -> None:
    """One pass over every table (in `erase_order`) and the landing files."""
    for name in erase_order():
        erased, redacted, purged = _erase_table(lake, name, scope, wording)
        result.files_purged += purged
        result.redacted[name] = result.redacted.get(name, 0) + redacted
        marker.progress(name, erased)
        if on_table is not None:
            on_table(name, erased)
    marker.progress(LANDING, _erase_landing(lake, scope.user_id))
    # shards a fanned-out run staged may hold the user's words; that run learns its window again at its commit
    staging.drop_all(lake)


def _erase_table(lake: Lake, name: str, scope: Scope, wording: SharedWording) -> tuple[int, int, int]:
    """Rewrite the partitions of `name` that hold the user's rows without them, then purge the table's history.
    Returns (rows deleted, shared rows kept without the user, data files purged)."""
    if name == CACHE_TABLE:  # vectors are read only for the buckets that hold the user's rows; bumps the epoch
        deleted, purged = erase_owner(lake, scope.user_id)
        return deleted, 0, purged
    partitioned = "window" in TABLES[name].names
    with ExitStack() as stack:
        if name in WRITER_LOCKS:
            stack.enter_context(lake.lock(WRITER_LOCKS[name]))
        table = lake.read_table(name)
        found = matches(table, scope)
        hit = table.filter(found.any)
        windows = sorted(set(hit.column("window").to_pylist())) if partitioned else None
        for window in windows or []:
            stack.enter_context(lake.lock(f"window-{window}"))
        if hit.num_rows:
            table = lake.read_table(name)  # again, under the window locks: what no run can change until we commit
            found = matches(table, scope)
            keep, deleted, redacted = _without_user(table, found, scope, wording, windows)
            lake.replace_windows(name, windows, keep)
        else:
            deleted = redacted = 0
        # Always: earlier versions of a table can hold the user's rows even when the current one holds none.
        purged = lake.purge_history(name)
    return deleted, redacted, purged


def _without_user(
    table: pa.Table, found: Matches, scope: Scope, wording: SharedWording, windows: list[str] | None
) -> tuple[pa.Table, int, int]:
    """The rows of the rewritten partitions that stay: direct rows go, shared rows of agent playbooks only this
    user supported (or worded) and rows the user owns (`owner_user_ids`) go, other shared rows stay with the user
    removed from their member lists and the user's words from their text."""
    if windows is not None:
        in_windows = pc.is_in(table.column("window").combine_chunks(), value_set=pa.array(windows, pa.string()))
        found = Matches(found.direct.filter(in_windows), found.shared.filter(in_windows))
        table = table.filter(in_windows)
    rows = table.to_pylist()
    direct, shared = found.direct.to_pylist(), found.shared.to_pylist()
    keep, deleted, redacted = [], 0, 0
    for row, is_direct, is_shared in zip(rows, direct, shared):
        if is_direct or (
            is_shared and (agent_playbook_of(row) in scope.sole_agent_playbook_ids or owned_by_user(row, scope))
        ):
            deleted += 1
        elif is_shared:
            keep.append(wording.for_erasure(without_user(row, scope)))
            redacted += 1
        else:
            keep.append(row)
    return pa.Table.from_pylist(keep, schema=table.schema), deleted, redacted


def _erase_landing(lake: Lake, user_id: str) -> int:
    """Rewrite every landing file that holds the user's turns without them (same name: temporary file, fsync,
    rename, directory fsync), or delete it if nothing else is in it. Returns the rows removed.

    The name is kept so the window's consumed-file list still matches and the landing sensor sees nothing new (the
    `turns` table was already rewritten to exactly what re-compacting these files gives). A deleted file is also
    dropped from that list. The landing writer rebuilds its idempotency index from these files at start-up, so the
    user's keys are gone from it after the next restart."""
    removed = 0
    for hit in landing_rows(lake, user_id):
        with lake.lock(f"window-{hit.window}"):
            table = read_parquet(hit.path)
            rest = table.filter(pc.invert(pc.equal(table.column("user_id"), user_id)))
            removed += table.num_rows - rest.num_rows
            if rest.num_rows:
                write_parquet(rest, hit.path)
            else:
                hit.path.unlink()
                sync_dir(hit.path.parent)
                lake.drop_consumed(hit.window, lake.relative(hit.path))
    return removed


def _erase_operation_status(lake: Lake, user_id: str) -> None:
    """Rerun progress files name the users they processed and the rerun's parameters: drop the user from them."""
    for service in SERVICES.values():
        status = read_status(lake, service)
        if status is None:
            continue
        fields: dict[str, Any] = {
            key: [u for u in status[key] if u != user_id]
            for key in ("processed_user_ids", "failed_user_ids")
            if user_id in (status.get(key) or [])
        }
        if status.get("current_user_id") == user_id:
            fields["current_user_id"] = None
        params = status.get("request_params") or {}
        if params.get("user_id") == user_id:
            fields["request_params"] = dict(params, user_id=None)
        if fields:
            write_status(lake, service, **fields)


def _index_mentions(lake: Lake, user_id: str) -> bool:
    """Whether any index version on disk holds a document of the user."""
    for version in list_versions(lake.index_root):
        for path in version_doc_files(lake.index_root, version):
            owners = read_parquet(path, columns=["user_id"]).column("user_id")
            if pc.any(pc.equal(owners, user_id)).as_py():
                return True
    return False


def _republish_index(lake: Lake, embedder: Embedder) -> str:
    """Publish a version built from the erased tables and delete every other version (and abandoned builds).

    A serving process still holding an old version keeps reading it from its open files until its watcher swaps
    to CURRENT (every 0.5 s); the bytes are gone from the directory at once."""
    cache = EmbeddingCache(lake)  # before the documents are read (see EmbeddingCache)
    docs, _, watermarks = index_documents(lake)
    version = publish_index(lake.index_root, docs, embedder, cache=cache, watermarks=watermarks)
    prune_versions(lake.index_root, keep=1, stale_tmp_seconds=0)
    if is_remote(lake.index_root):
        # This host's cached copies of the pruned versions go now, not at the service's next swap (which may have
        # happened already, while the old versions were still in the bucket).
        local_copy(lake.index_root, version)
    return version


class ErasureMarker:
    """`state/erasure_requests/<erasure id>.json`, the erasure id being `user_hash` (a salted hash of the user id):
    status, times and the rows erased so far — never the user id, also while in progress. While in progress an
    empty `state/erasure_requests/active/<erasure id>` lists it too, cheap to poll: the service refuses the user's
    publishes meanwhile, and resumes it at start-up (finding the user by hashing the ids the lake still holds)."""

    def __init__(self, lake: Lake, erasure_id: str) -> None:
        self.erasure_id = erasure_id
        self.path = lake.root.joinpath(*MARKER_DIR) / f"{erasure_id}.json"
        self.active = lake.root.joinpath(*ACTIVE_DIR) / erasure_id

    @classmethod
    def of(cls, lake: Lake, user_id: str) -> "ErasureMarker":
        """The marker of `user_id`'s erasure (creates the lake's salt on first use)."""
        return cls(lake, user_hash(lake, user_id))

    def read(self) -> dict | None:
        return self._state() if self.path.exists() else None

    def _state(self) -> dict:
        """The marker's state, once `begin` has written it."""
        return json.loads(self.path.read_text())

    def begin(self) -> None:
        """Start a request, or resume the interrupted one (keeping its counts)."""
        previous = self.read() or {"erased": {}}
        if previous.get("status") != "in_progress":
            self._write(
                {
                    "status": "in_progress",
                    "started_at": int(time.time()),
                    "erased": previous["erased"],
                    "erased_before": dict(previous["erased"]),
                }
            )
        if not self.active.exists():
            write_bytes(self.active, b"")

    def progress(self, name: str, rows: int) -> None:
        state = self._state()
        state["erased"][name] = state["erased"].get(name, 0) + rows
        self._write(state)

    def erased_now(self) -> dict[str, int]:
        """Rows per table erased by this request so far (an interrupted attempt and its retry count as one)."""
        state = self._state()
        return {name: n - state["erased_before"].get(name, 0) for name, n in state["erased"].items()}

    def complete(self) -> dict[str, int]:
        """Mark the request done (and no longer active); returns `erased_now()`."""
        erased = self.erased_now()
        state = self._state()
        del state["erased_before"]
        state.update(status="completed", completed_at=int(time.time()))
        self._write(state)
        if self.active.exists():
            self.active.unlink()
        return erased

    def _write(self, state: dict) -> None:
        write_bytes(self.path, json.dumps(state, sort_keys=True).encode())


def user_hash(lake: Lake, user_id: str) -> str:
    """sha256 of the lake's secret salt and the user id: names an erasure without naming the user."""
    return hash_user(_salt(lake), user_id)


def hash_user(salt: bytes, user_id: str) -> str:
    """`user_hash` with the salt already read (the service checks every publish against running erasures)."""
    return hashlib.sha256(salt + user_id.encode()).hexdigest()


def salt_of(lake: Lake) -> bytes | None:
    """The lake's salt, or None before the first erasure (read only: never creates it)."""
    path = lake.root.joinpath(*MARKER_DIR) / "salt"
    return path.read_bytes() if path.exists() else None


def _salt(lake: Lake) -> bytes:
    """The lake's random salt, created by the first erasure (callers hold the `erasure` lock)."""
    path = lake.root.joinpath(*MARKER_DIR) / "salt"
    if not path.exists():
        write_bytes(path, secrets.token_hex(32).encode())
    return path.read_bytes()


def active_erasures(lake: Lake) -> frozenset[str]:
    """Ids of the erasures in progress (running, or interrupted and not yet resumed)."""
    active = lake.root.joinpath(*ACTIVE_DIR)
    if not active.exists():
        return frozenset()
    return frozenset(p.name for p in active.iterdir() if _ERASURE_ID_RE.fullmatch(p.name))


def erasure_requests(lake: Lake) -> list[dict]:
    """Every erasure request the lake remembers, oldest first: `erasure_id`, `status` (`in_progress` |
    `completed`), `started_at`, `completed_at`, `erased` (rows per table in total). Names no user."""
    root = lake.root.joinpath(*MARKER_DIR)
    markers = [
        ErasureMarker(lake, p.stem)
        for p in (root.glob("*.json") if root.exists() else [])
        if _ERASURE_ID_RE.fullmatch(p.stem)
    ]
    rows = []
    for marker in markers:
        state = marker.read() or {}
        rows.append(
            {
                "erasure_id": marker.erasure_id,
                "status": state.get("status"),
                "started_at": state.get("started_at"),
                "completed_at": state.get("completed_at"),
                "erased": state.get("erased", {}),
            }
        )
    return sorted(rows, key=lambda r: (r["started_at"] or 0, r["erasure_id"]))


def resume_erasure(lake: Lake, erasure_id: str, erase: Callable[[str], ErasureResult]) -> ErasureResult:
    """Finish an interrupted erasure: find its user among the ids the lake still holds (hashing each) and `erase`
    them; when no id matches, nothing of the user is left anywhere and the request is only marked completed."""
    with lake.lock("erasure"):
        salt = _salt(lake)
        user_id = next((u for u in sorted(_user_ids(lake)) if hash_user(salt, u) == erasure_id), None)
        if user_id is None:
            marker = ErasureMarker(lake, erasure_id)
            if marker.read() is None:  # an active entry without its marker: nothing was started
                marker.begin()
            return ErasureResult(erased=marker.complete(), index_version=current_version(lake.index_root))
    return erase(user_id)


def _user_ids(lake: Lake) -> set[str]:
    """Every user id the lake names anywhere an erasure looks: landing files, tables (`user_id` and the member and
    owner lists), index versions and rerun progress files."""
    ids: set[object] = set()  # whatever the files hold; only the strings are user ids
    for path in lake.landing_files([hour for _, _, hour in lake.landing_hours()]):
        table = read_landing(lake, path, columns=["user_id"])
        ids.update(table.column("user_id").to_pylist() if table is not None else [])
    for name, schema in TABLES.items():
        columns = [c for c in ("user_id", *MEMBER_LISTS) if c in schema.names]
        if columns:
            table = lake.read_table(name)
            for column in columns:
                for value in table.column(column).to_pylist():
                    ids.update(value if isinstance(value, list) else [value])
    for version in list_versions(lake.index_root):
        for path in version_doc_files(lake.index_root, version):
            ids.update(read_parquet(path, columns=["user_id"]).column("user_id").to_pylist())
    for service in SERVICES.values():
        status = read_status(lake, service) or {}
        ids.update(
            [
                *(status.get("processed_user_ids") or []),
                *(status.get("failed_user_ids") or []),
                status.get("current_user_id"),
                (status.get("request_params") or {}).get("user_id"),
            ]
        )
    ids.discard(None)
    return {u for u in ids if isinstance(u, str)}
