"""Who and when a question about a conversation names: a heuristic parse of speakers and time ranges.

Heuristic, and labelled so wherever it is used: a speaker is any word of the question equal to one of the
conversation's roles ("Caroline", "Caroline's", "the assistant"); a time range is an explicit month and/or year
("in May 2023", "during 2022", "last May", "before June 2023", "after March"), or "last week / month / year".
Relative expressions are read against a reference instant (the conversation's latest turn: questions about a
conversation are asked after it). Events as anchors ("before the move") are not parsed: the turns' windows of
neighbours carry that context instead (search/conversation.py). Search uses both as extra ranked legs fused with the
hybrid results (boosts), never as filters, so a wrong parse reorders results but never hides one.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name and name.lower() != "may"})
_WORD = re.compile(r"[^\W\d_]+(?:'s)?|\d{4}", re.UNICODE)
_MONTH_YEAR = re.compile(
    r"\b(?P<rel>before|after|since|until|last|in|during|of)?\s*(?P<month>"
    + "|".join(sorted(_MONTHS, key=len, reverse=True))
    + r")\.?(?:\s+(?P<year>(?:19|20)\d{2}))?\b",
    re.IGNORECASE | re.ASCII,  # ASCII case-folding: "Auguſt" matched and missed the _MONTHS lookup (a 500)
)
_YEAR = re.compile(
    r"\b(?P<rel>before|after|since|until|in|during|of)?\s*(?P<year>(?:19|20)\d{2})\b", re.IGNORECASE | re.ASCII
)
_LAST = re.compile(r"\b(?:last|past|previous)\s+(?P<unit>week|month|year)\b", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class TurnQuery:
    """What a question names besides its words: speakers (roles as stored) and a time range (unix seconds)."""

    speakers: tuple[str, ...] = ()
    start: int | None = None
    end: int | None = None

    @property
    def timed(self) -> bool:
        return self.start is not None or self.end is not None


def parse_turn_query(query: str, roles: Iterable[str], reference: int) -> TurnQuery:
    """The speakers among `roles` the query names and the time range it names, relative to `reference` (unix
    seconds). A heuristic (see the module docstring)."""
    return TurnQuery(speakers_in(query, roles), *time_range(query, reference)[0])


def topic_of(query: str) -> str:
    """The query without its time expression: what a turn must be about, embedded for the vector legs (the time
    range is a leg of its own; a date's words only blur the embedding)."""
    span = time_range(query, 0)[1]
    topic = " ".join((query[: span[0]] + " " + query[span[1] :]).split()) if span else query
    return topic or query


def speakers_in(query: str, roles: Iterable[str]) -> tuple[str, ...]:
    """The roles named in `query` (a word equal to the role, possessive allowed), in the order of `roles`."""
    words = {w.casefold().removesuffix("'s") for w in _WORD.findall(query.replace("\u2019", "'"))}
    return tuple(dict.fromkeys(r for r in roles if r and r.casefold() in words))


Range = tuple[int | None, int | None]


def time_range(query: str, reference: int) -> tuple[Range, tuple[int, int] | None]:
    """((start, end) in unix seconds, (first, last) character span) of the first time expression in `query`;
    ((None, None), None) without one."""
    ref = datetime.fromtimestamp(int(reference), tz=timezone.utc)
    found = _LAST.search(query)
    if found:
        days = {"week": 7, "month": 31, "year": 366}[found["unit"].lower()]
        return (int((ref - timedelta(days=days)).timestamp()), int(ref.timestamp())), found.span()
    for found in _MONTH_YEAR.finditer(query):
        if _is_modal_may(found):
            continue
        month = _MONTHS[found["month"].lower()]
        year = int(found["year"]) if found["year"] else _latest_year_of(month, ref)
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
        return _relate(found["rel"], start, end), found.span()
    found = _YEAR.search(query)
    if found:
        year = int(found["year"])
        return _relate(
            found["rel"], datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
        ), found.span()
    return (None, None), None


def _is_modal_may(found: re.Match) -> bool:
    """ "May" as a verb ("may I ask", "she may have"): a month only with a year, a preposition, or capitalised
    mid-sentence."""
    if found["month"].lower() != "may" or found["year"] or found["rel"]:
        return False
    return found["month"] == "may" or found.start("month") == 0


def _latest_year_of(month: int, ref: datetime) -> int:
    """The year of the latest such month not after the reference ("in May" asked in March 2024 is May 2023)."""
    return ref.year if month <= ref.month else ref.year - 1


def _relate(relation: str | None, start: datetime, end: datetime) -> Range:
    rel = (relation or "").lower()
    if rel in ("before", "until"):
        return None, int(start.timestamp()) - 1
    if rel in ("after", "since"):
        return int(end.timestamp()) if rel == "after" else int(start.timestamp()), None
    return int(start.timestamp()), int(end.timestamp()) - 1
