"""The learned built-in extractor's parts: clause splitting, wording in the user's own words, the shipped head, the
extractor over windows (one playbook per correction turn, questions never stored, same-session context, other
languages left to an LLM), and the trainer end to end on a small corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reflexio_pipelines.learning.builtin import BuiltinExtractor
from reflexio_pipelines.learning.clauses.classifier import ClauseClassifier, decide
from reflexio_pipelines.learning.clauses.features import CUE_NAMES, ClauseInput, cue_vector
from reflexio_pipelines.learning.clauses.head import ClauseHead
from reflexio_pipelines.learning.clauses.kinds import KINDS
from reflexio_pipelines.learning.clauses.rewrite import playbook_parts, profile_text
from reflexio_pipelines.learning.clauses.split import split_clauses
from reflexio_pipelines.learning.clauses.train import EARLIER_MEMBER
from reflexio_pipelines.learning.types import Turn, Window

ROOT = Path(__file__).resolve().parents[1]


def _window(*turns: tuple[str, str] | tuple[str, str, str]) -> Window:
    out = []
    for i, spec in enumerate(turns):
        role, content = spec[0], spec[1]
        session = spec[2] if len(spec) > 2 else "s1"
        out.append(
            Turn(f"t{i}", i, f"r{i}", "u1", role, content, 1_000 + i, session_id=session, turn_index=i)  # type: ignore[arg-type]
        )
    return Window("u1", tuple(out))


@pytest.mark.parametrize(
    ("text", "clauses"),
    [
        ("I'm vegetarian, so no meat please", ["I'm vegetarian", "no meat please"]),
        (
            "I use VS Code, give me the shortcut for multi-cursor",
            ["I use VS Code", "give me the shortcut for multi-cursor"],
        ),
        ("When I send a report, use bullet points.", ["When I send a report, use bullet points."]),
        ("No, always write commit messages in English.", ["No, always write commit messages in English."]),
        ("From here on, please address me as Dr. Kim.", ["From here on, please address me as Dr. Kim."]),
        (
            "Forget the bullet rule, short paragraphs from now on",
            ["Forget the bullet rule", "short paragraphs from now on"],
        ),
        ("Override the old rule: only review source files", ["Override the old rule", "only review source files"]),
        ("TL;DR: keep it short", ["TL;DR: keep it short"]),
        ("Fix this:\n```\nprint('I love pizza')\n```\nthanks a lot", ["Fix this", "thanks a lot"]),
        # contractions typed without their apostrophe are restored; "its" and "wont" are words of their own
        ("its late but im vegan, so dont add cheese", ["its late but I'm vegan", "don't add cheese"]),
        # "İ" matches "i" case-insensitively but lower-cases to two characters: left as typed (it raised KeyError
        # and failed the user's learning run)
        ("İm from İzmir and im vegan", ["İm from İzmir and I'm vegan"]),
        # a parenthesis is one aside: its commas cut nothing, not even before an imperative ("fix")
        (
            "Commits follow Conventional Commits (feat:, fix:, chore:). Stick to that.",
            ["Commits follow Conventional Commits (feat:, fix:, chore:).", "Stick to that."],
        ),
        ("I use vim (with tmux; zsh too), give me tips", ["I use vim (with tmux; zsh too)", "give me tips"]),
    ],
)
def test_split_keeps_conditions_and_leads_with_their_clause(text: str, clauses: list[str]) -> None:
    assert split_clauses(text) == clauses


def test_contractions_typed_without_apostrophes_are_rewritten_like_typed_ones() -> None:
    """ "im" read as typed stayed in the learned profile ("Wait im not a chef, im a line cook")."""
    said = "wait im not a chef, im a line cook, big difference lol"
    result = BuiltinExtractor().extract(_window(("assistant", "Being a chef must be exhausting!"), ("user", said)))
    contents = [p.content for p in result.profiles]
    assert contents and all("they're a line cook" in c and " im " not in c.lower() for c in contents), contents


@pytest.mark.parametrize(
    ("clause", "profile"),
    [
        ("I don't eat pork", "Does not eat pork"),
        ("no pork anything pls, i keep halal", "No pork anything pls, they keep halal"),
        ("I always need an aisle seat", "Always needs an aisle seat"),
        ("I'm not a morning person", "Is not a morning person"),
        ("my manager is Dana", "Their manager is Dana"),
        ("we're saving for a house deposit", "They're saving for a house deposit"),
        ("I haven't eaten meat in years", "Has not eaten meat in years"),
        ("I'm in the US now, so let us know in dollars", "Is in the US now, so let them know in dollars"),
        ("I avoid caffeine after noon and prefer herbal teas", "Avoids caffeine after noon and prefers herbal teas"),
        ("I have an aversion to crowds and prefer quiet trails", "Has an aversion to crowds and prefers quiet trails"),
    ],
)
def test_profiles_keep_the_users_words_and_negations(clause: str, profile: str) -> None:
    assert profile_text(clause) == profile


def test_playbooks_take_their_condition_as_trigger() -> None:
    assert playbook_parts("could you please always cc my assistant") == (None, "Always cc the user's assistant")
    assert playbook_parts("When I send a report, use bullet points") == (
        "When the user sends a report",
        "Use bullet points",
    )
    assert playbook_parts("If I don't answer, remind me") == ("If the user does not answer", "Remind the user")


def test_cues_are_bounded_and_named() -> None:
    vector = cue_vector(ClauseInput("From now on I never want emojis?", "", "No, from now"))
    assert vector.shape == (len(CUE_NAMES),) and ((vector >= 0) & (vector <= 1)).all()
    named = dict(zip(CUE_NAMES, vector.tolist()))
    assert named["standing"] == named["question"] == named["opens_with_no"] == named["first_singular"] == 1.0
    assert named["third_party"] == 0.0


def test_the_shipped_head_loads_with_its_measurements() -> None:
    head = ClauseHead.load()
    assert set(head.kinds) == set(KINDS)
    assert set(head.min_probability) == {"profile", "playbook", "revocation"}
    dev = head.meta["dev"]["lasting"]
    earlier = head.meta["dev_earlier_member"]["lasting"]
    # measured on today's dev split (3,257 rows): the average beats its earlier member alone on both counts; the
    # head's own labels, before the structural checks (the whole extractor: docs/extractor.md)
    assert dev["support"] > 1500 and dev["precision"] >= earlier["precision"] and dev["recall"] > earlier["recall"]
    assert dev["precision"] >= 0.85 and dev["recall"] >= 0.8
    probs = head.probabilities(np.zeros((2, head.layers[0][0].shape[0]), dtype=np.float32))
    assert probs.shape == (2, len(KINDS)) and np.allclose(probs.sum(axis=1), 1.0)


def test_an_outcome_below_its_bar_stores_nothing() -> None:
    head = ClauseHead((), ("preference", "fact", "request", "social"), {"profile": 0.8}, {})
    sure, unsure = decide(head, np.array([[0.5, 0.4, 0.05, 0.05], [0.4, 0.3, 0.2, 0.1]]))
    assert sure.kind == "preference" and sure.probability == pytest.approx(0.9)  # preference + fact clear 0.8
    assert unsure.kind == "request"  # 0.7 does not: the best kind that stores nothing


def test_a_correction_turn_is_one_playbook_with_the_situation_as_trigger() -> None:
    result = BuiltinExtractor().extract(
        _window(
            ("user", "Please deploy the payments service."),
            ("assistant", "Deploying the payments service to us-east-1."),
            ("user", "No — we never deploy to us-east-1, always use us-west-2."),
        )
    )
    assert len(result.playbooks) == 1
    playbook = result.playbooks[0]
    assert "us-east-1" in playbook.content and "us-west-2" in playbook.content and "never" in playbook.content
    assert playbook.trigger == "When deploying the payments service"
    assert playbook.source_turn_ids == ["t0", "t1", "t2"] and playbook.rationale.startswith("The user said: ")
    assert result.profiles == [] and result.llm_calls == 0 and result.extractor == "builtin-learned"


def test_facts_become_profiles_and_requests_nothing() -> None:
    result = BuiltinExtractor().extract(
        _window(("user", "I'm allergic to shellfish. List five pros and cons of remote work."))
    )
    assert [p.content for p in result.profiles] == ["Is allergic to shellfish"]
    features = result.profiles[0].custom_features
    assert features["said"] == "I'm allergic to shellfish." and features["kind"] in ("preference", "fact")
    assert result.playbooks == []


def test_questions_are_never_stored() -> None:
    result = BuiltinExtractor().extract(_window(("user", "Why do my tyres always go flat in the winter?")))
    assert result.profiles == [] and result.playbooks == []


class _CountingEmbedder:
    """The real local embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        from reflexio_pipelines.learning.embedding import make_embedder

        self.inner, self.texts = make_embedder("local"), 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_clause_vectors_are_remembered_by_hash_and_forgotten_on_request() -> None:
    counting = _CountingEmbedder()
    classifier = ClauseClassifier(embedder=counting)  # type: ignore[arg-type]
    clauses = [ClauseInput("Thanks so much!"), ClauseInput("I live in Lisbon"), ClauseInput("Thanks so much!")]
    first = classifier.classify(clauses)
    assert counting.texts == 2  # the repeated clause is embedded once
    again = classifier.classify(clauses[:2])
    assert counting.texts == 2 and [p.kind for p in again] == [p.kind for p in first[:2]]
    uncached = ClauseClassifier(embedder=_CountingEmbedder()).classify(clauses)  # type: ignore[arg-type]
    for cold, warm in zip(uncached, first):
        assert cold.kind == warm.kind and cold.probability == pytest.approx(warm.probability, abs=1e-5)
    assert all(b"Lisbon" not in key for key in classifier._vectors._vectors)  # keyed by digest, not by words
    classifier.forget_vectors()
    classifier.classify(clauses[1:2])
    assert counting.texts == 3


def test_an_agent_turn_of_another_session_is_no_context() -> None:
    result = BuiltinExtractor().extract(
        _window(
            ("user", "Deploy the search service.", "old"),
            ("assistant", "Deployed to us-east-1.", "old"),
            ("user", "No — we never deploy to us-east-1, always use us-west-2.", "new"),
        )
    )
    assert len(result.playbooks) == 1
    assert result.playbooks[0].trigger is None and result.playbooks[0].source_turn_ids == ["t2"]


def test_other_languages_are_counted_and_left_to_an_llm() -> None:
    result = BuiltinExtractor().extract(_window(("user", "Я живу в Москве. 我对花生过敏。")))
    assert result.profiles == [] and result.playbooks == [] and result.unsupported_clauses == 2


def test_a_revocation_is_a_forget_directive_naming_its_target() -> None:
    result = BuiltinExtractor().extract(
        _window(("user", "Forget the bullet points rule, short paragraphs from now on"))
    )
    assert [d.target.casefold() for d in result.forget] == ["the bullet points rule"]
    assert len(result.playbooks) == 1 and "paragraphs" in result.playbooks[0].content.lower()


def test_the_trainer_fits_selects_and_writes_a_loadable_head(tmp_path: Path) -> None:
    """The training script end to end on a small corpus taken from our own writing (a few hundred rows): the head it
    writes loads, records its cross-validation and dev scores, and classifies."""
    from reflexio_pipelines.learning.clauses.train import train

    own = sorted((ROOT / "benchmarks/data/clauses/own").glob("*.jsonl"))[:4]
    assert own, "the committed own-writing corpus is missing"
    (tmp_path / "own").mkdir()
    for path in own:
        (tmp_path / "own" / path.name).write_text(path.read_text())
    out = tmp_path / "head.npz"
    meta = train(tmp_path, out, earlier=None)  # a few hundred rows need not hold every kind the member has
    rows = sum(len(p.read_text().splitlines()) for p in own)
    assert meta["rows"]["train"] + meta["rows"]["dev"] <= rows and meta["rows"]["dev"] > 0
    assert meta["model"] in meta["cross_validation"] and set(meta["bars"]) == {"profile", "playbook", "revocation"}
    assert json.dumps(meta)  # plain JSON in the file's header
    classifier = ClauseClassifier(out)
    predictions = classifier.classify([ClauseInput("I live in Porto with my two cats"), ClauseInput("hi there!")])
    assert [p.kind in KINDS for p in predictions] == [True, True]


def test_the_averaged_head_is_the_mean_of_its_members_logits() -> None:
    rng = np.random.default_rng(3)
    kinds = ("preference", "fact", "request")

    def member() -> ClauseHead:
        layers = ((rng.normal(size=(5, 4)), rng.normal(size=4)), (rng.normal(size=(4, 3)), rng.normal(size=3)))
        return ClauseHead(layers, kinds, {}, {})

    a, b = member(), member()
    x = rng.normal(size=(6, 5))
    both = ClauseHead.averaged([a, b], {"profile": 0.3}, {})
    logits = [np.log(h.probabilities(x)) for h in (a, b)]
    expected = np.exp((logits[0] + logits[1]) / 2)
    assert np.allclose(both.probabilities(x), expected / expected.sum(axis=1, keepdims=True), atol=1e-5)
    with pytest.raises(ValueError):
        ClauseHead.averaged([a, ClauseHead(a.layers, ("fact", "preference", "request"), {}, {})], {}, {})
    shipped = ClauseHead.load()
    assert shipped.min_probability == ClauseHead.load(ROOT / EARLIER_MEMBER).min_probability


@pytest.mark.parametrize(
    ("turns", "profiles", "playbooks", "forget"),
    [
        # a greeting in front of facts; two facts joined by "and I" stay two items
        ([("user", "Hi, I live in Paris and my phone number is 555-0100.")], 2, 0, 0),
        # a forget request is never a fact, whatever the head says
        ([("user", "Also, stop remembering my phone number.")], 0, 0, 1),
        ([("user", "Please delete what you know about my address.")], 0, 0, 1),
        ([("user", "Forget it, I'll do it myself.")], 0, 0, 0),  # names nothing
        # a one-off request is no rule and no fact
        ([("user", "Please deploy the billing service to production.")], 0, 0, 0),
        ([("user", "Deploy the api.")], 0, 0, 0),
        # a follow-up task after an agent turn is no correction, even with "do not" in its spec
        (
            [
                ("user", "What's a good name for a cat?"),
                ("assistant", "Maybe Miso."),
                ("user", "Give me ten more names that start with K and do not end in y."),
            ],
            0,
            0,
            0,
        ),
        # an imperative about the user is no fact about them; telling how to answer in general is a rule
        ([("user", "Please answer me in Italian, I'm practising.")], 0, 1, 0),
        ([("user", "Keep things formal with me.")], 0, 1, 0),
        ([("user", "Translate it into Italian.")], 0, 0, 0),  # the answer at hand, not a standing style
        # "my partner and I" is one subject, not two clauses
        ([("user", "My partner and I don't have kids.")], 1, 0, 0),
        ([("user", "Spicy food and I don't get along.")], 1, 0, 0),
        # questions without their mark and wishes state nothing lasting
        ([("user", "do you know any good pho places near the station")], 0, 0, 0),
        ([("user", "I wish I could play the cello.")], 0, 0, 0),
        # "never" + a verb is a rule by its form, whatever the head reads
        ([("user", "Never schedule meetings on Friday afternoons.")], 0, 1, 0),
        # a rule clause naming nothing ("please use that") is a fragment
        ([("user", "I go by Sam now."), ("assistant", "Sure, Sam."), ("user", "Please use that.")], 1, 0, 0),
        # a correction without a first person is a rule, not a profile
        (
            [
                ("user", "Restart the db"),
                ("assistant", "Restarting now."),
                ("user", "No — never restart it for a rotation."),
            ],
            0,
            1,
            0,
        ),
        # a correction scoped to the task at hand overrides for now and teaches no rule; "every time" still does
        (
            [
                ("user", "Deploy the payments service for the EU launch."),
                ("assistant", "Deploying the payments service to us-west-2."),
                ("user", "No, for this one use us-east-1, not us-west-2."),
            ],
            0,
            0,
            0,
        ),
        ([("user", "Just this once, skip the summary at the end.")], 0, 0, 0),
        ([("user", "This time and every time after, skip the summary at the end.")], 0, 1, 0),
        # a lead-in stays with its revocation, and what replaces it is a clause of its own
        ([("user", "Actually, drop the numbered lists, plain prose paragraphs work better for me now.")], 1, 0, 1),
        # a condition on the user's own next asks is "every time", and so is a rule the head leans to under its bar
        ([("user", "when i ask what to cook, only suggest stuff under 30 min")], 0, 1, 0),
        ([("user", "every time we talk about money keep it in euros")], 0, 1, 0),
        # "always"/"never" under a situation that comes back is a rule whatever the head reads; a task under one is not
        ([("user", "When you write SQL for me, never use SELECT star.")], 0, 1, 0),
        ([("user", "When you get a chance, send me the quarterly report.")], 0, 0, 0),
        # chat drops the "I": a preference the head is sure of is the user's own
        ([("user", "really prefer trains over planes for short trips")], 1, 0, 0),
        # someone else's view is not the user's, in a rule or a profile; a fact about them is the user's
        ([("user", "my father always says money is not everything")], 0, 0, 0),
        ([("user", "my dad can't stand spicy food, he sweats like crazy")], 0, 0, 0),
        ([("user", "my kids are 3 and 6, so its pretty chaotic here")], 1, 0, 0),
    ],
)
def test_structure_decides_what_the_head_cannot(turns: list, profiles: int, playbooks: int, forget: int) -> None:
    result = BuiltinExtractor().extract(_window(*turns))
    assert (len(result.profiles), len(result.playbooks), len(result.forget)) == (profiles, playbooks, forget)


def test_a_revocation_names_only_what_it_withdraws() -> None:
    result = BuiltinExtractor().extract(
        _window(("user", "You can ignore what I said about metric units, I've got used to miles."))
    )
    assert [f.target for f in result.forget] == ["metric units"]
    yarn = BuiltinExtractor().extract(_window(("user", "Forget the yarn thing, we migrated, use pnpm from now on.")))
    assert [f.target for f in yarn.forget] == ["The yarn thing"] and [p.content for p in yarn.playbooks] == ["Use pnpm"]


def test_a_passing_state_expires() -> None:
    result = BuiltinExtractor().extract(_window(("user", "I prefer green tea today. I prefer oolong in general.")))
    assert sorted((p.content, p.time_to_live) for p in result.profiles) == [
        ("Prefers green tea today", "one_day"),
        ("Prefers oolong in general", "infinity"),
    ]


def test_a_change_of_the_users_own_is_a_fact_a_story_is_not() -> None:
    moved = BuiltinExtractor().extract(_window(("user", "Quick update, we relocated to Bristol over the summer")))
    assert [p.content for p in moved.profiles] == ["They relocated to Bristol over the summer"]
    story = BuiltinExtractor().extract(_window(("user", "When I was a kid we moved to Ohio")))
    assert story.profiles == []


def test_a_rule_pointing_back_keeps_the_clause_that_names_what_it_means() -> None:
    window = _window(
        ("user", "Write a tweet announcing our new office opening."),
        ("assistant", "🎉 Big news! 🏢 We're opening our new office! ✨"),
        ("user", "please drop the emojis, I find them unprofessional and never want them in anything you write"),
    )
    result = BuiltinExtractor().extract(window)
    assert any("emojis" in p.content.lower() and "never" in p.content.lower() for p in result.playbooks)
    assert not result.forget  # "drop the emojis" names what "them" means; it withdraws no earlier rule


@pytest.mark.parametrize(
    "said",
    [
        "i am fine tanks",
        "hi, my day isgreat",
        "I'm doing well, thanks, and you?",
        "Me too, they make the best companions",
    ],
)
def test_how_the_user_is_right_now_or_an_agreement_teaches_nothing(said: str) -> None:
    # public chat turns (ConvAI2, DNLI) the head reads as facts; an agreement's subject is the partner's
    assert BuiltinExtractor().extract(_window(("user", said))).profiles == []


def test_a_lasting_state_said_alike_is_still_learned() -> None:
    result = BuiltinExtractor().extract(_window(("user", "I am fine with spicy food. Me too, I love dogs.")))
    assert len(result.profiles) == 2
