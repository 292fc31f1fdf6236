"""A development corpus for search_interactions built from public conversations we did not write:
Synthetic-Persona-Chat (SPC; google-research-datasets, pinned in reflexio_pipelines/learning/clauses/corpus.py,
CC BY 4.0), read at run time from the fetched mirror, never copied into git (like benchmarks/data/clauses/public/).

Per user, a long history between two named speakers: ~22 SPC conversations (~29 turns each) as sessions on successive
dates. SPC persona lines recur across conversations (494 distinct lines in the 1,000 valid ones), so a user is
anchored on one conversation's persona and plays that side in every other conversation whose persona shares a line
with it (the rest of the sessions: random conversations): the anchor facts come back across sessions, the others are
said once. Its partner (one name) plays the other side. Dev draws from the valid file, held-out from the test file.

Questions come from persona lines the owner restates in a turn (two content words shared with the line, or the
one word of a one-word line, words as clauses/labels.py cuts them; the turn is not a question), rewritten by rule
into a question in other words ("my favorite band is aerosmith" -> "Which band does Maya like best?", "i have two
dogs" -> "How many dogs does Maya have?", "i work at a bank" -> "What does Maya do for a living?"). Kept only when
every evidence turn shares at most half of the question's content words, so BM25 does not win by construction; a
question text asked of two different lines is dropped (it would have two answers). Categories:

- single_hop: the line restated once in the whole history;
- multi_hop: restated in 2-4 sessions; every restating turn is evidence (recall counts the share found);
- temporal: restated in sessions of different months; the question names one month ("..., as Maya said in May
  2023?") and its turn is the evidence;
- speaker: restated once, and the other speaker also said something sharing two of the line's content words: the
  name decides.

Limits, honestly: the conversations are LLM-generated from personas (SPC), so facts are stated more plainly and
more often than in real chat, and small talk is polite rather than rambling; the partner's persona changes from
session to session under one name; restatement detection is lexical, so a fact said only in other words is not
found (neither as evidence nor as a distractor: an unlisted restatement ranked first counts as a miss); the rewrite
rules cover the frequent persona frames only (favourite, have N, job, home, origin, car, family, age, dislikes),
and some questions are vague where their line is ("What does Maya do for a living?" for "i am a christian" is
filtered out only when no job word matches).
"""

from __future__ import annotations

import csv
import io
import random
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

from benchmarks.interaction_corpus import PAIRS, Conversation, Question
from reflexio_pipelines.learning.clauses.corpus import SPC_FILES, SPC_REPO, git_show
from reflexio_pipelines.learning.clauses.labels import content_words

MIRROR = Path("/work/.mirror")
SPLITS = {"dev": SPC_FILES[0], "heldout": SPC_FILES[1]}  # valid / test
SESSIONS = 22
START = datetime(2023, 1, 8, 18, 0, tzinfo=timezone.utc)
MAX_PER_CATEGORY = 8  # per user, so the frequent frames do not swamp a category
MAX_EVIDENCE = 4  # turns of a multi_hop question (a line restated in more sessions is a temporal question only)

_JOB = r"(?:nurse|chef|cook|coach|student|lawyer|doctor|mechanic|pilot|vet|guide|\w+(?:er|or|ist|ian))"
# (pattern on the lower-cased persona line, question with {n} the speaker's name); the first match wins. Frames say
# what the line states; topics (after them) only what it is about, for the many "i like / love / enjoy ..." lines.
FRAMES: list[tuple[str, str]] = [
    (r"^my favou?rite (?P<x>[a-z]+(?: [a-z]+)?) (?:is|are) ", "Which {x} does {n} like best?"),
    (r"^i (?:have|own) (?:two|three|four|five|six|\d+) (?P<x>[a-z]+)$", "How many {x} does {n} have?"),
    (r"^i (?:work|have worked) |^i am an? (?:[a-z]+ ){0,3}" + _JOB + r"\b", "What does {n} do for a living?"),
    (r"^i (?:now )?live (?:in|on|near) ", "Where is {n}'s home these days?"),
    (r"^i (?:was born|grew up|was raised) ", "Where does {n} come from originally?"),
    (
        r"^i (?:drive|own) an? .*\b(?:car|truck|van|jeep|ford|toyota|honda|bmw|mustang|prius)",
        "What vehicle does {n} have?",
    ),
    (
        r"^(?:my (?:mother|father|mom|dad|parents|wife|husband|brother|sister)|i am (?:married|divorced|single|engaged))",
        "What did {n} tell about relatives?",
    ),
    (r"^i (?:am|turned) (?:\w+ )?(?:\d+|[a-z]+ty(?:-[a-z]+)?|[a-z]+teen) years? old", "How old is {n}?"),
    (
        r"^i (?:hate|dislike|do not like|don't like|can't stand|am afraid of|am terrified of) ",
        "What can {n} not stand?",
    ),
    (r"\b(?:dogs?|cats?|pets?|horses?|parrots?|rabbits?|hamsters?|puppy|kitten)\b", "Which animals live with {n}?"),
    (
        r"^i (?:play|played) (?:the )?(?:guitar|piano|violin|drums|cello|flute|saxophone|trumpet|bass)",
        "Which instrument is {n} into?",
    ),
    (r"^i (?:volunteer|help out) ", "Where does {n} give time for free?"),
    (r"\b(?:school|college|university|grade|study|studying|studied|degree)\b", "What did {n} say about education?"),
    (
        r"\b(?:basketball|football|baseball|soccer|running|swimming|swim|hiking|tennis|golf|olympics|skiing|yoga|sky diving|surfing|sports?)\b",
        "Which sport is {n} into?",
    ),
    (
        r"\b(?:cook|cooking|bake|baking|grill|paella|coffees?|pizza|donuts|eat|eating|food)\b",
        "What does {n} enjoy in the kitchen or at the table?",
    ),
    (r"\b(?:chess|board games|video games|games|gaming)\b", "What does {n} play to pass the time?"),
    (r"\b(?:read|reading|books?|novels?)\b", "What did {n} say about literature?"),
    (r"\b(?:sing|singing|songs?|concerts?|music|dance|dancing)\b", "What kind of music or performing is {n} fond of?"),
    (r"\b(?:travel|travelling|traveling|disney|trips?|vacation)\b", "Where does {n} go on holiday?"),
]
_FRAMES = [(re.compile(pattern), question) for pattern, question in FRAMES]


def question_for(line: str, name: str) -> str | None:
    """The rule-based question asking for persona `line` of speaker `name`, or None when no frame fits."""
    text = line.strip().lower().rstrip(".!")
    for pattern, template in _FRAMES:
        found = pattern.search(text)
        if found:
            return template.format(n=name, **found.groupdict())
    return None


def restates(turn: str, line: str) -> bool:
    """Two content words shared with the line, or all of a one-word line's. Stricter than clauses/labels.py's
    "or half of the line's": with it "I have two vintage mustangs" restated "i have two dogs" and "That's a nice
    color!" restated "i hate the color orange" (in a sample of 18 dev questions, 3 had such evidence)."""
    line_words = content_words(line)
    shared = len(content_words(turn) & line_words)
    return shared >= 2 or shared == len(line_words) == 1


def _fair(question: str, name: str, turns: list[str]) -> bool:
    """Every evidence turn shares at most half of the question's content words (the names aside)."""
    asked = content_words(question) - content_words(name)
    return bool(asked) and all(len(asked & content_words(t)) * 2 <= len(asked) for t in turns)


Row = tuple[list[str], list[str], list[tuple[int, str]]]  # persona lines of side 0 and 1, turns (side, text)


def read_rows(show: Callable[[str], str], path: str) -> Iterator[Row]:
    """SPC conversations: both personas (lines) and the turns, each with its side (0 = "User 1")."""
    for i, row in enumerate(csv.reader(io.StringIO(show(path)))):
        if i == 0 or len(row) < 3:
            continue
        turns = []
        for line in row[2].split("\n"):
            found = re.match(r"^\s*User ([12]):\s*(.*)$", line)
            if found and found[2].strip():
                turns.append((int(found[1]) - 1, found[2].strip()))
        personas = [[p.strip() for p in cell.split("\n") if p.strip()] for cell in row[:2]]
        if len(turns) >= 10:
            yield personas[0], personas[1], turns


def _sessions(rows: list[Row], used: set[int], rng: random.Random) -> list[tuple[int, int]]:
    """(row, side the user plays): the anchor's persona-sharing conversations, then random ones to SESSIONS."""
    anchor = rng.choice([i for i in range(len(rows)) if i not in used])
    lines = {p.lower() for p in rows[anchor][0]}
    picked = [(anchor, 0)]
    sharing = []
    for i, (p0, p1, _) in enumerate(rows):
        if i == anchor or i in used:
            continue
        overlap = [len(lines & {p.lower() for p in side}) for side in (p0, p1)]
        if max(overlap):
            sharing.append((-max(overlap), rng.random(), i, overlap.index(max(overlap))))
    picked += [(i, side) for *_, i, side in sorted(sharing)[: SESSIONS * 2 // 3]]
    rest = [i for i in range(len(rows)) if i not in used and i not in {p for p, _ in picked}]
    picked += [(i, rng.randrange(2)) for i in rng.sample(rest, SESSIONS - len(picked))]
    used.update(i for i, _ in picked)
    rng.shuffle(picked)
    return picked


def conversation(rows: list[Row], index: int, used: set[int], rng: random.Random) -> Conversation:
    """User `index`'s history and questions (deterministic for the rng's seed and the rows)."""
    me, partner = PAIRS[index % len(PAIRS)]
    c = Conversation(user_id=f"spc-{index}", speakers=(me, partner))
    mentions: dict[tuple[str, str], list[str]] = {}  # (speaker, persona line) -> restating turn keys
    texts: dict[str, tuple[str, str]] = {}  # turn key -> (speaker, text)
    day = START
    for session, (row, side) in enumerate(_sessions(rows, used, rng)):
        personas, turns = rows[row][:2], rows[row][2]
        names = {side: me, 1 - side: partner}
        c.sessions.append([(names[s], text) for s, text in turns])
        c.dates.append(day)
        day += timedelta(days=rng.choice([9, 12, 14, 16, 19]))
        for t, (s, text) in enumerate(turns):
            texts[f"s{session}:t{t}"] = (names[s], text)
            for line in personas[s]:
                if not text.rstrip().endswith("?") and restates(text, line):
                    mentions.setdefault((names[s], line.lower().rstrip(". ")), []).append(f"s{session}:t{t}")
    bases: dict[str, set[str]] = {}  # question -> the lines it asks for
    for name, line in mentions:
        question = question_for(line, name)
        if question is not None:
            bases.setdefault(question, set()).add(line)
    per: dict[str, int] = {}
    for (name, line), keys in sorted(mentions.items()):
        question = question_for(line, name)
        if question is None or len(bases[question]) > 1 or not _fair(question, name, [texts[k][1] for k in keys]):
            continue  # no frame; two lines, one question: two answers; or the wording gives the answer away
        for found in _questions(c, question, name, line, keys, texts, rng):
            if per.get(found.category, 0) < MAX_PER_CATEGORY:
                per[found.category] = per.get(found.category, 0) + 1
                c.questions.append(found)
    return c


def _questions(
    c: Conversation,
    question: str,
    name: str,
    line: str,
    keys: list[str],
    texts: dict[str, tuple[str, str]],
    rng: random.Random,
) -> list[Question]:
    """The questions one restated persona line gives (see the module docstring for the categories)."""
    sessions = sorted({int(k[1:].split(":")[0]) for k in keys})
    out = []
    if len(keys) == 1:
        other = next(n for n in c.speakers if n != name)
        echoed = any(n == other and restates(text, line) for n, text in texts.values())
        out.append(Question(question, "speaker" if echoed else "single_hop", keys))
    elif len(sessions) == len(keys) <= MAX_EVIDENCE:
        out.append(Question(question, "multi_hop", keys))
    months: dict[str, list[str]] = {}
    for key in keys:
        months.setdefault(f"{c.dates[int(key[1:].split(':')[0])]:%B %Y}", []).append(key)
    once = [(month, found[0]) for month, found in months.items() if len(found) == 1]
    if len(months) > 1 and once:
        month, key = rng.choice(once)
        out.append(Question(f"{question.rstrip('?')}, as {name} said in {month}?", "temporal", [key]))
    return out


def corpus(users: int = 10, seed: int = 7, split: str = "dev", mirror: Path = MIRROR) -> list[Conversation]:
    """`users` histories from SPC's `split` file (dev: valid, heldout: test), users disjoint in conversations."""
    rows = list(read_rows(git_show(mirror, *SPC_REPO), SPLITS[split]))
    rng, used = random.Random(seed), set()
    return [conversation(rows, i, used, rng) for i in range(users)]
