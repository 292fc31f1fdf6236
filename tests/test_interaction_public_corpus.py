"""The public development corpus of search_interactions (benchmarks/interaction_public_corpus.py): questions asked
in other words than their answers, with evidence turns that restate the speaker's persona line. Built from the
fetched Synthetic-Persona-Chat mirror, so skipped where it is absent (content fetched never enters git)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import interaction_public_corpus as public
from reflexio_pipelines.learning.clauses.corpus import SPC_REPO
from reflexio_pipelines.learning.clauses.labels import content_words

MIRRORED = (public.MIRROR / SPC_REPO[0].replace("/", "+") / "repo").exists()


def test_persona_lines_become_questions_in_other_words() -> None:
    assert public.question_for("My favorite band is the killers.", "Maya") == "Which band does Maya like best?"
    assert public.question_for("i have two dogs", "Maya") == "How many dogs does Maya have?"
    assert public.question_for("i am a museum tour guide", "Leo") == "What does Leo do for a living?"
    assert public.question_for("i can move objects with my mind", "Leo") is None
    assert public.restates("I love to bake cookies and knit.", "I love to bake cookies.")
    assert not public.restates("What do you like to bake?", "Knitting is my passion.")


@pytest.mark.skipif(not MIRRORED, reason="Synthetic-Persona-Chat is not fetched")
def test_the_public_corpus_has_long_histories_and_fair_questions() -> None:
    conversations = public.corpus(users=2, seed=7, split="dev")
    first, second = ({tuple(text for _, text in s) for s in c.sessions} for c in conversations)
    assert not first & second  # users are disjoint in conversations
    for c in conversations:
        assert len(c.sessions) == public.SESSIONS and sum(map(len, c.sessions)) > 400
        assert c.dates == sorted(c.dates) and c.questions
        texts = {f"s{i}:t{j}": turn for i, session in enumerate(c.sessions) for j, turn in enumerate(session)}
        for q in c.questions:
            assert q.category in {"single_hop", "multi_hop", "temporal", "speaker"}
            speakers = {texts[k][0] for k in q.evidence}
            assert len(speakers) == 1 and speakers <= set(c.speakers)
            assert next(iter(speakers)) in q.question  # the question names who said it
            asked = content_words(q.question) - content_words(" ".join(c.speakers))
            for key in q.evidence:  # BM25 cannot win by construction: at most half the question's words
                shared = asked & content_words(texts[key][1])
                assert len(shared) * 2 <= len(asked)
    assert public.corpus(users=2, seed=7, split="dev")[0].questions == conversations[0].questions


@pytest.mark.e2e
@pytest.mark.skipif(not MIRRORED, reason="Synthetic-Persona-Chat is not fetched")
def test_the_ranking_benchmark_measures_every_leg_on_the_public_corpus(tmp_path: Path) -> None:
    from benchmarks import interaction_ranking

    out = tmp_path / "ranking.json"
    results = interaction_ranking.main(["--corpus", "public", "--ablation", "--users", "1", "--output", str(out)])
    variants = {"index", "fallback", "plain_bm25", *interaction_ranking.ABLATIONS, "no_neighbours"}
    for split in ("dev", "heldout"):
        assert results[split]["corpus"] == "public" and variants <= set(results[split])
        overall = {v: results[split][v]["overall"] for v in variants}
        assert all(
            0.0 <= o["recall@1"] <= o["recall@5"] <= o["recall@10"] <= 1.0 and o["n"] > 0 for o in overall.values()
        )
        assert overall["index"]["recall@10"] > overall["plain_bm25"]["recall@10"]
