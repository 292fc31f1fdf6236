"""Text helpers shared by the rule families: sentences, clipping, verb forms, the length limits of extracted
wording, and content tokens (also the judge's, the outcome counters', wording's and forgetting's notion of a word).
"""

from __future__ import annotations

import re

MAX_TRIGGER_CHARS = 120
MAX_RATIONALE_QUOTE = 160
MAX_CONTENT_CHARS = 400
MAX_ERROR_CHARS = 200
MAX_INPUT_JSON_CHARS = 300

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def word_set(*chunks: str) -> frozenset[str]:
    """A word set from space-separated text (keeps long vocabularies readable)."""
    return frozenset(" ".join(chunks).split())


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so patterns need only one spelling."""
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text.replace("\u2019", "'")) if s.strip()]


def clip(text: str, limit: int) -> str:
    """Cut at a word boundary and mark the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:-") + "…"


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def lower_first(text: str) -> str:
    """Lower-case the first word only when it is a plain word (keeps "I", acronyms and identifiers intact)."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'") or (len(first) > 1 and not first[1:].islower()):
        return text
    return text[:1].lower() + text[1:]


def third_person_verb(verb: str) -> str:
    """`run` -> `runs`, `go` -> `goes`, `carry` -> `carries`, `have` -> `has` (regular English rules)."""
    lower = verb.lower()
    if lower in {"have", "be", "do", "go"}:
        return {"have": "has", "be": "is", "do": "does", "go": "goes"}[lower]
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(lower) > 1 and lower.endswith("y") and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


#: Two-syllable verbs stressed on the last syllable double their final consonant too ("commit" -> "committing").
_DOUBLING_VERBS = frozenset(
    "commit submit omit permit admit format forget begin refer prefer control patrol occur "
    "regret upset equip compel rebut".split()
)


def gerund(verb: str) -> str:
    """`deploy` -> `deploying`, `write` -> `writing`, `run` -> `running`, `tie` -> `tying`, `commit` -> `committing`."""
    lower = verb.lower()
    if lower in _DOUBLING_VERBS:
        return verb + verb[-1] + "ing"
    if lower.endswith("ie"):
        return verb[:-2] + "ying"
    if lower.endswith("e") and not lower.endswith(("ee", "ye", "oe")) and len(lower) > 2:
        return verb[:-1] + "ing"
    vowel_groups = re.findall(r"[aeiou]+", lower)
    # double the final consonant of one-syllable consonant-vowel-consonant verbs (run, stop, set)
    if len(vowel_groups) == 1 and re.search(r"[^aeiou][aeiou][^aeiouwxy]$", lower):
        return verb + verb[-1] + "ing"
    return verb + "ing"


def first_word(text: str) -> str:
    return text.split(" ", 1)[0].lower().strip(",.!") if text else ""


_TOKEN_RE = re.compile(r"[a-z0-9]+(?:[-_./:][a-z0-9]+)*")
#: Function words: articles, pronouns, auxiliaries, prepositions, conjunctions.
FUNCTION_WORDS = word_set(
    "a about above after again all also am an and any are as at be because been before being below between both "
    "but by can could did do does doing down during each few for from further had has have having he her here hers "
    "him his how i if in into is it its itself just me more most my no nor not now of off on once only or other "
    "our ours out over own same she should so some such than that the their theirs them then there these they "
    "this those through to too under until up very was we were what when where which while who whom why will "
    "with would you your yours yourself"
)
#: Function and filler words: they carry no content (and identify nobody).
STOP_WORDS = FUNCTION_WORDS | word_set(
    # conversational filler: differences in these are style, not substance
    "sure certainly absolutely definitely great happy glad help hi hello hey please thanks thank let know "
    "simply basically actually really first next finally just course ok okay well note here's there's"
)


def stem(token: str) -> str:
    """A crude suffix strip so inflections ("restarting", "restarts") count as the same word."""
    if token.isalpha() and len(token) > 4:
        for suffix in ("ing", "ed", "es", "s", "ly"):
            if token.endswith(suffix) and len(token) - len(suffix) >= 3:
                return token[: -len(suffix)]
    return token


def content_tokens(text: str) -> list[str]:
    """Content words of a text in order of first appearance: lower-cased, punctuation removed, stop words dropped,
    crudely stemmed; numbers and identifiers (us-west-2, config.yaml) are kept whole."""
    seen: dict[str, None] = {}
    for token in _TOKEN_RE.findall(text.lower()):
        if token in STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            continue
        seen.setdefault(stem(token), None)
    return list(seen)
