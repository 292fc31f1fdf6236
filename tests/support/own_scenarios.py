"""Contradiction scenarios and a search-relevance scenario written for this project, in the shape of the original
Reflexio's `contradiction_scenarios.json` and OpenClaw eval dataset (played and judged by
`benchmarks/original_scenarios.py`; the original's own files are never copied here).

Each contradiction scenario: two batches of one user's conversation; after both are learned, the user's current
items must hold the newer state and nothing of the stale one.
"""

from __future__ import annotations

from typing import Any


def _turns(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    out = []
    for user, assistant in pairs:
        out += [{"role": "User", "content": user}, {"role": "Assistant", "content": assistant}]
    return out


DIET = {
    "name": "dairy_to_vegan",
    "description": "A cheese lover goes vegan after a lactose intolerance diagnosis.",
    "tests": ["profiles"],
    "expected_final_state": "User is vegan (no dairy, no animal products)",
    "expected_keywords": ["vegan"],
    "batch_1_sanity_terms": ["cheese", "dairy", "milk"],
    "should_not_contain": ["loves cheese", "eats dairy", "drinks milk every"],
    "batch_1": _turns(
        (
            "I love cheese more than anything. Aged gouda, brie, a good cheddar, I eat some every single day.",
            "A true cheese lover! Do you have a favourite cheese shop?",
        ),
        (
            "There's a fromagerie two streets away and I'm there every Saturday. I also drink milk every morning.",
            "Sounds like dairy is a big part of your routine.",
        ),
        (
            "It really is. Pizza night on Fridays with extra mozzarella is a family tradition.",
            "That sounds like a lovely tradition.",
        ),
    ),
    "batch_2": _turns(
        (
            "Things changed: I was diagnosed with severe lactose intolerance, so I went fully vegan two months ago.",
            "That's a big change. How are you finding it?",
        ),
        (
            "Surprisingly easy. No cheese, no milk, no eggs, no meat at all. Oat milk in my coffee now.",
            "Are you cooking differently?",
        ),
        (
            "Completely. Lentil curries, tofu scrambles, cashew-based sauces. I'm vegan for good.",
            "It sounds like the vegan diet suits you well.",
        ),
    ),
}

MOVE = {
    "name": "toronto_to_lisbon",
    "description": "A user who lived in Toronto relocates to Lisbon.",
    "tests": ["profiles"],
    "expected_final_state": "User lives in Lisbon, Portugal",
    "expected_keywords": ["lisbon"],
    "batch_1_sanity_terms": ["toronto"],
    "should_not_contain": ["lives in toronto", "based in toronto", "located in toronto"],
    "batch_1": _turns(
        (
            "I live in Toronto, near Kensington Market. Winters are brutal but I love the city.",
            "Kensington Market is a great area. How long have you been there?",
        ),
        (
            "Seven years now. I bike to my office on King Street most days, even in the snow.",
            "Impressive dedication!",
        ),
        (
            "Toronto is home. My whole friend group is here and I know every ramen place downtown.",
            "Sounds like you're settled in.",
        ),
    ),
    "batch_2": _turns(
        (
            "Big news: I moved to Lisbon last month. I left Toronto after seven years for a job here.",
            "Congratulations! How is Lisbon treating you?",
        ),
        (
            "I rent a flat in Alfama with a view of the river. The trams and the hills take some getting used to.",
            "Alfama is beautiful. Do you miss Toronto?",
        ),
        (
            "Not much. The winters here are mild and I'm learning Portuguese. Lisbon is home now.",
            "It sounds like the move was a good one.",
        ),
    ),
}

REVIEW_DEPTH = {
    "name": "review_depth_override",
    "description": "Batch 1 sets a rule to review every file line by line; batch 2 overrides it: line by line only "
    "for hand-written source, generated files and lockfiles only summarised.",
    "tests": ["playbooks"],
    "expected_final_state": "Review hand-written source line by line; only summarise generated files and lockfiles.",
    "expected_playbook_keywords": ["review"],
    "playbook_must_instruct_any_of": ["hand-written", "summarise", "summarize"],
    "playbook_must_not_instruct": ["every file", "including generated", "no exceptions", "every single file"],
    "batch_1_sanity_terms": ["line by line", "review"],
    "batch_1": _turns(
        (
            "Please review my pull request that changes the payment retry logic.",
            "Looks good overall! The naming is clear and the tests pass. Approved.",
        ),
        (
            "That's not a review. You skipped the retry loop, which can spin forever when the gateway times out. "
            "From now on, always review every file line by line, including tests and generated code, no exceptions.",
            "You're right, I missed the unbounded retry. I'll review every file line by line from now on.",
        ),
        (
            "Good. Line-by-line review of every file is the rule for all my pull requests.",
            "Understood: every file, line by line, for all your pull requests.",
        ),
    ),
    "batch_2": _turns(
        (
            "Review this pull request; it bumps a dependency and regenerates package-lock.json and the API client.",
            "Going line by line through package-lock.json: line 1 sets the lockfile version, line 2 names the "
            "package, line 3 ... (4,000 more lines follow).",
        ),
        (
            "Stop, that is useless. Override the old rule: only review hand-written source files line by line. "
            "For generated code and lockfiles, just summarise what changed in one or two sentences.",
            "Understood. Hand-written source gets a line-by-line review; generated files and lockfiles get a short "
            "summary.",
        ),
        (
            "Exactly. The every-file rule from before is gone; from now on summarise generated files instead.",
            "Got it, the earlier every-file rule no longer applies.",
        ),
    ),
}

ROLE = {
    "name": "qa_to_engineering_manager",
    "description": "A QA engineer becomes an engineering manager.",
    "tests": ["profiles"],
    "expected_final_state": "User is an engineering manager",
    "expected_keywords": ["engineering manager"],
    "batch_1_sanity_terms": ["qa", "test"],
    "should_not_contain": ["is a qa engineer", "works as a qa engineer", "works in qa"],
    "batch_1": _turns(
        (
            "I'm a QA engineer on the mobile team. How should I structure regression tests for the checkout flow?",
            "Group them by user journey and run the critical paths on every build.",
        ),
        (
            "I work in QA, so I mostly write Appium scripts and triage flaky tests all day.",
            "Flaky test triage is a big job. Do you track flakiness over time?",
        ),
        (
            "Yes, in a spreadsheet. As a QA engineer I want a dashboard for it eventually.",
            "A dashboard would make trends much easier to see.",
        ),
    ),
    "batch_2": _turns(
        (
            "Update: I got promoted. I'm now an engineering manager for the mobile team, no longer in QA.",
            "Congratulations on the promotion! What does the new role involve?",
        ),
        (
            "I run one-on-ones with six engineers, plan the quarter and hire. I don't write test scripts anymore.",
            "That's a very different day-to-day.",
        ),
        (
            "It is. As an engineering manager, I need help with performance reviews and hiring plans now.",
            "Happy to help with reviews and hiring plans.",
        ),
    ),
}

OWN_CONTRADICTIONS: list[dict[str, Any]] = [DIET, MOVE, REVIEW_DEPTH, ROLE]

OWN_SEARCH: dict[str, Any] = {
    "id": "search_relevance_own",
    "description": "Search returns the relevant playbook and not the unrelated one.",
    "category": "retrieve",
    "steps": [
        {
            "action": "seed_user_playbook",
            "params": {
                "user_id": "own-eval-1",
                "agent_version": "openclaw-agent",
                "content": "Run the tests with pytest -x to stop at the first failure",
                "trigger": "running tests",
            },
        },
        {
            "action": "seed_user_playbook",
            "params": {
                "user_id": "own-eval-1",
                "agent_version": "openclaw-agent",
                "content": "Prefers a light colour theme in the editor",
                "trigger": "editor appearance",
            },
        },
        {"action": "search", "params": {"query": "execute the unit tests", "user_id": "own-eval-1"}},
        {"action": "verify_result_contains", "params": {"field": "content", "contains": "pytest"}},
        {"action": "verify_result_not_contains", "params": {"field": "content", "contains": "colour theme"}},
    ],
}
