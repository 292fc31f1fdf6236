"""The always-on tier of a user's items (search/situations.py): which subjects a request is about, which items join,
how they are merged into the hits; and through the live search path, that a constraint is served for a request it
shares no word with while an unrelated rule is not."""

from __future__ import annotations

import pytest

from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.search.situations import TIER_BUDGET, SituationMatcher, merged, tier
from reflexio_pipelines.search.text import embed_search_query
from reflexio_pipelines.search.types import SearchHit

EMBEDDER = make_embedder("local")
MATCHER = SituationMatcher(EMBEDDER)


def _hit(doc_id: str, content: str, similarity: float, trigger: str | None = None) -> SearchHit:
    payload = {"content": content, "trigger": trigger}
    return SearchHit(doc_id, "profile", similarity, payload, None, None, similarity)


@pytest.mark.parametrize(
    ("request_text", "subject"),
    [
        ("recommend a restaurant for our anniversary", "diet"),
        ("book me a flight to Rome", "travel"),
        ("set up a call with the team in Sydney", "schedule"),
    ],
)
def test_a_request_is_about_its_situations(request_text: str, subject: str) -> None:
    assert subject in MATCHER.subjects_for(embed_search_query(EMBEDDER, request_text))


def test_a_test_run_is_not_about_the_editor_or_food() -> None:
    subjects = MATCHER.subjects_for(embed_search_query(EMBEDDER, "run the test suite"))
    assert not subjects & {"editor", "diet", "allergy_health", "travel"}
    assert {"accessibility", "language", "answer_format"} <= subjects  # these always count


def test_the_tier_takes_items_on_subject_then_near_ones() -> None:
    hits = [
        _hit("near", "Prefers dark roast coffee", 0.20),
        _hit("scoped", "Always use dark mode in the terminal", 0.15, trigger="terminal configuration"),
        _hit("allergy", "Is allergic to shellfish", 0.04),
        _hit("far", "Has two cats", 0.01),
    ]
    chosen = tier(hits, frozenset({"allergy_health"}))
    assert [h.doc_id for h in chosen] == ["allergy", "near"]  # a rule with its own trigger waits for its situation
    assert [h.doc_id for h in tier(hits, frozenset({"editor"}))] == ["scoped", "near"]


def test_merge_keeps_the_hits_first_within_top_k() -> None:
    hits = [_hit(f"h{i}", "x", 1.0) for i in range(5)]
    extra = [_hit(f"t{i}", "y", 0.1) for i in range(5)]
    out = merged(hits, extra, top_k=5)
    assert [h.doc_id for h in out] == ["h0", "h1", "h2", "t0", "t1"]  # at most half of top_k when hits fill it
    assert [h.doc_id for h in merged(hits[:1], extra, top_k=5)] == ["h0", "t0", "t1", "t2"]
    assert merged(hits, [hits[0]], top_k=5) == hits  # nothing new: unchanged
    assert merged(hits, extra, top_k=1) == hits[:1]  # the best hit always stays
    assert len(merged([], extra, top_k=5)) == TIER_BUDGET
