"""Situation triggers: the task a user request sets, as "When deploying …" or "When asked: …"."""

from __future__ import annotations

import re

from reflexio_pipelines.learning.rules.facts import QUESTION_START_RE, profile_from_clause
from reflexio_pipelines.learning.rules.text import (
    MAX_TRIGGER_CHARS,
    clip,
    first_word,
    gerund,
    lower_first,
    normalise,
    split_sentences,
    word_set,
)

# Words that make a request read as "When <gerund> …"; anything else is quoted as "When asked: …".
IMPERATIVE_VERBS = word_set(
    "add analyse analyze answer apply archive ask book build buy calculate cancel change check clean clear close "
    "compare compile compute configure convert copy create debug delete deploy describe design draft drop edit email "
    "estimate explain export extract fetch file find fix format generate get give help implement import improve "
    "install list load look make merge migrate move open optimise optimize order pay plan post prepare print "
    "provision publish pull push put query read rebuild recommend refactor refund release reload remove rename "
    "reorder replace reply report reset resize restart restore retry review rewrite roll rotate run save scale "
    "schedule search send set share show sort start stop submit suggest summarise summarize switch sync tell test "
    "track train transfer translate troubleshoot turn undo update upgrade upload use validate verify write "
    "leave keep include address mention cc assume attach label tag commit"
)
_SUBJECT_WORDS = word_set("i we my our the a an this that these those it there its his her their some all each every")
GREETING_RE = re.compile(r"^(?:hi|hello|hey|yo|good (?:morning|afternoon|evening))(?: there)?\b[\s,!.]*", re.I)
_POLITE_RE = re.compile(
    r"^(?:please|pls|kindly|can you|could you|would you|will you|can u|could u|i need you to|i want you to|"
    r"i'd like you to|i would like you to)\b[\s,]*",
    re.I,
)


def strip_polite(sentence: str) -> tuple[str, bool]:
    """The sentence without leading politeness ("can you please …"), and whether any was removed."""
    polite = False
    while match := _POLITE_RE.match(sentence):
        sentence, polite = sentence[match.end() :], True
    return sentence, polite


def _request_sentence(request: str) -> str:
    """The sentence of a user turn that states the task: the first imperative, polite request or question,
    else the first sentence that is not a statement about the user ("Hi! I'm Dana. Deploy X." -> "Deploy X.")."""
    sentences = [s for s in (GREETING_RE.sub("", normalise(s)).strip() for s in split_sentences(request)) if s]
    for sentence in sentences:
        text, polite = strip_polite(sentence)
        if polite or sentence.endswith("?") or first_word(text) in IMPERATIVE_VERBS:
            return sentence
    statements = [s for s in sentences if len(s.split()) >= 2 and profile_from_clause(s) is None]
    return (statements or sentences or [""])[0]


def situation_trigger(request: str) -> str:
    """A trigger naming the situation of a user request: "Deploy the billing service" -> "When deploying the
    billing service"; a question -> "When asked: <question>"."""
    sentence = _request_sentence(request)
    text, polite = strip_polite(sentence)
    text = re.sub(r"[\s,]*\bplease\b[\s.!?]*$", "", text, flags=re.I).rstrip(" .!?")
    if not text:
        return "When answering this kind of request"
    first, _, rest = text.partition(" ")
    if first.lower() in IMPERATIVE_VERBS:
        phrase = f"{gerund(first.lower())} {rest}".strip()
    elif not polite and (sentence.endswith("?") or QUESTION_START_RE.match(text)):
        phrase = f"asked: {lower_first(text)}"
    elif first.lower() in _SUBJECT_WORDS:
        phrase = lower_first(text)
    else:
        phrase = f"asked: {lower_first(text)}"
    return clip(f"When {phrase}", MAX_TRIGGER_CHARS)
