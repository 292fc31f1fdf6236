"""Facts in first-person statements (HEURISTIC: surface wording only): one clause -> third-person facts, those in a
typed slot phrased canonically so the slot is recognised (learning/slots.py).
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.rules.text import capitalise, first_word, third_person_verb, word_set
from reflexio_pipelines.learning.slots import DIET_REGIMES, LANGUAGES, ROLE_NOUN_RE, TZ_VALUE, typed_slots

CLAUSE_SPLIT_RE = re.compile(
    r"\s*[;:]\s+|,?\s+(?:and|but|so|also)\s+(?=(?:I|my|My|we|We)\b)|,\s+(?=(?:I|my|My)\b)|,\s+so\s+|"
    r"\s+[-\u2013\u2014]+\s+"
)
LEAD_IN_RE = re.compile(
    r"^(?:(?:also|and|but|so|well|actually|btw|fyi|oh|hi|hey|hello|ok|okay|right|yes|yeah|anyway|anyhow|in any case|"
    r"either way|"
    r"these days|nowadays|big news|good news|quick note|heads up|update|just so you know|for the record|"
    r"by the way|for what it's worth|(?:please )?(?:note|keep in mind|be aware|bear in mind|remember)(?: that)?|"
    r"(?:just )?(?:a )?(?:quick )?(?:note|reminder|fyi))\b[,!.:]?\s+)+",
    re.I,
)
#: Asides after a fact that are not part of it ("I live in Porto, by the way").
_ASIDE_TAIL_RE = re.compile(
    r"(?:,?\s+(?:by the way|btw|just so you know|for what it's worth|fyi|for the record|if that matters|"
    r"if that helps|if it matters|as you know|so keep that in mind|keep that in mind))+\s*$",
    re.I,
)
QUESTION_START_RE = re.compile(
    r"^(?:can|could|may|might|should|shall|would|will|do|does|did|is|are|am|was|were|what|how|why|when|where|who|"
    r"which|whom|whose)\b",
    re.I,
)
_REQUEST_RE = re.compile(
    r"\b(?:can|could|may|should|shall) i\b|\bi(?: really)? (?:want|need|would like|'d like|wish) (?:you|u) to\b|"
    r"\bplease\b|\blet me know\b",
    re.I,
)
# "I'm <word>" that describes a passing state or the conversation itself, not a stable fact about the user
_TRANSIENT_STATE = word_set(
    "sure sorry afraid done here back confused still just trying going asking wondering curious looking getting "
    "having thinking hoping glad happy fine good ok okay ready stuck lost about currently now not unable able so "
    "very really pretty quite too also gonna new interested planning tired busy late early off away out home "
    "heading leaving running waiting excited worried nervous bored hungry sick exhausted all"
)
_TRANSIENT_PHRASES = ("a bit ", "a little ", "kind of ", "sort of ")
# The object of "I like/prefer/use …" that refers to the conversation, not to the user's world
_DEICTIC_OBJECTS = word_set("it that this these those your yours them")
_PRONOUN_SWAPS = (
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bmine\b", re.I), "theirs"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
    (re.compile(r"\bI'm\b"), "they're"),
    (re.compile(r"\bI am\b"), "they are"),
    (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\byour\b", re.I), "the agent's"),
    (re.compile(r"\byou\b", re.I), "the agent"),
)
_VERB_PREFIXES = {
    "work": "Works",
    "live": "Lives",
    "prefer": "Prefers",
    "like": "Likes",
    "love": "Loves",
    "use": "Uses",
    "speak": "Speaks",
    "hate": "Dislikes",
    "dislike": "Dislikes",
    "enjoy": "Enjoys",
    "teach": "Teaches",
    "study": "Studies",
}
# ASCII case-folding: "İ" and "ſ" match "i" and "s" case-insensitively but do not lower-case to them (the lookup
# in _VERB_PREFIXES raised KeyError on "I lİke tea")
_VERB_RE = re.compile(
    r"^I (work|live|prefer|like|love|use|speak|hate|dislike|enjoy|teach|study)\b\s*(.*)$", re.I | re.A
)
_DISLIKE_RE = re.compile(
    r"^I (?:really )?(?:can't stand|cannot stand|don't like|do not like|don't enjoy)\s+(.+)$", re.I
)
_NOT_EAT_RE = re.compile(r"^I (?:don't|do not|no longer|never|can't|cannot) (eat|drink)\s+(.+)$", re.I)
_BE_RE = re.compile(r"^I(?:'m| am)\s+(.*)$", re.I)
_ADVERB_RE = re.compile(r"^I (always|usually|never|often|mostly|only|rarely)\s+([A-Za-z]+)\b\s*(.*)$", re.I)
_MY_RE = re.compile(r"^my\s+([\w'-]+(?:\s+[\w'-]+){0,3}?)\s+(is|are)\s+(.+)$", re.I)
_CALL_ME_RE = re.compile(
    r"^(?:you can |please |just |feel free to )?call me\s+(?!(?:a|an|the|back|later|tomorrow|tonight|when|if|at|on|in)\b)"
    r"(.+)$|"
    r"^I (?:go by|prefer to be called|like to be called)\s+(.+)$|"
    r"^I(?:'d| would) (?:prefer|like|rather)(?: it)?(?: if)? (?:you|u)(?: to)? call(?:ed)? me\s+(.+)$",
    re.I,
)
_NAME_IS_RE = re.compile(r"^(?i:my )?(?i:name's|name is)\s+([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)$")
_HERE_NAME_RE = re.compile(r"^([A-Z][a-z]+) here(?:[,!. ].*)?$")
_THIS_IS_RE = re.compile(r"^(?i:this is|it's) ([A-Z][a-z]+)(?: (?:from|at|in|here)\b.*)?$")
_NOT_NAMES = word_set("Nobody Everyone Everybody Someone Somebody Anyone Me Us Nothing It This That Back Still")
#: The periods and months a told change is dated by, the same before and after the statement.
_PERIODS = r"week|month|year|spring|summer|autumn|fall|winter"
_MONTHS = r"January|February|March|April|May|June|July|August|September|October|November|December"
_TIME_TAIL_RE = re.compile(
    rf"(?:,?\s+(?:last|this|next) (?:{_PERIODS})|,?\s+recently|,?\s+yesterday|"
    r",?\s+now|,?\s+these days|,?\s+nowadays|,?\s+again|,?\s+for good|,?\s+a (?:few|couple of) (?:days|weeks|months) "
    rf"ago|,?\s+since (?:last )?\w+|,?\s+in (?:{_MONTHS}|\d{{4}})|,?\s+at the moment|,?\s+today|"
    r",?\s+this (?:morning|afternoon|evening))+$",
    re.I,
)
_NOW_TAIL_RE = re.compile(r"(?:,?\s+(?:right now|now|these days|nowadays|at the moment))+[.!]?$", re.I)
#: When something happened, before the statement ("Last month we relocated to Madrid").
_TIME_LEAD_RE = re.compile(
    rf"^(?:(?:last|this|earlier this) (?:{_PERIODS})|recently|lately|finally|"
    rf"as of (?:today|this week|this month|now)|since (?:last )?\w+|in (?:{_MONTHS}|\d{{4}})|"
    r"a (?:few|couple of) (?:days|weeks|months) ago)\b[,]?\s+",
    re.I,
)
_LEAD_NOW_RE = re.compile(r"^(?:now|currently|still|officially|also)\s+", re.I)
_TEAM_WORDS = r"team|squad|group|department|dept|org|unit|crew|tribe|guild|division|pod|chapter"
# Moves ("I just moved to Austin", "we relocated from Denver to Seattle", "we've settled in Lyon"): where they live now.
_MOVED_RE = re.compile(
    r"^(?i:I|we)(?i:'ve| have)?(?i: (?:just|recently|finally|now|officially|also|since))*"
    r"(?i: (?:moved|relocated|settled|emigrated))(?i: (?:back|over|here|permanently|abroad))?"
    r"(?: (?i:from) (?P<origin>.+?))?(?i: (?:to|in|into|down in)) (?P<place>(?:the )?[A-Z].*)$",
)
_LIVING_RE = re.compile(
    r"^(?i:I|we)(?i:'m| am|'re| are|'ve| have)?(?i: (?:now |currently |still |also )?(?:living|live|lived|been living|"
    r"based|settled|staying long-term) (?:in|out of|near)) (?P<place>(?:the )?[A-Z][^,]*?)(?i: for (?:\w+ )?\w+)?$"
)
_TEAM_MOVE_RE = re.compile(
    rf"^I(?:'ve| have)?(?: (?:just|recently|finally|now|also))* (?:moved|switched|transferred|joined|changed)"
    rf"(?: over)?(?: to| into)? (?P<team>(?:the|a|an) (?:[\w&/-]+ ){{0,4}}?(?:{_TEAM_WORDS}))\b.*$",
    re.I,
)
_LEAD_TEAM_RE = re.compile(
    rf"^I (?P<verb>lead|manage|run|head|am part of|'m part of|belong to)"
    rf" (?P<team>(?:the|a|an|our) (?:[\w&/-]+ ){{0,4}}?(?:{_TEAM_WORDS}))\b",
    re.I,
)
_JOINED_RE = re.compile(
    r"^I(?:'ve| have)?(?: (?:just|recently|finally|now|also))* (?:joined|started at|started working at|"
    r"started a new job at|signed with|got a job at|took a job at)\s+(?P<org>(?!the \w+ (?:"
    + _TEAM_WORDS
    + r")\b).+)$",
    re.I,
)
_AT_ORG_RE = re.compile(
    r"^I(?:'m| am) (?:now |currently )?(?:at|with) (?P<org>[A-Z][\w&.-]*(?: [A-Z][\w&.-]*)*)(?: since .+| now)$"
)
_PROMOTED_RE = re.compile(
    r"^I(?:'ve| have)?(?: (?:just|recently|finally|now))* (?:got|been|was|am|'m|became|become)?\s*"
    r"(?:promoted|moved up|stepped up) to (?:be )?(?:a |an |the )?(?P<role>.+)$",
    re.I,
)
_BECAME_RE = re.compile(
    r"^I(?:'ve| have)?(?: (?:just|recently|finally|now))* (?:became|become) (?P<role>(?:a|an|the) .+)$", re.I
)
# "a data engineer at Acme", "a staff engineer on the payments team": the role, then its employer or team
_ROLE_SPLIT_RE = re.compile(
    rf"^(?P<role>.+?)\s+(?:(?:at|for|with)\s+(?P<org>(?!the (?:[\w-]+ )?(?:{_TEAM_WORDS})\b)(?:[A-Z]|the |a |an ).+?)"
    rf"|(?:on|in)\s+(?P<team>the (?:[\w&/-]+ ){{0,4}}?(?:{_TEAM_WORDS})))$"
)
#: "at Stripe as a backend engineer": the employer first, then the role.
_WORK_AT_AS_RE = re.compile(r"^(?P<org>(?:at|for) [A-Z].*?) as (?P<role>(?:a|an|the) .+)$")
_DIET_NOUNS = word_set("keto ketogenic paleo low-carb low carb carnivore mediterranean raw-food raw plant-based")
_DIET_CHANGE_RE = re.compile(
    rf"^I(?:'ve| have|'m| am)?(?: (?:just|recently|finally|now|also|officially))*"
    rf"(?: (?:had|decided|chose|started|wanted|needed|got|have|going|want|tried) to)?"
    rf" (?:go|went|gone|going|turned|turn|become|became|switch(?:ed)? to|converted to|be)"
    rf"(?: (?:fully|completely|full|strictly|mostly|totally|100%|properly|a))?\s+(?P<regime>{DIET_REGIMES})\b",
    re.I,
)
_DIET_FOLLOW_RE = re.compile(
    rf"^I(?:'m| am)? (?:now |currently |also |mostly |strictly )?(?:follow|eat|keep|am on|'m on|stick to|do|on)"
    rf" (?:a |an )?(?:strict |mostly |fairly |very )?(?P<regime>{DIET_REGIMES})(?: diet)?\b",
    re.I,
)
_HOUSEHOLD_DIET_RE = re.compile(
    rf"^(?i:we|we're|my (?:wife|husband|partner|family|boyfriend|girlfriend) and I)(?i: are| 're)?(?i: all| both| now)?"
    rf" (?P<regime>(?i:{DIET_REGIMES}))\b"
)
_DIET_PUT_ON_RE = re.compile(
    rf"\b(?:put|has put|switched|moved) me on (?:a |an )?(?:strict )?(?P<regime>{DIET_REGIMES})", re.I
)
_DIET_BE_RE = re.compile(
    rf"^I(?:'m| am|'ve been| have been) "
    rf"(?:now |currently |fully |strictly |mostly |a |an |still |completely |full |also |100% )*"
    rf"(?P<regime>{DIET_REGIMES})(?: (?:now|these days|again|since .+|for .+))?(?:,.*)?$",
    re.I,
)
_EAT_ALL_RE = re.compile(
    r"^I (?:now |also )?(?:eat|'ll eat|will eat) (?:everything|anything|pretty much anything)\b", re.I
)
_EAT_MEAT_RE = re.compile(
    r"^I (?:now |also )?(?:eat|'m eating|am eating|started eating|went back to eating) meat"
    r"(?: again)?\b",
    re.I,
)
_NO_MEAT_RE = re.compile(r"^I(?:'ve| have)? (?:stopped|quit|gave up|given up) (?:eating )?meat\b", re.I)
_EAT_AGAIN_RE = re.compile(
    r"^I(?:'ve| have)? (?:started|began|am|'m) (?:eating|back to eating) "
    r"(?P<food>meat|fish|dairy|eggs|chicken|seafood)(?: again)?\b",
    re.I,
)
_LANGUAGE_PREF_RE = re.compile(
    r"^(?:please |pls |kindly |and |just )?(?:(?:always |only )?"
    r"(?:reply|answer|respond|write|talk|speak|communicate|chat)(?: to me| me| back| with me)?(?: only)?|"
    r"switch(?: back)? to|change to|go back to|use|stick to|keep it in|keep to)"
    rf"(?: (?:only|always))? (?:in )?(?P<lang>{LANGUAGES})\b(?! (?:word|text|version|translation|copy))|"
    r"^I(?:'d| would)? (?:like|prefer|want|need)(?: (?:all |your |the |my )?(?:answers|replies|responses|messages|"
    r"everything|emails|help|(?:you|u) to (?:answer|reply|respond|write|speak|talk)(?: to me)?))?(?: to be)?"
    rf"(?: written)? in (?P<lang2>{LANGUAGES})\b",
    re.I,
)
_TZ_BE_RE = re.compile(
    rf"^I(?:'m| am)(?: now| currently| usually)? (?:on|in) (?:the )?(?P<tz>{TZ_VALUE})"
    r"(?: (?:time|timezone|time zone|hours))?(?: now)?$",
    re.I,
)
# "I have …" is a stable fact only about things a person keeps: conditions, family, pets, vehicles, a commute.
_HAVE_RE = re.compile(
    r"^I(?: have|'ve got| have got|'ve| got| still have| also have| now have)\s+"
    r"(?!to\b|been\b|had\b|got\b|just\b|never\b|already\b|always\b|no idea\b|not\b|a question\b|a quick\b|\w+ed\b)"
    r"(?P<np>.+)$",
    re.I,
)
_STABLE_HAVE = word_set(
    "allergy allergies allergic intolerance intolerant disease condition disorder syndrome diabetes asthma arthritis "
    "migraine migraines epilepsy autism dyslexia celiac coeliac eczema tinnitus deaf hearing vision glasses lenses "
    "wheelchair disability injury knee back hip heart pacemaker implant kid kids child children son sons daughter "
    "daughters baby babies twins toddler toddlers grandkids grandchildren partner wife husband boyfriend girlfriend "
    "fiance fiancee sister sisters brother brothers siblings roommate roommates dog dogs cat cats pet pets puppy "
    "kitten horse horses parrot rabbit hamster car cars bike bikes motorbike motorcycle scooter van truck house flat "
    "apartment garden commute degree phd masters license licence visa passport mortgage"
)
_TRANSIENT_HAVE = word_set(
    "question questions idea ideas meeting meetings call calls appointment problem problems issue issues bug bugs "
    "error errors deadline minute minutes moment second doubt doubts feeling suggestion request favour favor chance "
    "plan plans trouble time lot few couple headache cold flu fever task tasks file files presentation interview "
    "exam test draft email emails message ticket order"
)


def third_person(remainder: str) -> str:
    text = remainder.strip().rstrip(".!,;:")
    for pattern, replacement in _PRONOUN_SWAPS:
        text = pattern.sub(replacement, text)
    return text


def _value(text: str) -> str:
    """A slot value without the time words around it ("Austin last month" -> "Austin")."""
    text = _TIME_TAIL_RE.sub("", text.strip().rstrip(".!,;:"))
    return third_person(_LEAD_NOW_RE.sub("", text))


def _diet_fact(regime: str) -> str:
    regime = regime.lower()
    regime = regime.replace(" ", "-") if regime in {"low carb", "plant based", "raw food"} else regime
    return f"Follows a {regime} diet" if regime in _DIET_NOUNS else f"Is {regime}"


def _typed_facts(clause: str, greeted: bool, opening: bool = False) -> list[str] | None:
    """Facts in a typed slot (location, diet, role, team, employer, timezone, name, language), phrased canonically
    so the slot is recognised ("Lives in …", "Is vegetarian", "Works at …"); None when no typed rule applies. These
    rules also read requests ("Please reply in Spanish", "call me Alex")."""
    if match := _NAME_IS_RE.match(clause):
        return [f"Name is {match.group(1)}"]
    if match := _CALL_ME_RE.match(clause):
        return [f"Prefers to be called {third_person(next(g for g in match.groups() if g))}"]
    if (
        (match := _HERE_NAME_RE.match(clause) or _THIS_IS_RE.match(clause))
        and match.group(1) not in _NOT_NAMES
        and (greeted or opening)
    ):
        return [f"Name is {match.group(1)}"]
    if match := _LANGUAGE_PREF_RE.match(clause):
        return [f"Prefers answers in {(match.group('lang') or match.group('lang2')).capitalize()}"]
    if match := _TZ_BE_RE.match(clause):
        return [f"Timezone is {match.group('tz')}"]
    if (match := _MOVED_RE.match(clause)) or (match := _LIVING_RE.match(clause)):
        place = _value(match.group("place"))
        if not re.search(rf"\b(?:{_TEAM_WORDS}|job|role|company|position)\b", place, re.I):
            return [f"Lives in {place}"]
    if match := _TEAM_MOVE_RE.match(clause):
        return [f"Is on {_value(match.group('team'))}"]
    if match := _LEAD_TEAM_RE.match(clause):
        verb = match.group("verb").lower().replace("'m ", "am ")
        lead = {"am part of": "Is part of", "belong to": "Belongs to"}.get(verb, capitalise(third_person_verb(verb)))
        return [f"{lead} {_value(match.group('team'))}"]
    if match := _JOINED_RE.match(clause):
        return [f"Works at {_value(match.group('org'))}"]
    if match := _AT_ORG_RE.match(clause):
        return [f"Works at {match.group('org')}"]
    if (match := _PROMOTED_RE.match(clause)) or (match := _BECAME_RE.match(clause)):
        role = _value(match.group("role"))
        if ROLE_NOUN_RE.search(role):
            return _role_facts("Works as" if not re.match(r"(?:a|an|the) ", role) else "Is", role)
    if (
        (match := _DIET_CHANGE_RE.match(clause))
        or (match := _DIET_FOLLOW_RE.match(clause))
        or (match := _DIET_BE_RE.match(clause))
        or (match := _DIET_PUT_ON_RE.search(clause))
        or (match := _HOUSEHOLD_DIET_RE.match(clause))
    ):
        return [_diet_fact(match.group("regime"))]
    if _EAT_ALL_RE.match(clause):
        return ["Eats everything"]
    if _EAT_MEAT_RE.match(clause):
        return ["Eats meat"]
    if _NO_MEAT_RE.match(clause):
        return ["Does not eat meat"]
    if match := _EAT_AGAIN_RE.match(clause):
        return [f"Eats {match.group('food').lower()} again"]
    if match := _NOT_EAT_RE.match(clause):
        if first_word(match.group(2)) in _DEICTIC_OBJECTS:
            return []  # "I don't eat it": what "it" is lives in another clause, the fact alone says nothing
        return [f"Does not {match.group(1).lower()} {_value(match.group(2))}"]
    return None


def _role_facts(lead: str, role: str) -> list[str]:
    """ "Is a data engineer at Acme" -> the role and the employer as two facts (two slots), "Works as a staff engineer
    on the payments team" -> the role and the team."""
    match = _ROLE_SPLIT_RE.match(role)
    if match and ROLE_NOUN_RE.search(match.group("role")):
        facts = [f"{lead} {match.group('role')}"]
        org = match.group("org") or ""
        if re.match(r"(?:a|an)\s", org, re.I):
            pass  # "at a small firm" describes the workplace and names no employer: no employer-slot fact
        elif org and re.search(r"\b(?:student|pupil|undergrad|postgrad)s?\b", match.group("role"), re.I):
            facts.append(f"Studies at {_value(match.group('org'))}")
        elif org:
            facts.append(f"Works at {_value(match.group('org'))}")
        if match.group("team"):
            facts.append(f"Is on {match.group('team')}")
        return facts
    return [f"{lead} {role}"]


def _has_fact(clause: str) -> str | None:
    match = _HAVE_RE.match(clause)
    if not match:
        return None
    np_text = _value(match.group("np"))
    words = [w.strip(",.;:'\"()").lower() for w in np_text.split()]
    head_words = set(words[:6])
    if head_words & _TRANSIENT_HAVE:
        return None
    acronym = any(re.fullmatch(r"[A-Z]{2,5}", w.strip(",.;:")) for w in np_text.split()[:4])  # "ADHD", "IBS"
    stable = head_words & _STABLE_HAVE or acronym or any(w.endswith("itis") for w in head_words)
    return f"Has {np_text}" if stable else None


def facts_from_clause(clause: str, greeted: bool = False, opening: bool = False) -> list[str]:
    """Third-person facts for one first-person clause ([] when the clause is not a stable statement).

    `greeted` says the sentence opened with a greeting, which makes "I'm <Name>" an introduction; `opening` that the
    clause opens the turn ("Dana here, …")."""
    clause = _TIME_LEAD_RE.sub("", LEAD_IN_RE.sub("", clause.strip())).rstrip(".!")
    clause = _ASIDE_TAIL_RE.sub("", clause).rstrip(",;: ")
    if not clause:
        return []
    typed = _typed_facts(clause, greeted, opening)
    if typed is not None:
        return typed
    if _REQUEST_RE.search(clause):  # a request ("I want you to …", "… please") states no fact
        return []
    if match := _MY_RE.match(clause):
        subject, verb, rest = match.groups()
        if first_word(rest) in _DEICTIC_OBJECTS:
            return []
        rest = _NOW_TAIL_RE.sub("", _LEAD_NOW_RE.sub("", rest))  # "my timezone is now UTC": the value is UTC
        subject = re.sub(r"^(?:tz|time zone)$", "timezone", subject, flags=re.I)
        return [f"{capitalise(third_person(subject))} {verb.lower()} {third_person(rest)}"]
    if fact := _has_fact(clause):
        return [fact]
    if match := _DISLIKE_RE.match(clause):
        if first_word(match.group(1)) in _DEICTIC_OBJECTS:
            return []
        return [f"Dislikes {third_person(match.group(1))}"]
    if match := _ADVERB_RE.match(clause):
        adverb, verb, rest = match.groups()
        return [f"{adverb.capitalize()} {third_person_verb(verb.lower())} {third_person(rest)}".strip()]
    if match := _VERB_RE.match(clause):
        verb, rest = match.groups()
        # "I like it", "I use this" talk about the conversation; "I work" alone says nothing
        if len(rest) < 2 or first_word(rest) in _DEICTIC_OBJECTS or rest.lower().startswith(("to ask", "to know")):
            return []
        if verb.lower() == "work" and re.match(r"as\s", rest, re.I):
            return _role_facts("Works", third_person(rest))
        if verb.lower() == "work" and (at := _WORK_AT_AS_RE.match(rest)) and ROLE_NOUN_RE.search(at.group("role")):
            return [f"Works as {third_person(at.group('role'))}", f"Works {third_person(at.group('org'))}"]
        return [f"{_VERB_PREFIXES[verb.lower()]} {third_person(rest)}"]
    if match := _BE_RE.match(clause):
        rest = match.group(1)
        word = first_word(rest)
        if greeted and re.fullmatch(r"[A-Z][a-z]+", rest):  # "Hi, I'm Dana": an introduction
            return [f"Name is {rest}"]
        if greeted and (match := re.fullmatch(r"([A-Z][a-z]+),\s+(.+)", rest)):
            # "Hi, I'm Sam, a backend dev at Shopify, based in Toronto": the name, then what the rest says
            facts = [f"Name is {match.group(1)}"]
            for part in re.split(r",\s+(?:and\s+)?|\s+and\s+", match.group(2)):
                facts += facts_from_clause(f"I'm {part}")
            return facts
        # "I'm trying…", "I'm not sure", "I'm glad", "I'm at the airport", "I'm in a meeting" describe the moment
        if (
            re.match(r"(?:at|in) (?:a|an|the|my|our|his|her)\s+[a-z]", rest)
            or re.match(r"at [a-z]", rest)
            or rest.lower().strip(" !.,") in {"in", "down", "game", "set", "on it", "up", "out", "off"}
        ):
            return []
        if (
            not word
            or word in _TRANSIENT_STATE
            or rest.lower().startswith(_TRANSIENT_PHRASES)
            or (word.endswith("ing") and word != "using")
        ):
            if word in {"now", "currently", "still", "also"} and ROLE_NOUN_RE.search(rest):
                rest = _LEAD_NOW_RE.sub("", rest)  # "I'm now a UX designer": a role
            else:
                return []
        # "I'm a senior developer now": the time word goes, the rest is kept as said
        rest = _NOW_TAIL_RE.sub("", rest)
        if ROLE_NOUN_RE.search(rest) and re.match(r"(?:a|an|the)\s", rest, re.I):
            return _role_facts("Is", third_person(rest))
        return [f"Is {third_person(rest)}"]
    return []


def profile_from_clause(clause: str, greeted: bool = False) -> str | None:
    """The first fact `facts_from_clause` finds in a clause, or None."""
    facts = facts_from_clause(clause, greeted)
    return facts[0] if facts else None


def is_personal_fact(clause: str) -> bool:
    """Whether a clause states a stable fact about the person writing it ("I am a staff engineer at Acme", "my cat is
    called Rex"): what the profile rules would learn from it. A request for the answers' language ("Always answer
    in English") is a preference the profile rules read, but it identifies nobody: not a personal fact."""
    core = LEAD_IN_RE.sub("", clause.strip())
    if _LANGUAGE_PREF_RE.match(core) and not re.match(r"I\b", core):
        return False
    return profile_from_clause(clause) is not None


def typed_fact_clause(sentence: str) -> bool:
    """Whether a sentence states a fact in a typed slot (what a "No, I live in Munich" correction really says)."""
    return any(typed_slots(fact) for clause in CLAUSE_SPLIT_RE.split(sentence) for fact in facts_from_clause(clause))
