"""The group-commit landing writer: durability, batching, idempotency, no torn files."""

from __future__ import annotations

import threading

import pyarrow.parquet as pq

from reflexio_pipelines.lake.io import Lake
from serving.landing import LandingWriter


def _rows(request_id: str, n: int = 2) -> list[dict]:
    return [
        {
            "turn_id": f"{request_id}:{i}",
            "interaction_id": i,
            "request_id": request_id,
            "turn_index": i,
            "user_id": "u1",
            "role": "user",
            "content": f"turn {i} of {request_id}",
            "created_at": 1_700_000_000,
        }
        for i in range(n)
    ]


def _landed_rows(lake: Lake) -> list[dict]:
    files = lake.landing_files([p for _, _, p in lake.landing_hours()])
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def test_acknowledged_rows_are_in_committed_files_and_no_temp_files_remain(lake: Lake):
    writer = LandingWriter(lake)
    writer.start()
    receipt = writer.submit("r1", _rows("r1", 3)).result(timeout=10)
    writer.close()
    rows = _landed_rows(lake)
    assert [r["turn_id"] for r in rows] == ["r1:0", "r1:1", "r1:2"]
    assert all(r["ingested_at_us"] == receipt.ingested_at_us for r in rows)
    assert not list(lake.landing_turns.rglob(".tmp-*"))


def test_a_refused_write_leaves_no_temporary_file(lake: Lake, monkeypatch):
    """A full disk (the fsync fails with ENOSPC after the bytes were handed over): every waiter learns it, and no
    `.tmp-*` file (empty or partial) is left per refused publish."""
    import errno
    import os

    import pytest

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    writer = LandingWriter(lake)
    writer.start()
    try:
        monkeypatch.setattr(os, "fsync", disk_full)
        for n in range(3):
            with pytest.raises(OSError, match="No space"):
                writer.submit(f"r{n}", _rows(f"r{n}")).result(timeout=10)
        monkeypatch.undo()
        writer.submit("after", _rows("after")).result(timeout=10)  # space again: publishes land
    finally:
        writer.close()
    assert not list(lake.landing_turns.rglob(".tmp-*"))
    assert {r["request_id"] for r in _landed_rows(lake)} == {"after"}


def test_concurrent_publishes_share_files(lake: Lake):
    writer = LandingWriter(lake)
    writer.start()
    futures = []
    barrier = threading.Barrier(8)

    def client(c: int) -> None:
        barrier.wait()
        for i in range(25):
            futures.append(writer.submit(f"c{c}-{i}", _rows(f"c{c}-{i}")))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in futures:
        f.result(timeout=30)
    writer.close()
    assert len(_landed_rows(lake)) == 8 * 25 * 2
    # 200 publishes: group commit must need far fewer files (and fsyncs) than one per publish.
    assert writer.files_written < 200


def test_idempotency_key_lands_once_even_across_restarts(lake: Lake):
    writer = LandingWriter(lake)
    writer.start()
    first = writer.submit("a", _rows("a"), idempotency_key="k1").result(timeout=10)
    again = writer.submit("b", _rows("b"), idempotency_key="k1").result(timeout=10)
    writer.close()
    assert again.duplicate and again.request_id == first.request_id == "a"

    restarted = LandingWriter(lake)
    restarted.start()
    third = restarted.submit("c", _rows("c"), idempotency_key="k1").result(timeout=10)
    fresh = restarted.submit("d", _rows("d"), idempotency_key="k2").result(timeout=10)
    restarted.close()
    assert third.duplicate and third.request_id == "a"
    assert not fresh.duplicate
    assert sorted({r["request_id"] for r in _landed_rows(lake)}) == ["a", "d"]


def test_same_key_twice_in_one_batch_lands_once(lake: Lake):
    writer = LandingWriter(lake)
    # Queue both before the thread starts so they are guaranteed to be in the same group commit.
    futures = [
        writer.submit("x", _rows("x"), idempotency_key="same"),
        writer.submit("y", _rows("y"), idempotency_key="same"),
    ]
    writer.start()
    results = [f.result(timeout=10) for f in futures]
    writer.close()
    assert [r.request_id for r in results] == ["x", "x"]
    assert results[1].duplicate
    assert {r["request_id"] for r in _landed_rows(lake)} == {"x"}


def _user_rows(request_id: str, user_id: str) -> list[dict]:
    return [dict(row, user_id=user_id) for row in _rows(request_id)]


def test_a_key_is_per_user_and_bound_to_its_body_across_restarts(lake: Lake):
    import pytest

    from serving.landing import IdempotencyConflict

    writer = LandingWriter(lake)
    writer.start()
    ann = writer.submit("ann-1", _user_rows("ann-1", "ann"), "k", body_sha256="body-a").result(timeout=10)
    bob = writer.submit("bob-1", _user_rows("bob-1", "bob"), "k", body_sha256="body-b").result(timeout=10)
    assert not ann.duplicate and not bob.duplicate
    with pytest.raises(IdempotencyConflict, match="'k'"):
        writer.submit("ann-2", _user_rows("ann-2", "ann"), "k", body_sha256="body-other").result(timeout=10)
    writer.close()

    restarted = LandingWriter(lake)  # the index rebuilt from the landing files keeps users and bodies apart
    restarted.start()
    retry = restarted.submit("bob-2", _user_rows("bob-2", "bob"), "k", body_sha256="body-b").result(timeout=10)
    with pytest.raises(IdempotencyConflict):
        restarted.submit("ann-3", _user_rows("ann-3", "ann"), "k", body_sha256="body-b").result(timeout=10)
    restarted.close()
    assert retry.duplicate and retry.request_id == "bob-1"
    assert sorted({r["request_id"] for r in _landed_rows(lake)}) == ["ann-1", "bob-1"]


def test_a_conflicting_body_in_the_same_batch_is_refused_and_the_first_lands(lake: Lake):
    import pytest

    from serving.landing import IdempotencyConflict

    writer = LandingWriter(lake)
    futures = [
        writer.submit("x", _rows("x"), "same", body_sha256="one"),
        writer.submit("y", _rows("y"), "same", body_sha256="two"),
        writer.submit("z", _user_rows("z", "u2"), "same", body_sha256="two"),
    ]
    writer.start()
    assert futures[0].result(timeout=10).request_id == "x"
    with pytest.raises(IdempotencyConflict):
        futures[1].result(timeout=10)
    assert not futures[2].result(timeout=10).duplicate  # another user's key
    writer.close()
    assert {r["request_id"] for r in _landed_rows(lake)} == {"x", "z"}


def test_a_user_being_erased_is_refused_at_commit_and_their_keys_are_forgotten(lake: Lake):
    import pytest

    from serving.landing import UserBeingErased

    erasing: set[str] = set()
    writer = LandingWriter(lake, refuse=lambda user: user in erasing)
    writer.start()
    try:
        writer.submit("r1", _rows("r1"), "k1").result(timeout=10)
        erasing.add("u1")
        with pytest.raises(UserBeingErased, match="being erased"):
            writer.submit("r2", _rows("r2"), "k2").result(timeout=10)
        with pytest.raises(UserBeingErased):  # a retry of a stored publish too: its rows are being erased
            writer.submit("r1-again", _rows("r1-again"), "k1").result(timeout=10)
        erasing.clear()
        assert writer.submit("r1-again", _rows("r1-again"), "k1").result(timeout=10).duplicate
        writer.forget_user("u1")  # after the erasure: the key names nothing stored any more
        assert not writer.submit("r1-again", _rows("r1-again"), "k1").result(timeout=10).duplicate
    finally:
        writer.close()
    assert [r["request_id"] for r in _landed_rows(lake)] == ["r1", "r1", "r1-again", "r1-again"]
