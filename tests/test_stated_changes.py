"""Updates and revocations: a statement of change replaces the earlier items on its subject, an addition does not, a
revocation withdraws the playbooks it names — in the pure functions and through `learn()` with the built-in
extractor and the offline judge, two publishes a day apart."""

from __future__ import annotations

import numpy as np
import pytest

from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.builtin import BuiltinExtractor
from reflexio_pipelines.learning.dedup import RuleDedupJudge, changed_subjects
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.lifecycle import FORGOTTEN, REPLACED, current_rows
from reflexio_pipelines.learning.stated_changes import REPLACED_CONTENT, REVOKED_CONTENT, revoked_playbooks
from reflexio_pipelines.learning.subjects import names_in, states_a_change, subjects_of
from reflexio_pipelines.learning.types import Turn

EMBEDDER = make_embedder("local")
DAY = 86_400


@pytest.mark.parametrize(
    ("said", "change"),
    [
        ("I moved to Denver last month", True),
        ("I switched to Neovim for good", True),
        ("from now on, short paragraphs", True),
        ("I'm not vegetarian anymore", True),
        ("I've given up fish as well, fully vegetarian these days", True),
        ("I now also have a cat", False),
        ("I like jazz", False),
        ("I live in Boston", False),
    ],
)
def test_words_of_change_and_of_addition(said: str, change: bool) -> None:
    assert states_a_change(said) is change


def test_a_change_replaces_items_on_its_subject_only() -> None:
    new = [("Moved to Denver last month", "I moved to Denver last month")]
    existing = ["Lives in Boston", "Is allergic to shellfish", "Has a dog"]
    vectors = EMBEDDER.embed([new[0][0], *existing])
    assert subjects_of("Lives in Boston") & subjects_of(new[0][0])
    assert changed_subjects(new, existing, vectors[:1], vectors[1:], taken=set()) == {0: [0]}
    assert changed_subjects(new, existing, vectors[:1], vectors[1:], taken={0}) == {}
    added = [("Now also has a cat", "I now also have a cat")]
    added_vectors = EMBEDDER.embed([added[0][0]])
    assert changed_subjects(added, existing, added_vectors, vectors[1:], taken=set()) == {}


@pytest.mark.parametrize(
    ("old", "said"),
    [
        ("Uses Chrome for everything", "I switched to Firefox for good"),
        ("Drives a 2012 Honda Civic", "I sold the Civic and got an electric Kia EV6"),
        ("Runs three times a week", "My knee surgery means no more running, I swim instead now"),
        ("They track their work in Jira", "We moved our tickets from Jira to Linear"),
        ("Their laptop runs Windows 11", "I wiped Windows and put Fedora on my laptop"),
        # a home, a job, a car and a sport named without the subject's usual words
        ("Rents a studio apartment downtown", "Got the keys to our own townhouse now, two floors and a yard"),
        ("Teaches middle school maths", "Left the classroom, I'm a data analyst at a bank now"),
        ("Does not own a car", "Bought a secondhand Mazda, I drive everywhere now"),
        ("Runs 10k before work most days", "Physio says no impact for now, it's the stationary bike for me"),
    ],
)
def test_devices_vehicles_exercise_and_work_tools_are_subjects_a_change_replaces(old: str, said: str) -> None:
    # sentence embeddings put these pairs at cosine 0.32-0.52, under CHANGE_SIMILARITY: the subject decides
    existing = [old, "Is allergic to shellfish"]
    vectors = EMBEDDER.embed([said, *existing])
    assert changed_subjects([(said, said)], existing, vectors[:1], vectors[1:], taken=set()) == {0: [0]}


def test_a_revocation_names_the_rule_it_withdraws() -> None:
    playbooks = [
        {"user_playbook_id": 1, "trigger": None, "content": "Use bullet points in every summary"},
        {"user_playbook_id": 2, "trigger": "When deploying", "content": "Never deploy on Fridays"},
    ]
    assert [r["user_playbook_id"] for r in revoked_playbooks("the bullet points rule", playbooks, EMBEDDER)] == [1]
    assert revoked_playbooks("that rule", playbooks, EMBEDDER) == []  # names nothing: withdraws nothing


def _turns(user: str, session: str, at: int, *pairs: tuple[str, str]) -> list[Turn]:
    return [
        Turn(f"{session}-{i}", at + i, f"{session}-r", user, role, text, at + i, session_id=session, turn_index=i)
        for i, (role, text) in enumerate(pairs)
    ]


def _learn_twice(first: list[Turn], second: list[Turn]) -> tuple[list[dict], list[dict], list[dict]]:
    extractor, judge = BuiltinExtractor(), (lambda entity, vectors: RuleDedupJudge(vectors))
    one = learn(first, {}, extractor, EMBEDDER, judge, window="2026-01-01T00", run_id="r1", on_failure="raise")
    state = UserState(
        history=first,
        profiles=current_rows(one.profiles, "profile_id", "last_modified_timestamp"),
        playbooks=current_rows(one.playbooks, "user_playbook_id", "created_at"),
    )
    user = first[0].user_id
    two = learn(
        second, {user: state}, extractor, EMBEDDER, judge, window="2026-01-02T00", run_id="r2", on_failure="raise"
    )
    profiles = current_rows(one.profiles + two.profiles, "profile_id", "last_modified_timestamp")
    playbooks = current_rows(one.playbooks + two.playbooks, "user_playbook_id", "created_at")
    return profiles, playbooks, two.playbooks


def test_a_move_supersedes_the_old_city_through_learn() -> None:
    profiles, _, _ = _learn_twice(
        _turns("mia", "a", 1_000, ("user", "I live in Boston, near the harbour."), ("assistant", "Lovely!")),
        _turns("mia", "b", 1_000 + DAY, ("user", "I moved to Denver last month."), ("assistant", "Big change!")),
    )
    texts = [p["content"] for p in profiles]
    assert any("Denver" in t for t in texts) and not any("Boston" in t for t in texts)


def test_a_revocation_withdraws_the_rule_and_the_replacement_stays() -> None:
    first = _turns(
        "leo",
        "a",
        1_000,
        ("user", "From now on, always use bullet points in your summaries."),
        ("assistant", "Will do."),
    )
    second = _turns(
        "leo",
        "b",
        1_000 + DAY,
        ("user", "Forget the bullet points rule, short paragraphs from now on."),
        ("assistant", "OK."),
    )
    _, playbooks, written = _learn_twice(first, second)
    texts = [p["content"].lower() for p in playbooks]
    assert not any("bullet" in t for t in texts) and any("paragraph" in t for t in texts)
    tombstones = [r for r in written if r["status"] == FORGOTTEN]
    assert all(r["content"] == REVOKED_CONTENT for r in tombstones)
    assert (
        np.isin(
            [r["supersedes"] for r in tombstones if r["supersedes"]], [p["user_playbook_id"] for p in playbooks]
        ).sum()
        == 0
    )


@pytest.mark.parametrize(
    ("before", "after", "retired", "kept"),
    [
        (
            "I swim at 6 am every day, so never book anything before 9 in my calendar.",
            "I've moved my swims to the evenings now, mornings are free.",
            "before 9",
            "swims",
        ),
        ("Please always call me Robert in emails.", "I changed my name to Bob last year.", "robert", "bob"),
    ],
)
def test_a_changed_fact_retires_the_rules_said_with_the_old_one(
    before: str, after: str, retired: str, kept: str
) -> None:
    profiles, playbooks, written = _learn_twice(
        _turns("ana", "a", 1_000, ("user", before), ("assistant", "Noted.")),
        _turns("ana", "b", 1_000 + DAY, ("user", after), ("assistant", "Got it.")),
    )
    assert not any(retired in p["content"].lower() for p in playbooks)
    assert any(kept in p["content"].lower() for p in profiles)
    tombstones = [r for r in written if r["status"] == REPLACED]
    assert len(tombstones) == 1 and tombstones[0]["content"] == REPLACED_CONTENT and tombstones[0]["supersedes"]


def test_an_unrelated_fact_retires_no_rule() -> None:
    _, playbooks, written = _learn_twice(
        _turns("ana", "a", 1_000, ("user", "Never book anything before 9 in my calendar."), ("assistant", "Noted.")),
        _turns("ana", "b", 1_000 + DAY, ("user", "I moved to Denver last month."), ("assistant", "Big change!")),
    )
    assert any("before 9" in p["content"].lower() for p in playbooks)
    assert not [r for r in written if r["status"] == REPLACED]


def test_a_new_home_makes_an_earlier_time_zone_stale_not_the_other_way() -> None:
    profiles, _, _ = _learn_twice(
        _turns("kai", "a", 1_000, ("user", "I'm on Pacific time, so mornings are early for me."), ("assistant", "OK")),
        _turns("kai", "b", 1_000 + DAY, ("user", "I'm living in Madrid for the next three years."), ("assistant", "!")),
    )
    texts = " ".join(p["content"] for p in profiles).lower()
    assert "madrid" in texts and "pacific" not in texts
    kept, _, _ = _learn_twice(
        _turns("lia", "a", 1_000, ("user", "I live in Madrid."), ("assistant", "Lovely.")),
        _turns("lia", "b", 1_000 + DAY, ("user", "I'm on CET."), ("assistant", "Noted.")),
    )
    assert "madrid" in " ".join(p["content"] for p in kept).lower()


@pytest.mark.parametrize(
    ("before", "after", "old", "new"),
    [
        # the head reads a replacement as a story (hypothetical 0.86): its form makes it a fact
        ("I'm an iPhone user, so give me iOS steps.", "I ditched my iPhone for a Pixel last week.", "iphone", "pixel"),
        # a "correction" that answers no agent turn corrects what is known about the user, and names the pet
        (
            "I have a golden retriever named Max.",
            "Max passed away last month, we don't have a dog anymore.",
            "retriever",
            "max",
        ),
        # a "revocation" of the user's own condition: a new fact replacing the old by subject, not a withdrawal
        (
            "I can't have peanuts.",
            "My allergist says I've outgrown the peanut allergy, peanuts are fine now.",
            "can",
            "outgrown",
        ),
        # chat drops the "I" before a verb of change
        (
            "I use Safari on my Mac.",
            "Moved over to Firefox completely, Safari kept crashing.",
            "uses safari",
            "firefox",
        ),
        ("I drive a diesel Passat.", "Traded the Passat in for a Tesla Model 3 last week.", "diesel", "tesla"),
        # a change of the user's own with "no more" is a fact, not a rule (the head: request)
        (
            "I eat pretty much everything.",
            "ok so I've gone vegetarian since last month, no more meat for me",
            "everything",
            "vegetarian",
        ),
        ("I work as a nurse.", "I left nursing, I'm a paramedic now", "as a nurse", "paramedic"),
    ],
)
def test_a_change_in_the_users_life_replaces_the_old_fact(before: str, after: str, old: str, new: str) -> None:
    profiles, _, _ = _learn_twice(
        _turns("noa", "a", 1_000, ("user", before), ("assistant", "Noted.")),
        _turns("noa", "b", 1_000 + DAY, ("user", after), ("assistant", "Thanks for the update.")),
    )
    texts = [p["content"].lower() for p in profiles]
    assert any(new in t for t in texts), texts
    assert not any(old in t and new not in t for t in texts), texts


def test_relaxing_a_rule_withdraws_it() -> None:
    _, playbooks, written = _learn_twice(
        _turns("ivy", "a", 1_000, ("user", "Keep things formal with me."), ("assistant", "Of course.")),
        _turns(
            "ivy",
            "b",
            1_000 + DAY,
            ("user", "You can relax the formality, casual is fine by me now."),
            ("assistant", "Sure!"),
        ),
    )
    assert not any("formal" in p["content"].lower() for p in playbooks)
    assert [r for r in written if r["status"] in (FORGOTTEN, REPLACED)]


def test_names_are_what_an_item_names_after_its_first_word() -> None:
    assert names_in("Has a golden retriever named Max") == {"Max"}
    assert names_in("Lives in Boston since March") == {"Boston"}  # a month names nothing an item is about
    assert names_in("Max is their dog") == set()


def test_leaving_a_phone_at_home_replaces_no_device() -> None:
    profiles, _, _ = _learn_twice(
        _turns("ron", "a", 1_000, ("user", "I'm an iPhone user."), ("assistant", "Noted.")),
        _turns("ron", "b", 1_000 + DAY, ("user", "I left my phone at home this morning."), ("assistant", "Oh no.")),
    )
    assert any("iphone" in p["content"].lower() for p in profiles)


def test_a_change_naming_the_same_thing_replaces_it_whatever_the_head_reads() -> None:
    # "sold the Vespa" reads as chat to the clause head; it names the thing the earlier item is about
    profiles, _, _ = _learn_twice(
        _turns("eli", "a", 1_000, ("user", "I ride my Vespa to the office every day."), ("assistant", "Nice.")),
        _turns(
            "eli", "b", 1_000 + DAY, ("user", "sold the vespa last week, I cycle everywhere now"), ("assistant", "Ok")
        ),
    )
    texts = [p["content"].lower() for p in profiles]
    assert any("sold the vespa" in t for t in texts) and not any("ride" in t for t in texts)


def test_giving_up_a_hobby_replaces_it_and_an_addition_does_not() -> None:
    gave_up = _learn_twice(
        _turns("ada", "a", 1_000, ("user", "I'm learning the cello, grade 2 so far."), ("assistant", "Lovely.")),
        _turns("ada", "b", 1_000 + DAY, ("user", "I gave up the cello, it's guitar now."), ("assistant", "Ok")),
    )[0]
    assert not any("learning the cello" in p["content"].lower() for p in gave_up)
    added = _learn_twice(
        _turns("bo", "a", 1_000, ("user", "I'm learning the cello, grade 2 so far."), ("assistant", "Lovely.")),
        _turns("bo", "b", 1_000 + DAY, ("user", "I also play the cello in a quartet now."), ("assistant", "Ok")),
    )[0]
    assert any("learning the cello" in p["content"].lower() for p in added)


def test_a_revocation_withdraws_what_its_clause_names_not_what_follows() -> None:
    _, playbooks, _ = _learn_twice(
        _turns("cy", "a", 1_000, ("user", "Always put the figures in tables please."), ("assistant", "Will do.")),
        _turns(
            "cy", "b", 1_000 + DAY, ("user", "you can stop using tables now, plain text is fine"), ("assistant", "Ok")
        ),
    )
    assert not any("tables" in p["content"].lower() for p in playbooks)


def test_the_same_thing_with_the_other_polarity_replaces_it_without_words_of_change() -> None:
    flipped = _learn_twice(
        _turns("di", "a", 1_000, ("user", "I don't eat mushrooms at all."), ("assistant", "Noted.")),
        _turns("di", "b", 1_000 + DAY, ("user", "I've learned to love mushrooms in risotto."), ("assistant", "Ok")),
    )[0]
    assert [p["content"] for p in flipped] == ["Has learned to love mushrooms in risotto"]
    other_thing = _learn_twice(
        _turns("ed", "a", 1_000, ("user", "I don't eat mushrooms at all."), ("assistant", "Noted.")),
        _turns("ed", "b", 1_000 + DAY, ("user", "I love a good risotto."), ("assistant", "Ok")),
    )[0]
    assert len(other_thing) == 2
