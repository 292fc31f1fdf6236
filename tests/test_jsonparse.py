"""Recovering the extraction object from messy LLM replies, and validating it item by item."""

from __future__ import annotations

import pytest

from reflexio_pipelines.learning.jsonparse import (
    AmbiguousReply,
    LLMOutputError,
    RefusedReply,
    TruncatedReply,
    clean_text,
    parse_llm_json,
    validate_extraction,
)
from reflexio_pipelines.learning.types import Turn, Window

EXPECTED = {"profiles": [{"content": "Likes tea"}], "playbooks": []}


@pytest.mark.parametrize(
    "reply",
    [
        '{"profiles": [{"content": "Likes tea"}], "playbooks": []}',
        '```json\n{"profiles": [{"content": "Likes tea"}], "playbooks": []}\n```',
        '```\n{"profiles": [{"content": "Likes tea"}], "playbooks": []}\n```',
        'Here is the result:\n```json\n{"profiles": [{"content": "Likes tea"}], "playbooks": [],}\n```\nHope it helps!',
        '{"profiles": [{"content": "Likes tea",},], "playbooks": [],}',
        "{'profiles': [{'content': 'Likes tea'}], 'playbooks': []}",
        'Sure! The JSON is {"profiles": [{"content": "Likes tea"}], "playbooks": []} as requested.',
        'I found {2} things {as asked}:\n{"profiles": [{"content": "Likes tea"}], "playbooks": []}',  # prose braces
        '<think>Tea or coffee? {"profiles": [{"content": "Likes coffee"}]} no: tea.</think>\n'
        '{"profiles": [{"content": "Likes tea"}], "playbooks": []}',  # a draft inside the reasoning is not the answer
        'the user said tea, not coffee {"profiles": []}\n</think>\n\n{"profiles": [{"content": "Likes tea"}], '
        '"playbooks": []}',  # a template that opened the reasoning block in the prompt
        '"{\\"profiles\\": [{\\"content\\": \\"Likes tea\\"}], \\"playbooks\\": []}"',  # double-encoded
        '{"profiles": [{"content": "Likes tea"} // from T2\n], "playbooks": []}',  # a comment
        '```json\n{"profiles": [{"content": "Likes tea"}], "playbooks": []}\n```\nSo: {"profiles": [{"content": '
        '"Likes tea"}], "playbooks": []}',  # the same answer twice
    ],
)
def test_parse_recovers_object(reply: str) -> None:
    assert parse_llm_json(reply, expected_keys=("profiles", "playbooks")) == EXPECTED


def test_python_literals() -> None:
    assert parse_llm_json("{'ok': True, 'bad': False, 'none': None, 'n': [1, 2,]}") == {
        "ok": True,
        "bad": False,
        "none": None,
        "n": [1, 2],
    }


@pytest.mark.parametrize(
    "reply",
    [
        '{"profiles": [{"content": "Works at Acme", "time_to_live": "infinity"}, {"content": "Lik',
        '```json\n{"profiles": [{"content": "Likes tea"}], "playbooks": [',
        '{"profiles": [{"content": "Likes tea"}], "playbooks": []',
    ],
)
def test_a_reply_whose_object_never_closes_is_cut_off_and_yields_nothing(reply: str) -> None:
    """Repairing a cut-off object would store what arrived of it ("Lik") as an item: it is refused instead."""
    with pytest.raises(TruncatedReply, match="never closes"):
        parse_llm_json(reply, expected_keys=("profiles", "playbooks"))


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I'm sorry, but I can't help with that.", RefusedReply),
        ('I cannot process personal data.\n{"profiles": [], "playbooks": []}', RefusedReply),
        (
            '{"profiles": [{"content": "Likes tea"}]}\nor rather {"profiles": [{"content": "Likes coffee"}]}',
            AmbiguousReply,
        ),
        ("<think>The user likes tea, so the answer is", LLMOutputError),  # reasoning that never ends
    ],
)
def test_refusals_ambiguity_and_endless_reasoning_fail(reply: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_llm_json(reply, expected_keys=("profiles", "playbooks"))


def test_an_empty_answer_without_a_refusal_is_a_valid_empty_result() -> None:
    reply = 'Small talk only; I can\'t find anything worth remembering.\n{"profiles": [], "playbooks": []}'
    assert parse_llm_json(reply, expected_keys=("profiles", "playbooks")) == {"profiles": [], "playbooks": []}
    # the consolidator's null is a decision, whatever prose explains it
    reply = 'The members disagree, so I can\'t provide one shared rule.\n{"playbook": null}'
    assert parse_llm_json(reply, expected_keys=("playbook",)) == {"playbook": None}


def test_valid_json_containing_fences_and_braces_is_not_mangled() -> None:
    reply = '{"playbooks": [{"content": "Wrap code in ```bash``` fences and keep {braces}"}]}'
    assert parse_llm_json(reply)["playbooks"][0]["content"] == "Wrap code in ```bash``` fences and keep {braces}"


@pytest.mark.parametrize(
    "reply",
    ["", "   ", "I'm sorry, I can't help with that.", "[1, 2, 3]", '"just a string"', "```\nnothing here\n```", None],
)
def test_garbage_raises(reply: str | None) -> None:
    with pytest.raises(LLMOutputError):
        parse_llm_json(reply)


def test_expected_keys() -> None:
    assert parse_llm_json('{"profiles": []}', expected_keys=("profiles", "playbooks")) == {"profiles": []}
    with pytest.raises(LLMOutputError, match="lacks"):
        parse_llm_json('{"answer": 42}', expected_keys=("profiles", "playbooks"))


# --- validation -------------------------------------------------------------------------------------------------

WINDOW = Window(
    "u1",
    tuple(
        Turn(turn_id=f"id{i}", interaction_id=i, request_id="r", user_id="u1", role="user", content="x", created_at=i)
        for i in range(1, 4)
    ),
)
ALL_IDS = ["id1", "id2", "id3"]


def test_validate_converts_and_maps_evidence() -> None:
    profiles, playbooks, problems = validate_extraction(
        {
            "profiles": [
                {"content": "Prefers tea", "time_to_live": "one_week", "evidence": ["T2"], "metadata": "diet"},
                {"content": "Lives in Oslo", "time_to_live": "forever", "evidence": ["T9"]},
            ],
            "playbooks": [
                {
                    "rationale": "User corrected the region",
                    "trigger": "When choosing a region",
                    "content": "Use us-west-2.",
                    "kind": "correction",
                    "blocking_issue": None,
                    "evidence": ["T3", "T1"],
                },
                {
                    "content": "Check scopes before calling github.",
                    "kind": "tool_failure",
                    "blocking_issue": {"kind": "permission_denied", "details": "403"},
                },
                {"content": "Do X.", "kind": "wisdom", "blocking_issue": {"kind": "cosmic_rays", "details": "?"}},
            ],
        },
        WINDOW,
    )
    assert [(p.content, p.time_to_live, p.source_turn_ids, p.custom_features) for p in profiles] == [
        ("Prefers tea", "one_week", ["id2"], {"metadata": "diet"}),
        ("Lives in Oslo", "infinity", ALL_IDS, {}),  # unknown TTL coerced, invalid evidence -> whole window
    ]
    assert playbooks[0].source_turn_ids == ["id1", "id3"]
    assert (playbooks[0].trigger, playbooks[0].rationale, playbooks[0].blocking_issue_kind) == (
        "When choosing a region",
        "User corrected the region",
        None,
    )
    assert (playbooks[1].blocking_issue_kind, playbooks[1].blocking_issue_details, playbooks[1].trigger) == (
        "permission_denied",
        "403",
        None,
    )
    assert playbooks[1].source_turn_ids == ALL_IDS
    assert (playbooks[2].kind, playbooks[2].blocking_issue_kind) == ("correction", None)
    assert len(problems) == 3 and any("forever" in p for p in problems)


def test_validate_drops_bad_items_without_failing() -> None:
    profiles, playbooks, problems = validate_extraction(
        {
            "profiles": [{"content": ""}, {"content": 42}, "Bare string fact", ["nested"], {"no": "content"}],
            "playbooks": {"content": "Single object instead of a list", "trigger": "   "},
        },
        WINDOW,
    )
    assert [p.content for p in profiles] == ["Bare string fact"]
    assert [(p.content, p.trigger) for p in playbooks] == [("Single object instead of a list", None)]
    assert len(problems) == 4


def test_validate_tolerates_missing_and_wrong_typed_lists() -> None:
    assert validate_extraction({"profiles": None}, WINDOW) == ([], [], [])
    profiles, playbooks, problems = validate_extraction({"profiles": "none", "playbooks": 3}, WINDOW)
    assert (profiles, playbooks, len(problems)) == ([], [], 2)


def test_validate_cleans_truncates_and_dedupes() -> None:
    profiles, playbooks, _ = validate_extraction(
        {
            "profiles": [{"content": "Likes\x00 tea\u202e"}, {"content": "likes  TEA"}],
            "playbooks": [{"content": "y" * 10_000, "rationale": "r" * 5_000}],
        },
        WINDOW,
    )
    assert [p.content for p in profiles] == ["Likes tea"]
    assert len(playbooks[0].content) == 2_000 and playbooks[0].content.endswith("…")
    assert len(playbooks[0].rationale or "") == 2_000


def test_clean_text_keeps_newlines_and_tabs() -> None:
    assert clean_text(" a\tb\nc\x07 ") == "a\tb\nc"
