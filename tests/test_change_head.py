"""The change head (a learned heuristic: clauses/train_change.py): a turn that tells that something said before no
longer holds, without any word of change, replaces the earlier item it is about; an update that replaces nothing
teaches nothing; someone else's change and an addition replace nothing. Through `learn()` with the built-in
extractor and the offline judge, two publishes a day apart (tests/test_stated_changes.py's harness)."""

from __future__ import annotations

import numpy as np
import pytest

from reflexio_pipelines.learning.clauses.classifier import shared_classifier
from reflexio_pipelines.learning.clauses.features import change_clauses
from reflexio_pipelines.learning.clauses.head import CHANGE_HEAD_FILE, ClauseHead
from reflexio_pipelines.learning.dedup import CHANGE_NEAREST_FLOOR, SURE_CHANGE_FLOOR, changed_subjects
from reflexio_pipelines.learning.subjects import states_a_change
from tests.test_stated_changes import DAY, _learn_twice, _turns


def _contents(earlier: str, later: str, user: str = "ana") -> list[str]:
    profiles, playbooks, _ = _learn_twice(
        _turns(user, "a", 1_000, ("user", earlier), ("assistant", "Noted.")),
        _turns(user, "b", 1_000 + DAY, ("user", later), ("assistant", "Got it.")),
    )
    return [r["content"] for r in profiles + playbooks]


def test_the_shipped_head_carries_its_measured_numbers() -> None:
    head = ClauseHead.load(CHANGE_HEAD_FILE)
    assert head.kinds == ("holds", "change")
    assert 0.3 <= head.min_probability["change"] <= 0.95
    for part in ("dev_written", "dev_public"):
        assert {"precision", "recall", "rows"} <= set(head.meta[part])
    assert head.meta["rows"]["train"] > head.meta["rows"]["dev"] > 0


@pytest.mark.parametrize(
    ("said", "change"),
    [
        ("caved and bought an iPhone 16 last week, the whole family is on FaceTime", True),
        ("my sister just took a job in Denver", False),
        ("we also got a second cat, Miso", False),
        ("can you book a table for two tonight?", False),
    ],
)
def test_the_head_reads_a_change_without_words_of_change(said: str, change: bool) -> None:
    assert not states_a_change(said)  # the words-of-change rule cannot tell any of these
    classifier = shared_classifier()
    assert [p >= classifier.change_bar for p in classifier.change_probabilities([change_clauses(said)])] == [change]


def test_a_change_without_words_of_change_replaces_the_item_it_is_about() -> None:
    contents = _contents(
        "I'm on Android, a Samsung Galaxy S21, so give me Android steps.",
        "caved and bought an iPhone 16 last week, the whole family is on FaceTime",
    )
    assert not any("Galaxy" in c for c in contents)


def test_an_update_that_replaces_nothing_teaches_nothing() -> None:
    contents = _contents("I love hiking in the Alps in summer.", "closed on the condo last friday, finally")
    assert contents and all("condo" not in c for c in contents)


@pytest.mark.parametrize(
    ("earlier", "later", "kept"),
    [
        ("I live in Chicago, in Logan Square.", "my sister just moved to Denver for work", "Chicago"),
        ("I have a golden retriever called Biscuit.", "we also got a second dog, a beagle called Pip", "Biscuit"),
    ],
)
def test_someone_elses_change_and_an_addition_replace_nothing(earlier: str, later: str, kept: str) -> None:
    assert any(kept in c for c in _contents(earlier, later))


def test_another_persons_change_that_involves_the_user_replaces() -> None:
    contents = _contents("I live alone in a studio flat.", "my boyfriend moved in with me last month")
    assert not any("alone" in c for c in contents)


def test_an_update_that_only_retires_a_rule_is_learned_and_retires_it() -> None:
    contents = _contents(
        "Keep answers super short, 2-3 sentences max, I'm reading everything on my phone.",
        "set up a proper desk with two big monitors over the weekend, reading on my phone is over",
    )
    assert not any("short" in c for c in contents)
    assert any("monitors" in c for c in contents)


@pytest.mark.parametrize(("sure", "replaced"), [(0.9, True), (0.6, False), (0.0, False)])
def test_a_sure_change_reaches_a_less_similar_item(sure: float, replaced: bool) -> None:
    """The nearest item is replaced from cosine CHANGE_NEAREST_FLOOR (0.40), or from SURE_CHANGE_FLOOR (0.30) when the
    change head is sure (>= SURE_CHANGE): here the only item sits at 0.35."""
    cosine = (SURE_CHANGE_FLOOR + CHANGE_NEAREST_FLOOR) / 2
    existing = np.asarray([[1.0, 0.0]], dtype=np.float32)
    new = np.asarray([[cosine, (1 - cosine**2) ** 0.5]], dtype=np.float32)
    said = "big news, everything is different since friday"
    out = changed_subjects([(said, said)], ["Plays the cello every evening"], new, existing, set(), announced=[sure])
    assert out == ({0: [0]} if replaced else {})
    assert SURE_CHANGE_FLOOR < cosine < CHANGE_NEAREST_FLOOR
