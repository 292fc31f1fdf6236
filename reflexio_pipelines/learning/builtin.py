"""The built-in extractor: an offline, deterministic, RULE-BASED BASELINE — a HEURISTIC over the wording, not a model.

It exists so the pipeline runs end to end with no LLM configured (no instruction-following model is available
offline) and so tests have a reproducible reference. It recognises families of explicit surface patterns:

- profiles: first-person statements in user turns, phrased canonically so their typed slot is recognised
  (learning/slots.py): location incl. moves ("I just moved to Austin" -> "Lives in Austin"), diet ("I had to go
  fully vegetarian" -> "Is vegetarian"), role, team, employer (a compound "I'm a data engineer at Acme" is split into
  its slots), timezone, name, reply language, first language; "I have …" for stable things (conditions, allergies,
  family, pets, vehicles, a commute); likes, dislikes, habits, "my X is Y". Facts inside requests are kept ("I'm
  vegetarian, so no meat please" -> "Is vegetarian"); questions, passing states and stories about the past are not
  facts;
- correction playbooks: a user turn right after an agent turn that corrects or gives feedback on it — marker words
  ("no", "wrong", "don't", "never", "instead", "use X not Y", …), style feedback about length, tone and format ("Way
  too long. Keep it to three bullets."), process feedback ("You should have asked me before booking anything." ->
  "Ask me before booking anything."), a convention of the user's team ("Actually we use pnpm in this repo."); trigger
  = the situation taken from the request the agent was answering, content = the user's words rewritten mechanically
  as a rule. Sentences that tell a story (several past-tense verbs, or long) contribute only the instruction clauses
  in them: narrative is never stored verbatim as a rule;
- standing instructions in any user turn ("from now on …", "whenever you X, Y", "always/never …", polite requests
  about every answer's form): playbooks that need no agent turn to answer;
- one-off slips ("No, I meant the staging server.", "Not that one, the prod one.") are session context
  (`ExtractionResult.session_context`), never rules, unless the same sentence says something durable;
- tool-failure playbooks: every tool call with an error, naming the tool and the cause, pointing at a later call
  of the same tool that worked;
- expert playbooks: an expert answer whose content words differ substantially from the agent's (token-set
  heuristic, see `_expert_gap`);
- forget requests ("forget that I live in Paris", "delete what you know about my address", "don't keep anything
  about my kids"): a HEURISTIC over the wording (`forget_target`). They become forget directives, never profiles or
  correction playbooks; which stored profiles they remove is matched in learn.py (learning/forget.py).

Anything phrased less explicitly is missed, and the wording is mechanical; configure an LLM for real use. Measured
per category on the project's labelled set by benchmarks/extraction_quality.py (docs/configuration.md lists the
scores). Same window in, same output out (same order); identical contents are emitted once per window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from reflexio_pipelines.learning.config import DEFAULT_GROUP, ExtractorGroup
from reflexio_pipelines.learning.jsonparse import clean_text, dedupe_by_content
from reflexio_pipelines.learning.slots import DIET_REGIMES, LANGUAGES, ROLE_NOUN_RE, TZ_VALUE, typed_slots
from reflexio_pipelines.learning.transcript import (
    is_agent_turn,
    preceding_index,
    previous_speaker_index,
)
from reflexio_pipelines.learning.types import (
    ExtractedPlaybook,
    ExtractedProfile,
    ExtractionResult,
    ForgetDirective,
    ToolCall,
    Turn,
    Window,
)

EXTRACTOR_NAME = "builtin-rules"
PROMPT_VERSION = "rules-v2"
MODEL_NAME = "builtin"

MAX_TRIGGER_CHARS = 120
MAX_RATIONALE_QUOTE = 160
MAX_CONTENT_CHARS = 400
MAX_ERROR_CHARS = 200
MAX_INPUT_JSON_CHARS = 300

# ---------------------------------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------------------------------

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def _words(*chunks: str) -> frozenset[str]:
    """A word set from space-separated text (keeps long vocabularies readable)."""
    return frozenset(" ".join(chunks).split())


def _normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so patterns need only one spelling."""
    return " ".join(text.replace("\u2019", "'").replace("\u2018", "'").split())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text.replace("\u2019", "'")) if s.strip()]


def _clip(text: str, limit: int) -> str:
    """Cut at a word boundary and mark the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:-") + "…"


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """Lower-case the first word only when it is a plain word (keeps "I", acronyms and identifiers intact)."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'") or (len(first) > 1 and not first[1:].islower()):
        return text
    return text[:1].lower() + text[1:]


def _third_person_verb(verb: str) -> str:
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
_DOUBLING_VERBS = frozenset("commit submit omit permit admit format forget begin refer prefer control patrol occur "
                            "regret upset equip compel rebut".split())  # fmt: skip


def _gerund(verb: str) -> str:
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


# ---------------------------------------------------------------------------------------------------------------
# Profiles: first-person statements
# ---------------------------------------------------------------------------------------------------------------

_CLAUSE_SPLIT_RE = re.compile(
    r"\s*[;:]\s+|,?\s+(?:and|but|so|also)\s+(?=(?:I|my|My|we|We)\b)|,\s+(?=(?:I|my|My)\b)|,\s+so\s+|"
    r"\s+[-\u2013\u2014]+\s+"
)
_LEAD_IN_RE = re.compile(
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
_QUESTION_START_RE = re.compile(
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
_TRANSIENT_STATE = _words(
    "sure sorry afraid done here back confused still just trying going asking wondering curious looking getting "
    "having thinking hoping glad happy fine good ok okay ready stuck lost about currently now not unable able so "
    "very really pretty quite too also gonna new interested planning tired busy late early off away out home "
    "heading leaving running waiting excited worried nervous bored hungry sick exhausted all"
)
_TRANSIENT_PHRASES = ("a bit ", "a little ", "kind of ", "sort of ")
# The object of "I like/prefer/use …" that refers to the conversation, not to the user's world
_DEICTIC_OBJECTS = _words("it that this these those your yours them")
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
_VERB_RE = re.compile(r"^I (work|live|prefer|like|love|use|speak|hate|dislike|enjoy|teach|study)\b\s*(.*)$", re.I)
_DISLIKE_RE = re.compile(r"^I (?:really )?(?:can't stand|cannot stand|don't like|do not like|don't enjoy)\s+(.+)$",
                         re.I)  # fmt: skip
_NOT_EAT_RE = re.compile(r"^I (?:don't|do not|no longer|never|can't|cannot) (eat|drink)\s+(.+)$", re.I)
_BE_RE = re.compile(r"^I(?:'m| am)\s+(.*)$", re.I)
_ADVERB_RE = re.compile(r"^I (always|usually|never|often|mostly|only|rarely)\s+([A-Za-z]+)\b\s*(.*)$", re.I)
_MY_RE = re.compile(r"^my\s+([\w'-]+(?:\s+[\w'-]+){0,3}?)\s+(is|are)\s+(.+)$", re.I)
_CALL_ME_RE = re.compile(
    r"^(?:you can |please |just |feel free to )?call me\s+(.+)$|"
    r"^I (?:go by|prefer to be called|like to be called)\s+(.+)$|"
    r"^I(?:'d| would) (?:prefer|like|rather)(?: it)?(?: if)? (?:you|u)(?: to)? call(?:ed)? me\s+(.+)$",
    re.I,
)
_NAME_IS_RE = re.compile(r"^(?i:my )?(?i:name's|name is)\s+([A-Z][\w'-]+(?: [A-Z][\w'-]+)?)$")
_HERE_NAME_RE = re.compile(r"^([A-Z][a-z]+) here(?:[,!. ].*)?$")
_THIS_IS_RE = re.compile(r"^(?i:this is|it's) ([A-Z][a-z]+)(?: (?:from|at|in|here)\b.*)?$")
_NOT_NAMES = _words("Nobody Everyone Everybody Someone Somebody Anyone Me Us Nothing It This That Back Still")
_TIME_TAIL_RE = re.compile(
    r"(?:,?\s+(?:last|this|next) (?:week|month|year|spring|summer|autumn|fall|winter)|,?\s+recently|,?\s+yesterday|"
    r",?\s+now|,?\s+these days|,?\s+nowadays|,?\s+again|,?\s+for good|,?\s+a (?:few|couple of) (?:days|weeks|months) "
    r"ago|,?\s+since (?:last )?\w+|,?\s+in (?:January|February|March|April|May|June|July|August|September|October|"
    r"November|December|\d{4})|,?\s+at the moment|,?\s+today|,?\s+this (?:morning|afternoon|evening))+$",
    re.I,
)
_NOW_TAIL_RE = re.compile(r"(?:,?\s+(?:right now|now|these days|nowadays|at the moment))+[.!]?$", re.I)
#: When something happened, before the statement ("Last month we relocated to Madrid").
_TIME_LEAD_RE = re.compile(
    r"^(?:(?:last|this|earlier this) (?:week|month|year|spring|summer|autumn|fall|winter)|recently|lately|finally|"
    r"as of (?:today|this week|this month|now)|since (?:last )?\w+|in (?:January|February|March|April|May|June|July|"
    r"August|September|October|November|December|\d{4})|a (?:few|couple of) (?:days|weeks|months) ago)\b[,]?\s+",
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
_DIET_NOUNS = _words("keto ketogenic paleo low-carb low carb carnivore mediterranean raw-food raw plant-based")
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
_EAT_MEAT_RE = re.compile(r"^I (?:now |also )?(?:eat|'m eating|am eating|started eating|went back to eating) meat"
                          r"(?: again)?\b", re.I)  # fmt: skip
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
_STABLE_HAVE = _words(
    "allergy allergies allergic intolerance intolerant disease condition disorder syndrome diabetes asthma arthritis "
    "migraine migraines epilepsy autism dyslexia celiac coeliac eczema tinnitus deaf hearing vision glasses lenses "
    "wheelchair disability injury knee back hip heart pacemaker implant kid kids child children son sons daughter "
    "daughters baby babies twins toddler toddlers grandkids grandchildren partner wife husband boyfriend girlfriend "
    "fiance fiancee sister sisters brother brothers siblings roommate roommates dog dogs cat cats pet pets puppy "
    "kitten horse horses parrot rabbit hamster car cars bike bikes motorbike motorcycle scooter van truck house flat "
    "apartment garden commute degree phd masters license licence visa passport mortgage"
)
_TRANSIENT_HAVE = _words(
    "question questions idea ideas meeting meetings call calls appointment problem problems issue issues bug bugs "
    "error errors deadline minute minutes moment second doubt doubts feeling suggestion request favour favor chance "
    "plan plans trouble time lot few couple headache cold flu fever task tasks file files presentation interview "
    "exam test draft email emails message ticket order"
)

# Temporal hints in a statement bound how long the fact stays true.
_TTL_HINTS = (
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b", re.I), "one_day"),
    (re.compile(r"\b(?:this|next) week\b", re.I), "one_week"),
    (
        re.compile(r"\b(?:this|next) month\b|\bcurrently\b|\bright now\b|\bat the moment\b|\bfor now\b", re.I),
        "one_month",
    ),
    (re.compile(r"\bthis (?:quarter|season|semester)\b", re.I), "one_quarter"),
    (re.compile(r"\bthis year\b", re.I), "one_year"),
)


def _third_person(remainder: str) -> str:
    text = remainder.strip().rstrip(".!,;:")
    for pattern, replacement in _PRONOUN_SWAPS:
        text = pattern.sub(replacement, text)
    return text


def _first_word(text: str) -> str:
    return text.split(" ", 1)[0].lower().strip(",.!") if text else ""


def _value(text: str) -> str:
    """A slot value without the time words around it ("Austin last month" -> "Austin")."""
    text = _TIME_TAIL_RE.sub("", text.strip().rstrip(".!,;:"))
    return _third_person(_LEAD_NOW_RE.sub("", text))


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
        return [f"Prefers to be called {_third_person(next(g for g in match.groups() if g))}"]
    if (match := _HERE_NAME_RE.match(clause) or _THIS_IS_RE.match(clause)) and match.group(1) not in _NOT_NAMES and \
            (greeted or opening):  # fmt: skip
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
        lead = {"am part of": "Is part of", "belong to": "Belongs to"}.get(verb, _capitalise(_third_person_verb(verb)))
        return [f"{lead} {_value(match.group('team'))}"]
    if match := _JOINED_RE.match(clause):
        return [f"Works at {_value(match.group('org'))}"]
    if match := _AT_ORG_RE.match(clause):
        return [f"Works at {match.group('org')}"]
    if (match := _PROMOTED_RE.match(clause)) or (match := _BECAME_RE.match(clause)):
        role = _value(match.group("role"))
        if ROLE_NOUN_RE.search(role):
            return _role_facts("Works as" if not re.match(r"(?:a|an|the) ", role) else "Is", role)
    if (match := _DIET_CHANGE_RE.match(clause)) or (match := _DIET_FOLLOW_RE.match(clause)) or \
            (match := _DIET_BE_RE.match(clause)) or (match := _DIET_PUT_ON_RE.search(clause)) or \
            (match := _HOUSEHOLD_DIET_RE.match(clause)):  # fmt: skip
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
        return [f"Does not {match.group(1).lower()} {_value(match.group(2))}"]
    return None


def _role_facts(lead: str, role: str) -> list[str]:
    """ "Is a data engineer at Acme" -> the role and the employer as two facts (two slots), "Works as a staff engineer
    on the payments team" -> the role and the team."""
    match = _ROLE_SPLIT_RE.match(role)
    if match and ROLE_NOUN_RE.search(match.group("role")):
        facts = [f"{lead} {match.group('role')}"]
        if match.group("org") and re.search(r"\b(?:student|pupil|undergrad|postgrad)s?\b", match.group("role"), re.I):
            facts.append(f"Studies at {_value(match.group('org'))}")
        elif match.group("org"):
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


def _facts_from_clause(clause: str, greeted: bool = False, opening: bool = False) -> list[str]:
    """Third-person facts for one first-person clause ([] when the clause is not a stable statement).

    `greeted` says the sentence opened with a greeting, which makes "I'm <Name>" an introduction; `opening` that the
    clause opens the turn ("Dana here, …")."""
    clause = _TIME_LEAD_RE.sub("", _LEAD_IN_RE.sub("", clause.strip())).rstrip(".!")
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
        if _first_word(rest) in _DEICTIC_OBJECTS:
            return []
        rest = _NOW_TAIL_RE.sub("", _LEAD_NOW_RE.sub("", rest))  # "my timezone is now UTC": the value is UTC
        subject = re.sub(r"^(?:tz|time zone)$", "timezone", subject, flags=re.I)
        return [f"{_capitalise(_third_person(subject))} {verb.lower()} {_third_person(rest)}"]
    if fact := _has_fact(clause):
        return [fact]
    if match := _DISLIKE_RE.match(clause):
        if _first_word(match.group(1)) in _DEICTIC_OBJECTS:
            return []
        return [f"Dislikes {_third_person(match.group(1))}"]
    if match := _ADVERB_RE.match(clause):
        adverb, verb, rest = match.groups()
        return [f"{adverb.capitalize()} {_third_person_verb(verb.lower())} {_third_person(rest)}".strip()]
    if match := _VERB_RE.match(clause):
        verb, rest = match.groups()
        # "I like it", "I use this" talk about the conversation; "I work" alone says nothing
        if len(rest) < 2 or _first_word(rest) in _DEICTIC_OBJECTS or rest.lower().startswith(("to ask", "to know")):
            return []
        if verb.lower() == "work" and re.match(r"as\s", rest, re.I):
            return _role_facts("Works", _third_person(rest))
        return [f"{_VERB_PREFIXES[verb.lower()]} {_third_person(rest)}"]
    if match := _BE_RE.match(clause):
        rest = match.group(1)
        word = _first_word(rest)
        if greeted and re.fullmatch(r"[A-Z][a-z]+", rest):  # "Hi, I'm Dana": an introduction
            return [f"Name is {rest}"]
        if greeted and (match := re.fullmatch(r"([A-Z][a-z]+),\s+(.+)", rest)):
            # "Hi, I'm Sam, a backend dev at Shopify, based in Toronto": the name, then what the rest says
            facts = [f"Name is {match.group(1)}"]
            for part in re.split(r",\s+(?:and\s+)?|\s+and\s+", match.group(2)):
                facts += _facts_from_clause(f"I'm {part}")
            return facts
        # "I'm trying…", "I'm not sure", "I'm glad", "I'm at the airport", "I'm in a meeting" describe the moment
        if re.match(r"(?:at|in) (?:a|an|the|my|our|his|her)\s+[a-z]", rest) or re.match(r"at [a-z]", rest) or \
                rest.lower().strip(" !.,") in {"in", "down", "game", "set", "on it", "up", "out", "off"}:  # fmt: skip
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
            return _role_facts("Is", _third_person(rest))
        return [f"Is {_third_person(rest)}"]
    return []


def _profile_from_clause(clause: str, greeted: bool = False) -> str | None:
    """The first fact `_facts_from_clause` finds in a clause, or None."""
    facts = _facts_from_clause(clause, greeted)
    return facts[0] if facts else None


def is_personal_fact(clause: str) -> bool:
    """Whether a clause states a stable fact about the person writing it ("I am a staff engineer at Acme", "my cat is
    called Rex"): what the profile rules would learn from it. A request for the answers' language ("Always answer
    in English") is a preference the profile rules read, but it identifies nobody: not a personal fact."""
    core = _LEAD_IN_RE.sub("", clause.strip())
    if _LANGUAGE_PREF_RE.match(core) and not re.match(r"I\b", core):
        return False
    return _profile_from_clause(clause) is not None


def facts_stated(text: str) -> list[str]:
    """Third-person facts a user turn states, also inside a correction ("No, I live in Munich now" -> ["Lives in
    Munich"]): the profile rules per clause after the correction lead-in ("No,", "Wrong.") is stripped. The
    extractor skips correcting sentences (they become rules); outcome counters compare them with served profiles."""
    facts = []
    for sentence in map(_normalise, _sentences(text)):
        for clause in _CLAUSE_SPLIT_RE.split(_STRIP_LEAD_RE.sub("", sentence)):
            facts += [f for f in _facts_from_clause(clause) if len(f) > 4]
    return facts


def _ttl_for(sentence: str) -> str:
    for pattern, ttl in _TTL_HINTS:
        if pattern.search(sentence):
            return ttl
    return "infinity"


def _profiles_from_turn(turn: Turn, is_correction_turn: bool) -> Iterator[ExtractedProfile]:
    after_greeting = False
    for position, sentence in enumerate(_sentences(turn.content)):
        sentence = _normalise(sentence)
        if _GREETING_RE.fullmatch(sentence):
            # "Hi! I'm Dana" splits into two sentences; the greeting still makes the next one an introduction
            after_greeting = True
            continue
        greeted, after_greeting = after_greeting or bool(_GREETING_RE.match(sentence)), False
        if _QUESTION_START_RE.match(_LEAD_IN_RE.sub("", sentence)):
            continue  # a question asks, it states nothing ("Should I go vegan?")
        if forget_target(sentence):  # "forget that I live in Paris" asks to drop the fact, it does not state it
            continue
        if _is_narrative(sentence):  # a story about the past is not a fact about the user now
            continue
        # a sentence that corrects the agent is a rule for the agent, not a fact about the user — unless what
        # follows the "No," is itself a fact in a typed slot ("No, I live in Munich now")
        if is_correction_turn and _has_correction_marker(sentence):
            remainder = _STRIP_LEAD_RE.sub("", sentence)
            if remainder == sentence or _MARKER_RE.search(remainder) or not _typed_fact_clause(remainder):
                continue
            sentence = remainder
        for number, clause in enumerate(_CLAUSE_SPLIT_RE.split(sentence)):
            if clause.rstrip().endswith("?") or _QUESTION_START_RE.match(_LEAD_IN_RE.sub("", clause.strip())):
                continue  # the question of "I'm vegetarian - what protein should I eat?"; the fact before it stays
            for content in _facts_from_clause(clause, greeted, opening=position == 0 and number == 0):
                if len(content) > 4:
                    yield ExtractedProfile(
                        content=clean_text(content, MAX_CONTENT_CHARS),
                        time_to_live=_ttl_for(sentence),
                        source_turn_ids=[turn.turn_id],
                    )


def _typed_fact_clause(sentence: str) -> bool:
    """Whether a sentence states a fact in a typed slot (what a "No, I live in Munich" correction really says)."""
    return any(
        typed_slots(fact) for clause in _CLAUSE_SPLIT_RE.split(sentence) for fact in _facts_from_clause(clause)
    )


# ---------------------------------------------------------------------------------------------------------------
# Forget requests (HEURISTIC: surface wording only)
# ---------------------------------------------------------------------------------------------------------------

# Verbs that always ask the agent to drop something it remembers.
_FORGET_VERB = (
    r"(?:forget|unlearn|stop remembering|(?:do not|don't|dont) remember|no longer remember|"
    r"stop (?:storing|keeping|saving|tracking))"
)
# Verbs that only do so when their object is the user's own data: "delete my address" is a forget request,
# "delete the staging branch" is a task for the agent.
_ERASE_VERB = r"(?:delete|remove|erase|wipe|purge|clear|(?:do not|don't|dont) (?:keep|store|save|retain|hold on to))"
_ABOUT = (
    r"(?:what you (?:know|have|remember|stored|saved|keep)(?: (?:stored|saved|on file|on record))?(?: about| on)?|"
    r"everything (?:you know )?about|anything (?:you know )?about|all (?:you know )?about|the fact that|about|"
    r"(?:that )?I (?:said|told you|mentioned)(?: that)?|that)"
)
_FORGET_RE = re.compile(rf"\b{_FORGET_VERB}\b\s*(?:{_ABOUT}\s+)*(?P<target>.*)$", re.I)
_ERASE_RE = re.compile(rf"\b{_ERASE_VERB}\b\s+(?:{_ABOUT}\s+)*(?P<target>(?:my|I|I'm|I've)\b.*)$", re.I)
_TARGET_TAIL_RE = re.compile(
    r"(?:\s+(?:from|in) (?:your|the) (?:memory|records?|notes|profile|files?|database)|\s+(?:any ?more|for now)|"
    r"[\s,]*\bplease\b|[\s.!?,;:]+)+$",
    re.I,
)
# "forget it", "forget that" (alone) mean "never mind", not "erase something"
_NOT_A_TARGET = _words("it this that these those them everything anything all")


def forget_target(sentence: str) -> str | None:
    """What a sentence asks the agent to forget about the user, phrased like a profile where the wording allows
    ("forget that I live in Paris" -> "Lives in Paris", "stop remembering my phone number" -> "Their phone
    number"); None when the sentence is not a forget request. HEURISTIC: wording only, so "forget it" (never mind)
    is not one, and an unusual phrasing ("I'd rather you didn't keep my address") is missed."""
    text = _normalise(sentence)
    match = _FORGET_RE.search(text) or _ERASE_RE.search(text)
    if match is None:
        return None
    target = _TARGET_TAIL_RE.sub("", match.group("target")).strip()
    if not target or _first_word(target) in _NOT_A_TARGET:
        return None
    as_profile = _profile_from_clause(target) if re.match(r"I\b|I'", target) else None
    return as_profile or _capitalise(_third_person(target))


def has_forget_request(window: Window) -> bool:
    """Whether any user turn of the window asks to forget something (the `forget_target` heuristic)."""
    return any(forget_target(s) for t in window.turns if t.is_user for s in _sentences(t.content))


def _forget_directives(turn: Turn) -> Iterator[ForgetDirective]:
    for sentence in _sentences(turn.content):
        target = forget_target(sentence)
        if target:
            yield ForgetDirective(target=clean_text(target, MAX_CONTENT_CHARS), source_turn_ids=[turn.turn_id])


# ---------------------------------------------------------------------------------------------------------------
# Corrections, feedback and standing instructions (HEURISTIC: surface wording only)
# ---------------------------------------------------------------------------------------------------------------

# Phrases that contain a marker word but are politeness, not a correction.
_NOT_A_CORRECTION_RE = re.compile(
    r"\bno,? (?:problem|worries|thanks|thank you|rush|idea|need|hurry|stress|big deal)\b|\bnever ?mind\b|"
    r"\b(?:don't|do not) worry\b|\bnot sure\b|\bnot bad\b|\bnot a problem\b|"
    r"\b(?:no|nope|nah)[,.!]*\s+(?:all good|i'm good|i'm fine|that's all|that's it|that's fine|not now|not yet|"
    r"maybe later|nothing else|that's everything)\b",
    re.I,
)
_LEADING_NO_RE = re.compile(r"^(?:no|nope|nah)\b", re.I)
_MARKER_RE = re.compile(
    r"\b(?:wrong|incorrect|instead|stop|rather than)\b|\bthat(?:'s| is) not\b|"
    # "I never…", "I don't…" are about the user; "never…", "we never…", "don't…" address behaviour
    r"(?<!\bI )\b(?:never|always|don't|dont|do not)\b|"
    r"\bnot\b[^.?!]{1,80}\bbut\b|\buse\b[^.?!]{1,80}?,?\s+not\b",
    re.I,
)
# Leading "No," / "Nope —" / "Wrong." carry no rule; "wrong" needs punctuation after it ("Wrong place" is content).
# "No" followed by a noun is a prohibition ("No emojis"): it is kept.
_STRIP_LEAD_RE = re.compile(
    r"^(?:(?:no|nope|nah)\b(?:[\s,.!;:\u2013\u2014-]*$|\s*[,.!;:\u2013\u2014-]+\s*|\s+(?=(?:I|I'm|I've|I'd|we|we're|"
    r"you|it|it's|that|that's|this|not|actually|wait|sorry|please|thanks|use|don't|never|always|stop|just|"
    r"the (?:other|one|right)|wrong)\b))|(?:wrong|incorrect|that's (?:wrong|not right|incorrect|not it)|"
    r"that is (?:wrong|not right|incorrect))\s*[,.!;:\u2013\u2014-]+\s*)+",
    re.I,
)
_SUBJECT_ADVERB_RE = re.compile(r"^(?:we|you|I)\s+(always|never|only|usually)\b", re.I)
_SUBJECT_MODAL_RE = re.compile(
    r"^(?:(?:we|you)\s+(?:should|must|need to|have to|ought to|will|'ll)|please|pls|kindly|make sure to|"
    r"be sure to|I want you to|I need you to|I'd like you to|I would like you to|"
    r"I(?:'d| would)? (?:want|need|like|prefer)(?= (?:all|every|each|the|my|your|answers|replies|everything)\b))\s+",
    re.I,
)
_SUBJECT_USE_RE = re.compile(r"^(?:we|I)\s+(use|prefer)\b", re.I)
_CLAUSE_RULE_RE = re.compile(r",\s+(?:and\s+|but\s+)?(?:we\s+|you\s+)?(always|never|instead|use|don't|do not)\b", re.I)
_FILLER_SENTENCE_RE = re.compile(
    r"^(?:thanks|thank you|ok|okay|hmm+|ugh|sorry|please|good|great|fine|right|yes|yeah|sure|cool|nice|ha+|oops|"
    r"whoops|oh|well|also|hm+)[.!]*$",
    re.I,
)
_PLEASE_TAIL_RE = re.compile(r"[\s,]*\b(?:please|pls|thanks|thank you)\b[\s.!]*$", re.I)

#: A rule for every future conversation, whether or not it answers an agent turn ("From now on, …").
_STANDING_RE = re.compile(
    r"\b(?:from now on|from today(?: on(?:wards?)?)?|from here on(?: out)?|from this point(?: on)?|going forward|"
    r"moving forward|in (?:the )?future|next time|every time|each time|whenever|for all future|in general|"
    r"by default|as a rule|any ?more|ever again|for everything|in anything)\b",
    re.I,
)
#: A standing marker that opens a sentence and its subordinate clause ("Whenever you write SQL, …").
_CONDITION_RE = re.compile(
    r"^(?:whenever|every time|each time|next time|any time|anytime|when(?:ever)? you(?:'re| are)?)\s+(?:you\s+)?"
    r"(?:(?P<situation>[^,]+),\s*(?:then\s+)?(?P<rule>.+)|(?P<situation2>[^,]+?)\s+(?:then\s+)?"
    r"(?P<rule2>(?:please|always|never|don't|do not|use|make|put|leave|add|include|check|ask|send|keep|show|write|"
    r"give|try)\b[^,]*))$",
    re.I,
)
_STANDING_LEAD_RE = re.compile(
    r"^(?:(?:from now on|from today(?: on(?:wards?)?)?|from here on(?: out)?|from this point(?: on)?|going forward|"
    r"moving forward|in (?:the )?future|for all future \w+|in general|by default|as a rule|also|and|ok|okay|good|"
    r"great|thanks|actually|next time|every time|each time|for every \w+)\b[\s,:;-]*)+",
    re.I,
)
#: "I meant …", "not that one": the user fixes what they asked for this time — session context, not a rule.
_SLIP_RE = re.compile(
    r"\bI (?:meant|mean|said\b(?! (?:no|not|to|don't|never|always|use|that you)\b)|was (?:talking|asking|thinking) "
    r"(?:about|of)|was referring to|wanted|was after|was looking for|asked for\b.{1,60}\bnot|should have said|"
    r"misspoke|mistyped)\b|"
    r"\b(?:not that one|not this one|the other (?:one|\w+)|wrong one|the one (?:from|with|in|on|at|for|I|that|who)|"
    r"the [\w.-]+ one|make it (?:a|an|the)|this time|typo|my bad|my mistake|I misread)\b|"
    r"^(?:oops|whoops|sorry|my bad)\b|"
    r"^not (?:the |that |this )?[\w.'-]+(?: [\w.'-]+)?\s*[,\u2013\u2014-]+\s*"
    r"(?:the |it's |use )?[\w.'-]+(?: [\w.'-]+){0,3}[.!]?$",
    re.I,
)
#: Words that make a fix durable even when it names this task's object ("always", "we never", "our").
_DURABLE_RE = re.compile(
    r"\b(?:always|never|don't|do not|stop|we use|we're on|our|any ?more|in general|by default|from now on|going "
    r"forward|in (?:the )?future|next time|every time|whenever)\b",
    re.I,
)

# Style feedback: how the answer read (length, tone, format), not what it said.
_STYLE_ADJECTIVES = {
    **dict.fromkeys("long lengthy verbose wordy rambling padded".split(), "Keep answers shorter"),
    **dict.fromkeys("short brief terse thin shallow".split(), "Give fuller, more detailed answers"),
    **dict.fromkeys("casual informal chatty flippant jokey slangy sloppy".split(), "Use a more formal tone"),
    **dict.fromkeys("formal stiff stuffy robotic corporate dry".split(), "Use a more casual, conversational tone"),
    **dict.fromkeys("technical jargony dense complicated complex academic".split(),
                    "Use plainer, less technical language"),  # fmt: skip
    **dict.fromkeys("vague generic fluffy wishy-washy hand-wavy abstract".split(), "Be more specific and concrete"),
    **dict.fromkeys("salesy cheesy pushy enthusiastic peppy gushing sycophantic".split(), "Tone down the enthusiasm"),
    **dict.fromkeys("repetitive redundant".split(), "Don't repeat yourself"),
    **dict.fromkeys("cluttered busy messy".split(), "Keep the layout clean and simple"),
}
_STYLE_NOUNS = (
    r"emojis?|emoticons?|exclamation (?:marks|points)|bullets?|bullet points?|headers?|headings?|titles?|tables?|"
    r"paragraphs?|sentences?|words?|lines?|lists?|numbered lists?|markdown|formatting|format|bold|italics|caps|"
    r"jargon|acronyms|detail|details|text|preamble|intro|introduction|summary|summaries|recap|conclusion|"
    r"disclaimers?|caveats?|pleasantries|fluff|filler|small talk|tone|length|answers?|replies|reply|responses?|"
    r"code blocks?|comments|examples?|links?|sources|citations|steps|tl;?dr|sign-?off|greeting|apologies|hedging|"
    r"spelling|punctuation|capitals|capital letters|question marks|adjectives|buzzwords|quotes"
)
_FORMAT_VALUES = (
    rf"{LANGUAGES}|metric|imperial|celsius|fahrenheit|euros?|dollars|usd|eur|gbp|pounds|kilometres|kilometers|"
    r"km|miles|kg|kilos|pounds|24-hour|24h|12-hour|iso|utc|local time|plain text|plain english|simple english|"
    r"markdown|html|json|yaml|csv|pdf|a table|tables|bullet points|bullets|a list|numbered steps|one line|"
    r"one paragraph|(?:british|american|us|uk|canadian|australian) (?:english|spelling)|first person|second person|"
    r"(?:the )?active voice|lowercase|title case|sentence case"
)
_STYLE_EVAL_RE = re.compile(
    r"^(?:(?:that|this|it)(?:'s| is| was)\s+)?(?:(?:way|far|much|a bit|a little|just)\s+)?(?:too|so) "
    r"(?P<many>many|much) (?P<noun>[a-z ;-]+)|"
    r"^(?:(?:that|this|it)(?:'s| is| was| feels| reads| sounds| seems)?\s+)?(?:(?:way|far|much|a bit|a little|"
    r"slightly|kind of|rather|really|just|still|somewhat|overly|pretty)\s+)*(?:too|overly|so|very)\s+"
    r"(?P<adj>[a-z-]+)\b|"
    r"^(?:(?:that|this|it)(?:'s| is| was)\s+)?(?:a )?wall of text\b|"
    r"^(?:(?:that|this|it)(?:'s| is| was)\s+)?not (?P<enough>[a-z-]+) enough\b",
    re.I,
)
_COMPARATIVE_RE = re.compile(
    rf"^(?:(?:much|a bit|a little|way|even)\s+)?(?P<more>less|more|fewer)\s+(?P<what>{_STYLE_NOUNS}|[a-z-]+)\b",
    re.I,
)
_BARE_COMPARATIVE_RE = re.compile(
    r"^(?:(?:much|a bit|a little|way|even)\s+)?(?P<adj>shorter|longer|simpler|briefer|clearer|tighter|"
    r"more concise|less formal|more formal|less casual|more casual|crisper)\b",
    re.I,
)
_STYLE_DIRECTIVE_RE = re.compile(
    rf"\b(?:{_STYLE_NOUNS})\b|\b(?:shorter|longer|concise|brief|briefly|formal|casual|plain|simple|simpler|"
    r"succinct|loosen|tone (?:it )?down|straight to|to the point|get to the point|cut (?:it )?down|trim|"
    r"break it (?:up|into)|max(?:imum)?|at most|or less|or fewer|tops|up front|upfront|at the top|at the end)\b|"
    r"^(?:please )?(?:put|lead with|start with|open with|move) .{1,60}\b(?:first|last|on top)[.!]?$",
    re.I,
)
_FORMAT_REQUEST_RE = re.compile(
    rf"\b(?:in|as|into|to|using|with)\s+(?:(?:a|an|the)\s+)?(?:{_FORMAT_VALUES})\b|"
    rf"^(?:no|without)\s+(?:{_STYLE_NOUNS})\b",
    re.I,
)
#: "You should have asked me before …": how the agent should have gone about the task.
_SHOULD_HAVE_RE = re.compile(
    r"^(?:you|u)\s+(?P<neg>should(?:n't| not)|should|could|ought to|(?:were|was) (?:only |just )?supposed to|"
    r"needed to|need(?:ed)? to)(?:'ve|\s+have)?(?:\s+(?P<adv>only|just|really|also|first|at least|always|never))?"
    r"\s+(?P<verb>[a-z]+)\b(?P<rest>.*)$",
    re.I,
)
_FORGOT_RE = re.compile(r"^(?:you|u)\s+(?:forgot|didn't remember|missed|neglected)\s+(?:to\s+)?(?P<rest>.+)$", re.I)
_RATHER_RE = re.compile(
    r"^I(?:'d| would)\s+(?:rather|prefer(?: it if)?|like it if)\s+(?:you|u)\s+(?P<verb>[a-z]+)\b(?P<rest>.*)$", re.I
)
_WHY_DIDNT_RE = re.compile(
    r"^why (?:didn't|did not|don't|do not|wouldn't|won't) (?:you|u) (?:just )?(?P<rest>.+)$", re.I
)
_TOLD_YOU_RE = re.compile(r"^I\s+(?:already\s+)?(?:told|asked)\s+(?:you|u)\s+(?:to\s+|not to\s+)?(?P<rest>.+)$", re.I)
_CHECK_WITH_ME_RE = re.compile(
    r"\b(?:ask|check with|confirm with|run (?:it|this|that|things|them|everything) (?:by|past)|clear (?:it|this|that) "
    r"with|talk to|ping|wait for) me\b|\b(?:my|an?) (?:ok|okay|approval|sign-?off|go-?ahead|confirmation)\b",
    re.I,
)
#: Conventions of the user's team or project ("Actually we use pnpm in this repo", "our reports use ISO dates").
_CONVENTION_RE = re.compile(
    r"^(?:we|we're|we are|we've|our(?: [\w.-]+){1,2}?|the team|this (?:repo|project|codebase|team|company|service|"
    r"app)|everything here|here)\b(?:\s+(?:actually|always|only|"
    r"usually|all|just|now|mostly|generally|normally|still))*\s+(?:use|uses|are on|'re on|is on|run on|runs on|"
    r"deploy|deploys|write|writes|name|names|call|calls|is called|are called|host|hosts|store|stores|keep|keeps|"
    r"follow|follows|build with|builds with|ship|ships|test with|work in|works in|go through|goes through|"
    r"prefer|prefers|format|formats|standardi[sz]e on|settled on|moved to|switched to|migrated to|live|lives|sit|"
    r"sits|is kept|are kept|is stored|are stored|is hosted|are hosted|is written in|are written in|is built with|"
    r"lives in|is on|are on)\b"
    r"|^(?:we're|we are) (?:a|an|all) [\w.+#-]+ (?:shop|house|team|company|org|place|crowd|people)\b"
    r"|\b(?:standard|convention|default|policy|style guide|house style|rule of thumb) (?:here )?(?:is|says|uses)\b"
    r"|^(?:we're|we are|our \w+ (?:is|are)|the \w+ (?:is|are))(?: (?:now|all|still|actually))? on [A-Z0-9]"
    r"|\b(?:is|are) called\b.*\b(?:in this|here|in our)\b|\bin (?:this|our) (?:repo|project|codebase|team|company)\b",
    re.I,
)
#: A story about the past: what happened, not what to do.
_PAST_RE = re.compile(
    r"\b(?:was|were|had|did|went|made|ate|kept|took|came|said|told|thought|found|left|gave|saw|knew|became|began|"
    r"brought|bought|felt|lost|met|paid|spent|stood|won|wrote|broke|chose|drove|forgot|grew|heard|hurt|led|rode|"
    r"sang|shook|slept|spoke|stole|taught|threw|understood|woke|wore|crept)\b|"
    r"\b(?:I|we|he|she|they|it|someone|nobody|everyone|my \w+|the \w+)\s+(?:\w+ly\s+)?\w+ed\b|"
    r"\b(?:ago|back then|back in|last (?:year|summer|winter|spring|autumn|fall|month|week|night|time)|yesterday|"
    r"in (?:19|20)\d\d|when I was|years ago)\b",
    re.I,
)
MAX_RULE_WORDS = 30  # a longer sentence is prose, never a rule
MAX_RULE_SENTENCES = 3
#: First words that make a clause an instruction.
_DIRECTIVE_OPENERS = _words(
    "don't dont never always please stop avoid use make keep put leave add include check ask confirm show give "
    "send write reply answer respond skip drop cut start try remember assume prefer wait double-check tell let "
    "mention note cc copy call format sort list stick stay loosen tone break shorten trim get run go default "
    "follow switch change limit lead open close book schedule save lose ditch remove cut trim"
)


#: A verdict on the answer with no instruction in it.
_VERDICT_RE = re.compile(
    r"^(?:(?:that|this|it)(?:'s| is| was| looks| seems)\s+)?(?:the\s+|a\s+)?(?:(?:completely|totally|all|just|"
    r"quite|very)\s+)?(?:wrong|incorrect|not right|not correct|not quite|not it|not what I (?:asked for|wanted|meant)|"
    r"a mistake|an error|off)(?:\s+(?:[\w.-]+)){0,2}[.!]*$",
    re.I,
)


def _is_narrative(sentence: str) -> bool:
    """Prose about what happened (several past-tense verbs, or long): context, never a fact or a rule as it stands."""
    words = sentence.split()
    if len(words) > MAX_RULE_WORDS + 15:
        return True
    if _SHOULD_HAVE_RE.match(sentence) or _TOLD_YOU_RE.match(sentence) or _FORGOT_RE.match(sentence):
        return False
    past = len(_PAST_RE.findall(sentence))
    return (past >= 2 and len(words) > 12) or (past >= 1 and len(words) > 20)


def _is_directive(text: str) -> bool:
    """Whether a sentence (lead-ins stripped) is phrased as an instruction to the agent."""
    stripped, polite = _strip_polite(text)
    first = _first_word(stripped)
    if polite or _SUBJECT_MODAL_RE.match(text) or first in _DIRECTIVE_OPENERS or first in _IMPERATIVE_VERBS:
        return not re.match(r"^(?:I|we)\b", stripped) or bool(_SUBJECT_MODAL_RE.match(stripped))
    if re.match(r"^(?:no|without|only|just|all|every|everything)\s+\w+", stripped, re.I):
        return True  # "No emojis", "Only metric units", "Everything in UTC"
    if re.match(r"^I(?:'d| would)? (?:want|need|like|prefer)\s+(?:all|every|each|the|my|your|answers|replies|it|"
                r"them|things|everything|you)\b", stripped, re.I):  # fmt: skip
        return True  # "I want all times shown in 24-hour format"
    return False


_TONE_WORDS = _words("formal casual concise detailed specific technical direct friendly polite")


def _style_rule(sentence: str) -> str | None:
    """A rule from feedback on how an answer read ("Way too long." -> "Keep answers shorter (…)")."""
    text = _PLEASE_TAIL_RE.sub("", sentence).strip().rstrip(".!")
    if match := _STYLE_EVAL_RE.match(text):
        groups = match.groupdict()
        if groups.get("adj"):
            adj = groups["adj"].lower()
            fix = _STYLE_ADJECTIVES.get(adj)
            return f"{fix} (the user found an answer too {adj})." if fix else None
        if groups.get("many"):
            noun = groups["noun"].strip()
            return f"Use {'fewer' if groups['many'].lower() == 'many' else 'less'} {noun}." if re.match(
                rf"(?:{_STYLE_NOUNS})\b", noun, re.I) and len(noun.split()) <= 4 else None  # fmt: skip
        if groups.get("enough"):
            adj = groups["enough"].lower()
            return f"Be more {adj} (the user found an answer not {adj} enough)."
        return "Avoid walls of text: break answers into short paragraphs."
    if match := _BARE_COMPARATIVE_RE.match(text):
        rest = text[match.end() :].strip(" ,.")
        if not rest or _STYLE_DIRECTIVE_RE.search(rest) or len(rest.split()) <= 4:
            return f"Keep answers {match.group('adj').lower()}." + (f" {_capitalise(rest)}." if rest else "")
    if match := _COMPARATIVE_RE.match(text):
        if re.fullmatch(_STYLE_NOUNS, match.group("what"), re.I) or match.group("what").lower() in _TONE_WORDS:
            verb = "Use" if re.fullmatch(_STYLE_NOUNS, match.group("what"), re.I) else "Be"
            return f"{verb} {_lower_first(text)}."
    return None


def _process_rule(sentence: str) -> str | None:
    """A rule from feedback on how the agent went about the task ("You should have asked me before booking")."""
    text = _PLEASE_TAIL_RE.sub("", sentence).strip().rstrip(".!")
    if match := _SHOULD_HAVE_RE.match(text):
        verb = _base_verb(match.group("verb"))
        negative = "n't" in match.group("neg") or " not" in match.group("neg")
        adverb = match.group("adv") or ("only" if re.search(r"\bonly\b", match.group("neg")) else "")
        verb = f"{adverb} {verb}" if adverb else verb
        rest = match.group("rest").rstrip()
        return f"{'Do not ' + verb if negative else _capitalise(verb)}{rest}."
    if match := _FORGOT_RE.match(text):
        return f"Remember to {match.group('rest')}."
    if match := _RATHER_RE.match(text):
        rest = re.sub(r"\bthan\s+(?:just\s+)?([a-z]+)\b", lambda m: f"rather than {_base_verb(m.group(1))}",
                      match.group("rest"))  # fmt: skip
        return f"{_capitalise(_base_verb(match.group('verb')))}{rest}."
    if match := _WHY_DIDNT_RE.match(text):
        return f"{_capitalise(match.group('rest').rstrip('?'))}."
    if match := _TOLD_YOU_RE.match(text):
        negative = re.search(r"\bnot to\b", text[: match.start("rest")])
        rest = match.group("rest")
        return f"Do not {rest}." if negative else f"{_capitalise(rest)}."
    return None


_IRREGULAR_PARTICIPLES = {
    "been": "be", "done": "do", "gone": "go", "made": "make", "taken": "take", "given": "give", "written": "write",
    "sent": "send", "told": "tell", "run": "run", "read": "read", "put": "put", "set": "set", "left": "leave",
    "kept": "keep", "brought": "bring", "thought": "think", "bought": "buy", "got": "get", "gotten": "get",
    "shown": "show", "chosen": "choose", "spoken": "speak", "broken": "break", "paid": "pay", "said": "say",
    "built": "build", "held": "hold", "meant": "mean", "found": "find", "let": "let", "cut": "cut", "hit": "hit",
    "begun": "begin", "seen": "see", "known": "know", "drawn": "draw", "forgotten": "forget", "understood":
    "understand", "stuck": "stick", "woken": "wake", "ridden": "ride", "driven": "drive", "eaten": "eat",
    "ran": "run", "used": "use", "created": "create", "deleted": "delete", "completed": "complete", "quoted": "quote",
    "typed": "type", "required": "require", "called": "call", "pinged": "ping", "cced": "cc", "invited": "invite",
    "wrote": "write", "did": "do", "went": "go", "came": "come", "took": "take", "gave": "give", "saw": "see",
}  # fmt: skip


def _base_verb(word: str) -> str:
    """`asked` -> `ask`, `booked` -> `book`, `merged` -> `merge`, `stopped` -> `stop`, `tried` -> `try`, `told` ->
    `tell` (regular English spelling rules and the common irregular participles; a word that is no participle is
    returned as it is)."""
    lower = word.lower()
    if lower in _IRREGULAR_PARTICIPLES:
        return _IRREGULAR_PARTICIPLES[lower]
    if not lower.endswith("ed") or len(lower) <= 4:
        return lower
    stem_ = lower[:-2]
    if stem_.endswith("i") and len(stem_) > 2:
        return stem_[:-1] + "y"  # tried -> try, copied -> copy
    if len(stem_) > 3 and stem_[-1] == stem_[-2] and stem_[-1] in "bgmnprt":
        return stem_[:-1]  # stopped -> stop, planned -> plan, committed -> commit (added, called, passed stay)
    if stem_.endswith("e"):
        return stem_  # agreed -> agree, freed -> free
    silent_e = (
        r"(?:[vzc]|[^aeiou][aou]t|[^aeiou]ete|[nrd]g|[^s]s|[^aeiou][aiou]r|[^aeiouwl]l|ul|[^aeiou][iu]n|[^aeiou][iu]d|"
        r"[^aeiou][aiou]k|[^aeiou][aiu]m|[^aeiou]ib|[^aeiou]at)$"
    )
    if re.search(silent_e, stem_) and not re.search(r"(?:ss|ck|rl|wl|ail|eal|oil|oal|ool|eel|ain|oin|een|oon|ead|oad|"
                                                     r"eed|ood|aid|eak|ook|eem|oom|eer|oor|ear|air|our|focus|bias)$",
                                                     stem_):  # fmt: skip
        return stem_ + "e"  # merged -> merge, used -> use, updated -> update, scheduled -> schedule
    return stem_


#: "Good, but …", "Nice, though …": praise before the feedback.
_FEEDBACK_LEAD_RE = re.compile(
    r"^(?:(?:good|great|nice|fine|ok|okay|thanks|cool|hmm+|yes|yeah|looks good|not bad|close)[,!.]*\s+)?"
    r"(?:but|though|however|just|only)\b[,]?\s+(?=\w)",
    re.I,
)


def _feedback_rule(sentence: str) -> str | None:
    """The rule in one sentence of feedback after an agent turn: style, process, a convention, a standing
    instruction, or a directive about the answer's form; None when the sentence is none of these (a story, a fact,
    a one-off fix, a new task such as "Now translate it into German")."""
    text = _FEEDBACK_LEAD_RE.sub("", _STANDING_LEAD_RE.sub("", _LEAD_IN_RE.sub("", sentence))).strip() or sentence
    if rule := _style_rule(text) or _process_rule(text):
        return rule
    if text.endswith("?"):  # only a polite request counts ("Can you make it less formal?"), not a question
        stripped, polite = _strip_polite(text)
        if not polite:
            return None
        text = stripped.rstrip("?").strip()
        if rule := _style_rule(text):
            return rule
    if _CONVENTION_RE.search(text) and not _PAST_RE.search(text) and not _typed_fact_clause(text):
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", text))
    new_task = bool(re.match(r"^(?:now|also|then|next|and now|and then)\b|^(?:can|could|would) you (?:also|now)\b|"
                             r"^(?:please\s+)?translate\b", text, re.I))  # fmt: skip
    if _is_directive(text) and (_names_style(text) or (not new_task and (
            _FORMAT_REQUEST_RE.search(text) or _STANDING_RE.search(sentence) or _CHECK_WITH_ME_RE.search(text)))):
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", text))
    if not new_task and _FORMAT_REQUEST_RE.search(text) and len(text.split()) <= 8 and \
            not _QUESTION_START_RE.match(text) and not re.search(r"\btranslat", text, re.I):  # fmt: skip
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", text))  # "Prices in euros, please"
    return None


def _names_style(text: str) -> bool:
    """Whether a directive names the answer's style ("Keep replies short", "Answer in two sentences max"). The verb
    that opens it does not count: "Reply to the customer about the delay" is a new task, not feedback on replies."""
    first = _first_word(text)
    opening = len(first) if first in _IMPERATIVE_VERBS else 0
    return any((m.start(), m.end()) != (0, opening) for m in _STYLE_DIRECTIVE_RE.finditer(text))


def _is_slip(sentence: str) -> bool:
    """A fix of what the user asked for this time ("No, I meant the staging server", "No, 2024."), with nothing
    durable in it."""
    sentence = _normalise(sentence)
    text = _STRIP_LEAD_RE.sub("", sentence).strip()
    if _DURABLE_RE.search(text) or _STANDING_RE.search(text) or _style_rule(text):
        return False
    if _SLIP_RE.search(sentence) or _SLIP_RE.search(text):
        return not (_STYLE_DIRECTIVE_RE.search(text) and not re.search(r"\bmake it (?:a|an|the)\b", text, re.I))
    return _bare_value_slip(sentence)


_CLOSER_RE = re.compile(
    r"^(?:(?:that's|that is|it's) (?:all|it|fine|ok|okay|enough)|all (?:good|set|done)|i'm (?:good|fine|ok|okay|set|done)|"
    r"not (?:now|yet|today|really)|maybe later|later|nothing(?: else)?|none|nah|nope|never ?mind|not needed|no need)\b",
    re.I,
)


def _bare_value_slip(sentence: str) -> bool:
    """ "No, 2024." / "No, staging.": a bare value after the "No", no instruction in it (not "No, all good")."""
    sentence = _normalise(sentence)
    text = _STRIP_LEAD_RE.sub("", sentence).strip()
    return text != sentence and 0 < len(text.split()) <= 3 and not _is_directive(text) and \
        not _profile_from_clause(text) and not _FILLER_SENTENCE_RE.match(text) and not _CLOSER_RE.match(text)  # fmt: skip


def _has_correction_marker(text: str) -> bool:
    # "stop remembering my phone number" holds a marker word but is a forget request, not a rule for the agent
    sentences = [_NOT_A_CORRECTION_RE.sub(" ", _normalise(s)).strip() for s in _sentences(text) if not forget_target(s)]
    return any(_MARKER_RE.search(s) or _LEADING_NO_RE.match(s) for s in sentences)


def _has_feedback(text: str, strong: bool = False) -> bool:
    """Whether a user turn gives the agent feedback beyond the marker words: style, process, conventions, standing
    instructions, or a one-off fix ("I meant …"). `strong`: the agent had asked a question, so a bare "No, X" is an
    answer to it, not a fix."""
    return any(_feedback_rule(s) or (_is_slip(s) and not (strong and _bare_value_slip(s)))
               for s in map(_normalise, _sentences(text)))  # fmt: skip


def _rule_sentence(sentence: str) -> str:
    sentence = _SUBJECT_ADVERB_RE.sub(lambda m: m.group(1), sentence)
    sentence = _SUBJECT_MODAL_RE.sub("", sentence)
    sentence = _SUBJECT_USE_RE.sub(lambda m: m.group(1), sentence)
    sentence = _CLAUSE_RULE_RE.sub(lambda m: "; " + m.group(1), sentence)
    sentence = sentence.strip().rstrip(",;:")
    if sentence and sentence[-1] not in ".!?":
        sentence += "."
    return _capitalise(sentence)


def _directive_clauses(sentence: str) -> list[str]:
    """The clauses of a long or narrative sentence that are instructions ("…, so never do that again")."""
    clauses = re.split(r"[,;]\s+|\s+[-\u2013\u2014]+\s+|\s+(?:and|but|so)\s+(?=(?:never|always|don't|do not|please)\b)",
                       sentence)  # fmt: skip
    return [c for c in clauses if len(c.split()) <= MAX_RULE_WORDS and re.match(
        r"^(?:please\s+)?(?:never|always|don't|do not|stop|avoid|make sure|remember to)\b", c.strip(), re.I)]


def correction_rule(correction: str) -> str:
    """The user's correction or feedback as an imperative rule, keeping their words ("No, we never X, always Y" ->
    "Never X; always Y."; "Way too long." -> "Keep answers shorter (…)"). Sentences that are stories, facts about
    the user or one-off fixes ("I meant the staging server") are left out; "" when no rule is left."""
    rules = []
    for sentence in map(_normalise, _sentences(correction)):
        if forget_target(sentence):  # a forget request in the same turn is handled as one, not as part of the rule
            continue
        if _is_slip(sentence):  # a one-off fix: session context, not a rule
            continue
        marked = _has_correction_marker(sentence)
        rule = _STRIP_LEAD_RE.sub("", _LEAD_IN_RE.sub("", _STRIP_LEAD_RE.sub("", sentence)))
        if not rule or _FILLER_SENTENCE_RE.match(rule) or _NOT_A_CORRECTION_RE.fullmatch(rule.rstrip(".!")) or \
                _VERDICT_RE.match(rule):  # fmt: skip
            continue  # "Wrong address.", "That was the wrong environment.": a verdict, no rule in it
        # a plain fact about the user in the same turn ("I'm a PM") is a profile, not part of the rule; so is a
        # fact in a typed slot after a bare "No," ("No, I live in Munich now")
        is_fact = any(map(_profile_from_clause, _CLAUSE_SPLIT_RE.split(rule)))
        only_lead = marked and not _MARKER_RE.search(rule)
        if is_fact and not _feedback_rule(rule) and (not marked or (only_lead and _typed_fact_clause(rule))):
            continue
        if rule.endswith("?") and not _feedback_rule(rule):
            continue  # a question is not a rule (a polite request about the answer's form is)
        if _is_narrative(rule) or (_PAST_RE.search(rule) and not _feedback_rule(rule) and not _is_directive(rule)):
            # what happened is context: only the instructions in it ("…, so never do that again") are rules
            rules += [_rule_sentence(c) for c in _directive_clauses(rule)]
            continue
        if feedback := _feedback_rule(rule):
            rules.append(feedback)
        elif marked and (_MARKER_RE.search(rule) or _is_directive(rule) or rule != sentence):
            rules.append(_rule_sentence(rule))
        elif _is_directive(rule):
            rules.append(_rule_sentence(_PLEASE_TAIL_RE.sub("", rule)))
    rules = [r for r in dict.fromkeys(rules) if len(r.split()) <= MAX_RULE_WORDS + 5]
    return _clip(" ".join(rules[:MAX_RULE_SENTENCES]), MAX_CONTENT_CHARS)


def session_notes(text: str) -> list[str]:
    """The one-off fixes of a user turn ("No, I meant the staging server" -> "Meant the staging server"): they hold
    for the conversation they were said in and are never stored as rules."""
    notes = []
    for sentence in map(_normalise, _sentences(text)):
        if _is_slip(sentence):
            core = _STRIP_LEAD_RE.sub("", _LEAD_IN_RE.sub("", sentence)).rstrip(".!")
            core = re.sub(r"^(?:oops|whoops|sorry|my bad)\b[,!.]?\s*", "", core, flags=re.I)
            notes.append(_capitalise(re.sub(r"^I\s+(?=meant|mean|said|was|wanted|asked)", "", core)) + ".")
    return notes


# Words that make a request read as "When <gerund> …"; anything else is quoted as "When asked: …".
_IMPERATIVE_VERBS = _words(
    "add analyse analyze answer apply archive ask book build buy calculate cancel change check clean clear close "
    "compare compile compute configure convert copy create debug delete deploy describe design draft drop edit email "
    "estimate explain export extract fetch file find fix format generate get give help implement import improve "
    "install list load look make merge migrate move open optimise optimize order pay plan post prepare print "
    "provision publish pull push put query read rebuild recommend refactor refund release reload remove rename "
    "reorder replace reply report reset resize restart restore retry review rewrite roll rotate run save scale "
    "schedule search send set share show sort start stop submit suggest summarise summarize switch sync tell test "
    "track train transfer translate troubleshoot turn undo update upgrade upload use validate verify write "
    "leave keep include address mention cc assume attach label tag commit"
)
_SUBJECT_WORDS = _words("i we my our the a an this that these those it there its his her their some all each every")
_GREETING_RE = re.compile(r"^(?:hi|hello|hey|yo|good (?:morning|afternoon|evening))(?: there)?\b[\s,!.]*", re.I)
_POLITE_RE = re.compile(
    r"^(?:please|pls|kindly|can you|could you|would you|will you|can u|could u|i need you to|i want you to|"
    r"i'd like you to|i would like you to)\b[\s,]*",
    re.I,
)


def _strip_polite(sentence: str) -> tuple[str, bool]:
    """The sentence without leading politeness ("can you please …"), and whether any was removed."""
    polite = False
    while match := _POLITE_RE.match(sentence):
        sentence, polite = sentence[match.end() :], True
    return sentence, polite


def _request_sentence(request: str) -> str:
    """The sentence of a user turn that states the task: the first imperative, polite request or question,
    else the first sentence that is not a statement about the user ("Hi! I'm Dana. Deploy X." -> "Deploy X.")."""
    sentences = [s for s in (_GREETING_RE.sub("", _normalise(s)).strip() for s in _sentences(request)) if s]
    for sentence in sentences:
        text, polite = _strip_polite(sentence)
        if polite or sentence.endswith("?") or _first_word(text) in _IMPERATIVE_VERBS:
            return sentence
    statements = [s for s in sentences if len(s.split()) >= 2 and _profile_from_clause(s) is None]
    return (statements or sentences or [""])[0]


def situation_trigger(request: str) -> str:
    """A trigger naming the situation of a user request: "Deploy the billing service" -> "When deploying the
    billing service"; a question -> "When asked: <question>"."""
    sentence = _request_sentence(request)
    text, polite = _strip_polite(sentence)
    text = re.sub(r"[\s,]*\bplease\b[\s.!?]*$", "", text, flags=re.I).rstrip(" .!?")
    if not text:
        return "When answering this kind of request"
    first, _, rest = text.partition(" ")
    if first.lower() in _IMPERATIVE_VERBS:
        phrase = f"{_gerund(first.lower())} {rest}".strip()
    elif not polite and (sentence.endswith("?") or _QUESTION_START_RE.match(text)):
        phrase = f"asked: {_lower_first(text)}"
    elif first.lower() in _SUBJECT_WORDS:
        phrase = _lower_first(text)
    else:
        phrase = f"asked: {_lower_first(text)}"
    return _clip(f"When {phrase}", MAX_TRIGGER_CHARS)


def _corrected_agent_index(turns: tuple[Turn, ...], index: int) -> int | None:
    """The agent turn that user turn `index` corrects or gives feedback on, or None when it does neither: marker
    words ("no", "wrong", "never", "instead", …), style feedback ("Way too long."), process feedback ("You should
    have asked me first."), a convention ("Actually we use pnpm here."), a standing instruction, or a one-off fix
    ("I meant the staging server"). A bare "No" that answers the agent's question is an answer, not a correction."""
    turn = turns[index]
    if not turn.is_user:
        return None
    agent_index = previous_speaker_index(turns, index)
    if agent_index is None or not is_agent_turn(turns[agent_index]):
        return None
    text = turn.content
    asked = turns[agent_index].content.rstrip().endswith("?")
    if _has_correction_marker(text):
        only_no = not any(_MARKER_RE.search(_NOT_A_CORRECTION_RE.sub(" ", _normalise(s))) for s in _sentences(text))
        if not (asked and only_no) or _has_feedback(text, strong=asked):
            return agent_index
    return agent_index if _has_feedback(text, strong=asked) else None


def _request_index(turns: tuple[Turn, ...], agent_index: int) -> int | None:
    """The user turn that set the task the agent was answering: the nearest earlier user turn that is not itself a
    correction (after "No, X" -> agent retry -> "No, Y", the situation is still the original request)."""
    index = preceding_index(turns, agent_index, user=True)
    while index is not None and _corrected_agent_index(turns, index) is not None:
        index = preceding_index(turns, index, user=True)
    return index


def _correction_playbook(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    agent_index = _corrected_agent_index(turns, index)
    if agent_index is None:
        return None
    turn, agent = turns[index], turns[agent_index]
    content = correction_rule(turn.content)
    if not content:
        return None  # a one-off fix or a story: session context at most, never a rule
    request_index = _request_index(turns, agent_index)
    if request_index is not None:
        trigger = situation_trigger(turns[request_index].content)
        sources = [turns[request_index].turn_id, agent.turn_id, turn.turn_id]
    else:  # the request scrolled out of the window: describe the situation by the answer that went wrong
        trigger = _clip(f"When giving an answer like: {_normalise(agent.content)}", MAX_TRIGGER_CHARS)
        sources = [agent.turn_id, turn.turn_id]
    quote = _clip(_normalise(agent.content), MAX_RATIONALE_QUOTE)
    return ExtractedPlaybook(
        content=clean_text(content),
        trigger=clean_text(trigger),
        rationale=clean_text(f"The user corrected the agent's answer: '{quote}'"),
        kind="correction",
        source_turn_ids=sources,
    )


def _standing_rule(sentence: str) -> tuple[str, str | None] | None:
    """(rule, situation) for a standing instruction in any user turn ("From now on, write commit messages in the
    imperative mood", "Whenever you write SQL, use CTEs", "Could you keep the numbers in metric units?", "We use
    Poetry for this project"); the situation is the "whenever …" clause when there is one. None otherwise."""
    text = _normalise(sentence)
    if forget_target(text) or _is_narrative(text) or len(text.split()) > MAX_RULE_WORDS:
        return None
    core = _NOT_A_CORRECTION_RE.sub("", _LEAD_IN_RE.sub("", text)).strip(" ,.!")  # "never mind" is no rule
    if not core:
        return None
    if match := _CONDITION_RE.match(core):
        rule = (match.group("rule") or match.group("rule2")).strip()
        situation = (match.group("situation") or match.group("situation2")).strip()
        statement = re.match(r"^(?:I|I'm|I've|he|she|they|it|it's|there|this|that)\b", rule, re.I)
        if _is_directive(rule) or _style_rule(rule) or (not statement and not _PAST_RE.search(rule)):
            return _style_rule(rule) or _rule_sentence(_PLEASE_TAIL_RE.sub("", rule)), situation
    stripped, polite = _strip_polite(core)
    polite = polite or bool(_PLEASE_TAIL_RE.search(core))
    if stripped.endswith("?"):
        if not polite:
            return None  # a question, not an instruction
        stripped = stripped.rstrip("?").strip()
    marked = bool(_STANDING_RE.search(core))
    if marked or re.match(r"^(?:please\s+)?(?:always|never|don't ever|do not ever)\s+\w+", stripped, re.I):
        rule = _STANDING_LEAD_RE.sub("", stripped).strip()
        rule = re.sub(r"[\s,]*\b(?:from now on|going forward|moving forward|in (?:the )?future|from today on|"
                      r"any ?more|ever again)\b[\s,]*(?=[.!]?$)", "", rule, flags=re.I).strip()  # fmt: skip
        if not rule:
            return None
        if _style_rule(rule):
            return _style_rule(rule), None
        # after an explicit marker ("From now on, sign off with …") anything but a statement about someone is an
        # instruction; a statement about the user ("From now on I'll do it myself") is not
        statement = re.match(r"^(?:I|I'll|I'm|I've|he|she|they|it|it's|there|this|that)\b", rule, re.I) and \
            not _SUBJECT_MODAL_RE.match(rule)  # fmt: skip
        if _is_directive(rule) or (marked and not statement and not _PAST_RE.search(rule)):
            return _rule_sentence(_PLEASE_TAIL_RE.sub("", rule)), None
        return None
    # a request about every answer's form ("Could you keep the numbers in metric units?", "Please use British
    # spelling", "Metric units only, please"): not about this answer alone
    formatted = _FORMAT_REQUEST_RE.search(stripped) or re.search(rf"\b(?:{_FORMAT_VALUES})\b", stripped, re.I)
    keeps = re.match(r"^(?:please\s+)?(?:keep|stick to|stick with|stay with|use|always use|use only|only use|write|"
                     r"format)\b", stripped, re.I)  # fmt: skip
    if polite and formatted and keeps and not re.search(r"\btranslat", stripped, re.I):
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", stripped)), None
    # a prohibition about the answers' form ("Don't use markdown in your replies", "Avoid jargon", "I'd rather you
    # didn't use emojis"): every answer
    if match := re.match(r"^(?:please\s+)?(?:(?:don't|do not|never|avoid|stop)(?: ever)?|"
                         r"I(?:'d| would) (?:rather|prefer)(?: it if)? you (?:didn't|did not|don't|not))\s+(?P<rest>.+)$",
                         stripped, re.I):  # fmt: skip
        about_form = re.search(rf"\b(?:{_STYLE_NOUNS})\b", match.group("rest"), re.I)
        if about_form and not _PAST_RE.search(match.group("rest")):
            verb = "Avoid" if stripped.lower().startswith(("avoid", "please avoid")) else "Don't"
            rest = re.sub(r"^(?:use|using)\b", "use", match.group("rest"), flags=re.I)
            return _rule_sentence(_PLEASE_TAIL_RE.sub("", f"{verb} {rest}")), None
    if polite and re.match(r"^(?:please\s+)?keep (?:it|them|things|answers|replies|everything) (?:short|brief|concise|"
                           r"simple|formal|casual|light|to the point)\b", stripped, re.I):  # fmt: skip
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", stripped)), None
    if formatted and len(stripped.split()) <= 6 and (polite or re.search(r"\bonly\b", stripped, re.I)) and \
            not _QUESTION_START_RE.match(stripped) and not re.search(r"\btranslat", stripped, re.I):  # fmt: skip
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", stripped)), None  # "Metric units only, please"
    if _CONVENTION_RE.search(core) and not _PAST_RE.search(core) and not _typed_fact_clause(core) and re.match(
            r"^(?:we|our|the team|this|everything|in this|in our|here)\b", core, re.I):  # fmt: skip
        return _rule_sentence(_PLEASE_TAIL_RE.sub("", core)), None
    return None


def _standing_playbooks(turns: tuple[Turn, ...], index: int) -> Iterator[ExtractedPlaybook]:
    """Standing instructions of user turn `index` (one that does not answer an agent turn)."""
    turn = turns[index]
    for sentence in _sentences(turn.content):
        found = _standing_rule(sentence)
        if found is None:
            continue
        rule, situation = found
        if situation:
            trigger = situation_trigger(situation)
        elif _first_word(rule) in _IMPERATIVE_VERBS:
            trigger = situation_trigger(rule.rstrip("."))
        elif (match := re.match(r"^(?:always|never|don't|do not)\s+(?=(\w+))", rule, re.I)) and \
                match.group(1).lower() in _IMPERATIVE_VERBS:  # fmt: skip
            trigger = situation_trigger(rule[match.end() :].rstrip("."))  # "Never deploy on Fridays": when deploying
        else:  # the rule's own words keep triggers of different instructions apart (a trigger is a dedup slot)
            trigger = _clip(f"In any answer: {_lower_first(rule.rstrip('.'))}", MAX_TRIGGER_CHARS)
        yield ExtractedPlaybook(
            content=clean_text(rule),
            trigger=clean_text(trigger),
            rationale=clean_text(
                f"The user gave a standing instruction: '{_clip(_normalise(sentence), MAX_RATIONALE_QUOTE)}'"
            ),
            kind="correction",
            source_turn_ids=[turn.turn_id],
        )


# ---------------------------------------------------------------------------------------------------------------
# Tool failures
# ---------------------------------------------------------------------------------------------------------------

_PERMISSION_RE = re.compile(r"permission|forbidden|\b403\b|unauthori[sz]ed|access denied", re.I)
_MISSING_RE = re.compile(r"not found|unknown tool|no such tool|not available", re.I)
_TRANSIENT_RE = re.compile(r"time(?:d)? ?out|unavailable|connection|\b5\d\d\b", re.I)
_RATE_LIMIT_RE = re.compile(r"rate.?limit|too many requests|\b429\b", re.I)
_INPUT_KEYS = ("input", "args", "arguments", "parameters", "params", "query")
_RESULT_KEYS = frozenset(
    {
        "output",
        "result",
        "response",
        "error",
        "error_message",
        "exception",
        "status",
        "latency",
        "latency_ms",
        "duration_ms",
    }
)


def blocking_issue_kind(error: str) -> str | None:
    """`permission_denied` / `missing_tool` when the error says so, else None."""
    if _PERMISSION_RE.search(error):
        return "permission_denied"
    if _MISSING_RE.search(error):
        return "missing_tool"
    return None


def tool_input(call: ToolCall) -> Any:
    """The arguments a tool call was made with (its `input`/`args`/… entry, else the non-result fields)."""
    for key in _INPUT_KEYS:
        if key in call.tool_data:
            return call.tool_data[key]
    return {k: v for k, v in call.tool_data.items() if k not in _RESULT_KEYS}


def _check_hint(call: ToolCall, error: str) -> str:
    if _PERMISSION_RE.search(error):
        return "that the credentials have the required permissions or scopes"
    if _MISSING_RE.search(error):
        return "that the tool or resource exists and is available"
    if _RATE_LIMIT_RE.search(error):
        return "the rate limit and wait"
    if _TRANSIENT_RE.search(error):
        return "that the service is reachable"
    args = tool_input(call)
    keys = ", ".join(map(str, args)) if isinstance(args, dict) and args else ""
    return f"the input ({keys})" if keys else "the input"


def _tool_failure_playbooks(turns: tuple[Turn, ...]) -> Iterator[tuple[int, ExtractedPlaybook]]:
    """(turn index, playbook) for every failed tool call, in window order."""
    calls = [(i, turn, call) for i, turn in enumerate(turns) for call in turn.tools_used]
    for position, (index, turn, call) in enumerate(calls):
        error = call.error
        if error is None:
            continue
        error_text = _clip(_normalise(error), MAX_ERROR_CHARS)
        later_success = next(
            ((t, c) for _, t, c in calls[position + 1 :] if c.tool_name == call.tool_name and c.error is None), None
        )
        content = (
            f"{call.tool_name} failed with '{error_text}'. Check {_check_hint(call, error)} before calling it again."
        )
        rationale = f"A {call.tool_name} call failed with '{_clip(error_text, MAX_RATIONALE_QUOTE)}'"
        sources = [turn.turn_id]
        if later_success is not None:
            success_turn, success_call = later_success
            working = json.dumps(tool_input(success_call), ensure_ascii=False, default=str)
            content += f" A later call succeeded; use the working input: {_clip(working, MAX_INPUT_JSON_CHARS)}"
            rationale += "; a later call of the same tool succeeded"
            if success_turn.turn_id not in sources:
                sources.append(success_turn.turn_id)
        issue = blocking_issue_kind(error)
        yield (
            index,
            ExtractedPlaybook(
                content=clean_text(content),
                trigger=f"When calling the {call.tool_name} tool",
                rationale=clean_text(rationale + "."),
                kind="tool_failure",
                blocking_issue_kind=issue,
                blocking_issue_details=clean_text(error_text) if issue else None,
                source_turn_ids=sources,
            ),
        )


# ---------------------------------------------------------------------------------------------------------------
# Success recipes: tool calls that worked, confirmed by the user
# ---------------------------------------------------------------------------------------------------------------

# Heuristic: an explicit thank-you or approval right after the agent's turn is the success signal.
_APPROVAL_RE = re.compile(
    r"^(?:thanks|thank you|thx|perfect|great|awesome|excellent|nice|works|that works|it works|exactly|"
    r"that's (?:it|right|perfect|great)|looks good|lgtm)\b",
    re.I,
)


def _success_recipe(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    """A recipe from an agent turn whose tool calls all succeeded and that the user then approved.

    Content lists the exact calls and inputs that worked (grounded in the turn); the trigger is the request.
    """
    turn = turns[index]
    if not is_agent_turn(turn) or not turn.tools_used or any(c.error is not None for c in turn.tools_used):
        return None
    reply = next((t for t in turns[index + 1 :] if t.is_user), None)
    request_index = _request_index(turns, index)
    if reply is None or request_index is None or not _APPROVAL_RE.match(_LEAD_IN_RE.sub("", reply.content.strip())):
        return None
    steps = "; then ".join(
        f"{call.tool_name}({_clip(json.dumps(tool_input(call), ensure_ascii=False, default=str), MAX_INPUT_JSON_CHARS)})"
        for call in turn.tools_used
    )
    request = turns[request_index]
    return ExtractedPlaybook(
        content=clean_text(f"What worked: {steps}."),
        trigger=situation_trigger(request.content),
        rationale=clean_text(f"The user approved the result: '{_clip(reply.content, MAX_RATIONALE_QUOTE)}'."),
        kind="recipe",
        source_turn_ids=[request.turn_id, turn.turn_id, reply.turn_id],
    )


# ---------------------------------------------------------------------------------------------------------------
# Expert answers
# ---------------------------------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[a-z0-9]+(?:[-_./:][a-z0-9]+)*")
#: Function and filler words: they carry no content (and identify nobody).
STOP_WORDS = _words(
    "a about above after again all also am an and any are as at be because been before being below between both "
    "but by can could did do does doing down during each few for from further had has have having he her here hers "
    "him his how i if in into is it its itself just me more most my no nor not now of off on once only or other "
    "our ours out over own same she should so some such than that the their theirs them then there these they "
    "this those through to too under until up very was we were what when where which while who whom why will "
    "with would you your yours yourself "
    # conversational filler: differences in these are style, not substance
    "sure certainly absolutely definitely great happy glad help hi hello hey please thanks thank let know "
    "simply basically actually really first next finally just course ok okay well note here's there's"
)
EXPERT_JACCARD_THRESHOLD = 0.6
MAX_MISSED_TOKENS = 10
MAX_EXPERT_CHARS = 400


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


def _expert_gap(agent: str, expert: str) -> list[str]:
    """Content tokens the expert used and the agent lacked, if the answers differ in substance; else [].

    HEURISTIC, not understanding: "substance" means the expert introduces new content words AND the two token
    sets overlap less than EXPERT_JACCARD_THRESHOLD. Reordering, casing, punctuation and filler words leave the
    sets unchanged and yield nothing; a paraphrase with many synonyms may be misread as substantive.
    """
    agent_tokens = set(content_tokens(agent))
    expert_ordered = content_tokens(expert)
    expert_tokens = set(expert_ordered)
    missed = [t for t in expert_ordered if t not in agent_tokens]
    union = agent_tokens | expert_tokens
    jaccard = len(agent_tokens & expert_tokens) / len(union) if union else 1.0
    return missed if missed and jaccard < EXPERT_JACCARD_THRESHOLD else []


def _expert_playbook(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    turn = turns[index]
    expert = turn.expert_content.strip()
    if not expert:
        return None
    missed = _expert_gap(turn.content, expert)
    if not missed:
        return None
    question_index = preceding_index(turns, index, user=True)
    if question_index is not None:
        trigger = f"When asked: {_normalise(turns[question_index].content)}"
        sources = [turns[question_index].turn_id, turn.turn_id]
    else:
        trigger = f"When answering like: {_normalise(turn.content)}"
        sources = [turn.turn_id]
    return ExtractedPlaybook(
        content=clean_text(f"Answer as the expert did: {_clip(_normalise(expert), MAX_EXPERT_CHARS)}"),
        trigger=clean_text(_clip(trigger, MAX_TRIGGER_CHARS)),
        rationale=clean_text(
            "The expert answer covers points the agent's answer missed: " + ", ".join(missed[:MAX_MISSED_TOKENS])
        ),
        kind="expert",
        source_turn_ids=sources,
    )


# ---------------------------------------------------------------------------------------------------------------
# The extractor
# ---------------------------------------------------------------------------------------------------------------


class BuiltinExtractor:
    """Rule-based baseline extractor (see the module docstring); needs no network and makes no LLM calls."""

    name = EXTRACTOR_NAME

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> ExtractionResult:
        """Profiles and playbooks the rules find in `window`. The group's definitions and agent context are
        ignored (the rules do not read them); items are tagged with the group's first profile/playbook extractor,
        and a kind the group has no extractor for is not extracted."""
        group = group or DEFAULT_GROUP
        turns = window.turns
        profiles: list[ExtractedProfile] = []
        playbooks: list[ExtractedPlaybook] = []
        forget: list[ForgetDirective] = []
        tool_failures: dict[int, list[ExtractedPlaybook]] = {}
        for index, playbook in _tool_failure_playbooks(turns):
            tool_failures.setdefault(index, []).append(playbook)
        notes: list[str] = []
        for index, turn in enumerate(turns):
            correction = _correction_playbook(turns, index)
            if turn.is_user:
                corrected = correction is not None or _corrected_agent_index(turns, index) is not None
                profiles.extend(_profiles_from_turn(turn, is_correction_turn=corrected))
                forget.extend(_forget_directives(turn))
                if corrected:  # one-off fixes hold for this conversation only
                    notes.extend(session_notes(turn.content))
                else:  # a standing instruction needs no agent turn to answer
                    playbooks.extend(_standing_playbooks(turns, index))
            if correction is not None:
                playbooks.append(correction)
            playbooks.extend(tool_failures.get(index, []))
            if (expert := _expert_playbook(turns, index)) is not None:
                playbooks.append(expert)
            if (recipe := _success_recipe(turns, index)) is not None:
                playbooks.append(recipe)
        return ExtractionResult(
            profiles=[tagged for p in dedupe_by_content(profiles) if (tagged := group.tag_profile(p))],
            playbooks=[tagged for p in dedupe_by_content(playbooks) if (tagged := group.tag_playbook(p))],
            # forgetting is about profiles: a group without a profile extractor has nothing to forget
            forget=forget if group.resolve("profile", None)[0] is not None else [],
            extractor=EXTRACTOR_NAME,
            model=MODEL_NAME,
            prompt_version=PROMPT_VERSION,
            llm_calls=0,
            session_context=list(dict.fromkeys(notes)),
        )
