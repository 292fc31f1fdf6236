"""The heuristic parse of speakers and time ranges in questions about a conversation (search/turn_query.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from reflexio_pipelines.search.turn_query import parse_turn_query, speakers_in, time_range, topic_of


def _ts(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp())


REF = _ts(2024, 3, 15)  # the conversation's latest turn


def test_speakers_are_roles_named_as_words_possessives_included():
    roles = ["Maya", "Leo", "assistant"]
    assert speakers_in("What is the name of Maya's dog?", roles) == ("Maya",)
    assert speakers_in("what did LEO and maya say", roles) == ("Maya", "Leo")
    assert speakers_in("What did Maya’s brother say?", roles) == ("Maya",)  # typographic apostrophe
    assert speakers_in("What did the assistant suggest?", roles) == ("assistant",)
    assert speakers_in("Mayan ruins and Leonardo", roles) == ()  # whole words only


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Maya cook in May 2023?", (_ts(2023, 5, 1), _ts(2023, 6, 1) - 1)),
        ("what happened during December 2022", (_ts(2022, 12, 1), _ts(2023, 1, 1) - 1)),
        ("What did she plant last May?", (_ts(2023, 5, 1), _ts(2023, 6, 1) - 1)),  # the latest May before the reference
        ("anything in February?", (_ts(2024, 2, 1), _ts(2024, 3, 1) - 1)),
        ("before June 2023 what was the plan", (None, _ts(2023, 6, 1) - 1)),
        ("What changed after March 2023?", (_ts(2023, 4, 1), None)),
        ("since Jan 2023", (_ts(2023, 1, 1), None)),
        ("what did they do in 2022", (_ts(2022, 1, 1), _ts(2023, 1, 1) - 1)),
        ("what did we discuss last week", (REF - 7 * 86_400, REF)),
        ("may I ask what she said in dec", (_ts(2023, 12, 1), _ts(2024, 1, 1) - 1)),  # "may" the verb is no month
        ("She may have moved", (None, None)),
        ("What is the name of the dog?", (None, None)),
    ],
)
def test_time_ranges(query, expected):
    assert time_range(query, REF)[0] == expected
    parsed = parse_turn_query(query, (), REF)
    assert (parsed.start, parsed.end) == expected


def test_topic_drops_the_time_expression_only():
    assert topic_of("What did Maya cook in May 2023?") == "What did Maya cook ?"
    assert topic_of("What did Maya cook?") == "What did Maya cook?"
    assert topic_of("in 2023") == "in 2023"  # nothing else left: the query as it was


def test_parse_is_timed_only_with_a_range():
    assert not parse_turn_query("What is Leo's cat called?", ["Leo"], REF).timed
    parsed = parse_turn_query("What did Leo plant in April 2023?", ["Leo", "Maya"], REF)
    assert parsed.speakers == ("Leo",) and parsed.timed


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What happened in Auguſt 2023?", (1672531200, 1704067199)),  # the year alone
        ("laſt week", (None, None)),
        ("the paſt month", (None, None)),
    ],
)
def test_letters_that_case_fold_to_ascii_ones_do_not_break_the_parse(query, expected):
    """ "ſ" and "İ" match "s" and "i" case-insensitively in Unicode regexes but do not lower-case to them: the month
    lookup raised KeyError, a 500 from search_interactions. Only ASCII spellings name a time now."""
    assert time_range(query, REF)[0] == expected
