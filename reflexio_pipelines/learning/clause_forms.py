"""The forms of a user clause that the built-in extractor's structural checks read (builtin.py) — HEURISTICS on
the wording, each with the clause-head reading or the measured count that made it necessary. Pure regular expressions
and thresholds: no model, no I/O."""

from __future__ import annotations

import re

#: Greetings and fillers in front of a clause: the head reads the clause without them ("Hi, I live in Paris" is a
#: fact, "Quick update: I moved to Berlin" a move); the user's words are kept whole.
LEAD_IN_RE = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|ok|okay|so|well|oh|ah|also|and|plus|btw|by the way|fyi|quick update|update|actually|"
    r"one more thing|just so you know|for the record|for future reference|heads[- ]up|good news|news|fun fact|"
    r"(?:keep|bear) in mind(?: that)?|worth (?:saying|noting|mentioning|knowing)(?: that)?|(?:please )?note that|"
    r"slight problem|one thing)\b"
    r"[\s,:!.—–-]*)+",
    re.I,
)
#: A profile is what the user says about themselves or their own: a clause with no first person is no profile
#: ("Deploy the api", "Austin weather is warmer").
#: "Me" counts too ("sesame puts me in hospital"), except after a verb of asking ("Give me some synonyms").
ABOUT_USER_RE = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|my|me|mine|myself|we|we're|we've|our|ours|us)\b", re.I)
#: Chat drops the "I" before a verb of change ("Moved over to Firefox completely", "Traded the Passat in for a Tesla").
IMPLICIT_I_RE = re.compile(
    r"^(?:just |finally |recently |also )?(?:moved|switched|traded|sold|swapped|quit|left|stopped|gave up|got rid of|"
    r"ditched|dropped|replaced|migrated|upgraded|downgraded|retired|graduated)\b"
    # and before what the user is doing these days ("training at home now with two kettlebells": fact 0.86), not a
    # gerund that is the subject ("Running is my thing") or a noun ("something", "morning")
    r"|^(?:just |now |currently |still |mostly )?(?!(?:some|any|every|no)thing|morning|evening|spring|ceiling)"
    r"[a-z]+ing\b(?!\s+(?:is|are|was|were|has|makes)\b)",
    re.I,
)
#: A clause opening with the user as its subject ("I've gone vegetarian …", "we're on Go now").
OWN_OPENING_RE = re.compile(r"^(?:i|i'm|im|i've|ive|we|we're|we've|my|our)\b", re.I)


def first_person(text: str) -> bool:
    """The user speaks of themselves or their own, with an "I" said or dropped."""
    return bool(ABOUT_USER_RE.search(text) or IMPLICIT_I_RE.match(LEAD_IN_RE.sub("", text)))


ASKING_RE = re.compile(
    r"^(?:please\s+)?(?:give|show|tell|send|make|write|list|help|find|book|get|let|call|check|explain|draft|"
    r"summari[sz]e|translate|fix|create|suggest|recommend|plan|teach|remind|bring|buy|order|email|text|ping|"
    r"walk|take|pick|read|sing|generate|compose|prepare)\b",
    re.I,
)
#: Other imperative openings: no profile either ("Please answer me in French, I'm practising" tells the agent what
#: to do; it says nothing the user is). Unlike an asking verb, such a clause after an agent turn may well be a
#: correction ("use us-west-2").
TELLING_RE = re.compile(
    r"^(?:please\s+)?(?:answer|reply|respond|speak|talk|use|keep|put|add|include|avoid|stop|switch|format|address)\b",
    re.I,
)
#: A rule for every conversation says so ("always", "never", "from now on", "don't", …); without such a word, and not
#: answering an agent turn, an imperative is a one-off request ("Please deploy the billing service to production")
#: unless the head is all but certain.
STANDING_RE = re.compile(
    r"\b(?:always|never|from now on|from here on|going forward|in future|in the future|every time|whenever|by default|"
    r"next time|"
    r"each time|any ?time|don't|do not|dont|stop|avoid|only|make sure|remember|instead|rather|no more|prefer|"
    r"anymore|any more)\b",
    re.I,
)
SURE = 0.95
#: The words of standing that say "every time" outright; a condition on the user's own next asks says it too ("when i
#: ask what to cook, only suggest stuff under 30 min": request 0.99 by the head).
ALWAYS_RE = re.compile(
    r"\b(?:always|never(?!\s+mind)|from now on|from here on|going forward|in future|in the future|every time|"
    r"whenever|by default|each time|any ?time|next time|(?:when|if) (?:i|we) (?:ask|share|send|paste|request))\b",
    re.I,
)
EVERY_TIME_RE = re.compile(rf"{ALWAYS_RE.pattern}|\b(?:anymore|any more|no more)\b", re.I)
#: A clause opening with "always"/"never"/"don't" and a verb is an imperative whatever its words are about; in the
#: training split 35 of 37 such clauses are instructions or revocations.
STANDING_IMPERATIVE_RE = re.compile(
    r"^(?:please\s+)?(?:always|never|don't|do not|dont)\s+(?!(?:i|we|you|mind|worry|forget)\b)\w+", re.I
)
#: A situation that comes back, said before such an imperative ("When you create a file, always forward it to …",
#: "whenever I paste a receipt, don't comment"): the clause is a standing instruction whatever kind the head gives it
#: (the averaged head reads the first social 0.56 / instruction 0.27). In the training split all 5 clauses of this
#: form are instructions (none in the development split).
STANDING_CONDITION_RE = re.compile(
    r"^(?:when(?:ever)?|every time|each time|any ?time|if)\s+(?:you|i|we)\b[^,;]{1,80}[,;]\s*", re.I
)


def conditioned_imperative(bare: str) -> bool:
    """Whether a clause (lead-in removed) is a standing imperative under a recurring situation."""
    condition = STANDING_CONDITION_RE.match(bare)
    return condition is not None and bool(STANDING_IMPERATIVE_RE.match(bare[condition.end() :]))


#: An asking verb without a word of standing is a one-off task ("give me a 5 letter word that starts with l …") unless it
#: points back at the answer it corrects ("make it shorter", "write them in British English", "again", "instead"; not "that", mostly a relative pronoun) or
#: says how to address the user; the head reads "does not contain p, o, t" after an agent turn as a correction (1.0).
POINTS_BACK_RE = re.compile(
    r"\b(?:it|these|those|them|again|instead|anymore|shorter|longer|simpler)\b|"
    r"^(?:please\s+)?call me\b",
    re.I,
)
#: Clauses that ask without a question mark: inverted questions ("do you like dragons"), wonderings ("I'm wondering
#: when I can see it"); and wishes ("I wish I had a dog"), which say what is not so. None states a lasting fact.
ASKS_OR_WISHES_RE = re.compile(
    r"^(?:(?:me too|same here|same)\b[\s,.!]*)?(?:"
    r"(?:do|does|did|are|is|was|were|can|could|would|will|have|has|should|shall)\s+(?:you|u|i|we|they|he|she|it|there)\b|"
    r"(?:what|how|why|where|who|which)\b|"
    r"(?:i|we)\s+(?:wonder|wish|was wondering|am wondering|'m wondering|were wondering)\b|i'm\s+wondering\b)",
    re.I,
)
#: A clause that scopes itself to the task at hand ("No, for this one use us-east-1", "skip the intro just this once")
#: overrides a rule for now; it teaches no rule for every conversation unless it also says "every time".
ONE_OFF_RE = re.compile(
    r"\b(?:for this one|this one time|this time|just this once|just for (?:now|today|this)|for now|"
    r"for this (?:task|request|message|email|reply|answer|launch|release|project|ticket|run))\b",
    re.I,
)
#: How the agent should answer (form, language, units), told plainly ("Please keep your answers in numbered lists",
#: "Reply in English please", "Keep things formal with me"), holds beyond the task at hand without a word of
#: standing; the head reads such clauses as instructions below SURE (0.6-0.9) when they open a conversation.
STYLE_SUBJECTS = frozenset({"answer_format", "language"})
UNITS_RE = re.compile(r"\b(?:celsius|fahrenheit|metric|imperial|kilomet(?:er|re)s|miles|24-hour|12-hour)\b", re.I)
#: Least instruction + correction probability for such a clause to be a rule.
STYLE_RULE_FLOOR = 0.5
#: Least rule probability for a first-person-less clause answering the agent to be taken as a correction.
PLAYBOOK_FALLBACK = 0.3
#: A change told as a story of long ago ("when I was a kid we moved to Ohio") no longer holds.
STORY_RE = re.compile(
    r"\b(?:when i was|as a (?:kid|child|teen)|growing up|back in|years ago|in (?:college|school|high school)|"
    r"used to|once upon|my (?:childhood|youth))\b",
    re.I,
)
#: Least profile probability for a change of the user's own that the head read as a story to be kept as a fact.
CHANGE_PROFILE_FLOOR = 0.2
#: One thing given up for another ("I ditched my iPhone for a Pixel": hypothetical 0.86, profile kinds 0.0): the
#: form of a lasting change whatever mass the head gives the profile kinds.
REPLACEMENT_RE = re.compile(
    r"\b(?:ditched|swapped|traded|replaced|switched|exchanged|sold|gave up)\b(?:\s+\S+){1,5}?\s+"
    r"(?:for|with|to|and (?:got|bought|went with))\b",
    re.I,
)
#: How the user is right now, as a greeting's answer ("i am fine tanks", "hi, my day isgreat": fact 0.6-0.9 by the
#: head; 9 of the 37 items learned from 300 public chat sessions), and an agreement whose subject is the partner's
#: ("Me too, they make the best companions"): nothing lasting is said of the user.
PASSING_STATE_RE = re.compile(
    r"^(?:(?:i am|i'm|im|i've been|ive been|feeling|my day(?: is|'s| was| has been)?)\s*(?:doing\s+)?"
    r"(?:very |really |pretty |so |quite |just )?(?:good|well|fine|great|ok|okay|alright|awesome|wonderful|tired|"
    r"bored|busy|not bad|not too bad)(?:[\s,.!]+(?:thanks|thank you|tanks|thx|and you|you|today|now|too))*[\s,.!?]*$"
    r"|(?:me too|same here|me neither|same)\b[\s,.!]*(?:they|it|it's|that|this|those|these|he|she)\b)",
    re.I,
)
#: What the task at hand should be ("something i can prep sunday night and just grab"): said in the first person, yet
#: no lasting fact. ("I'll …" is not such a form: "I'll bring Rosie, she's my 12 year old lab and has hip dysplasia".)
TASK_AT_HAND_RE = re.compile(r"^(?:something|somewhere|someone|somebody)\b", re.I)
#: Profiles about a passing state expire ("I'd like green tea today"): the original's time-to-live values.
TIME_BOUND: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening)|right now|at the moment)\b", re.I), "one_day"),
    (re.compile(r"\b(?:this week|these days off)\b", re.I), "one_week"),
    (re.compile(r"\bthis month\b", re.I), "one_month"),
)


def time_to_live(text: str) -> str:
    """How long what a clause says holds: the first `TIME_BOUND` it names, else "infinity"."""
    return next((ttl for pattern, ttl in TIME_BOUND if pattern.search(text)), "infinity")


REVOKE_LEAD_RE = re.compile(
    r"^(?:please\s+|you can\s+|you may\s+|feel free to\s+)?"
    r"(?:forget|ignore|scrap|drop|disregard|never mind|nevermind|cancel|undo|withdraw|delete|remove|"
    r"override|you can stop|stop|relax|loosen|ease up on)"
    r"(?:\s+(?:about|that|what i (?:said|told you) (?:about|regarding)))?\s+",
    re.I,
)

#: The explicit withdrawals, which withdraw what they name whatever the head reads ("stop", "remove", "drop" also
#: start one-off edits of the answer at hand, so they count only when the head says revocation).
WITHDRAW_RE = re.compile(
    r"^(?:please\s+|you can\s+|you may\s+|feel free to\s+)?(?:forget|disregard|scrap|relax|loosen|ease up on)\s+"
    r"(?:the|that|my|your|about|all|those|these)\b",
    re.I,
)
#: Where a revocation's target ends: its clause ("stop doing bullet points now, prose is fine" names bullet points).
TARGET_END_RE = re.compile(r"\s+(?:now|any ?more|please)\b|\s*[,;:—–]\s*|\s+-\s+", re.I)
#: A rule that says it holds everywhere takes no trigger from the request it corrects ("not anywhere, ever").
EVERYWHERE_RE = re.compile(
    r"\b(?:anywhere|everywhere|ever|in anything|in everything|across the board|no matter what)\b", re.I
)
#: A word pointing back at something named before it.
PRONOUN_RE = re.compile(r"\b(?:it|them|those|these)\b", re.I)
#: Words that name an instruction rather than the user's life.
NAMES_A_RULE_RE = re.compile(r"\b(?:rule|rules|instruction|instructions|what i (?:said|told you)|that one)\b", re.I)


def asks(text: str) -> bool:
    """A question, with or without its mark, or a wish (see `ASKS_OR_WISHES_RE`): it states no lasting preference
    or rule, whatever the head would say."""
    return text.rstrip().endswith("?") or bool(ASKS_OR_WISHES_RE.match(LEAD_IN_RE.sub("", text.strip())))


def told(text: str) -> str:
    """What the classifier reads of a clause: the clause without a lead-in ("keep in mind", "worth saying")."""
    return LEAD_IN_RE.sub("", text) or text
