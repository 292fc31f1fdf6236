"""Forget requests end to end, for both extraction paths (the built-in rules and LiteLLM against the stub, which
answers in the prompt's `forget` channel): "forget that I live in Paris", "please delete what you know about my
address", "stop remembering my phone number" remove the matching profiles (superseded by a `forgotten` tombstone),
are never stored as facts or rules, leave search at the next index build and are not re-learned from older
turns — not by a later window reading them as context, not by re-materialising the window they came from."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import live_rows
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.learning.forget import FORGOTTEN_CONTENT, match_profiles
from reflexio_pipelines.learning.rules.forget_requests import forget_target
from reflexio_pipelines.runs import launch
from reflexio_pipelines.search.query import LoadedIndex
from reflexio_pipelines.search.types import SearchFilters
from reflexio_pipelines.settings import LLMSettings, Settings
from tests.support.conversations import conversation
from tests.support.landing import land_hourly

T0 = datetime(2026, 11, 4, 9, 10, tzinfo=timezone.utc)


HOURS = [
    [
        conversation(
            "dana",
            "d1",
            ("user", "Hi, I live in Paris and my phone number is 555-0100."),
            ("assistant", "Noted."),
            ("user", "I prefer short answers."),
            ("assistant", "Sure."),
        ),
        conversation("paul", "p1", ("user", "I live in Lyon and I speak French."), ("assistant", "Merci.")),
        conversation("eve", "e1", ("user", "I work as a pilot."), ("assistant", "Great.")),
    ],
    [
        conversation(
            "dana",
            "d2",
            ("user", "Please forget that I live in Paris."),
            ("assistant", "Done."),
            ("user", "Also, stop remembering my phone number."),
            ("assistant", "OK."),
            ("user", "I work at Initech."),
            ("assistant", "Noted."),
            ("user", "Actually, forget that I work at Initech."),
            ("assistant", "Forgotten."),
        ),
        conversation("paul", "p2", ("user", "Please delete what you know about my address."), ("assistant", "Done.")),
        conversation(
            "eve",
            "e2",
            ("user", "Book me a flight to Oslo."),
            ("assistant", "Which day?"),
            ("user", "Forget it, I'll do it myself."),
            ("assistant", "Alright."),
        ),
    ],
    [
        conversation("dana", "d3", ("user", "What's the weather like today?"), ("assistant", "Sunny.")),
    ],
]


@pytest.fixture
def settings(extractor_settings):
    """Every test runs with the built-in extractor and through LiteLLM against the stub (see conftest)."""
    return extractor_settings


def _live(lake: Lake, user: str) -> set[str]:
    return {r["content"] for r in live_rows(lake, "profile") if r["user_id"] == user}


def _search(lake: Lake, user: str, query: str) -> list[str]:
    index = LoadedIndex.load(lake.index_root)
    hits = index.search(
        "profile", query, None, top_k=10, threshold=0.0, mode="fts", filters=SearchFilters(user_id=user)
    )
    return [hit.payload["content"] for hit in hits]


def test_forget_requests_remove_profiles_and_are_not_relearned(lake: Lake, settings, instance):
    # the learned built-in keeps the user's words in the third person ("my phone number is" -> "Their phone …"); the
    # LLM stub answers with the rule extractor's canonical wording
    phone = "Phone number is 555-0100" if settings.llm.model else "Their phone number is 555-0100"
    _forget_requests_remove_profiles(lake, settings, instance, phone=phone)


def test_the_rule_extractor_forget_requests_remove_profiles(lake: Lake, instance):
    """The same, pinned to the rule extractor (`builtin="rules"`), which words the fact canonically."""
    rules = Settings(lake=str(lake.root), llm=LLMSettings(builtin="rules"))
    _forget_requests_remove_profiles(lake, rules, instance, phone="Phone number is 555-0100")


def _forget_requests_remove_profiles(lake: Lake, settings, instance, phone: str) -> None:
    keys = land_hourly(lake, HOURS, T0)
    launch(keys[:1], settings=settings, instance=instance)
    assert {"Lives in Paris", phone, "Prefers short answers"} <= _live(lake, "dana")
    assert "Lives in Paris" in _search(lake, "dana", "Paris")

    launch(keys[1:2], settings=settings, instance=instance)
    assert _live(lake, "dana") == {"Prefers short answers"}  # Initech was stated and forgotten in the same window
    assert _live(lake, "paul") == {"Speaks French"}  # "my address" matched "Lives in Lyon" (heuristic alias)
    assert _live(lake, "eve") == {"Works as a pilot"}  # "forget it" is "never mind", not a forget request
    assert _search(lake, "dana", "Paris") == [] and _search(lake, "dana", "phone number") == []
    assert _search(lake, "paul", "Lyon") == []

    rows = lake.read_table("user_profiles").to_pylist()
    by_content = {r["content"]: r for r in rows if r["status"] != "forgotten"}
    tombstones = [r for r in rows if r["status"] == "forgotten"]
    assert all(t["content"] == FORGOTTEN_CONTENT for t in tombstones)  # the forgotten fact is not repeated
    removed = {old for t in tombstones for old in t["supersedes"]}
    assert {
        by_content["Lives in Paris"]["profile_id"],
        by_content[phone]["profile_id"],
        by_content["Lives in Lyon"]["profile_id"],
    } <= removed
    assert len(tombstones) == 4  # Paris, phone, Initech (never written, still tombstoned), Lyon
    # the request is never stored as a fact or a rule
    learned = [r["content"] for r in rows] + [r["content"] for r in lake.read_table("user_playbooks").to_pylist()]
    assert not any(word in text.lower() for text in learned for word in ("forget", "remember", "delete"))
    changes = [c for c in lake.read_table("change_log").to_pylist() if c["change"] == "forgotten"]
    assert {c["item_id"] for c in changes} == removed and all(c["content"] is None for c in changes)

    # a later window reads the old turns as context; re-materialising the window that stated them writes them again:
    # neither brings a forgotten profile back
    launch(keys[2:], settings=settings, instance=instance)
    launch(keys[:1], settings=settings, instance=instance)
    assert _live(lake, "dana") == {"Prefers short answers"} and _live(lake, "paul") == {"Speaks French"}
    assert _search(lake, "dana", "Paris") == [] and _search(lake, "paul", "Lyon") == []


@pytest.mark.parametrize(
    ("sentence", "target"),
    [
        ("Forget that I live in Paris.", "Lives in Paris"),
        ("Please delete what you know about my address.", "Their address"),
        ("Stop remembering my phone number", "Their phone number"),
        ("Can you remove my email from your records?", "Their email"),
        ("Forget it, I'll do it myself.", None),  # never mind
        ("Delete the staging branch.", None),  # a task, not the user's data
        ("No, never deploy on Fridays.", None),
    ],
)
def test_forget_wording_heuristic(sentence: str, target: str | None):
    assert forget_target(sentence) == target


def test_matching_heuristic_removes_the_fact_and_not_its_neighbours():
    profiles = [
        "Lives in Paris",
        "Lives in Berlin",
        "Works at Acme in the Paris office",
        "Phone number is 555-0100",
        "Prefers vegetarian food",
        "Email is dana@example.com",
    ]
    embedder = make_embedder()

    def matched(target: str) -> list[str]:
        return [profiles[m.profile_index] for m in match_profiles(target, profiles, embedder)]

    assert matched("Lives in Paris") == ["Lives in Paris"]
    assert matched("Their address") == ["Lives in Paris", "Lives in Berlin"]  # every stored address goes
    assert matched("Their phone number") == ["Phone number is 555-0100"]
    assert matched("Is vegetarian") == ["Prefers vegetarian food"]  # a near paraphrase (embedding similarity)
    assert matched("Their shoe size") == []
