"""Reads whose listed landing file vanishes before it is opened (issue #19, finding 2), made deterministic: the
listing itself deletes one of the files it returns, as an erasure running between a reader's listing and its open
does. The concurrent version over HTTP is `tests/test_privacy.py::test_reads_during_an_erasure_never_answer_5xx`;
this one fails every time the retry from a fresh listing (`storage.read_vanishing`) is missing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.privacy.export import export_user
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
