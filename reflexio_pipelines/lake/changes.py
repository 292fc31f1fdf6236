"""Which users' rows a Delta table's commits touched since a given table version: what an index build needs to
rebuild, so that its cost follows the new data rather than the lake (see search/documents.py `scoped_documents`).

Read from the transaction log itself: every commit after the version names the data files it added and removed;
the users whose rows differ between the files removed and the files added are the ones that changed. A window's
commit rewrites the window's files, most of its users' rows unchanged: comparing rows (not only the `user_id`
column) keeps those users out, so a run costs the users it taught, not its window's (an open window under steady
traffic held ~2,400 users when a run changed ~150). When the log cannot answer exactly (a commit file already
cleaned up, a removed data file vacuumed by an erasure, a file without a `user_id` column) the answer is None and
the caller rebuilds everything, which is always correct.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.storage import LakePath, read_parquet, vanished

#: Tables whose rows become profile and user playbook documents (lake/records.py `live_rows` reads all four).
DOCUMENT_SOURCES = ("user_profiles", "user_playbooks", "lifecycle_events", "curation_log")
#: Watermark name prefix: an index version records the Delta version of each source table it was built from.
WATERMARK_PREFIX = "delta_version:"


def source_versions(lake: Lake, tables: Iterable[str] = DOCUMENT_SOURCES) -> dict[str, int]:
    """Watermarks naming each table's current Delta version (-1 before its first commit); read them BEFORE the
    tables, so a commit landing during the read is seen again by the next build rather than missed."""
    out = {}
    for name in tables:
        version = lake.table_version(name)
        out[WATERMARK_PREFIX + name] = -1 if version is None else version
    return out


def users_touched(lake: Lake, since: Mapping[str, int], now: Mapping[str, int]) -> frozenset[str] | None:
    """Users with rows added or removed in any table between the `since` and `now` watermarks
    (`source_versions`), or None when that cannot be told exactly (then rebuild everything)."""
    touched: set[str] = set()
    for key, version in now.items():
        before = since.get(key)
        if before is None:
            return None  # the served version predates this watermark
        users = _users_between(lake, key.removeprefix(WATERMARK_PREFIX), before, version)
        if users is None:
            return None
        touched |= users
    return frozenset(touched)


def _users_between(lake: Lake, name: str, before: int, after: int) -> set[str] | None:
    if after == before:
        return set()
    if after < before:
        return None  # the table was recreated (its log starts again)
    log_dir = lake.table_path(name) / "_delta_log"
    added: set[str] = set()
    removed: set[str] = set()
    for version in range(before + 1, after + 1):
        commit = log_dir / f"{version:020d}.json"
        try:
            lines = commit.read_text().splitlines()
        except Exception as exc:
            if vanished(exc):
                return None  # the log was cleaned up past the served version
            raise
        for line in lines:
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                added.add(unquote(action["add"]["path"]))
            if "remove" in action:
                path = unquote(action["remove"]["path"])
                if path in added:
                    added.discard(path)  # added and removed again within the range: never seen by either side
                else:
                    removed.add(path)
    root = lake.table_path(name)
    old, new = _rows_by_user(root, removed), _rows_by_user(root, added)
    if old is None or new is None:
        return None
    # A window's commit rewrites the whole window: its users whose rows come back unchanged did not change.
    return {user for user in old.keys() | new.keys() if old.get(user) != new.get(user)}


def _rows_by_user(root: LakePath, paths: Iterable[str]) -> dict[str, Counter] | None:
    """user id -> the multiset of its rows (as canonical JSON) in the data files `paths`; None when a file cannot
    be read (vacuumed by an erasure) or names no user."""
    out: dict[str, Counter] = {}
    for path in sorted(paths):
        try:
            table = read_parquet(root / path)
        except Exception as exc:
            if vanished(exc):
                return None  # vacuumed (an erasure purges history at once)
            raise
        if "user_id" not in table.column_names:
            return None
        for row in table.to_pylist():
            user = row.get("user_id")
            if user is not None:
                out.setdefault(user, Counter())[json.dumps(row, sort_keys=True, default=str)] += 1
    return out
