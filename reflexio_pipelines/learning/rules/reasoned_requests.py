"""Requests with a lasting reason (HEURISTIC: surface wording only): "Book me an aisle seat - I always get up a lot on
long flights", "Prices in euros, please - I don't think in dollars". The request alone would be a one-off task; the
reason says it holds every time (a habit, a constraint, something the user never or always does), so the request
becomes a standing rule carrying its reason. A reason bound to the moment ("I'm at the office today", "it's our
anniversary") makes nothing durable.
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.rules.facts import QUESTION_START_RE, third_person
from reflexio_pipelines.learning.rules.feedback import PLEASE_TAIL_RE, rule_sentence
from reflexio_pipelines.learning.rules.text import capitalise, first_word, word_set
from reflexio_pipelines.learning.rules.triggers import IMPERATIVE_VERBS, strip_polite

#: The request, a separator, then the reason ("…, I never check my personal inbox", "… because I'm allergic").
_SPLIT_RE = re.compile(
    r"^(?P<request>.+?)(?:\s+[-\u2013\u2014]+\s+|,\s+(?:because\s+|since\s+|as\s+)?|\s+(?:because|since)\s+)"
    r"(?P<reason>(?:I|I'm|I've|my|My|it's|It's|they|They|we|We)\b.+)$"
)
_HABIT = (
    r"(?:always|never|usually|normally|generally|rarely|hardly ever|only|can't|cannot|can not|don't|do not|"
    r"won't|doesn't|does not|no longer)"
)
#: A reason that holds beyond this conversation: a habit or inability of the user or of someone the request serves
#: ("my manager doesn't read English"), a condition ("I'm allergic"), or a language the user does not think in.
_LASTING_REASON_RE = re.compile(
    rf"^(?:I(?: really| just| basically)? {_HABIT}\b"
    rf"|I(?:'m| am) (?:never|always|allergic|intolerant|(?:lactose|gluten) intolerant|vegetarian|vegan|colou?r-?blind|"
    rf"deaf|diabetic|dyslexic|left-handed|not a (?:morning|night) person)\b"
    rf"|my (?:[\w'-]+ ){{1,2}}{_HABIT}\b|my (?:[\w'-]+ ){{1,2}}(?:is|are) allergic\b"
    rf"|(?:it's|it is) not my (?:first|native|main) language\b|(?:they|we) {_HABIT}\b)",
    re.I,
)
#: Words that bind a reason (or the request) to this occasion only.
_OCCASION_RE = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:time|morning|afternoon|evening|week|weekend|once)|right now|"
    r"at the moment|for now|just once|yet|anniversary|birthday)\b",
    re.I,
)
#: A request with no verb that asks for a form of the answers ("Prices in euros, please", "Window table if you can").
_NOUN_REQUEST_RE = re.compile(
    r"^(?P<ask>(?!I\b|my\b|we\b)[A-Za-z][^,?]*?)(?:,?\s+(?:please|if you can|if possible))$", re.I
)
_MAX_REQUEST_WORDS = 16
#: First words of a request phrased as an instruction: the task verbs, and the verbs of asking for a form.
_REQUEST_OPENERS = IMPERATIVE_VERBS | word_set(
    "send text call leave skip keep use write give show put stick avoid don't never always"
)


def _request_rule(request: str) -> str | None:
    """The request as a rule ("Book me an aisle seat …" -> "Book the user an aisle seat …"), or None when it is no
    request (a statement, a question that is not a polite ask)."""
    text, polite = strip_polite(request.strip())
    polite = polite or bool(PLEASE_TAIL_RE.search(text))
    text = PLEASE_TAIL_RE.sub("", text).strip(" ,.!")
    if text.endswith("?"):
        if not polite:
            return None
        text = text.rstrip("?").strip()
    if not text or len(text.split()) > _MAX_REQUEST_WORDS or _OCCASION_RE.search(text):
        return None
    if first_word(text) not in _REQUEST_OPENERS:
        if match := _NOUN_REQUEST_RE.match(request.strip(" .!")):
            text = match.group("ask")
        elif not (polite and re.match(r"^(?:no|nothing|only|just)\b", text, re.I)):
            return None
    if QUESTION_START_RE.match(text):
        return None
    text = re.sub(r"\bme\b", "the user", re.sub(r"\bmy\b", "the user's", text))
    return capitalise(text)


def reasoned_rule(sentence: str) -> tuple[str, str | None] | None:
    """(rule, situation) for a request with a lasting reason in one sentence ("Prices in euros, please - I don't
    think in dollars" -> "Prices in euros (they don't think in dollars)."), or None. The situation is the request
    when it opens with a verb ("Book the user an aisle seat …": the trigger is booking, not the reason)."""
    match = _SPLIT_RE.match(sentence.strip())
    if not match:
        return None
    reason = match.group("reason").strip(" .!")
    if not _LASTING_REASON_RE.match(reason) or _OCCASION_RE.search(reason):
        return None
    rule = _request_rule(match.group("request"))
    if rule is None:
        return None
    situation = rule if first_word(rule) in IMPERATIVE_VERBS else None
    return rule_sentence(f"{rule} ({third_person(reason)})"), situation
