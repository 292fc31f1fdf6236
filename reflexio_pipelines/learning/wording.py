"""The wording of shared items: which words a text taught by several users may carry, and how words are taken out.

An agent playbook is served to every user's agent, so it must not carry one person's words: neither facts about
them ("I am a staff engineer at Acme") nor the names, places and projects only they mentioned. This module is pure
text logic, used by aggregation (what a consolidated rule may say, `learning/aggregate.py`) and by privacy (erasure
re-words shared items without the erased user, export shows a requester only their own words of them).

Words are compared normalised — case-folded, a possessive "'s" dropped, crudely stemmed — so "Deploying" and
"deploy" count as one word. Function words ("the", "to", "what", see `rules.text.STOP_WORDS`, and the generic names
for people such as "the user") identify nobody: they are never counted and never taken out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from reflexio_pipelines.learning.rules.facts import is_personal_fact
from reflexio_pipelines.learning.rules.text import STOP_WORDS, stem

#: A word: letters/digits (any script), joined by inner apostrophes, hyphens, dots, slashes or colons, so
#: "us-west-2", "config.yaml" and "don't" are one word each.
WORD_RE = re.compile(r"\w+(?:['\u2019\-_./:]\w+)*")
#: How rules name people without naming anyone (the third person below writes "the user"): function words too.
_GENERIC_PEOPLE = frozenset("user users agent agents assistant team customer customers".split())
#: Contractions of function words ("don't", "i'm", "it's") are function words too.
_CONTRACTED = frozenset("don can won isn doesn didn aren wasn weren shouldn wouldn couldn haven hasn".split())
#: Where a text splits into clauses (the separator is kept, so the text can be put back together).
_CLAUSE_SPLIT_RE = re.compile(r"([.!?;:,]\s+|\s+[-\u2013\u2014]+\s+)")
#: First person -> third person, in this order ("I am" before "I"), for what is left after the facts are dropped.
_THIRD_PERSON = [
    (re.compile(r"\bI(?: am|'m)\b"), "the user is"),
    (re.compile(r"\bI(?: have|'ve)\b"), "the user has"),
    (re.compile(r"\bdo I\b"), "does the user"),
    (re.compile(r"\bI\b"), "the user"),
    (re.compile(r"\b(?:me|myself)\b", re.I), "the user"),
    (re.compile(r"\bmine\b", re.I), "the user's"),
    (re.compile(r"\b(?:my|our)\b", re.I), "the"),
    (re.compile(r"\bwe\b", re.I), "the team"),
]
#: A preposition, article or conjunction left with nothing after it once the word it led to was taken out.
_DANGLING_RE = re.compile(r"\s+(?:at|in|on|for|of|the|a|an|to|from|by|with|and|or)(?=\s*(?:[.,;:!?)\]]|$))", re.I)
_TIDY = [
    (re.compile(r"\(\s*\)|\[\s*\]|'\s*'|\"\s*\"|\u2018\s*\u2019|\u201c\s*\u201d"), ""),  # emptied brackets, quotes
    (re.compile(r"[ \t]{2,}"), " "),
    (re.compile(r"\s+([,.;:!?\u2026)\]])"), r"\1"),  # no space before closing punctuation
    (re.compile(r"([,;:])(?:\s*[,;:])+"), r"\1"),  # a run of separators left where words were
    (re.compile(r"[,;:]\s*([.!?])"), r"\1"),
    (re.compile(r"^[\s,;:.!?\-\u2013\u2014]+"), ""),  # nothing before the first word
    (re.compile(r"[\s,;:\-\u2013\u2014]+$"), ""),  # nor a dangling separator after the last
]


def normal_word(word: str) -> str:
    """How a word is compared: case-folded, straight apostrophe, possessive dropped, crudely stemmed (a final "e"
    too, so "write" and "writing" meet)."""
    folded = word.casefold().replace("\u2019", "'")
    stemmed = stem(folded[:-2] if folded.endswith("'s") else folded)
    return stemmed[:-1] if len(stemmed) > 3 and stemmed.endswith("e") and stemmed.isalpha() else stemmed


def is_function_word(word: str) -> bool:
    """Whether a word (as written) is a function word, which carries no content and identifies nobody."""
    folded = word.casefold().replace("\u2019", "'")
    base = folded.split("'", 1)[0]
    return (
        folded in STOP_WORDS
        or folded in _GENERIC_PEOPLE
        or (len(folded) == 1 and not folded.isdigit())
        or ("'" in folded and (base in STOP_WORDS or base in _CONTRACTED))
    )


def vocabulary(texts: Iterable[str | None]) -> frozenset[str]:
    """The normalised content words of `texts` (function words left out; None and "" are skipped)."""
    return frozenset(
        normal_word(m.group())
        for text in texts
        if text
        for m in WORD_RE.finditer(text)
        if not is_function_word(m.group())
    )


class Support:
    """Who wrote which word: each user's vocabulary, from the texts they contributed."""

    def __init__(self, texts_by_user: Mapping[str, Iterable[str | None]]) -> None:
        self.words = {user: vocabulary(texts) for user, texts in texts_by_user.items()}

    @property
    def users(self) -> int:
        return len(self.words)

    def writers(self, word: str) -> int:
        """How many users wrote the normalised `word`."""
        return sum(word in words for words in self.words.values())

    def without(self, user: str) -> "Support":
        """The same support with one user's words left out."""
        rest = Support({})
        rest.words = {u: words for u, words in self.words.items() if u != user}
        return rest


def keep_words(text: str, keep: Callable[[str], bool]) -> str:
    """`text` without the content words that `keep` (called with the normalised word) refuses, punctuation tidied.

    Returns `text` unchanged when every word stays, "" when no content word is left (what remained would be only
    function words and punctuation)."""
    pieces, start, kept = [], 0, False
    for match in WORD_RE.finditer(text):
        word = match.group()
        if is_function_word(word):
            continue
        if keep(normal_word(word)):
            kept = True
            continue
        pieces.append(text[start : match.start()])
        start = match.end()
    if not kept:
        return ""
    if not pieces:
        return text
    pieces.append(text[start:])
    return tidy(_DANGLING_RE.sub("", "".join(pieces)))


def tidy(text: str) -> str:
    """Spaces and separators put right after words were taken out of `text`."""
    for pattern, replacement in _TIDY:
        text = pattern.sub(replacement, text)
    return text.strip()


def without_personal_facts(text: str) -> str:
    """`text` without the clauses that state a fact about the person who wrote them, the rest in the third person:
    "When asked: I am a staff engineer at Acme, how do I size the pool?" -> "When asked: how does the user size
    the pool?"."""
    parts = _CLAUSE_SPLIT_RE.split(text)
    clauses, separators = parts[0::2], [*parts[1::2], ""]
    kept = "".join(c + s for c, s in zip(clauses, separators) if not is_personal_fact(c.strip()))
    for pattern, replacement in _THIRD_PERSON:
        kept = pattern.sub(replacement, kept)
    return tidy(kept)
