"""The original Reflexio's kinds of scenario — a stated fact or a rule contradicted by a later batch, and search
relevance between two seeded playbooks — played on our own scenarios (tests/support/own_scenarios.py) through the
real service on 127.0.0.1 and the real pipeline (every publish waits for its Dagster run), judged by the same
functions as `benchmarks/original_scenarios.py`, which plays the original's own scenarios.

These hold the system to what the original's tests demand of it; they are not relaxed to what passes today.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.original_scenarios import (
    Check,
    Post,
    ScenarioResult,
    http_post,
    judge_batch_1,
    judge_final,
    judge_search_step,
    play_contradiction,
    play_openclaw,
)
from tests.support.own_scenarios import OWN_CONTRADICTIONS, OWN_SEARCH
from tests.support.processes import running_service


def _verdict(result: ScenarioResult) -> str:
    return f"{result.name} failed: {result.failures()}\nobserved: {result.observed}"


# ----------------------------------------------------------------------------------------------------------------
# The judging itself (no service)
# ----------------------------------------------------------------------------------------------------------------

PROFILE_SCENARIO = OWN_CONTRADICTIONS[0]
PLAYBOOK_SCENARIO = OWN_CONTRADICTIONS[2]


def _passed(checks: list[Check]) -> bool:
    return all(c.passed for c in checks)


def test_profiles_judged_like_the_original() -> None:
    assert judge_batch_1(PROFILE_SCENARIO, [{"content": "Loves aged cheese"}], []).passed
    assert not judge_batch_1(PROFILE_SCENARIO, [], []).passed
    assert _passed(judge_final(PROFILE_SCENARIO, [{"content": "Is vegan"}, {"content": "Drinks oat milk"}], []))
    # the newer state missing, or a stale phrase surviving (case-insensitively), fails
    assert not _passed(judge_final(PROFILE_SCENARIO, [{"content": "Drinks oat milk"}], []))
    assert not _passed(judge_final(PROFILE_SCENARIO, [{"content": "Is vegan"}, {"content": "Loves Cheese"}], []))
    assert not _passed(judge_final(PROFILE_SCENARIO, [], []))


def test_playbooks_judged_on_what_they_instruct() -> None:
    new = {"trigger": "When reviewing a pull request", "content": "Review hand-written source line by line."}
    old = {"trigger": "When reviewing code", "content": "Review every file line by line, no exceptions."}
    vague = {"trigger": "When reviewing code", "content": "Be thorough in every review."}
    assert _passed(judge_final(PLAYBOOK_SCENARIO, [], [new]))
    assert not _passed(judge_final(PLAYBOOK_SCENARIO, [], [new, old]))  # the stale rule is still current
    assert not _passed(judge_final(PLAYBOOK_SCENARIO, [], [vague]))  # nothing instructs the new rule
    # profiles do not count for a playbook scenario
    assert not _passed(judge_final(PLAYBOOK_SCENARIO, [{"content": "Wants hand-written review"}], []))


def test_search_steps_judged_like_the_openclaw_runner() -> None:
    answer = {
        "user_playbooks": [{"content": "Run the tests with pytest -x"}],
        "agent_playbooks": [],
        "profiles": [{"content": "Prefers a light colour theme"}],
    }
    contains, absent = OWN_SEARCH["steps"][3], OWN_SEARCH["steps"][4]
    assert judge_search_step(contains, answer).passed
    assert not judge_search_step(absent, answer).passed  # profiles are searched results too
    assert judge_search_step(absent, dict(answer, profiles=[])).passed
    assert not judge_search_step(contains, None).passed


# ----------------------------------------------------------------------------------------------------------------
# Played through the live service
# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Post]:
    """`python -m serving` on 127.0.0.1 over a fresh lake (built-in extractor, the default), for the module."""
    root: Path = tmp_path_factory.mktemp("own-scenarios")
    with running_service(root / "lake", root / "dagster_home", root / "serving.log") as url:
        yield http_post(url)


@pytest.mark.e2e
def test_contradicted_statements_are_replaced_in_three_of_four_scenarios(live: Post) -> None:
    """The bar of issue 39 for the original's four scenarios (>= 3 of 4), held on our own four. Known miss of the
    built-in extractor (docs/extractor.md): a rule stated as a fact ("line-by-line review of every file is the rule
    for all my pull requests") becomes a profile, which a later playbook does not replace."""
    results = [play_contradiction(live, s, user_id=f"own-{s['name']}") for s in OWN_CONTRADICTIONS]
    failed = [r for r in results if not r.passed]
    assert len(failed) <= 1, "\n".join(_verdict(r) for r in failed)


@pytest.mark.e2e
def test_search_returns_the_relevant_playbook_only(live: Post) -> None:
    result = play_openclaw(live, OWN_SEARCH)
    assert result.passed, _verdict(result)
