"""The user -> windows directory (lake/user_windows.py): a window's state reads open only the partitions that hold
its users' turns (issue 15 item 3), give the same state as reading every earlier window, survive the directory's
own compaction and an older lake without it, and lose the user on erasure."""

from __future__ import annotations

from datetime import datetime, timezone

from reflexio_pipelines.lake import user_windows
from reflexio_pipelines.lake.compaction import compact_window
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.reads import counting_reads
from reflexio_pipelines.lake.records import user_states
from reflexio_pipelines.lake.windows import landing_hours_of_key, window_of_key
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.storage import open_delta
from tests.support.landing import land_hourly

START = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
LATER = "2026-03-03T00"


def _conversation(user: str, n: int) -> dict:
    return {
        "id": f"{user}-{n}",
        "user_id": user,
        "session_id": f"{user}-s{n}",
        "agent_version": "agent-1",
        "source": "test",
        "interactions": [
            {"role": "user", "content": f"I live in Town{n} and work with {user} tools"},
            {"role": "assistant", "content": "Noted."},
        ],
    }


def _landed_and_compacted(lake: Lake, batches: list[list[str]]) -> list[str]:
    """Land one hour per batch of users, compact each window as the `turns` asset does; the windows."""
    keys = land_hourly(lake, [[_conversation(u, i) for u in users] for i, users in enumerate(batches)], START)
    for key in keys:
        compact_window(lake, window_of_key(key, GRANULARITY), landing_hours_of_key(key, GRANULARITY))
    return [window_of_key(k, GRANULARITY) for k in keys]


def _history(lake: Lake, users: set[str]) -> dict[str, list[str]]:
    return {u: [t.turn_id for t in s.history] for u, s in user_states(lake, users, LATER).items()}


def test_state_reads_open_only_the_windows_of_the_windows_users(lake: Lake):
    windows = _landed_and_compacted(lake, [["alice", "bob"], ["carol"], ["alice", "dave"], ["erin"]])
    assert user_windows.history_windows(lake, ["alice"], LATER) == [windows[0], windows[2]]
    assert user_windows.history_windows(lake, ["alice"], windows[2]) == [windows[0]]  # strictly before
    assert user_windows.history_windows(lake, ["newcomer"], LATER) == []
    with counting_reads() as reads:
        states = user_states(lake, {"alice"}, LATER)
    assert len(states["alice"].history) == 4  # two conversations of two turns
    assert reads.tables["turns"].files == 2 < reads.tables["turns"].files_in_table == 4
    with counting_reads() as reads:
        states = user_states(lake, {"newcomer"}, LATER)
    assert states["newcomer"].history == []
    assert "turns" not in reads.tables  # nothing of the user anywhere: no turns read at all
    assert all(t.files == 0 for t in reads.tables.values())


def test_the_directory_gives_the_state_a_full_read_gives(lake: Lake):
    _landed_and_compacted(lake, [["alice", "bob"], ["carol", "alice"], ["bob"]])
    users = {"alice", "bob", "carol", "zoe"}
    with_directory = _history(lake, users)
    lake.root.joinpath(*user_windows._MARKER).unlink()  # as a lake whose turns predate the directory
    assert user_windows.history_windows(lake, users, LATER) is None
    with counting_reads() as reads:
        assert _history(lake, users) == with_directory
    assert reads.tables["turns"].files == 3  # every earlier window
    assert sum(len(h) for h in with_directory.values()) == 10  # five conversations of two turns


def test_an_older_lake_is_listed_once_then_answers_from_the_directory(lake: Lake):
    windows = _landed_and_compacted(lake, [["alice"], ["bob"]])
    # drop the directory entirely, as before it existed
    for path in sorted(lake.table_path(user_windows.TABLE).rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    lake.table_path(user_windows.TABLE).rmdir()
    lake.root.joinpath(*user_windows._MARKER).unlink()
    assert user_windows.history_windows(lake, ["alice"], LATER) is None
    user_windows.ensure_complete(lake)
    assert user_windows.history_windows(lake, ["alice", "bob"], LATER) == windows
    user_windows.ensure_complete(lake)  # once only
    assert lake.read_table(user_windows.TABLE).num_rows == 2


def test_the_directory_is_compacted_sorted_and_loses_nothing(lake: Lake):
    users = [f"user-{i:03d}" for i in range(user_windows.COMPACT_AT_FILES * 3)]
    for i, user in enumerate(users):  # one append per commit, as the turns compaction makes them
        user_windows.record(lake, f"2026-03-02T{i % 24:02d}", [user])
    table = open_delta(lake.table_path(user_windows.TABLE))
    assert len(table.file_uris()) < user_windows.COMPACT_AT_FILES
    rows = lake.read_table(user_windows.TABLE)
    assert sorted(rows.column("user_id").to_pylist()) == users
    assert user_windows.history_windows(lake, ["user-005"], LATER) is None  # appends alone never mark it complete
    user_windows.ensure_complete(lake)
    assert user_windows.history_windows(lake, ["user-005", "user-030"], LATER) == ["2026-03-02T05", "2026-03-02T06"]


def test_a_retried_compaction_records_its_users_again_harmlessly(lake: Lake):
    windows = _landed_and_compacted(lake, [["alice"]])
    user_windows.record(lake, windows[0], ["alice"])  # a crash after recording, before the commit, then a retry
    assert lake.read_table(user_windows.TABLE).num_rows == 2
    assert user_windows.history_windows(lake, ["alice"], LATER) == windows


def test_erasure_removes_the_users_pairs(lake: Lake):
    from reflexio_pipelines.learning.embedding import make_embedder
    from reflexio_pipelines.privacy.erasure import erase_user

    _landed_and_compacted(lake, [["alice", "bob"], ["alice"]])
    erase_user(lake, "alice", make_embedder("local"))
    rows = lake.read_table(user_windows.TABLE)
    assert rows.column("user_id").to_pylist() == ["bob"]
    assert b"alice" not in b"".join(p.read_bytes() for p in lake.table_path(user_windows.TABLE).rglob("*.parquet"))
    assert user_windows.history_windows(lake, ["alice"], LATER) == []
