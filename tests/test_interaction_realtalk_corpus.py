"""The real-chat development corpus of search_interactions (benchmarks/interaction_realtalk_corpus.py): LoCoMo-format
chats read into sessions, dates and questions whose evidence ids become turn keys. The format is checked on a small
chat written here; the five dev chats only where the REALTALK mirror is fetched (content fetched never enters git)."""

from __future__ import annotations

import pytest

from benchmarks import interaction_realtalk_corpus as realtalk

CHAT = {
    "name": {"speaker_1": "Emi", "speaker_2": "elise"},
    "session_1_date_time": "29.12.2023, 22:42:04",
    "session_1": [
        {"clean_text": "Hey! How are you?", "speaker": "Emi", "date_time": "29.12.2023, 22:42:04", "dia_id": "D1:1"},
        {"clean_text": "  ", "speaker": "elise", "date_time": "29.12.2023, 22:43:00", "dia_id": "D1:2"},
        {"clean_text": "Cooking class today!", "speaker": "Emi", "date_time": "29.12.2023, 22:44:00", "dia_id": "D1:3"},
    ],
    "session_2_date_time": "30.12.2023, 20:00:00",
    "session_2": [
        {"clean_text": "I made pasta.", "speaker": "Emi", "date_time": "30.12.2023, 20:00:00", "dia_id": "D2:1"},
    ],
    "events_session_1": {},
    "qa": [
        {"question": "What did Kate cook?", "evidence": ["D1:3", "D2:1", "D9:9"], "category": 1},
        {"question": "When was the class?", "evidence": ["D1:3"], "category": 2},
        {"question": "Nothing to find", "evidence": ["D7:7"], "category": 3},
        {"question": "Adversarial", "evidence": ["D1:1"], "category": 5},
    ],
}


def test_a_chat_becomes_sessions_and_questions_with_turn_keys() -> None:
    c = realtalk.conversation(CHAT, "u")
    assert c.speakers == ("Emi", "elise")
    assert c.sessions == [[("Emi", "Hey! How are you?"), ("Emi", "Cooking class today!")], [("Emi", "I made pasta.")]]
    assert [d.day for d in c.dates] == [29, 30]
    # blank turns are left out, evidence naming no turn is dropped, and so is a question left without evidence or
    # of a category the corpus does not use
    assert [(q.category, q.evidence) for q in c.questions] == [
        ("multi_hop", ["s0:t1", "s1:t0"]),
        ("temporal", ["s0:t1"]),
    ]


MIRRORED = (realtalk.MIRROR / realtalk.REPO.replace("/", "+") / "repo").exists()


@pytest.mark.skipif(not MIRRORED, reason="REALTALK is not fetched")
def test_the_dev_chats_are_long_and_their_questions_point_at_turns() -> None:
    conversations = realtalk.corpus(split="dev")
    assert len(conversations) == 5
    for c in conversations:
        turns = sum(map(len, c.sessions))
        assert 400 <= turns and len(c.sessions) >= 18 and c.dates == sorted(c.dates)
        keys = {f"s{i}:t{j}" for i, s in enumerate(c.sessions) for j in range(len(s))}
        assert len(c.questions) >= 60 and all(set(q.evidence) <= keys for q in c.questions)
