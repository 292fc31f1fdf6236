"""The rule-based baseline extractor: corrections, profiles, tool failures, expert answers, and what it ignores."""

from __future__ import annotations

import time

import pytest

from reflexio_pipelines.learning.rules.corrections import correction_rule
from reflexio_pipelines.learning.rules.extractor import RuleExtractor
from reflexio_pipelines.learning.rules.text import content_tokens
from reflexio_pipelines.learning.rules.triggers import situation_trigger
from reflexio_pipelines.learning.types import ToolCall, Turn, Window

EXTRACTOR = RuleExtractor()


def convo(*turns: tuple, session: str = "s1") -> Window:
    """A window from (role, content[, extra Turn fields]) tuples; turn ids are t1, t2, …"""
    built = []
    for i, spec in enumerate(turns, start=1):
        role, content, *extra = spec
        built.append(
            Turn(
                turn_id=f"t{i}",
                interaction_id=i,
                request_id="r1",
                user_id="u1",
                role=role,
                content=content,
                created_at=1_000 + i,
                session_id=session,
                **(extra[0] if extra else {}),
            )
        )
    return Window("u1", tuple(built))


DEPLOY = convo(
    ("user", "Deploy the billing service to production."),
    ("assistant", "Deploying billing-service to us-east-1 now."),
    ("user", "No — we never deploy to us-east-1, always use us-west-2"),
)


def test_deploy_region_correction() -> None:
    result = EXTRACTOR.extract(DEPLOY)
    assert result.profiles == []
    (playbook,) = result.playbooks
    assert playbook.kind == "correction"
    assert playbook.trigger == "When deploying the billing service to production"
    assert not playbook.trigger.lower().startswith("when the user asks")
    assert "us-east-1" in playbook.content and "us-west-2" in playbook.content
    assert playbook.content == "Never deploy to us-east-1; always use us-west-2."
    assert playbook.rationale == "The user corrected the agent's answer: 'Deploying billing-service to us-east-1 now.'"
    assert playbook.source_turn_ids == ["t1", "t2", "t3"]
    assert playbook.blocking_issue_kind is None
    assert (result.extractor, result.model, result.prompt_version, result.llm_calls) == (
        "builtin-rules",
        "builtin",
        "rules-v2",
        0,
    )


@pytest.mark.parametrize(
    ("said", "profile"),
    [
        ("I prefer dark mode.", "Prefers dark mode"),
        ("my name is Dana", "Name is Dana"),
        ("I'm vegetarian.", "Is vegetarian"),
        ("I live in Lisbon with my partner.", "Lives in Lisbon with their partner"),
        ("I use Neovim for everything", "Uses Neovim for everything"),
        ("I always run the linter before committing", "Always runs the linter before committing"),
        ("Call me Sam.", "Prefers to be called Sam"),
        ("Hi! I'm Dana.", "Name is Dana"),
        ("My timezone is CET.", "Timezone is CET"),
        ("My timezone is CET, so schedule reports for 8am my time.", "Timezone is CET"),
    ],
)
def test_personal_facts_become_profiles(said: str, profile: str) -> None:
    result = EXTRACTOR.extract(convo(("user", said)))
    assert [p.content for p in result.profiles] == [profile]
    assert result.profiles[0].source_turn_ids == ["t1"]
    assert result.profiles[0].time_to_live == "infinity"
    assert result.playbooks == []


def test_several_facts_in_one_turn_and_temporal_ttl() -> None:
    result = EXTRACTOR.extract(
        convo(("user", "Hi, I'm Dana, I work at Acme and I prefer short answers. I'm in Berlin this week."))
    )
    assert [(p.content, p.time_to_live) for p in result.profiles] == [
        ("Name is Dana", "infinity"),
        ("Works at Acme", "infinity"),
        ("Prefers short answers", "infinity"),
        ("Is in Berlin this week", "one_week"),
    ]


@pytest.mark.parametrize(
    "said",
    [
        "Can I use dark mode here?",
        "Do I prefer tabs?",
        "I want you to summarise this file.",
        "I need you to use the staging database.",
        "I'm not sure what happened.",
        "I'm trying to fix the build.",
        "I like it!",
        "I'm sorry, I'm confused.",
    ],
)
def test_questions_requests_and_passing_states_are_not_profiles(said: str) -> None:
    assert EXTRACTOR.extract(convo(("user", said))).profiles == []


def test_correction_sentences_are_not_profiles_but_other_sentences_are() -> None:
    window = convo(
        ("user", "Write the weekly summary."),
        ("assistant", "Here is a 2-page summary…"),
        ("user", "No, I prefer one paragraph. I'm a product manager."),
    )
    result = EXTRACTOR.extract(window)
    assert [p.content for p in result.profiles] == ["Is a product manager"]
    (playbook,) = result.playbooks
    assert playbook.trigger == "When writing the weekly summary"
    assert playbook.content == "Prefer one paragraph."


def test_habit_in_first_person_is_a_profile_not_a_correction() -> None:
    window = convo(
        ("user", "Any tips?"),
        ("assistant", "Try running tests."),
        ("user", "I always run tests before pushing."),
    )
    result = EXTRACTOR.extract(window)
    assert [p.content for p in result.profiles] == ["Always runs tests before pushing"]
    assert result.playbooks == []


def test_second_correction_keeps_the_original_request_as_situation() -> None:
    window = convo(
        ("user", "Book a table for four tonight"),
        ("assistant", "Booked at 6pm at Luigi's."),
        ("user", "No, never book before 7pm"),
        ("assistant", "Rebooked at 7pm at Luigi's."),
        ("user", "Wrong place, we don't eat Italian"),
    )
    first, second = EXTRACTOR.extract(window).playbooks
    assert first.trigger == second.trigger == "When booking a table for four tonight"
    assert (first.content, second.content) == ("Never book before 7pm.", "Wrong place; don't eat Italian.")
    assert second.source_turn_ids == ["t1", "t4", "t5"]


def test_correction_needs_a_preceding_agent_turn() -> None:
    assert EXTRACTOR.extract(convo(("user", "The deploy on Friday went fine."))).playbooks == []
    assert EXTRACTOR.extract(convo(("user", "Wrong, use pnpm."))).playbooks == []


def test_a_standing_instruction_needs_no_agent_turn() -> None:
    (playbook,) = EXTRACTOR.extract(convo(("user", "Never deploy on Fridays."))).playbooks
    assert (playbook.content, playbook.trigger) == ("Never deploy on Fridays.", "When deploying on Fridays")
    assert playbook.rationale.startswith("The user gave a standing instruction")


@pytest.mark.parametrize(
    ("said", "profiles"),
    [
        ("I work as a data engineer at Acme", ["Works as a data engineer", "Works at Acme"]),  # two slots, two facts
        ("I'm a staff engineer on the payments team.", ["Is a staff engineer", "Is on the payments team"]),
        ("Please note that I'm vegetarian", ["Is vegetarian"]),  # the lead-in is politeness, the fact is stated
    ],
)
def test_compound_and_prefaced_facts(said: str, profiles: list[str]) -> None:
    assert [p.content for p in EXTRACTOR.extract(convo(("user", said))).profiles] == profiles


def test_correction_without_request_in_window_uses_the_agent_answer_as_situation() -> None:
    window = convo(("assistant", "I used npm install."), ("user", "Wrong, use pnpm, not npm."))
    (playbook,) = EXTRACTOR.extract(window).playbooks
    assert playbook.trigger == "When giving an answer like: I used npm install."
    assert playbook.content == "Use pnpm, not npm."
    assert playbook.source_turn_ids == ["t1", "t2"]


@pytest.mark.parametrize(
    ("correction", "rule"),
    [
        ("No — we never deploy to us-east-1, always use us-west-2", "Never deploy to us-east-1; always use us-west-2."),
        ("Nope, use pnpm, not npm. Thanks!", "Use pnpm, not npm."),
        ("That's wrong. You should use the orders_v2 table instead.", "Use the orders_v2 table instead."),
        ("no, don't add emojis", "Don't add emojis."),
        ("Stop adding a summary at the end", "Stop adding a summary at the end."),
        ("Not the CSV but the parquet export", "Not the CSV but the parquet export."),
        ("No. Use the EU bucket. I'm based in Dublin.", "Use the EU bucket."),
        ("No, I prefer tabs", "Prefer tabs."),
        ("No.\nUse the staging cluster.\nThanks", "Use the staging cluster."),
    ],
)
def test_correction_rule_rewrites(correction: str, rule: str) -> None:
    assert correction_rule(correction) == rule


@pytest.mark.parametrize(
    ("request_text", "trigger"),
    [
        ("Deploy the billing service to production.", "When deploying the billing service to production"),
        ("Hi, can you please write a SQL query for churn?", "When writing a SQL query for churn"),
        ("Set up CI for the repo", "When setting up CI for the repo"),
        ("Which region should we use?", "When asked: which region should we use"),
        ("The invoices look off", "When the invoices look off"),
        ("Hi! I'm Dana. Summarize the Q3 numbers please.", "When summarizing the Q3 numbers"),
        ("x" * 300, "When asked: " + "x" * 107 + "…"),
    ],
)
def test_situation_trigger(request_text: str, trigger: str) -> None:
    assert situation_trigger(request_text) == trigger
    assert len(situation_trigger(request_text)) <= 120


@pytest.mark.parametrize(
    "reply",
    [
        "No problem, thanks!",
        "No worries, that's great.",
        "Never mind, all good.",
        "Thanks, that's perfect!",
        "ok",
        "No, thanks.",
        "No.",
    ],
)
def test_polite_replies_are_not_corrections(reply: str) -> None:
    window = convo(("user", "Summarise the doc"), ("assistant", "Here you go."), ("user", reply))
    assert EXTRACTOR.extract(window).playbooks == []


@pytest.mark.parametrize(
    "task",
    [
        "Reply to the customer asking about the late delivery. A short answer is fine for now.",
        "Answer the email from the finance team.",
        "Format the release notes for the wiki.",
    ],
)
def test_a_new_task_whose_verb_is_a_style_word_is_not_feedback(task: str) -> None:
    # "reply" / "answer" / "format" are also nouns of answer style ("Keep replies short"): as the verb opening a
    # request they name a new task, so the answer before it was not corrected (a heuristic; learning/rules/)
    window = convo(
        ("user", "Tell me a short joke."), ("assistant", "Why did the spreadsheet go to therapy?"), ("user", task)
    )
    assert EXTRACTOR.extract(window).playbooks == []
    styled = convo(
        ("user", "Tell me a short joke."),
        ("assistant", "Why did the spreadsheet go to therapy?"),
        ("user", "Reply in two sentences max."),
    )
    assert [p.content for p in EXTRACTOR.extract(styled).playbooks] == ["Reply in two sentences max."]


def test_chit_chat_yields_nothing() -> None:
    window = convo(
        ("user", "Hello there!"),
        ("assistant", "Hi! How can I help you today?"),
        ("user", "Just saying hi. How are you?"),
        ("assistant", "I'm doing well, thanks for asking!"),
        ("user", "Great, thanks. Have a nice day!"),
    )
    result = EXTRACTOR.extract(window)
    assert result.profiles == [] and result.playbooks == []


def test_tool_failure_with_permission_error() -> None:
    window = convo(
        ("user", "Open a PR for the fix"),
        (
            "assistant",
            "I could not open the PR.",
            {
                "tools_used": (
                    ToolCall(
                        "github.create_pr",
                        {"input": {"repo": "acme/api"}, "error": "403 Forbidden: token lacks repo scope"},
                    ),
                )
            },
        ),
    )
    (playbook,) = EXTRACTOR.extract(window).playbooks
    assert playbook.kind == "tool_failure"
    assert playbook.trigger == "When calling the github.create_pr tool"
    assert "github.create_pr" in playbook.content and "token lacks repo scope" in playbook.content
    assert playbook.content.startswith("github.create_pr failed with '403 Forbidden: token lacks repo scope'. Check ")
    assert playbook.blocking_issue_kind == "permission_denied"
    assert playbook.blocking_issue_details == "403 Forbidden: token lacks repo scope"
    assert playbook.source_turn_ids == ["t2"]


def test_tool_failure_then_success_points_at_the_working_input() -> None:
    window = convo(
        ("user", "Get the weather in Paris"),
        (
            "assistant",
            "Trying.",
            {"tools_used": (ToolCall("weather", {"input": {"city": "Paris, FR"}, "error": "city format invalid"}),)},
        ),
        (
            "assistant",
            "It is 20°C.",
            {"tools_used": (ToolCall("weather", {"input": {"city": "Paris"}, "output": "20C"}),)},
        ),
    )
    (playbook,) = EXTRACTOR.extract(window).playbooks
    assert playbook.content == (
        "weather failed with 'city format invalid'. Check the input (city) before calling it again. "
        'A later call succeeded; use the working input: {"city": "Paris"}'
    )
    assert playbook.blocking_issue_kind is None
    assert playbook.source_turn_ids == ["t2", "t3"]


def test_missing_tool_and_status_errors_and_dedup() -> None:
    failing = ToolCall("crm_lookup", {"query": "acme", "status": "error", "output": "Unknown tool: crm_lookup"})
    window = convo(
        ("assistant", "a", {"tools_used": (failing,)}),
        ("assistant", "b", {"tools_used": (failing,)}),  # same failure twice: one playbook
    )
    (playbook,) = EXTRACTOR.extract(window).playbooks
    assert playbook.blocking_issue_kind == "missing_tool"
    assert "Unknown tool: crm_lookup" in playbook.content


def test_expert_differing_only_in_style_yields_nothing() -> None:
    window = convo(
        ("user", "How do I fix the stale cache?"),
        (
            "assistant",
            "Restart the server, then clear the cache.",
            {"expert_content": "Sure! First, restart the SERVER -- and then simply clear the cache."},
        ),
    )
    assert EXTRACTOR.extract(window).playbooks == []


def test_expert_differing_in_substance_yields_a_rule() -> None:
    window = convo(
        ("user", "How long do customers have to return an item?"),
        (
            "assistant",
            "You can return items any time.",
            {"expert_content": "Returns are accepted within 30 days of delivery with the order number."},
        ),
    )
    (playbook,) = EXTRACTOR.extract(window).playbooks
    assert playbook.kind == "expert"
    assert playbook.trigger == "When asked: How long do customers have to return an item?"
    assert (
        playbook.content
        == "Answer as the expert did: Returns are accepted within 30 days of delivery with the order number."
    )
    assert "30" in playbook.rationale and "delivery" in playbook.rationale
    assert playbook.source_turn_ids == ["t1", "t2"]


def test_content_tokens_keep_identifiers_and_numbers() -> None:
    assert content_tokens("Use us-west-2 and config.yaml, not 42 THINGS!") == [
        "use",
        "us-west-2",
        "config.yaml",
        "42",
        "thing",
    ]


def test_deterministic_and_ordered() -> None:
    window = convo(
        ("user", "I prefer metric units. Book a table for two"),
        ("assistant", "Booked.", {"tools_used": (ToolCall("booking", {"error": "timeout after 30s"}),)}),
        ("user", "No, never book before 7pm"),
    )
    first = EXTRACTOR.extract(window)
    assert first == RuleExtractor().extract(window)
    assert [p.kind for p in first.playbooks] == ["tool_failure", "correction"]  # turn order
    assert first.playbooks[1].trigger == "When booking a table for two"


def test_throughput_is_far_above_pipeline_needs() -> None:
    window = convo(*DEPLOY_TURNS * 3)
    start = time.perf_counter()
    for _ in range(200):
        EXTRACTOR.extract(window)
    per_window = (time.perf_counter() - start) / 200
    assert per_window < 0.02  # ≥ 50 windows/s even on a slow CI core


DEPLOY_TURNS = (
    ("user", "Deploy the billing service to production. I'm the on-call SRE."),
    (
        "assistant",
        "Deploying to us-east-1.",
        {"tools_used": (ToolCall("kubectl", {"args": "apply", "error": "connection refused"}),)},
    ),
    ("user", "No — we never deploy to us-east-1, always use us-west-2"),
    (
        "assistant",
        "OK, deploying to us-west-2.",
        {"expert_content": "Deploy to us-west-2 with the canary flag and page #billing."},
    ),
)


def test_letters_that_case_fold_to_ascii_ones_do_not_break_the_rules() -> None:
    """ "İ" and "ſ" match "i" and "s" case-insensitively but lower-case to other strings: the verb lookup raised
    KeyError ("I lİke tea") and failed the user's learning run."""
    for said in ("I lİke tea", "I uſe vim every day", "I lİve in İzmir"):
        turn = Turn("t1", 1, "r1", "u1", "user", said, 1_000, session_id="s1")
        RuleExtractor().extract(Window("u1", (turn,)))  # no KeyError
    turn = Turn("t1", 1, "r1", "u1", "user", "I like tea", 1_000, session_id="s1")
    assert [p.content for p in RuleExtractor().extract(Window("u1", (turn,))).profiles] == ["Likes tea"]
