"""A learning run's index build takes in a bounded number of new turns, oldest first (`max_new_turns`), so what the
run learned is not held back behind a backlog of turn embeddings; the rest is taken in by the next builds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from reflexio_pipelines.jobs import (
    LEARNING_BUILD_OVERDUE_S,
    MAX_NEW_TURNS_PER_BUILD,
    MAX_NEW_TURNS_PER_LEARNING_BUILD,
    MAX_OVERDUE_TURNS_PER_LEARNING_BUILD,
    learning_run_config,
)
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.documents import Overdue, index_documents, intake_through
from reflexio_pipelines.search.versions import TURNS_WATERMARK
from tests.support.landing import land

T0 = datetime(2026, 3, 2, 10, 15, tzinfo=timezone.utc)


def _conversation(n: int) -> dict:
    return {
        "id": f"c{n}",
        "user_id": f"user-{n}",
        "agent_version": "v1",
        "source": "chat",
        "session_id": f"s{n}",
        "interactions": [
            {"role": "user", "content": f"Question number {n}?"},
            {"role": "assistant", "content": f"Answer number {n}."},
        ],
    }


def test_new_turns_are_taken_in_oldest_first_up_to_the_bound(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    for n in range(3):  # three publishes of two turns, a second apart
        land(lake, [_conversation(n)], at=T0 + timedelta(seconds=n))
    _, everything, all_marks = index_documents(lake, new_turns=True)
    assert everything["interaction"] == 6
    # a bound inside a publish takes the whole publish (its turns share one ingest time), never half of it
    docs, bounded, marks = index_documents(lake, new_turns=True, max_new_turns=3)
    assert bounded["interaction"] == 4
    assert {d.payload["user_id"] for d in docs if d.entity_type == "interaction"} == {"user-0", "user-1"}
    assert marks[TURNS_WATERMARK] < all_marks[TURNS_WATERMARK]
    assert index_documents(lake, new_turns=True, max_new_turns=100)[1]["interaction"] == 6


def test_a_learning_runs_build_takes_in_fewer_new_turns_than_an_index_job() -> None:
    # the items a learning run learned wait for its build's turn embeddings; an index_job has nothing waiting on it
    intake = learning_run_config("due", index_turns=True)["ops"]["search_index"]["config"]
    assert intake == {
        "index_turns": True,
        "max_new_turns": MAX_NEW_TURNS_PER_LEARNING_BUILD,
        "overdue_after_s": LEARNING_BUILD_OVERDUE_S,
        "max_overdue_turns": MAX_OVERDUE_TURNS_PER_LEARNING_BUILD,
    }
    assert 0 < MAX_NEW_TURNS_PER_LEARNING_BUILD < MAX_NEW_TURNS_PER_BUILD
    # overdue turns lift the cap: 50 turns/s between two learning runs (~21 s apart) fit, with headroom
    assert MAX_OVERDUE_TURNS_PER_LEARNING_BUILD >= 50 * 21 * 1.2
    assert "search_index" not in learning_run_config("due")["ops"]  # materialize keeps the version's turns


def test_overdue_turns_are_taken_in_beyond_the_cap_up_to_its_own_bound() -> None:
    rows = [{"ingested_at_us": t} for t in range(1, 11)]  # ten new turns, ingested at 1..10
    assert intake_through(rows, 0, 3) == 3  # none overdue: the cap
    assert intake_through(rows, 0, 3, Overdue(before_us=6, max_turns=100)) == 6  # every overdue one
    assert intake_through(rows, 0, 3, Overdue(before_us=6, max_turns=5)) == 5  # overdue, bounded
    assert intake_through(rows, 0, 3, Overdue(before_us=2, max_turns=100)) == 3  # fewer overdue than the cap
    assert intake_through(rows, 4, 3, Overdue(before_us=100, max_turns=100)) == 10  # all of them overdue


def test_a_build_takes_overdue_turns_in_beyond_its_cap(tmp_path: Path) -> None:
    lake = Lake.at(str(tmp_path / "lake"))
    for n in range(3):
        land(lake, [_conversation(n)], at=T0 + timedelta(seconds=n))
    overdue = Overdue(before_us=int((T0 + timedelta(seconds=1)).timestamp() * 1_000_000), max_turns=100)
    _, counts, _ = index_documents(lake, new_turns=True, max_new_turns=1, overdue=overdue)
    assert counts["interaction"] == 4  # the first two publishes are overdue; the third waits for the next build
