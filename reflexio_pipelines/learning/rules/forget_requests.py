"""Forget requests (HEURISTIC: surface wording only): what a user turn asks the agent to forget about them."""

from __future__ import annotations

import re
from collections.abc import Iterator

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.facts import profile_from_clause, third_person
from reflexio_pipelines.learning.rules.text import (
    MAX_CONTENT_CHARS,
    capitalise,
    first_word,
    normalise,
    split_sentences,
    word_set,
)
from reflexio_pipelines.learning.types import ForgetDirective, Turn, Window

# Verbs that always ask the agent to drop something it remembers.
_FORGET_VERB = (
    r"(?:forget|unlearn|stop remembering|(?:do not|don't|dont) remember|no longer remember|"
    r"stop (?:storing|keeping|saving|tracking))"
)
# Verbs that only do so when their object is the user's own data: "delete my address" is a forget request,
# "delete the staging branch" is a task for the agent.
_ERASE_VERB = r"(?:delete|remove|erase|wipe|purge|clear|(?:do not|don't|dont) (?:keep|store|save|retain|hold on to))"
_ABOUT = (
    r"(?:what you (?:know|have|remember|stored|saved|keep)(?: (?:stored|saved|on file|on record))?(?: about| on)?|"
    r"everything (?:you know )?about|anything (?:you know )?about|all (?:you know )?about|the fact that|about|"
    r"(?:that )?I (?:said|told you|mentioned)(?: that)?|that)"
)
_FORGET_RE = re.compile(rf"\b{_FORGET_VERB}\b\s*(?:{_ABOUT}\s+)*(?P<target>.*)$", re.I)
_ERASE_RE = re.compile(rf"\b{_ERASE_VERB}\b\s+(?:{_ABOUT}\s+)*(?P<target>(?:my|I|I'm|I've)\b.*)$", re.I)
_TARGET_TAIL_RE = re.compile(
    r"(?:\s+(?:from|in) (?:your|the) (?:memory|records?|notes|profile|files?|database)|\s+(?:any ?more|for now)|"
    r"[\s,]*\bplease\b|[\s.!?,;:]+)+$",
    re.I,
)
# "forget it", "forget that" (alone) mean "never mind", not "erase something"
_NOT_A_TARGET = word_set("it this that these those them everything anything all")


def forget_target(sentence: str) -> str | None:
    """What a sentence asks the agent to forget about the user, phrased like a profile where the wording allows
    ("forget that I live in Paris" -> "Lives in Paris", "stop remembering my phone number" -> "Their phone
    number"); None when the sentence is not a forget request. HEURISTIC: wording only, so "forget it" (never mind)
    is not one, and an unusual phrasing ("I'd rather you didn't keep my address") is missed."""
    text = normalise(sentence)
    match = _FORGET_RE.search(text) or _ERASE_RE.search(text)
    if match is None:
        return None
    target = _TARGET_TAIL_RE.sub("", match.group("target")).strip()
    if not target or first_word(target) in _NOT_A_TARGET:
        return None
    as_profile = profile_from_clause(target) if re.match(r"I\b|I'", target) else None
    return as_profile or capitalise(third_person(target))


def has_forget_request(window: Window) -> bool:
    """Whether any user turn of the window asks to forget something (the `forget_target` heuristic)."""
    return any(forget_target(s) for t in window.turns if t.is_user for s in split_sentences(t.content))


def forget_directives(turn: Turn) -> Iterator[ForgetDirective]:
    for sentence in split_sentences(turn.content):
        target = forget_target(sentence)
        if target:
            yield ForgetDirective(target=clean_text(target, MAX_CONTENT_CHARS), source_turn_ids=[turn.turn_id])
