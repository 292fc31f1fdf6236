"""What a taught lesson looks like where it is served, in whatever words the extractor keeps.

The default built-in extractor keeps the user's own words in the third person ("We never deploy to us-east-1.
Always use us-west-2"); the rule extractor (`REFLEXIO_LLM_BUILTIN=rules`) rewrote them into canonical wording ("Never
deploy to us-east-1; always use us-west-2."); an LLM words them its own way. Tests whose point is that a lesson was
learned and injected (integrations, the SDK, the CLI, races, outcome counting) check its substance with these: the
key tokens, with the polarity that makes it that lesson — us-east-1 ruled out ("never" before it), us-west-2 the one
to use — on one line of the served text. A block that holds nothing learned, or a different rule, does not match.

The sessions that teach the region correction (and bring it back) are here too, for the tests that count outcomes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: The region correction most tests teach ("No — we never deploy to us-east-1, always use us-west-2."): patterns
#: that must all occur on one line (case-insensitive).
REGION_LESSON: tuple[str, ...] = (r"\bnever\b.*\bus-east-1\b", r"\bus-west-2\b")

#: A session that teaches that correction: (role, content) turns.
TEACH_REGION = [
    ("user", "Please deploy the payments service."),
    ("assistant", "Deploying the payments service to us-east-1."),
    ("user", "No — we never deploy to us-east-1, always use us-west-2."),
]
#: A later session in which the agent deploys to us-east-1 again and the same correction comes back.
REGION_AGAIN = [("user", "Deploy the payments service again."), *TEACH_REGION[1:]]


def lesson_lines(text: str, lesson: Sequence[str] = REGION_LESSON) -> list[str]:
    """The lines of `text` (a context block, a system prompt, a stored item's content) that state `lesson`."""
    return [line for line in text.splitlines() if all(re.search(p, line, re.I) for p in lesson)]


def states_lesson(text: str, lesson: Sequence[str] = REGION_LESSON) -> bool:
    """Whether one line of `text` states `lesson`."""
    return bool(lesson_lines(text, lesson))


def served_rule_lines(block: str, lesson: Sequence[str] = REGION_LESSON) -> list[str]:
    """The behaviour-rule lines of a rendered context block ("- <situation> -> <rule>") whose rule states `lesson`."""
    return [
        line
        for line in block.splitlines()
        if line.startswith("- ") and " -> " in line and states_lesson(line.split(" -> ", 1)[1], lesson)
    ]
