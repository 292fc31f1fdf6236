"""The kinds of user clause the built-in extractor tells apart (the classifier's labels).

Lasting kinds become learned items; the others teach nothing on their own:

- preference: a lasting preference, dislike or constraint ("I can't stand cilantro", "for finance numbers I want
  them rounded to thousands", "I'm allergic to shellfish");
- fact: a personal or team fact ("I live in Lisbon", "we're a Kotlin shop", "my manager is Dana");
- instruction: a standing instruction about how the agent should work from now on ("always cc my assistant",
  "from now on answer in short paragraphs");
- correction: a correction of the agent's last answer that carries a rule ("no, we never deploy on Fridays");
- request: a one-off task or question ("list the flaws of this argument", "book a table for two");
- feedback: feedback without a lasting rule ("perfect, thanks", "that's not what I meant");
- social: greetings, small talk, acknowledgements, feelings of the moment;
- hypothetical: hypothetical, quoted or someone else's view ("my old boss always wanted pie charts");
- revocation: withdraws something said earlier ("forget the bullet points rule", "ignore what I said about X").
"""

from __future__ import annotations

from typing import Literal

Kind = Literal[
    "preference", "fact", "instruction", "correction", "request", "feedback", "social", "hypothetical", "revocation"
]
KINDS: tuple[Kind, ...] = (
    "preference",
    "fact",
    "instruction",
    "correction",
    "request",
    "feedback",
    "social",
    "hypothetical",
    "revocation",
)
#: Kinds that become learned items (profiles for preference and fact, playbooks for instruction and correction).
LASTING: frozenset[str] = frozenset({"preference", "fact", "instruction", "correction"})
PROFILE_KINDS: frozenset[str] = frozenset({"preference", "fact"})
PLAYBOOK_KINDS: frozenset[str] = frozenset({"instruction", "correction"})
#: What a kind does to the store. The head's bars are set per outcome, not per kind: telling an instruction from a
#: correction (both become a playbook) or a preference from a fact (both a profile) changes nothing stored, so only
#: the summed probability of an outcome has to clear its bar.
OUTCOMES: dict[str, tuple[str, ...]] = {
    "profile": ("preference", "fact"),
    "playbook": ("instruction", "correction"),
    "revocation": ("revocation",),
}
