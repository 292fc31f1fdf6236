"""Reads whose listed landing file vanishes before it is opened (issue #19, finding 2), made deterministic: the
listing itself deletes one of the files it returns, as an erasure running between a reader's listing and its open
does. The concurrent version over HTTP is `tests/test_privacy.py::test_reads_during_an_erasure_never_answer_5xx`;
this one fails every time the retry from a fresh listing (`storage.read_vanishing`) is missing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.privacy.export import export_user
from reflexio_pipelines.storage import read_parquet, write_parquet
from serving.landing import LandingWriter
from tests.support.landing import land

T0 = datetime(2026, 3, 2, 10, 15, tzinfo=timezone.utc)


def _conversation(user_id: str, n: int, text: str) -> dict:
    return {
        "id": f"{user_id}-{n}",
        "user_id": user_id,
        "agent_version": "v1",
        "source": "chat",
        "session_id": f"{user_id}-s{n}",
        "interactions": [{"role": "user", "content": text}],
    }


@pytest.fixture()
def lake(tmp_path: Path) -> Lake:
    store = Lake.at(str(tmp_path / "lake"))
    for n in range(3):  # one landing file per publish
        land(store, [_conversation("erased", n, f"Quillfeather note {n}.")], at=T0)
    land(store, [_conversation("kept", 0, "Kept user note.")], at=T0)
    return store


def _vanish_once(lake: Lake, monkeypatch: pytest.MonkeyPatch, doomed: Callable[[Path], bool]) -> list[Path]:
    """Make the next listing of landing files delete, after listing them, the files `doomed` picks."""
    original = Lake.landing_files
    deleted: list[Path] = []

    def listing(self: Lake, hour_dirs: list) -> list:
        files = original(self, hour_dirs)
        if not deleted:
            for path in files:
                if doomed(Path(path)):
                    Path(path).unlink()
                    deleted.append(Path(path))
        return files

    monkeypatch.setattr(Lake, "landing_files", listing)
    return deleted


def _holds(path: Path, word: str) -> bool:
    return word.encode() in path.read_bytes()


def test_turn_reads_start_again_when_a_listed_file_vanished(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    before = {r["content"] for r in turn_rows(lake)}
    assert "Quillfeather note 0." in before and "Kept user note." in before
    deleted = _vanish_once(lake, monkeypatch, lambda p: _holds(p, "Quillfeather note 0"))
    after = {r["content"] for r in turn_rows(lake)}
    assert deleted, "the listing deleted no file: the fault was not injected"
    assert after == before - {"Quillfeather note 0."}  # the lake after the deletion, whole


def test_an_export_starts_again_when_another_users_file_vanished(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    deleted = _vanish_once(lake, monkeypatch, lambda p: _holds(p, "Quillfeather note 1"))
    exported = export_user(lake, "kept")
    assert deleted
    texts = [
        row["content"] for table in exported.values() if "content" in table.column_names for row in table.to_pylist()
    ]
    assert texts == ["Kept user note."]


def test_the_idempotency_scan_starts_again_when_a_file_vanished(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    deleted = _vanish_once(lake, monkeypatch, lambda p: _holds(p, "Quillfeather note 2"))
    writer = LandingWriter(lake, clock=lambda: T0)
    writer.start()  # scans every landing file's idempotency keys
    writer.close()
    assert deleted


def test_a_read_racing_an_erasure_starts_again_until_the_erasure_has_committed(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While an erasure is in progress every listing loses a file before it is opened, for longer than the few quick
    tries that used to be the limit (~0.5 s); the read waits for the erasure's end, then answers the lake after it."""
    import threading
    import time

    from reflexio_pipelines.privacy.erasure import ErasureMarker

    for n in range(3, 30):  # more of the erased user's files than a read used to try
        land(lake, [_conversation("erased", n, f"Quillfeather note {n}.")], at=T0)
    marker = ErasureMarker.of(lake, "erased")
    marker.begin()  # the erasure is in progress: its active entry is listed
    original = Lake.landing_files
    listings = 0

    def listing(self: Lake, hour_dirs: list) -> list:
        nonlocal listings
        files = original(self, hour_dirs)
        doomed = [Path(p) for p in files if lake.erasing() and _holds(Path(p), "Quillfeather")]
        if doomed:
            listings += 1
            doomed[0].unlink()  # the erasure deletes one more file right after this listing
        return files

    monkeypatch.setattr(Lake, "landing_files", listing)
    finishing = threading.Timer(1.5, marker.complete)  # the erasure commits 1.5 s later
    finishing.start()
    started = time.monotonic()
    try:
        rows = turn_rows(lake)
    finally:
        finishing.cancel()
    assert time.monotonic() - started >= 1.0 and listings >= 6
    assert "Kept user note." in {r["content"] for r in rows}
    assert not lake.erasing()  # answered after the erasure, not while it ran


def test_without_an_erasure_in_progress_a_read_that_keeps_vanishing_gives_up(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait is for an erasure only: a file that keeps vanishing with no erasure running is an error soon."""
    from reflexio_pipelines.storage import read_vanishing

    calls = 0

    def always_vanishing() -> None:
        nonlocal calls
        calls += 1
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        read_vanishing(always_vanishing, busy=lake.erasing)
    assert calls == 5


def test_readers_skip_temporary_files_left_in_the_consumed_state(lake: Lake) -> None:
    """An empty `.tmp-*.json` (a write refused by a full disk, or in flight) is no window's consumed list."""
    before = {r["content"] for r in turn_rows(lake)}
    consumed = lake.root / "state" / "consumed"
    consumed.mkdir(parents=True, exist_ok=True)
    (consumed / ".tmp-0123abcd-2026-03-02T10.json").write_bytes(b"")
    (consumed / ".tmp-4567efab-2026-03-02T11.json").write_bytes(b'{"files": ["landing/tu')
    assert {r["content"] for r in turn_rows(lake)} == before
    assert lake.consumed_files() == set()


def test_a_file_renamed_over_while_it_is_read_reads_whole(tmp_path: Path) -> None:
    """An erasure rewrites a landing file under the same name (write aside, rename over). A reader given the path used
    to take the file's size from one look and its bytes from a later open: 361 of 3,000 reads failed with "corrupt
    file" here while a writer renamed two files of different sizes over each other (a 500 from export_user_data in
    tests/test_erasure_reads.py). `read_parquet` reads footer and pages from one open file: each read is one whole
    version."""
    path = tmp_path / "landing.parquet"
    small = pa.table({"user_id": ["a"] * 3, "text": ["x"] * 3})
    big = pa.table({"user_id": [f"u{i}" for i in range(300)], "text": [f"words {i} " * 5 for i in range(300)]})
    write_parquet(big, path)
    stop = threading.Event()

    def rename_over() -> None:
        n = 0
        while not stop.is_set():
            write_parquet(small if n % 2 else big, path)
            n += 1

    writer = threading.Thread(target=rename_over)
    writer.start()
    try:
        sizes = [read_parquet(path).num_rows for _ in range(3000)]
    finally:
        stop.set()
        writer.join()
    assert set(sizes) <= {3, 300}
