"""What a learned item is about, and where it matters — a HEURISTIC lexicon, not a model.

Each subject names a family of lasting facts and constraints (where the user lives, what they eat, what they are
allergic to, how they travel, the tools their team uses, the form answers should take, …) with the words that
show an item is about it, and the situations in which it matters. Two uses, one table:

- supersession (learn.py): a new statement said with words of change ("I moved to…", "switched to…", "from now on",
  "no longer") replaces the user's earlier items on the same subject. Sentence embeddings alone cannot tell: "Lives
  in Boston" / "Moved to Denver last month" have cosine 0.29, "Uses VS Code" / "Switched to Neovim" 0.16, while
  "Has a dog" / "Now also has a cat" (an addition, not a change) have 0.56;
- serving (search/situations.py): a request close to one of a subject's situation phrases brings the user's items
  on that subject with it, so "Is allergic to shellfish" is served for "recommend a restaurant for our
  anniversary" and "Always needs an aisle seat" for "book me a flight to Rome", though no word of the request is in
  the item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reflexio_pipelines.learning.rules.text import content_tokens


@dataclass(frozen=True)
class Subject:
    name: str
    cues: re.Pattern[str]
    situations: str  # comma-separated phrases naming the requests where the subject matters


def _subject(name: str, cues: str, situations: str) -> Subject:
    return Subject(name, re.compile(rf"\b(?:{cues})", re.I), situations)


_FOOD_SITUATIONS = "restaurants, dining out, recipes, cooking, meals, dishes, menus, food orders, groceries, snacks"
SUBJECTS: tuple[Subject, ...] = (
    _subject(
        "location",
        r"liv(?:e|es|ing) in|moved (?:to|from|back)|relocat|based in|home ?town|my (?:city|neighbou?rhood|apartment|"
        r"flat|house)|apartment|neighbou?rhood|commut|feels like home|is home|(?:the|our|my) move\b|"
        # the kinds of home a move ends in ("got the keys to our little farmhouse outside Asheville")
        r"farmhouse|townhouse|condo\b|bungalow|cottage|cabin\b|studio (?:apartment|flat)|keys to (?:the|our|my)|"
        r"\brent(?:s|ing)? (?:a|an|the)\b|mortgage|landlord",
        "nearby places, neighbourhood, weather, commute, shipping address, moving, scheduling calls across time zones",
    ),
    _subject(
        "diet",
        r"vegetarian|vegan|pescatarian|keto|paleo|carnivore|plant[- ]based|meat|beef|pork|steak|chicken|fish|"
        r"seafood|dairy|eggs?\b|halal|kosher|diet|protein|sugar|carbs|calorie|fasting|don't eat|do not eat|eats?\b|"
        r"cheese|milk|butter|yogh?urt|bread|pasta|pizza|burger|bacon|ham\b|lamb|tofu|coffee|\btea\b|chocolate|"
        r"sweets|dessert|cook|grill|bbq|barbecue|brisket|ribeye|food|caffeine|decaf",
        _FOOD_SITUATIONS,
    ),
    _subject(
        "allergy_health",
        r"allerg|intoleran|celiac|coeliac|gluten|lactose|peanut|nuts?\b|shellfish|diabet|asthma|migraine|"
        r"medication|pregnan|injur|chronic|seasick|motion sick|blood pressure|cholesterol|anxiety|adhd",
        f"{_FOOD_SITUATIONS}, travel, trips, activities, exercise, medicine, health advice",
    ),
    _subject(
        "travel",
        r"aisle|window seat|legroom|seat\b|seats\b|fly|flying|flights?|airline|layover|red-?eye|trains?\b|"
        r"hotel|hostel|road trip|jet ?lag|wheelchair|mobility|stairs|crowd",
        "flights, trains, travel booking, trips, hotels, seats, tickets, itineraries, vacations",
    ),
    _subject(
        "accessibility",
        r"screen reader|blind|low vision|eyesight|font size|large (?:text|font)|dyslex|deaf|hard of hearing|"
        r"captions|subtitles|colou?r ?blind|high contrast|accessib",
        "documents, slides, websites, videos, emails, formatting, design, reading",
    ),
    _subject(
        "language",
        r"speak|language|native|fluent|english|spanish|french|german|portuguese|italian|mandarin|chinese|japanese|"
        r"hindi|arabic|russian|translat",
        "replies, emails, documents, translations, messages",
    ),
    _subject(
        "schedule",
        r"time ?zone|(?:pacific|eastern|central|mountain|atlantic) time|\butc|\bgmt|\bpst|\best\b|\bcet|"
        r"morning person|night owl|mornings|evenings|weekends|"
        r"working hours|work hours|office hours|meetings?|calendar|available|availability|shift|9 ?(?:to|-) ?5|"
        r"nine to five|monday to friday|weekdays",
        "meetings, scheduling, calendar invites, reminders, deadlines, calls, appointments",
    ),
    _subject(
        "editor",
        r"vs ?code|visual studio|neovim|\bvim\b|emacs|intellij|pycharm|webstorm|sublime|xcode|editor|\bide\b|"
        r"terminal|shell\b|zsh|bash\b|keybind|shortcut",
        "editor shortcuts, keybindings, setup, configuration",
    ),
    _subject(
        "devices",
        r"iphone|\bios\b|android|\bpixel\b|samsung|galaxy|smartphone|\bphone\b|laptop|macbook|\bmac\b|windows \d|"
        r"windows\b(?! seat)|linux|ubuntu|fedora|debian|chromebook|ipad|tablet|\bchrome\b|firefox|safari|"
        r"\bedge\b|brave\b|browser",
        "phone settings, laptop setup, apps, installing software, browser settings, troubleshooting devices",
    ),
    _subject(
        "work_tools",
        r"jira|\blinear\b|asana|trello|notion\b|slack\b|microsoft teams|confluence|github|gitlab|bitbucket|clickup",
        "tickets, issues, project tracking, team messages, documentation, task boards",
    ),
    _subject(
        "exercise",
        r"running|\bruns? (?:\w+ )?times\b|\bruns? (?:a )?\d+ ?(?:k|km|miles?)\b|jogg|swim|\bgym\b|cycling|"
        r"stationary bike|yoga|pilates|lifting|weights\b|workouts?\b|"
        r"marathon|triathlon",
        "workouts, exercise plans, training, fitness, sports, weekend activities",
    ),
    _subject(
        "vehicle",
        r"\bcar\b|\bdrives? (?:an?|the|my)\b|honda|toyota|tesla|\bford\b|\bkia\b|hyundai|volkswagen|\bbmw\b|"
        r"civic|corolla|electric (?:car|vehicle)|\bev\d*\b|motorbike|motorcycle|scooter|"
        # the commonest makes, named without the word "car" ("picked up a used 2017 Subaru Outback on Saturday")
        r"subaru|mazda|nissan|\baudi\b|mercedes|volvo|\bjeep\b|chevy|chevrolet|prius|\bvw\b|peugeot|renault|"
        r"skoda|fiat|suv\b|pickup truck|minivan",
        "car maintenance, driving, road trips, parking, fuel, charging",
    ),
    _subject(
        "stack",
        r"kotlin|java\b|python|golang|\bgo\b shop|rust\b|typescript|javascript|react|angular|vue|svelte|django|"
        r"flask|fastapi|rails|spring|postgres|mysql|mongo|redis|kafka|aws|gcp|google cloud|azure|kubernetes|k8s|docker|"
        r"terraform|pnpm|npm|yarn|gradle|maven|monorepo|swift|c\+\+|c#|\.net|php|scala|elixir",
        "code, functions, scripts, libraries, builds, tests, deployments, examples, pull requests, cloud storage, "
        "hosting, databases",
    ),
    _subject(
        "code_review",
        r"code review|review(?:ing|s)? (?:the |my |our |any |every )?(?:code|pull requests?|prs?|diffs?|files?)|"
        r"pull requests?|\bprs?\b|\bdiffs?\b|line[- ]by[- ]line|security review|security (?:scan|check)|"
        r"vulnerabilit",
        "code reviews, pull requests, diffs, reviewing changes",
    ),
    _subject(
        "answer_format",
        r"bullet|paragraph|concise|brief|short(?:er)? (?:answers?|replies|responses)|tone|formal|casual|"
        r"emoji|markdown|tables?\b|summar|tl;?dr|length|word count|headings|numbered|round(?:ed)? to|"
        r"walk-?through|step[- ]by[- ]step|just the code|code only|only the code|explanations?\b|jargon|big words|"
        r"(?:\d+|one|two|three|four|five) (?:sentences|lines|words)\b|sentences? max|under \d+ words",
        "answers, replies, summaries, reports, emails, documents, explanations",
    ),
    _subject(
        "role",
        r"developer|engineer|designer|manager|analyst|scientist|teach(?:er|es|ing)?\b|lectur|professor|tutor|"
        r"nurs(?:e|es|ing)\b|doctor|lawyer|student|job|"
        r"paramedic|firefighter|pilot|chef|accountant|consultant|freelanc|self-employed|unemployed|"
        r"full[- ]stack|backend|back-end|frontend|front-end|devops|\brole\b|position|works? (?:as|at|for|in)|"
        r"\bqa\b|quality assurance|promoted|promotion|"
        r"employer|company|team\b",
        "work tasks, code, career, documents for work",
    ),
    _subject(
        "budget",
        r"budget|cheap|expensive|afford|spend|price|cost|\$\d|€\d|£\d|frugal|splurge|finance|salary|pay for|"
        r"subscriptions?\b|paid (?:apps?|plans?|tiers?)|free (?:apps?|tiers?|versions?|only)|one-off purchases?",
        "shopping, purchases, gifts, budgets, prices, travel booking, apps, software, subscriptions",
    ),
    _subject(
        "family",
        r"\bkids?\b|children|daughter|\bson\b|wife|husband|partner|toddler|baby|\bdogs?\b|\bcats?\b|\bpets?\b|"
        r"girlfriend|boyfriend|fianc|roommate|flatmate|li(?:ve|ves|ving) alone|"
        r"parents|mom|mum|mother|father|dad|grand|newborn|pregnan|expecting (?:a|our|my)\b",
        "family trips, gifts, kids activities, home, weekends, babysitting",
    ),
    _subject(
        "name",
        r"call (?:me|the user)\b|(?:go|goes|going) by\b|my name|their name|name is|nickname|address (?:me|the user) as|"
        r"pronouns",
        "greetings, emails, letters, messages, introductions, invitations, cards",
    ),
    _subject(
        "values",
        r"halal|kosher|religio|church|mosque|temple|pray|ethic|sustainab|eco[- ]friendly|carbon|cruelty|"
        r"fair trade|second[- ]hand|alcohol|sober|don't drink|do not drink|\bwine\b|\bbeer\b|drinking",
        "purchases, travel, food, drinks, events, gifts",
    ),
)

#: Words of change: the statement replaces an earlier one rather than adding to it.
CHANGE_RE = re.compile(
    r"\b(?:moved|moving|relocated|switched|switching|no longer|not any ?more|any ?more|now\b|actually|instead|"
    r"these days|changed|started|stopped|quit|became|become|turned|gone|went|override|overrid|from now on|"
    r"from here on|from this point on|going forward|new (?:job|role|team|city|place|home)|left|scratch|replace|gave up|given up|dropped|ditched|"
    r"sold|traded|outgr[eo]wn?|passed away|died|graduated|retired|divorced|got rid of|wiped|migrat\w*|rewr[io]t\w*|"
    r"(?:go|went|gone|going) "
    r"(?:fully |full |completely |totally )?(?:vegan|vegetarian|keto|pescatarian|plant))",
    re.I,
)
#: Words of addition: "now also has a cat" adds to "has a dog", it does not replace it.
ADDITION_RE = re.compile(r"\b(?:also|too|as well|another|in addition|additionally|plus)\b", re.I)
#: Words that say something ended, which an addition word cannot undo ("has given up fish as well, fully vegetarian
#: these days" replaces "Is pescatarian").
ENDED_RE = re.compile(
    r"\b(?:no longer|not any ?more|any ?more|these days|switched|moved|relocated|quit|stopped|gave up|given up|"
    r"instead|from now on|from here on|from this point on|override|overrid|replaced?|is gone|are gone|dropped|ditched|left|sold|outgr[eo]wn?|"
    r"passed away|died|graduated|retired|got rid of|wiped|migrated off|migrating off)\b",
    re.I,
)


#: A capitalised word inside an item (not its first word): a name the item is about ("Has a golden retriever named
#: Max", "Lives in Boston"). Months, days and "I" are capitalised without naming anything an item is about.
_NAME_RE = re.compile(r"(?<=\s)[A-Z][a-z]{2,}\b")
_NOT_NAMES = frozenset(
    "January February March April May June July August September October November December "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday The They Their".split()
)


def names_in(item: str) -> frozenset[str]:
    """The names an item mentions after its first word (heuristic: capitalisation)."""
    return frozenset(name for name in _NAME_RE.findall(item) if name not in _NOT_NAMES)


#: Stems too general to say two items are about one thing: verbs of liking and habit, time words, the third-person
#: rewrite's words, and the hedges of chat ("Is learning piano" / "gave up on the piano" share "piano"; "Prefers
#: short answers" / "from now on I prefer tables" share only these).
_GENERIC_STEMS = frozenset(
    "prefer like love hate want need use us usual always never most mostly get got go went make take has have had "
    "user thing everyth someth day days week month year time now today still just realli honest lot bit kind "
    "new old good great fine answer repl respons work job".split()
)


def things_named(text: str) -> frozenset[str]:
    """The content words (stems) of a text that name a thing rather than a liking, a habit or a time (heuristic)."""
    return frozenset(t for t in content_tokens(text) if t not in _GENERIC_STEMS and not (t.isdigit() and len(t) < 3))


_NEGATION_RE = re.compile(
    r"\b(?:not|no|never|nor|without|cannot|none)\b|n't\b|\b(?:dont|doesnt|didnt|cant|wont|isnt|arent)\b", re.I
)


def negated(text: str) -> bool:
    """Whether a text says something is not so (heuristic: a negation word anywhere in it)."""
    return bool(_NEGATION_RE.search(text))


def subjects_of(text: str) -> frozenset[str]:
    """The subjects an item's wording is about (empty when none of the lexicon's words are in it)."""
    return frozenset(s.name for s in SUBJECTS if s.cues.search(text))


def states_a_change(said: str) -> bool:
    """True when the user's words announce a change rather than an addition ("I moved to Denver", "from now on")."""
    return bool(CHANGE_RE.search(said)) and (bool(ENDED_RE.search(said)) or not ADDITION_RE.search(said))


#: A statement whose subject is another person ("my sister just moved to Denver", "my boss switched to a Mac"):
#: their change is not the user's, whatever its words.
_SOMEONE_ELSE_RE = re.compile(
    r"^\W*(?:(?:so|and|but|oh|btw|well),?\s+)?(?:(?:he|she)\b|(?:my|our|a)\s+(?:\w+\s+)?(?:sister|brother|sibling|mom|mum|"
    r"mother|dad|father|parents?|wife|husband|partner|boyfriend|girlfriend|fianc[eé]e?|boss|manager|friend|"
    r"colleague|coworker|co-worker|roommate|flatmate|neighbou?r|son|daughter|kids?|children|cousin|aunt|uncle|"
    r"grand(?:ma|pa|mother|father|parents)|in-laws?|team ?mate|client|landlord)s?\b)",
    re.I,
)


#: The user in what another person does ("my girlfriend moved in with me" changes the user's household).
_THE_USER_RE = re.compile(r"\b(?:i|me|we|us|i'm|we're|mine|ours)\b", re.I)


def about_someone_else(said: str) -> bool:
    """True when the user's words tell of another person and not of the user ("my sister just moved to Denver";
    not "my girlfriend moved in with me")."""
    match = _SOMEONE_ELSE_RE.match(said)
    return match is not None and not _THE_USER_RE.search(said[match.end() :])


#: What another person likes, wants, thinks or says: their view, not the user's ("my dad can't stand spicy food").
_VIEW_RE = re.compile(
    r"\b(?:likes?|loves?|hates?|can'?t stand|cannot stand|prefers?|wants?|wanted|thinks?|thought|says?|said|"
    r"believes?|obsessed|enjoys?|dislikes?|insists?|swears? by|is (?:really )?into|are (?:really )?into)\b",
    re.I,
)


def someone_elses_view(said: str) -> bool:
    """True when the words tell what another person likes, wants, thinks or says (someone else's view: the clause
    kinds' "hypothetical"); a fact about them ("my wife is pregnant") is not one."""
    return bool(_SOMEONE_ELSE_RE.match(said)) and bool(_VIEW_RE.search(said))
