"""A corpus of extraction answers in the shapes real models send, hand-written for the project's own conversations.

The fake LLM of openai_stub replays the built-in rules, so the LLM path and the built-in path agree by construction
and a parser that a real model's answer breaks goes unnoticed. These answers are written the way models actually
answer the extraction prompt: fenced JSON, prose before or after it, reasoning first (`<think>…</think>`, or a
template that opened the block in the prompt, or the provider's reasoning channel), JSON inside a tool call, Python
literals and trailing commas, extra and missing fields, wrong types, truncated output (`finish: length`, or an
object that never closes), refusals (in prose, next to an empty object, or flagged by the provider), two
conflicting answers, wrappers and arrays that are not the contract.

Each case names a conversation (the demo's sample conversations, reflexio_pipelines/demo/sample_conversations.json,
and one forget request from tests/test_forget.py) and what must come of its answer: exactly the listed items, or
a failure with the fixed reason stored in `extraction_failures.error_message`. No case may store anything else.
Citations are `T#` labels (T1 = the conversation's first turn); `ALL` means "no usable citation: the whole window".

The answers are the project's own writing; they are not any model's output and say nothing about extraction
quality (a good model may never send some of them) — they exercise the parser, the validator and the protocols.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from reflexio_pipelines.demo.run import sample_conversations
from tests.support.conversations import conversation
from tests.support.provider_stubs import Reply

ALL = ("*",)  # evidence: every turn of the window

# the fixed reasons stored in extraction_failures.error_message (llm_failures.summarize_failure)
CUT_OFF = "the reply was cut off before its answer ended"
REFUSED = "the model refused to answer"
AMBIGUOUS = "the reply holds several different answers"
NO_JSON = "the reply holds no usable JSON object"
SCHEMA = "the reply is JSON but violates the extraction schema"


def _conversations() -> dict[str, dict]:
    found = {c["id"]: c for c in sample_conversations()}
    found["dana-forget"] = conversation(  # tests/test_forget.py, dana's second conversation (first request)
        "dana",
        "dana-forget",
        ("user", "Please forget that I live in Paris."),
        ("assistant", "Done."),
        session="dana-d2",
    )
    return found


CONVERSATIONS = _conversations()


@dataclass(frozen=True)
class Profile:
    content: str
    evidence: tuple[str, ...]
    time_to_live: str = "infinity"


@dataclass(frozen=True)
class Playbook:
    content: str
    evidence: tuple[str, ...]
    trigger: str | None = None
    kind: str = "correction"
    blocking_issue_kind: str | None = None


@dataclass(frozen=True)
class Forget:
    target: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class AnswerCase:
    """One answer to one conversation's extraction prompt, and what must come of it."""

    id: str
    conversation: str
    form: str
    reply: Reply
    profiles: tuple[Profile, ...] = ()
    playbooks: tuple[Playbook, ...] = ()
    forget: tuple[Forget, ...] = ()
    failure: str | None = None  # the expected error_message; None = the answer must succeed with exactly the items

    def __str__(self) -> str:
        return self.id


# --- the items each conversation should yield --------------------------------------------------------------------

REGION = Playbook(
    "Never deploy to us-east-1; always deploy to us-west-2.", ("T2", "T3"), trigger="When choosing a deployment region"
)
ROLE = Profile("Is a data analyst on the growth team", ("T1",))
SQL = Profile("Prefers answers with SQL examples", ("T1",))
TIMEZONE = Profile("Timezone is CET", ("T3",))
TOKEN = Playbook(
    "Open infra issues with the ops-bot token; the default token lacks the issues:write scope.",
    ("T2", "T3", "T4"),
    trigger="When create_issue targets the infra repo",
    kind="tool_failure",
    blocking_issue_kind="permission_denied",
)
ROTATION = Playbook(
    "Rotate credentials without downtime: create a second credential in the vault, roll the service "
    "onto it with a rolling restart, verify connections, then revoke the old credential.",
    ("T2",),
    trigger="When rotating database credentials",
    kind="expert",
)

REGION_JSON = """{
  "profiles": [],
  "playbooks": [
    {
      "rationale": "The user rejected us-east-1 and asked for us-west-2.",
      "trigger": "When choosing a deployment region",
      "content": "Never deploy to us-east-1; always deploy to us-west-2.",
      "kind": "correction",
      "blocking_issue": null,
      "evidence": ["T2", "T3"]
    }
  ],
  "forget": []
}"""
BOB_JSON = """{
  "profiles": [
    {"content": "Is a data analyst on the growth team", "time_to_live": "infinity", "evidence": ["T1"]},
    {"content": "Prefers answers with SQL examples", "time_to_live": "infinity", "evidence": ["T1"]},
    {"content": "Timezone is CET", "time_to_live": "infinity", "evidence": ["T3"]}
  ],
  "playbooks": [],
  "forget": []
}"""
TOKEN_JSON = """{"profiles": [], "playbooks": [{"rationale": "create_issue failed with 403 (missing issues:write); \
the ops-bot token worked.", "trigger": "When create_issue targets the infra repo", "content": "Open infra issues \
with the ops-bot token; the default token lacks the issues:write scope.", "kind": "tool_failure", "blocking_issue": \
{"kind": "permission_denied", "details": "403: token lacks issues:write for infra"}, "evidence": ["T2", "T3", \
"T4"]}], "forget": []}"""
EMPTY_JSON = '{"profiles": [], "playbooks": [], "forget": []}'


CASES: tuple[AnswerCase, ...] = (
    # --- answers that must yield exactly their items ---------------------------------------------------------
    AnswerCase("plain-json", "alice-deploy-region", "plain JSON", Reply(REGION_JSON), playbooks=(REGION,)),
    AnswerCase(
        "fenced-json",
        "bob-personal-facts",
        "```json fence",
        Reply(f"```json\n{BOB_JSON}\n```"),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "bare-fence",
        "carol-tool-failure",
        "``` fence without a language",
        Reply(f"```\n{TOKEN_JSON}\n```"),
        playbooks=(TOKEN,),
    ),
    AnswerCase(
        "prose-before",
        "alice-deploy-region",
        "prose before the JSON",
        Reply(f"Here is the extracted memory for this conversation:\n\n{REGION_JSON}"),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "prose-after",
        "bob-personal-facts",
        "prose after the JSON",
        Reply(
            f"{BOB_JSON}\n\nI extracted three stable facts; the 8am schedule is a one-off task detail, so it "
            "is not stored."
        ),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "prose-with-braces",
        "carol-tool-failure",
        "prose around the JSON, with braces of its own",
        Reply(
            "I looked at {4} turns. The tool call used the default token (the `{token}` field was unset)."
            f"\n\n```json\n{TOKEN_JSON}\n```\n\nThe {{scope}} issue is a permission problem."
        ),
        playbooks=(TOKEN,),
    ),
    AnswerCase(
        "think-first",
        "alice-deploy-region",
        "<think> block with a draft answer, then the answer",
        Reply(
            '<think>\nThe user corrected the region. A first idea: {"playbooks": [{"content": "Deploy the '
            'payments service to us-east-1."}]} - no, that is what the agent did wrong. The rule is the '
            f"opposite.\n</think>\n\n{REGION_JSON}"
        ),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "think-closing-only",
        "bob-personal-facts",
        "reasoning whose opening tag was in the chat template",
        Reply(
            'Okay, the user says they are an analyst {"profiles": ["analyst"]}, likes SQL, timezone CET. '
            f"The report time is a one-off.\n</think>\n\n{BOB_JSON}"
        ),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "reasoning-channel",
        "bob-personal-facts",
        "reasoning in the provider's own channel",
        Reply(
            BOB_JSON,
            reasoning='Drafting: {"profiles": [{"content": "Works in marketing"}]} is wrong; the user is an analyst.',
        ),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "tool-call",
        "carol-tool-failure",
        "JSON as a tool call's arguments, no text",
        Reply(tool_json=TOKEN_JSON),
        playbooks=(TOKEN,),
    ),
    AnswerCase(
        "tool-call-with-prose",
        "alice-deploy-region",
        "a sentence, then the JSON as a tool call",
        Reply("I'll record the correction.", tool_json=REGION_JSON),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "python-literals",
        "bob-personal-facts",
        "single quotes, None, trailing commas",
        Reply(
            "{'profiles': [{'content': 'Is a data analyst on the growth team', 'time_to_live': 'infinity', "
            "'evidence': ['T1'],}, {'content': 'Prefers answers with SQL examples', 'evidence': ['T1'],},"
            " {'content': 'Timezone is CET', 'evidence': ['T3'],},], 'playbooks': [], 'forget': None,}"
        ),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "comments",
        "carol-tool-failure",
        "JSON with // comments",
        Reply(
            TOKEN_JSON.replace('"kind": "tool_failure",', '"kind": "tool_failure", // the 403\n').replace(
                '"forget": []', '"forget": [] // nothing to forget'
            )
        ),
        playbooks=(TOKEN,),
    ),
    AnswerCase(
        "extra-fields",
        "alice-deploy-region",
        "extra top-level and item fields",
        Reply(
            json.dumps(
                {
                    "summary": "One correction.",
                    "version": 2,
                    "profiles": [],
                    "playbooks": [
                        {
                            **json.loads(REGION_JSON)["playbooks"][0],
                            "confidence": 0.93,
                            "tags": ["deploy", "region"],
                            "severity": "high",
                        }
                    ],
                    "forget": [],
                    "notes": None,
                },
                indent=2,
            )
        ),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "extra-profile-fields",
        "bob-personal-facts",
        "profiles with extra scalar fields (kept as features)",
        Reply(
            json.dumps(
                {
                    "profiles": [
                        {**p, "category": c, "confidence": 0.9}
                        for p, c in zip(json.loads(BOB_JSON)["profiles"], ["role", "preference", "locale"])
                    ],
                    "playbooks": [],
                }
            )
        ),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "missing-optional-fields",
        "alice-deploy-region",
        "a playbook with only content and evidence",
        Reply(
            '{"playbooks": [{"content": "Never deploy to us-east-1; always deploy to us-west-2.", '
            '"evidence": ["T2", "T3"]}]}'
        ),
        playbooks=(Playbook(REGION.content, ("T2", "T3")),),
    ),
    AnswerCase(
        "missing-evidence",
        "bob-personal-facts",
        "profiles without evidence",
        Reply(
            '{"profiles": [{"content": "Is a data analyst on the growth team"}, {"content": "Timezone is '
            'CET", "time_to_live": "infinity"}], "playbooks": []}'
        ),
        profiles=(Profile(ROLE.content, ALL), Profile(TIMEZONE.content, ALL)),
    ),
    AnswerCase(
        "wrong-types-coerced",
        "bob-personal-facts",
        "a single object for a list, a string for evidence, an unknown TTL, null lists",
        Reply(
            '{"profiles": {"content": "Timezone is CET", "time_to_live": "forever", "evidence": "T3"}, '
            '"playbooks": null, "forget": null}'
        ),
        profiles=(TIMEZONE,),
    ),
    AnswerCase(
        "numeric-evidence-and-cased-kind",
        "alice-deploy-region",
        "evidence as numbers, kind capitalised, blocking_issue as the string 'none'",
        Reply(
            '{"profiles": [], "playbooks": [{"trigger": "When choosing a deployment region", "content": '
            '"Never deploy to us-east-1; always deploy to us-west-2.", "kind": "Correction", '
            '"blocking_issue": "none", "evidence": [2, 3]}]}'
        ),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "bad-items-among-good",
        "bob-personal-facts",
        "a bare string, a number and an empty item among items",
        Reply(
            '{"profiles": [{"content": "Is a data analyst on the growth team", "evidence": ["T1"]}, '
            '{"content": 42}, {"content": "   "}, "Timezone is CET", {"fact": "likes SQL"}], '
            '"playbooks": []}'
        ),
        profiles=(ROLE, Profile(TIMEZONE.content, ALL)),
    ),
    AnswerCase(
        "double-encoded",
        "bob-personal-facts",
        "the JSON object sent as a JSON string",
        Reply(json.dumps(BOB_JSON)),
        profiles=(ROLE, SQL, TIMEZONE),
    ),
    AnswerCase(
        "same-answer-twice",
        "alice-deploy-region",
        "the answer fenced, then repeated",
        Reply(f"```json\n{REGION_JSON}\n```\n\nFinal answer:\n{REGION_JSON}"),
        playbooks=(REGION,),
    ),
    AnswerCase(
        "expert",
        "dmitri-expert",
        "an expert-answer rule, fenced, prose first",
        Reply(
            "The expert's procedure differs in substance (zero downtime), so it is a rule:\n```json\n"
            + json.dumps(
                {
                    "profiles": [],
                    "playbooks": [
                        {
                            "rationale": "The expert rotated without downtime.",
                            "trigger": "When rotating database credentials",
                            "content": ROTATION.content,
                            "kind": "expert",
                            "blocking_issue": None,
                            "evidence": ["T2"],
                        }
                    ],
                    "forget": [],
                }
            )
            + "\n```"
        ),
        playbooks=(ROTATION,),
    ),
    AnswerCase("empty", "alice-chitchat", "an empty answer", Reply(EMPTY_JSON)),
    AnswerCase(
        "empty-with-prose",
        "alice-chitchat",
        "an empty answer with a remark that is not a refusal",
        Reply(f"This is small talk; I can't find anything worth remembering.\n{EMPTY_JSON}"),
    ),
    AnswerCase(
        "forget",
        "dana-forget",
        "a forget request in the forget channel (never stored as a fact)",
        Reply('{"profiles": [], "playbooks": [], "forget": [{"target": "Lives in Paris", "evidence": ["T1"]}]}'),
        forget=(Forget("Lives in Paris", ("T1",)),),
    ),
    # --- answers that must fail, storing nothing ---------------------------------------------------------------
    AnswerCase(
        "cut-off-mid-string",
        "bob-personal-facts",
        "cut off at the token limit inside a string",
        Reply(BOB_JSON[: BOB_JSON.index("SQL") + 2], finish="length"),
        failure=CUT_OFF,
    ),
    AnswerCase(
        "cut-off-unmarked",
        "bob-personal-facts",
        "an object that never closes, finish_reason stop",
        Reply(BOB_JSON[: BOB_JSON.index("Timezone") + 8]),
        failure=CUT_OFF,
    ),
    AnswerCase(
        "cut-off-complete-object",
        "alice-deploy-region",
        "finish_reason length after a complete object",
        Reply(f"{REGION_JSON}\n\nNote that the agent should also", finish="length"),
        failure=CUT_OFF,
    ),
    AnswerCase(
        "cut-off-in-reasoning",
        "alice-deploy-region",
        "cut off while still reasoning",
        Reply(
            "<think>\nThe user rejected us-east-1. I should write a correction rule with the trigger", finish="length"
        ),
        failure=CUT_OFF,
    ),
    AnswerCase(
        "reasoning-never-ends",
        "alice-deploy-region",
        "a <think> block that never closes, then nothing",
        Reply("<think>\nThe user rejected us-east-1, so the rule is to use us-west-2."),
        failure=NO_JSON,
    ),
    AnswerCase(
        "refusal-prose",
        "bob-personal-facts",
        "a refusal in prose",
        Reply("I'm sorry, but I can't help with extracting personal information about individuals."),
        failure=REFUSED,
    ),
    AnswerCase(
        "refusal-with-empty-json",
        "bob-personal-facts",
        "a refusal next to an empty object",
        Reply(f"I cannot process personal data about users, so I am returning nothing.\n{EMPTY_JSON}"),
        failure=REFUSED,
    ),
    AnswerCase(
        "refusal-flagged",
        "carol-tool-failure",
        "a refusal the provider flags (refusal field, content filter, stop_reason refusal, SAFETY)",
        Reply("I'm sorry, I can't assist with that request.", finish="refusal"),
        failure=REFUSED,
    ),
    AnswerCase(
        "two-answers",
        "alice-deploy-region",
        "a draft and a corrected answer, both outside reasoning",
        Reply(
            'First pass:\n{"playbooks": [{"content": "Deploy the payments service to us-east-1."}]}\n\n'
            f"Corrected:\n{REGION_JSON}"
        ),
        failure=AMBIGUOUS,
    ),
    AnswerCase(
        "text-and-tool-disagree",
        "alice-deploy-region",
        "one answer in the text, another in a tool call",
        Reply('{"playbooks": [{"content": "Always confirm the region before deploying."}]}', tool_json=REGION_JSON),
        failure=AMBIGUOUS,
    ),
    AnswerCase(
        "wrapped",
        "bob-personal-facts",
        "the contract wrapped in another key",
        Reply(json.dumps({"result": json.loads(BOB_JSON)})),
        failure=NO_JSON,
    ),
    AnswerCase(
        "top-level-array",
        "bob-personal-facts",
        "a list of items instead of the object",
        Reply(json.dumps(json.loads(BOB_JSON)["profiles"])),
        failure=NO_JSON,
    ),
    AnswerCase("empty-reply", "alice-deploy-region", "an empty reply", Reply(""), failure=NO_JSON),
    AnswerCase(
        "wrong-types-everywhere",
        "alice-deploy-region",
        "lists as strings, items without content",
        Reply('{"profiles": "Deploys to us-west-2", "playbooks": [{"rule": "use us-west-2"}]}'),
        failure=SCHEMA,
    ),
    AnswerCase(
        "all-items-invalid",
        "carol-tool-failure",
        "every item invalid",
        Reply(
            '{"profiles": [], "playbooks": [{"content": ""}, {"content": null, "kind": "tool_failure"}, '
            '{"trigger": "When opening issues"}]}'
        ),
        failure=SCHEMA,
    ),
)


def case_by_session(session_id: str) -> AnswerCase | None:
    """The case a corpus test published under session `session_id` (= the case id), else None."""
    return next((case for case in CASES if case.id == session_id), None)
