"""The built-in extractor: an offline, deterministic, RULE-BASED BASELINE. It is not a model.

It exists so the pipeline runs end to end with no LLM configured (no instruction-following model is available
offline) and so tests have a reproducible reference. It only recognises explicit surface patterns:

- profiles: first-person statements in user turns ("I prefer dark mode" -> "Prefers dark mode", "my name is Dana"
  -> "Name is Dana"), skipping questions, requests and sentences that correct the agent;
- correction playbooks: a user turn right after an agent turn that contains correction markers ("no", "wrong",
  "don't", "never", "instead", "use X not Y", …); trigger = the situation taken from the request the agent was
  answering, content = the user's correction rewritten mechanically as a rule (the user's own words kept);
- tool-failure playbooks: every tool call with an error, naming the tool and the cause, pointing at a later call
  of the same tool that worked;
- expert playbooks: an expert answer whose content words differ substantially from the agent's (token-set
  heuristic, see `_expert_gap`);
- forget requests ("forget that I live in Paris", "delete what you know about my address", "stop remembering my
  phone number"): a HEURISTIC over the wording (`forget_target`). They become forget directives, never profiles or
  correction playbooks; which stored profiles they remove is matched in learn.py (learning/forget.py).

Anything phrased less explicitly is missed, and the wording is mechanical; configure an LLM for real use.
Same window in, same output out (same order); identical contents are emitted once per window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from reflexio_pipelines.learning.config import DEFAULT_GROUP, ExtractorGroup
from reflexio_pipelines.learning.jsonparse import clean_text, dedupe_by_content
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
PROMPT_VERSION = "rules-v1"
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


def _gerund(verb: str) -> str:
    """`deploy` -> `deploying`, `write` -> `writing`, `run` -> `running`, `tie` -> `tying`."""
    lower = verb.lower()
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
    r"\s*[;:]\s+|,?\s+(?:and|but|so|also)\s+(?=(?:I|my|My)\b)|,\s+(?=(?:I|my|My)\b)|,\s+so\s+|\s+[-\u2013\u2014]+\s+"
)
_LEAD_IN_RE = re.compile(r"^(?:(?:also|and|but|so|well|actually|btw|fyi|oh|hi|hey|hello|ok|okay)\b[,!.]?\s+)+", re.I)
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
    "very really pretty quite too also gonna new interested planning"
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
}
_VERB_RE = re.compile(r"^I (work|live|prefer|like|love|use|speak)\b\s*(.*)$", re.I)
_BE_RE = re.compile(r"^I(?:'m| am)\s+(.*)$", re.I)
_ADVERB_RE = re.compile(r"^I (always|usually|never|often|mostly|only|rarely)\s+([A-Za-z]+)\b\s*(.*)$", re.I)
_MY_RE = re.compile(r"^my\s+([\w'-]+(?:\s+[\w'-]+){0,3}?)\s+(is|are)\s+(.+)$", re.I)
_CALL_ME_RE = re.compile(r"^(?:you can |please )?call me\s+(.+)$", re.I)
_TIME_TAIL_RE = re.compile(r"\s+(?:last|this|next) (?:week|month|year)$|\s+recently$|\s+yesterday$", re.I)
# "I moved to Berlin" states where the user lives now (so it can supersede an older "Lives in London")
_MOVED_RE = re.compile(r"^I(?: have|'ve)?(?: just| recently)? (?:moved|relocated) to\s+(.+)$", re.I)

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


def _profile_from_clause(clause: str, greeted: bool = False) -> str | None:
    """Third-person fact for one first-person clause, or None when the clause is not a stable statement.

    `greeted` says the sentence opened with a greeting, which makes "I'm <Name>" an introduction."""
    clause = _LEAD_IN_RE.sub("", clause.strip()).rstrip(".!")
    if match := _MY_RE.match(clause):
        subject, verb, rest = match.groups()
        if _first_word(rest) in _DEICTIC_OBJECTS:
            return None
        return f"{_capitalise(_third_person(subject))} {verb.lower()} {_third_person(rest)}"
    if match := _MOVED_RE.match(clause):
        return f"Lives in {_third_person(_TIME_TAIL_RE.sub('', match.group(1)))}"
    if match := _CALL_ME_RE.match(clause):
        return f"Prefers to be called {_third_person(match.group(1))}"
    if match := _ADVERB_RE.match(clause):
        adverb, verb, rest = match.groups()
        return f"{adverb.capitalize()} {_third_person_verb(verb.lower())} {_third_person(rest)}".strip()
    if match := _VERB_RE.match(clause):
        verb, rest = match.groups()
        # "I like it", "I use this" talk about the conversation; "I work" alone says nothing
        if len(rest) < 2 or _first_word(rest) in _DEICTIC_OBJECTS or rest.lower().startswith(("to ask", "to know")):
            return None
        return f"{_VERB_PREFIXES[verb.lower()]} {_third_person(rest)}"
    if match := _BE_RE.match(clause):
        rest = match.group(1)
        word = _first_word(rest)
        if greeted and re.fullmatch(r"[A-Z][a-z]+", rest):  # "Hi, I'm Dana": an introduction
            return f"Name is {rest}"
        # "I'm trying…", "I'm not sure", "I'm glad" describe the moment, not the user
        if (
            not word
            or word in _TRANSIENT_STATE
            or rest.lower().startswith(_TRANSIENT_PHRASES)
            or (word.endswith("ing") and word != "using")
        ):
            return None
        return f"Is {_third_person(rest)}"
    return None


def is_personal_fact(clause: str) -> bool:
    """Whether a clause states a stable fact about the person writing it ("I am a staff engineer at Acme", "my cat is
    called Rex"): what the profile rules would learn from it."""
    return _profile_from_clause(clause) is not None


def facts_stated(text: str) -> list[str]:
    """Third-person facts a user turn states, also inside a correction ("No, I live in Munich now" -> ["Lives in
    Munich now"]): the profile rules per clause after the correction lead-in ("No,", "Wrong.") is stripped. The
    extractor skips correcting sentences (they become rules); outcome counters compare them with served profiles."""
    facts = []
    for sentence in map(_normalise, _sentences(text)):
        for clause in _CLAUSE_SPLIT_RE.split(_STRIP_LEAD_RE.sub("", sentence)):
            content = _profile_from_clause(clause)
            if content and len(content) > 4:
                facts.append(content)
    return facts


def _ttl_for(sentence: str) -> str:
    for pattern, ttl in _TTL_HINTS:
        if pattern.search(sentence):
            return ttl
    return "infinity"


def _profiles_from_turn(turn: Turn, is_correction_turn: bool) -> Iterator[ExtractedProfile]:
    after_greeting = False
    for sentence in _sentences(turn.content):
        if _GREETING_RE.fullmatch(sentence):
            # "Hi! I'm Dana" splits into two sentences; the greeting still makes the next one an introduction
            after_greeting = True
            continue
        greeted, after_greeting = after_greeting or bool(_GREETING_RE.match(sentence)), False
        if sentence.endswith("?") or _QUESTION_START_RE.match(sentence) or _REQUEST_RE.search(sentence):
            continue
        if forget_target(sentence):  # "forget that I live in Paris" asks to drop the fact, it does not state it
            continue
        # a sentence that corrects the agent is a rule for the agent, not a fact about the user
        if is_correction_turn and _has_correction_marker(sentence):
            continue
        for clause in _CLAUSE_SPLIT_RE.split(sentence):
            content = _profile_from_clause(clause, greeted)
            if content and len(content) > 4:
                yield ExtractedProfile(
                    content=clean_text(content, MAX_CONTENT_CHARS),
                    time_to_live=_ttl_for(sentence),
                    source_turn_ids=[turn.turn_id],
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
_ERASE_VERB = r"(?:delete|remove|erase|wipe|purge|clear)"
_ABOUT = (
    r"(?:what you (?:know|have|remember|stored|saved|keep)(?: (?:stored|saved|on file|on record))?(?: about| on)?|"
    r"everything (?:you know )?about|anything (?:you know )?about|all (?:you know )?about|the fact that|about|that)"
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
# Corrections
# ---------------------------------------------------------------------------------------------------------------

# Phrases that contain a marker word but are politeness, not a correction.
_NOT_A_CORRECTION_RE = re.compile(
    r"\bno,? (?:problem|worries|thanks|thank you|rush|idea)\b|\bnever ?mind\b|\b(?:don't|do not) worry\b|"
    r"\bnot sure\b",
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
_STRIP_LEAD_RE = re.compile(
    r"^(?:(?:no|nope|nah)\b[\s,.!;:\u2013\u2014-]*|(?:wrong|incorrect|that's (?:wrong|not right|incorrect|not it)|"
    r"that is (?:wrong|not right|incorrect))\s*[,.!;:\u2013\u2014-]+\s*)+",
    re.I,
)
_SUBJECT_ADVERB_RE = re.compile(r"^(?:we|you|I)\s+(always|never|only|usually)\b", re.I)
_SUBJECT_MODAL_RE = re.compile(r"^(?:(?:we|you)\s+(?:should|must|need to|have to|ought to)|please)\s+", re.I)
_SUBJECT_USE_RE = re.compile(r"^(?:we|I)\s+(use|prefer)\b", re.I)
_CLAUSE_RULE_RE = re.compile(r",\s+(?:and\s+|but\s+)?(?:we\s+|you\s+)?(always|never|instead|use|don't|do not)\b", re.I)
_FILLER_SENTENCE_RE = re.compile(r"^(?:thanks|thank you|ok|okay|hmm+|ugh|sorry|please)[.!]*$", re.I)


def _has_correction_marker(text: str) -> bool:
    # "stop remembering my phone number" holds a marker word but is a forget request, not a rule for the agent
    sentences = [_NOT_A_CORRECTION_RE.sub(" ", _normalise(s)).strip() for s in _sentences(text) if not forget_target(s)]
    return any(_MARKER_RE.search(s) or _LEADING_NO_RE.match(s) for s in sentences)


def _rule_sentence(sentence: str) -> str:
    sentence = _SUBJECT_ADVERB_RE.sub(lambda m: m.group(1), sentence)
    sentence = _SUBJECT_MODAL_RE.sub("", sentence)
    sentence = _SUBJECT_USE_RE.sub(lambda m: m.group(1), sentence)
    sentence = _CLAUSE_RULE_RE.sub(lambda m: "; " + m.group(1), sentence)
    sentence = sentence.strip().rstrip(",;:")
    if sentence and sentence[-1] not in ".!?":
        sentence += "."
    return _capitalise(sentence)


def correction_rule(correction: str) -> str:
    """The user's correction as an imperative rule, keeping their words ("No, we never X, always Y" ->
    "Never X; always Y.")."""
    rules = []
    for sentence in map(_normalise, _sentences(correction)):
        if forget_target(sentence):  # a forget request in the same turn is handled as one, not as part of the rule
            continue
        # a plain fact about the user in the same turn ("I'm a PM") is a profile, not part of the rule
        if not _has_correction_marker(sentence) and any(map(_profile_from_clause, _CLAUSE_SPLIT_RE.split(sentence))):
            continue
        rule = _STRIP_LEAD_RE.sub("", sentence)
        if rule and not _FILLER_SENTENCE_RE.match(rule):
            rules.append(_rule_sentence(rule))
    return _clip(" ".join(rules), MAX_CONTENT_CHARS)


# Words that make a request read as "When <gerund> …"; anything else is quoted as "When asked: …".
_IMPERATIVE_VERBS = _words(
    "add analyse analyze answer apply archive ask book build buy calculate cancel change check clean clear close "
    "compare compile compute configure convert copy create debug delete deploy describe design draft drop edit email "
    "estimate explain export extract fetch file find fix format generate get give help implement import improve "
    "install list load look make merge migrate move open optimise optimize order pay plan post prepare print "
    "provision publish pull push put query read rebuild recommend refactor refund release reload remove rename "
    "reorder replace reply report reset resize restart restore retry review rewrite roll rotate run save scale "
    "schedule search send set share show sort start stop submit suggest summarise summarize switch sync tell test "
    "track train transfer translate troubleshoot turn undo update upgrade upload use validate verify write"
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
    """The agent turn that user turn `index` corrects, or None when the turn is not a correction."""
    turn = turns[index]
    if not turn.is_user or not _has_correction_marker(turn.content):
        return None
    agent_index = previous_speaker_index(turns, index)
    return agent_index if agent_index is not None and is_agent_turn(turns[agent_index]) else None


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
        return None
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
        for index, turn in enumerate(turns):
            correction = _correction_playbook(turns, index)
            if turn.is_user:
                profiles.extend(_profiles_from_turn(turn, is_correction_turn=correction is not None))
                forget.extend(_forget_directives(turn))
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
        )
