"""A learning run's index build takes in a bounded number of new turns, oldest first (`max_new_turns`), so what the
run learned is not held back behind a backlog of turn embeddings; the rest is taken in by the next builds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from reflexio_pipelines.jobs import MAX_NEW_TURNS_PER_BUILD, MAX_NEW_TURNS_PER_LEARNING_BUILD, learning_run_config
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.search.documents import index_documents
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
    assert intake == {"index_turns": True, "max_new_turns": MAX_NEW_TURNS_PER_LEARNING_BUILD}
    assert 0 < MAX_NEW_TURNS_PER_LEARNING_BUILD < MAX_NEW_TURNS_PER_BUILD
    assert "search_index" not in learning_run_config("due")["ops"]  # materialize keeps the version's turns
