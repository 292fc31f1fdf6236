"""Profiles from user turns: the facts of every stating clause; questions, forget requests, stories and the
correcting sentences of a correction are skipped, and time words bound how long a fact stays true.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.corrections import MARKER_RE, STRIP_LEAD_RE, has_correction_marker
from reflexio_pipelines.learning.rules.facts import (
    CLAUSE_SPLIT_RE,
    LEAD_IN_RE,
    QUESTION_START_RE,
    facts_from_clause,
    typed_fact_clause,
)
from reflexio_pipelines.learning.rules.feedback import is_narrative
from reflexio_pipelines.learning.rules.forget_requests import forget_target
from reflexio_pipelines.learning.rules.text import MAX_CONTENT_CHARS, normalise, split_sentences
from reflexio_pipelines.learning.rules.triggers import GREETING_RE
from reflexio_pipelines.learning.types import ExtractedProfile, Turn

# Temporal hints in a statement bound how long the fact stays true.
_TTL_HINTS = (
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), "one_day"),
    (re.compile(r"\b(?:this|next) week\b", re.I), "one_week"),
    (
        re.compile(r"\b(?:this|next) month\b|\bcurrently\b|\bright now\b|\bat the moment\b|\bfor now\b", re.I),
        "one_month",
    ),
    (re.compile(r"\bthis (?:quarter|season|semester)\b", re.I), "one_quarter"),
    (re.compile(r"\bthis year\b", re.I), "one_year"),
)


def facts_stated(text: str) -> list[str]:
    """Third-person facts a user turn states, also inside a correction ("No, I live in Munich now" -> ["Lives in
    Munich"]): the profile rules per clause after the correction lead-in ("No,", "Wrong.") is stripped. The
    extractor skips correcting sentences (they become rules); outcome counters compare them with served profiles."""
    facts = []
    for sentence in map(normalise, split_sentences(text)):
        for clause in CLAUSE_SPLIT_RE.split(STRIP_LEAD_RE.sub("", sentence)):
            facts += [f for f in facts_from_clause(clause) if len(f) > 4]
    return facts


def _ttl_for(sentence: str) -> str:
    for pattern, ttl in _TTL_HINTS:
        if pattern.search(sentence):
            return ttl
    return "infinity"


def profiles_from_turn(turn: Turn, is_correction_turn: bool) -> Iterator[ExtractedProfile]:
    after_greeting = False
    for position, sentence in enumerate(split_sentences(turn.content)):
        sentence = normalise(sentence)
        if GREETING_RE.fullmatch(sentence):
            # "Hi! I'm Dana" splits into two sentences; the greeting still makes the next one an introduction
            after_greeting = True
            continue
        greeted, after_greeting = after_greeting or bool(GREETING_RE.match(sentence)), False
        if QUESTION_START_RE.match(LEAD_IN_RE.sub("", sentence)):
            continue  # a question asks, it states nothing ("Should I go vegan?")
        if forget_target(sentence):  # "forget that I live in Paris" asks to drop the fact, it does not state it
            continue
        if is_narrative(sentence):  # a story about the past is not a fact about the user now
            continue
        # a sentence that corrects the agent is a rule for the agent, not a fact about the user — unless what
        # follows the "No," is itself a fact in a typed slot ("No, I live in Munich now")
        if is_correction_turn and has_correction_marker(sentence):
            remainder = STRIP_LEAD_RE.sub("", sentence)
            if remainder == sentence or MARKER_RE.search(remainder) or not typed_fact_clause(remainder):
                continue
            sentence = remainder
        for number, clause in enumerate(CLAUSE_SPLIT_RE.split(sentence)):
            if clause.rstrip().endswith("?") or QUESTION_START_RE.match(LEAD_IN_RE.sub("", clause.strip())):
                continue  # the question of "I'm vegetarian - what protein should I eat?"; the fact before it stays
            for content in facts_from_clause(clause, greeted, opening=position == 0 and number == 0):
                if len(content) > 4:
                    yield ExtractedProfile(
                        content=clean_text(content, MAX_CONTENT_CHARS),
                        time_to_live=_ttl_for(sentence),
                        source_turn_ids=[turn.turn_id],
                    )
