"""Wording a classified clause as a learned item, in the user's own words.

Nothing is paraphrased: a profile is the clause turned to the third person ("I don't eat pork" -> "Does not eat
pork", "my manager is Dana" -> "Their manager is Dana", "we're a Go shop" -> "They're a Go shop"), so a
negation is kept by construction; a playbook is the instruction with the politeness taken off ("could you please
always cc my assistant" -> "Always cc the user's assistant"), its condition ("when I send a report, …") becoming
its trigger. The verb forms follow regular English rules (`rules/text.py third_person_verb`).
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.rules.text import MAX_CONTENT_CHARS, capitalise, clip, third_person_verb

_LEAD_RE = re.compile(
    r"^(?:(?:oh|ah|well|yeah|yes|yep|so|and|but|also|plus|btw|by the way|fyi|honestly|frankly|actually|just so you "
    r"know|for (?:the record|context|reference)|for what it's worth|ok|okay|right|anyway|hey|hi)\b[,:]?\s+)+",
    re.I,
)
_POLITE_RE = re.compile(
    r"^(?:(?:please|pls|kindly|can you|could you|would you|will you|i want you to|i'd like you to|i need you to|"
    r"make sure (?:to|you)|remember to|try to|going forward,?|from now on,?|in (?:the )?future,?)\s+)+",
    re.I,
)
_TAIL_RE = re.compile(r"[\s,]*(?:please|thanks|thank you|going forward|from now on)?[\s.!]*$", re.I)
_CONDITION_RE = re.compile(
    r"^((?:when|whenever|if|for|every time|each time|anytime|any time)\b[^,]{3,80}),\s*(.+)$", re.I
)
_ADVERBS = (
    "really|just|also|usually|always|never|often|generally|mostly|honestly|actually|still|now|only|definitely|"
    "absolutely|totally|currently|recently|typically|normally|sometimes|rarely|basically|mainly|mostly|strongly|"
    "truly|seriously|kind of|kinda|pretty much|even|already|finally|personally"
)
_START_RE = re.compile(rf"^I\s+((?:(?:{_ADVERBS})\s+)*)([A-Za-z'-]+)\b(.*)$", re.I | re.S)
#: A second verb of the same "I" ("I avoid caffeine and prefer herbal teas" -> "… and prefers herbal teas"): the
#: common verbs of liking, habit and having, since a word after "and" is as often a noun.
_AND_VERB_RE = re.compile(
    r"(\band (?:also |really |usually |mostly |much )?)(prefer|like|love|hate|enjoy|avoid|need|want|use|eat|drink|"
    r"drive|play|speak|have|own|work|live|go|try|tend)\b",
    re.I,
)
_FIXED_STARTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.I), r)
    for p, r in (
        (r"^(?:I'm|I am|Im)\b", "Is"),
        (r"^I've got\b|^I have got\b", "Has"),
        (r"^(?:I've|I have)\b", "Has"),
        (r"^I (?:don't|do not|dont)\b", "Does not"),
        (r"^I (?:doesn't|does not)\b", "Does not"),
        (r"^I (?:can't|cannot|cant|can not)\b", "Cannot"),
        (r"^I can\b", "Can"),
        (r"^I (?:won't|will not)\b", "Will not"),
        (r"^(?:I'll|I will)\b", "Will"),
        (r"^(?:I'd|I would)\b", "Would"),
        (r"^I (?:was)\b", "Was"),
        (r"^I (?:wasn't|was not)\b", "Was not"),
        (r"^I (?:didn't|did not|didnt)\b", "Did not"),
        (r"^I (?:haven't|have not|havent)\b", "Has not"),
        (r"^I (?:wasn't|was not|wasnt)\b", "Was not"),
    )
)
_PRONOUNS_THIRD = (
    (r"\bI'm\b|\bI am\b", "they're"),
    (r"\bI've\b", "they've"),
    (r"\bI'd\b", "they'd"),
    (r"\bI'll\b", "they'll"),
    (r"\bI was\b", "they were"),
    (r"\bI\b", "they"),
    (r"\bmy\b", "their"),
    (r"\bmine\b", "theirs"),
    (r"\bmyself\b", "themselves"),
    (r"\bme\b", "them"),
    # "we" is the user's household or team; the third person keeps it unresolved rather than guessing which
    (r"\bwe're\b|\bwe are\b", "they're"),
    (r"\bwe've\b", "they've"),
    (r"\bwe\b", "they"),
    (r"\bour\b", "their"),
    (r"\bours\b", "theirs"),
    (r"(?-i:\b[Uu]s\b)", "them"),  # "US" in capitals is the country: "I'm in the US now"
)
_PRONOUNS_USER = (
    (r"\bI'm\b|\bI am\b|\bIm\b", "the user is"),
    (r"\bI (?:don't|dont|do not)\b", "the user does not"),
    (r"\bI (?:haven't|havent|have not)\b", "the user has not"),
    (r"\bI (?:didn't|didnt|did not)\b", "the user did not"),
    (r"\bI (?:wasn't|wasnt|was not)\b", "the user was not"),
    (r"\bI was\b", "the user was"),
    (r"\bI do\b", "the user does"),
    (r"\bI've\b|\bI have\b", "the user has"),
    (r"\bI\b", "the user"),
    (r"\bmy\b", "the user's"),
    (r"\bmine\b", "the user's"),
    (r"\bmyself\b", "themselves"),
    (r"\bme\b", "the user"),
)


def _substitute(text: str, table: tuple[tuple[str, str], ...]) -> str:
    for pattern, replacement in table:
        text = re.sub(pattern, replacement, text, flags=re.I)
    return text


_NOT_CONJUGATED = frozenset("was were am is are had has does not also".split())
_MODALS = frozenset("can can't cannot could would should will won't must might may do don't did didn't".split())
_USER_VERB_RE = re.compile(rf"\bI\s+((?:(?:{_ADVERBS})\s+)*)([A-Za-z'-]+)", re.I)


def _verb_for(verb: str) -> str:
    lower = verb.lower()
    if (
        "'" in lower
        or lower in _NOT_CONJUGATED
        or lower in _MODALS
        or (lower.endswith("ed") and not lower.endswith("eed"))
        or lower in _IRREGULAR_PAST
    ):
        return verb
    return third_person_verb(verb)


def _about_user(text: str) -> str:
    """First person -> "the user", with the verb after "I" agreeing ("when I send" -> "when the user sends")."""
    text = _substitute(text, _PRONOUNS_USER[:8])  # the auxiliaries first: "I don't" -> "the user does not"
    text = _USER_VERB_RE.sub(lambda m: f"the user {m.group(1)}{_verb_for(m.group(2))}", text)
    return _substitute(text, _PRONOUNS_USER[8:])


def _tidy(text: str) -> str:
    text = _LEAD_RE.sub("", " ".join(text.split())).strip(" ,;:-")
    return re.sub(r"[\s.!]+$", "", text)


def _and_verbs(rest: str) -> str:
    return _AND_VERB_RE.sub(lambda m: f"{m.group(1)}{third_person_verb(m.group(2))}", rest)


def _third_person_start(text: str) -> str:
    for pattern, replacement in _FIXED_STARTS:
        if match := pattern.match(text):
            return replacement + _substitute(_and_verbs(text[match.end() :]), _PRONOUNS_THIRD)
    if match := _START_RE.match(text):
        adverbs, verb, rest = match.groups()
        verb = _verb_for(verb)
        return capitalise(f"{adverbs}{verb}{_substitute(_and_verbs(rest), _PRONOUNS_THIRD)}")
    return capitalise(_substitute(text, _PRONOUNS_THIRD))


_IRREGULAR_PAST = frozenset(
    "went got had made took became left moved began bought came found gave kept knew lost met paid ran said sold "
    "sent spent stopped switched quit grew wrote thought told felt tore broke wore swore drove rode ate fell flew "
    "forgot froze hid hurt led put read rose saw shook spoke stole stood struck swam threw understood woke won".split()
)


def profile_text(clause: str) -> str:
    """The clause as a profile, in the third person, with its own words (negation kept)."""
    return clip(_third_person_start(_tidy(clause)), MAX_CONTENT_CHARS)


def playbook_parts(clause: str) -> tuple[str | None, str]:
    """(trigger or None, content) of an instruction clause: its condition becomes the trigger."""
    text = _POLITE_RE.sub("", _tidy(clause))
    text = _TAIL_RE.sub("", text)
    trigger = None
    if match := _CONDITION_RE.match(text):
        trigger, text = capitalise(_about_user(match.group(1))), match.group(2)
        text = _POLITE_RE.sub("", text)
    content = capitalise(_about_user(text.strip()))
    return trigger, clip(content, MAX_CONTENT_CHARS)
