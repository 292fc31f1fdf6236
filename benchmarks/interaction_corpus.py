"""A deterministic corpus of long, multi-session conversations between two people, with questions about what was
said and the turns that hold each answer (benchmarks/interaction_search.py).

Written for this project (no public dataset is downloaded): per pair of speakers, ~26 dated sessions of ~27 turns
(chit-chat from templates, and facts planted in a few turns per session), and questions in five categories:

- single_hop: one turn answers, in other words than the question's ("What is the name of Maya's dog?" ← "we adopted
  a beagle puppy ... called him Biscuit");
- multi_hop: two turns in different sessions answer together ("Where is the sister who became a nurse moving to?");
- temporal: the session's date decides which of several similar turns answers ("What did Maya cook in May 2023?");
- speaker: both speakers say something similar, the question names one ("Which instrument is Leo learning?");
- context: the answer turn only makes sense after the turn before it ("How long did Maya take to finish the
  marathon?" ← "Four hours and ten minutes, my knees hated me", after "Did you run the Lisbon marathon?").

Hard negatives are planted on purpose: the other speaker has a pet, a sibling and an instrument too; the same
activity recurs in other months; chit-chat reuses the questions' everyday words (weekend, trip, work, cooking).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

PAIRS = [
    ("Maya", "Leo"),
    ("Priya", "Tom"),
    ("Ines", "Karl"),
    ("Amara", "Jonas"),
    ("Sofia", "Ravi"),
    ("Hana", "Marcus"),
    ("Elena", "Diego"),
    ("Nora", "Felix"),
    ("Yuki", "Omar"),
    ("Clara", "Ben"),
]
SESSIONS = 26
TURNS_PER_SESSION = 27
START = datetime(2023, 1, 8, 18, 0, tzinfo=timezone.utc)

BREEDS = ["beagle", "corgi", "labrador", "dachshund", "border collie", "poodle", "greyhound", "terrier"]
PET_NAMES = ["Biscuit", "Pepper", "Juniper", "Moose", "Waffles", "Ziggy", "Clementine", "Noodle", "Pickle", "Rocco"]
CAT_NAMES = ["Miso", "Tofu", "Luna", "Saffron", "Oreo", "Mochi", "Pumpkin", "Figaro", "Nimbus", "Ginger"]
SIBLINGS = ["Anya", "Beatriz", "Chloe", "Dalia", "Esme", "Freya", "Greta", "Hedda", "Iris", "Jolene"]
BROTHERS = ["Arturo", "Bastian", "Cormac", "Dmitri", "Emil", "Florian", "Gideon", "Hugo", "Ivo", "Julian"]
JOBS = [
    ("nurse", "intensive care unit"),
    ("architect", "firm that designs libraries"),
    ("pilot", "regional airline"),
    ("pharmacist", "chain of pharmacies"),
    ("translator", "publishing house"),
    ("veterinarian", "animal clinic"),
    ("electrician", "solar installation company"),
    ("paramedic", "ambulance service"),
    ("geologist", "mining survey company"),
    ("chef", "seafood restaurant"),
]
CITIES = [
    "Lisbon",
    "Krakow",
    "Porto",
    "Seville",
    "Ghent",
    "Tallinn",
    "Bergen",
    "Trieste",
    "Valencia",
    "Salzburg",
    "Bologna",
    "Ljubljana",
    "Dubrovnik",
    "Lyon",
    "Gdansk",
    "Zurich",
]
INSTRUMENTS = ["cello", "banjo", "trumpet", "ukulele", "clarinet", "harp", "saxophone", "accordion", "violin", "oboe"]
DISHES = [
    "a mushroom risotto",
    "pad thai",
    "a lamb tagine",
    "homemade ramen",
    "a spinach lasagna",
    "paella",
    "butter chicken",
    "a lemon tart",
    "dumplings",
    "a beef stew",
    "shakshuka",
    "gnocchi",
]
PLANTS = [
    "tomatoes",
    "sunflowers",
    "lavender",
    "strawberries",
    "tulip bulbs",
    "basil",
    "a fig tree",
    "peonies",
    "courgettes",
    "rosemary",
    "blueberry bushes",
    "dahlias",
]
FOODS = [
    "grilled sardines",
    "pierogi",
    "custard tarts",
    "tapas",
    "waffles",
    "smoked fish",
    "truffle pasta",
    "oysters",
    "cheese fondue",
    "pastries",
]
BOOKS = [
    ("The Salt Road", "caravans crossing the desert"),
    ("Glass Orchard", "a family of glassblowers"),
    ("North of Quiet", "a lighthouse keeper"),
    ("The Copper Hour", "a heist in a clock factory"),
    ("Paper Tides", "two rival cartographers"),
    ("Winter Ledger", "a bookkeeper who finds a fortune"),
    ("Ember Street", "a fire brigade in the 1920s"),
    ("The Long Meadow", "a shepherd and his daughter"),
    ("Saltwater Psalms", "a fishing village"),
    ("Iron Lullaby", "a train driver's last journey"),
]
TIMES = [
    "four hours and ten minutes",
    "three hours fifty-two",
    "just under five hours",
    "four hours flat",
    "four hours and twenty-five minutes",
    "three hours and forty minutes",
]
INJURIES = [
    ("ankle", "playing squash"),
    ("wrist", "bouldering at the climbing gym"),
    ("knee", "skiing"),
    ("shoulder", "at volleyball practice"),
    ("back", "moving a sofa"),
    ("thumb", "playing basketball"),
]

# Chit-chat is composed (opener + clause + when, or a short reply): thousands of distinct lines, reusing the everyday
# words questions use (cook, trip, work, weekend, read, play) without answering them.
OPENERS = ["", "Honestly, ", "So ", "Anyway, ", "Ugh, ", "Well, ", "Funny thing, ", "You know what, ", "Oh, "]
CLAUSES = [
    "work has been non-stop",
    "the weather has been awful",
    "I finally cleaned out the garage",
    "we had friends over for dinner",
    "my phone screen cracked again",
    "I went for a long walk by the river",
    "the tram strike made me late",
    "I started a puzzle with two thousand pieces",
    "I'm trying to cook more instead of ordering food",
    "the new season of that show came out",
    "my neighbour's renovation is so loud",
    "I tried a new coffee place downtown",
    "I've been sleeping badly",
    "we keep talking about planning a trip",
    "traffic was terrible",
    "I watched a documentary about octopuses",
    "work sent us to a boring training day",
    "the kids next door got a trampoline",
    "I repainted the hallway",
    "my laptop died in the middle of a call",
    "I reorganised the bookshelf",
    "the bakery on the corner closed",
    "I signed the lease renewal",
    "the heating broke again",
    "I ran into an old classmate at the market",
    "I binged a podcast about shipwrecks",
    "my manager moved our weekly meeting",
    "the cat from upstairs visited",
    "I spent ages queueing at the post office",
    "we played board games until midnight",
    "I read the news and felt tired",
    "the gym was packed",
    "I forgot my umbrella twice",
    "my sister called to complain about her landlord",
    "I finally fixed the squeaky door",
    "we ordered pizza and watched a film",
    "the train was cancelled",
    "I did my taxes",
]
WHEN = [
    "",
    " this week",
    " on Saturday",
    " yesterday",
    " last night",
    " this morning",
    " since Monday",
    " over the weekend",
    " again",
]
REPLIES = [
    "That sounds lovely.",
    "Ha, typical.",
    "Oh no, that's annoying.",
    "Good for you!",
    "Tell me more.",
    "I can imagine.",
    "Same here, honestly.",
    "No way!",
    "That's wild.",
    "Fair enough.",
    "Classic.",
    "Sounds exhausting.",
    "Oh nice!",
    "Poor you.",
    "Haha, of course.",
]


def _filler(rng: random.Random) -> str:
    """One line of chit-chat: a composed statement, or (one in three) a short reply."""
    if rng.random() < 1 / 3:
        return rng.choice(REPLIES)
    line = f"{rng.choice(OPENERS)}{rng.choice(CLAUSES)}{rng.choice(WHEN)}."
    return line[0].upper() + line[1:]


@dataclass
class Question:
    question: str
    category: str
    evidence: list[str]  # turn keys "s<session>:t<turn>"


@dataclass
class Conversation:
    """One pair's sessions (lists of (speaker, text)) with dates, and questions on them."""

    user_id: str
    speakers: tuple[str, str]
    sessions: list[list[tuple[str, str]]] = field(default_factory=list)
    dates: list[datetime] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


class _Builder:
    """Plants facts into sessions: `say` appends a turn to a session and returns its key."""

    def __init__(self, conversation: Conversation, rng: random.Random) -> None:
        self.c, self.rng = conversation, rng

    def say(self, session: int, speaker: str, text: str) -> str:
        self.c.sessions[session].append((speaker, text))
        return f"s{session}:t{len(self.c.sessions[session]) - 1}"

    def chat(self, session: int, n: int) -> None:
        a, b = self.c.speakers
        for _ in range(n):
            self.say(session, (a, b)[len(self.c.sessions[session]) % 2], _filler(self.rng))

    def ask(self, question: str, category: str, *evidence: str) -> None:
        self.c.questions.append(Question(question, category, list(evidence)))


def _month(date: datetime) -> str:
    return f"{date:%B %Y}"


def _distinct_months(dates: list[datetime], n: int, rng: random.Random) -> list[int]:
    """`n` sessions in pairwise different months: a question naming the month has one answer."""
    by_month: dict[str, list[int]] = {}
    for session, date in enumerate(dates):
        by_month.setdefault(_month(date), []).append(session)
    return sorted(rng.choice(sessions) for sessions in rng.sample(list(by_month.values()), n))


def conversation(index: int, seed: int = 7) -> Conversation:
    """Pair `index`'s conversation (deterministic for (index, seed))."""
    rng = random.Random(seed * 1000 + index)
    a, b = PAIRS[index % len(PAIRS)]
    c = Conversation(user_id=f"pair-{index}", speakers=(a, b))
    day = START
    for _ in range(SESSIONS):
        c.sessions.append([])
        c.dates.append(day)
        day += timedelta(days=rng.choice([9, 12, 14, 16, 19]))
    bld = _Builder(c, rng)
    slots = list(range(SESSIONS))
    rng.shuffle(slots)
    pick = iter(slots + slots)  # each fact in its own session while sessions last
    pick_any = lambda: next(pick)  # noqa: E731

    for session in range(SESSIONS):
        bld.say(session, b, rng.choice(["Hey! How have you been?", "Hi, long time no talk!", "Evening! What's new?"]))
        bld.say(session, a, rng.choice(["Good, busy as always.", "Not bad at all, you?", "Tired but happy."]))
        bld.chat(session, 4)

    # single_hop + speaker hard negatives: a dog for A, a cat for B
    breed, dog = rng.choice(BREEDS), rng.choice(PET_NAMES)
    e = bld.say(pick_any(), a, f"We finally adopted a {breed} puppy last weekend, we called him {dog}.")
    bld.ask(f"What is the name of {a}'s dog?", "single_hop", e)
    bld.ask(f"Which pet did {a} get and what breed is it?", "single_hop", e)
    cat = rng.choice(CAT_NAMES)
    e2 = bld.say(pick_any(), b, f"{cat} knocked my plants over again, that cat is a menace.")
    bld.ask(f"What is {b}'s cat called?", "single_hop", e2)

    # sibling job, later the move: single_hop and multi_hop
    sister, (job, employer) = rng.choice(SIBLINGS), rng.choice(JOBS)
    first, second = sorted(rng.sample(range(SESSIONS), 2))
    e_job = bld.say(first, a, f"My sister {sister} just got hired as a {job} at a {employer}.")
    city = rng.choice(CITIES)
    e_move = bld.say(second, a, f"{sister} is packing boxes, she's relocating to {city} at the end of the month.")
    bld.ask(f"What does {a}'s sister do for a living?", "single_hop", e_job)
    bld.ask(f"Which city is the sister who became a {job} moving to, and what is her name?", "multi_hop", e_job, e_move)
    brother, (bjob, _employer) = rng.choice(BROTHERS), rng.choice([j for j in JOBS if j[0] != job])
    e_bro = bld.say(pick_any(), b, f"My brother {brother} quit his job, he wants to be a {bjob} now.")
    bld.ask(f"What career does {b}'s brother want to switch to?", "single_hop", e_bro)

    # speaker: both learn an instrument
    ia, ib = rng.sample(INSTRUMENTS, 2)
    e_a = bld.say(pick_any(), a, f"I signed up for {ia} lessons at the community centre, Tuesdays after work.")
    e_b = bld.say(pick_any(), b, f"I've been practising the {ib} every evening, my neighbours must hate me.")
    bld.ask(f"Which instrument is {a} learning to play?", "speaker", e_a)
    bld.ask(f"What instrument does {b} practise?", "speaker", e_b)
    da, db = rng.sample(BOOKS, 2)
    e_ra = bld.say(pick_any(), a, f"I'm halfway through {da[0]}, it's about {da[1]}.")
    e_rb = bld.say(pick_any(), b, f"I couldn't put down {db[0]}, a novel about {db[1]}.")
    bld.ask(f"What novel was {b} reading?", "speaker", e_rb)
    bld.ask(f"What is the book {a} was reading about?", "speaker", e_ra)

    # temporal: A cooks in three sessions, B plants in three sessions
    for _activity, speaker, items, template, question in (
        ("cook", a, DISHES, "Tried making {x} from scratch yesterday, it took forever.", "What did {p} cook in {m}?"),
        ("plant", b, PLANTS, "Spent Sunday in the garden putting in {x}.", "What did {p} plant in the garden in {m}?"),
    ):
        for session, item in zip(_distinct_months(c.dates, 3, rng), rng.sample(items, 3)):
            e = bld.say(session, speaker, template.format(x=item))
            bld.ask(question.format(p=speaker, m=_month(c.dates[session])), "temporal", e)

    # context: the answer turn does not name what it answers
    trip, food = rng.choice(CITIES), rng.choice(FOODS)
    s = pick_any()
    bld.say(s, b, f"So how was {trip}? You were there for a week, right?")
    e = bld.say(s, a, f"Amazing, the {food} alone was worth it, and we walked everywhere.")
    bld.ask(f"What food did {a} enjoy on the trip to {trip}?", "context", e)
    s = pick_any()
    race = rng.choice([x for x in CITIES if x != trip])
    bld.say(s, a, f"Did you end up running the {race} marathon?")
    e = bld.say(s, b, f"I did! Finished in {rng.choice(TIMES)}, my knees still hate me.")
    bld.ask(f"How long did it take {b} to finish the marathon in {race}?", "context", e)
    s = pick_any()
    part, how = rng.choice(INJURIES)
    bld.say(s, b, "Why were you limping at the party?")
    e = bld.say(s, a, f"I hurt my {part} {how}, it's healing slowly.")
    bld.ask(f"How did {a} get injured?", "context", e)

    # multi_hop across speakers: the book recommendation
    s1, s2 = sorted(rng.sample(range(SESSIONS), 2))
    e1 = bld.say(s1, a, f"You have to read {da[0]}, honestly the best thing I read this year.")
    e2 = bld.say(s2, b, f"I started {da[0]} because you kept recommending it, you were right.")
    bld.ask(f"Which book did {a} recommend that {b} ended up reading?", "multi_hop", e1, e2)

    for session in range(SESSIONS):
        bld.chat(session, TURNS_PER_SESSION - len(c.sessions[session]))
    return c


def corpus(users: int = 10, seed: int = 7) -> list[Conversation]:
    """`users` pairs' conversations."""
    return [conversation(i, seed) for i in range(users)]
