"""Learning across windows, end to end through landing files and Dagster runs: supersession with lineage,
repeated corrections collapsing into one playbook, bookmarks and the change log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.windows import key_of_moment
from reflexio_pipelines.learning.lifecycle import current_rows
from reflexio_pipelines.partitions import GRANULARITY
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.types import SearchFilters
from reflexio_pipelines.settings import LLMSettings, Settings
from tests.support.conversations import conversation
from tests.support.landing import land

T0 = datetime(2026, 11, 2, 9, 15, tzinfo=timezone.utc)


@pytest.fixture
def settings(extractor_settings):
    """Every test runs with the built-in extractor and through LiteLLM against the stub (see conftest)."""
    return extractor_settings


CORRECTION = (
    ("user", "Please deploy the billing service to production."),
    ("assistant", "Deploying the billing service to us-east-1."),
    ("user", "No — we never deploy to us-east-1, always use us-west-2."),
)


def _run_hours(lake: Lake, settings, instance, batches: list[list[dict]]) -> list[str]:
    keys = []
    for hour, conversations in enumerate(batches):
        moment = T0 + timedelta(hours=hour)
        land(lake, conversations, at=moment)
        keys.append(key_of_moment(moment, GRANULARITY))
    launch(keys, settings=settings, instance=instance)
    return keys


def _mentions(content: str, city: str) -> bool:
    return city.lower() in content.lower()


def _lives_in(content: str, city: str) -> bool:
    return content == f"Lives in {city}"


def _supersedes_with_lineage(lake: Lake, settings, instance, about: Callable[[str, str], bool]) -> None:
    """London stated, then a move to Berlin: the Berlin profile supersedes the London one, with lineage in the row
    and the change log; an unrelated fact stays; search finds only Berlin. `about(content, city)` says whether a
    profile is the one about `city` (exact canonical wording for the rule extractor, the city named otherwise)."""
    _run_hours(
        lake,
        settings,
        instance,
        [
            [
                conversation(
                    "ana", "c", ("user", "Hi, I live in London and I prefer short answers."), ("assistant", "Noted.")
                )
            ],
            [
                conversation(
                    "ana", "c", ("user", "Quick update: I moved to Berlin last month."), ("assistant", "Thanks!")
                )
            ],
        ],
    )
    rows = lake.read_table("user_profiles").to_pylist()
    learned = [r["content"] for r in rows]
    london = next((r for r in rows if about(r["content"], "London")), None)
    berlin = next((r for r in rows if about(r["content"], "Berlin")), None)
    assert london is not None and berlin is not None, learned
    assert berlin["supersedes"] == [london["profile_id"]]  # lineage, and the old row is still there for audit
    current = {r["content"] for r in current_rows(rows, "profile_id", "last_modified_timestamp")}
    assert berlin["content"] in current and london["content"] not in current
    assert any("short answers" in c for c in current), current  # an unrelated fact is untouched
    changes = lake.read_table("change_log").to_pylist()
    assert {
        "entity": "profile",
        "change": "superseded",
        "item_id": london["profile_id"],
        "superseded_by": berlin["profile_id"],
    }.items() <= next(c for c in changes if c["change"] == "superseded").items()
    index = LoadedIndex.load(lake.index_root)
    hits = index.search(
        "profile",
        "London Berlin",  # both cities by name: only the current one may come back
        None,
        top_k=5,
        threshold=0.0,
        mode="fts",
        filters=SearchFilters(user_id="ana"),
    )
    located = [c for h in hits if about(c := h.payload["content"], "London") or about(c, "Berlin")]
    assert len(located) == 1 and about(located[0], "Berlin"), located


def test_a_later_contradicting_fact_supersedes_with_lineage(lake: Lake, settings, instance):
    """On the default extractor (and LiteLLM): wording-agnostic, the profiles are the ones naming each city."""
    _supersedes_with_lineage(lake, settings, instance, _mentions)


def test_the_rule_extractor_supersedes_the_canonical_slot(lake: Lake, instance):
    """Pinned to the rule extractor (`builtin="rules"`): its canonical slot wording, "Lives in London" superseded
    by "Lives in Berlin", is exactly what is stored and served."""
    rules = Settings(lake=str(lake.root), llm=LLMSettings(builtin="rules"))
    _supersedes_with_lineage(lake, rules, instance, _lives_in)


def test_the_same_correction_three_times_is_one_playbook(lake: Lake, settings, instance):
    batches = [[conversation("ben", f"c{i}", *CORRECTION)] for i in range(3)]
    batches[1].append(conversation("ben", "same-hour-repeat", *CORRECTION))
    _run_hours(lake, settings, instance, batches)
    rows = lake.read_table("user_playbooks").to_pylist()
    current = current_rows(rows, "user_playbook_id", "created_at")
    assert len([r for r in current if "us-west-2" in r["content"]]) == 1
    assert len({r["user_playbook_id"] for r in rows}) == 1  # never written again under a new id
    bookmarks = sorted(lake.read_table("extraction_bookmarks").to_pylist(), key=lambda r: r["window"])
    assert [b["new_turns"] for b in bookmarks] == [3, 6, 3]
    assert all(b["last_turn_id"] for b in bookmarks)


def test_bookmarks_advance_even_when_nothing_is_extracted(lake: Lake, settings, instance):
    _run_hours(
        lake, settings, instance, [[conversation("cy", "c", ("user", "Good morning!"), ("assistant", "Hello!"))]]
    )
    (bookmark,) = lake.read_table("extraction_bookmarks").to_pylist()
    assert bookmark["items_extracted"] == 0 and bookmark["extraction_windows"] == 1 and bookmark["last_turn_id"]


def test_a_correction_split_across_windows_is_read_with_its_context(lake: Lake, settings, instance):
    first, correction = CORRECTION[:2], CORRECTION[2:]
    _run_hours(
        lake,
        settings,
        instance,
        [
            [conversation("dee", "a", *first, session="dee-s")],
            [conversation("dee", "b", *correction, session="dee-s")],
        ],
    )
    rows = lake.read_table("user_playbooks").to_pylist()
    assert any("us-west-2" in r["content"] and r["trigger"] for r in rows)
    (row,) = [r for r in rows if "us-west-2" in r["content"]]
    assert len(row["source_turn_ids"]) >= 2  # the agent turn from the earlier window is part of the evidence


@pytest.mark.parametrize("reruns", [2])
def test_rerunning_an_old_window_changes_nothing(lake: Lake, settings, instance, reruns):
    keys = _run_hours(
        lake,
        settings,
        instance,
        [
            [conversation("eve", "c", ("user", "I live in Oslo."), ("assistant", "Ok."))],
            [conversation("eve", "c", ("user", "I moved to Rome."), ("assistant", "Ok."))],
        ],
    )

    def snapshot():
        return sorted(
            (r["profile_id"], r["content"], tuple(r["supersedes"]), r["window"])
            for r in lake.read_table("user_profiles").to_pylist()
        )

    before = snapshot()
    for _ in range(reruns):
        launch(keys, settings=settings, instance=instance)
    assert snapshot() == before
