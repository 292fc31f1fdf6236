"""The built-in extractor: offline, deterministic, and LEARNED — a heuristic model, not understanding.

Each user clause (learning/clauses/split.py) is labelled by the clause classifier, a small neural head over the
bundled sentence embedder trained on clauses written outside this project (learning/clauses/, docs/extractor.md for
its measured precision and recall). Lasting kinds become items in the user's own words:

- preference and fact -> a profile, turned to the third person ("I can't stand cilantro" -> "Cannot stand
  cilantro"); the clause itself is kept in `custom_features.said`;
- instruction and correction -> a playbook; its trigger is the clause's own condition ("when I send a report, …"),
  else, for a correction, the situation of the request the agent was answering; the rationale quotes the user;
- revocation -> a forget directive for what it names ("forget the bullet points rule");
- request, feedback, social and hypothetical clauses teach nothing (a feedback clause right after an agent turn is
  kept as session context: it holds for that conversation only), and neither does a question, whatever the head
  says of it (structure, not wording: "Why do my tyres always go flat in winter?" is no habit).

Rules remain only for structure: tool calls that failed (rules/tool_failures.py), expert answers that differ from
the agent's (rules/expert.py) and tool sequences that worked (rules/success_recipes.py).

Languages: English only (`clauses/language.py`). Clauses in other languages are not learned here — an LLM provider
configured through LiteLLM learns them — and are counted in `ExtractionResult.unsupported_clauses`.
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.clauses.classifier import ClauseClassifier, Prediction, shared_classifier
from reflexio_pipelines.learning.clauses.features import ClauseInput
from reflexio_pipelines.learning.clauses.kinds import PLAYBOOK_KINDS, PROFILE_KINDS
from reflexio_pipelines.learning.clauses.language import is_supported
from reflexio_pipelines.learning.clauses.rewrite import playbook_parts, profile_text
from reflexio_pipelines.learning.clauses.split import split_clauses
from reflexio_pipelines.learning.config import DEFAULT_GROUP
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.jsonparse import clean_text, dedupe_by_content
from reflexio_pipelines.learning.rules.expert import _expert_playbook
from reflexio_pipelines.learning.rules.forget_requests import forget_target
from reflexio_pipelines.learning.rules.success_recipes import _success_recipe
from reflexio_pipelines.learning.rules.text import (
    MAX_CONTENT_CHARS,
    MAX_TRIGGER_CHARS,
    _clip,
    _normalise,
    content_tokens,
)
from reflexio_pipelines.learning.rules.tool_failures import _tool_failure_playbooks
from reflexio_pipelines.learning.rules.triggers import situation_trigger
from reflexio_pipelines.learning.stated_changes import SAID_PREFIX
from reflexio_pipelines.learning.subjects import ENDED_RE, states_a_change, subjects_of
from reflexio_pipelines.learning.types import (
    ExtractedPlaybook,
    ExtractedProfile,
    ExtractionResult,
    ForgetDirective,
    Turn,
    Window,
)

#: A rule clause shorter than this, or with fewer than two content words ("please use that"), is a fragment ("No
#: exceptions", "Remember the rule") unless it follows a longer one of the same turn: it says nothing an agent could
#: follow on its own.
MIN_RULE_WORDS = 3

EXTRACTOR_NAME = "builtin-learned"
PROMPT_VERSION = "clauses-v1"
MODEL_NAME = "builtin-clause-head"

#: Greetings and fillers in front of a clause: the head reads the clause without them ("Hi, I live in Paris" is a
#: fact, "Quick update: I moved to Berlin" a move); the user's words are kept whole.
_LEAD_IN_RE = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|ok|okay|so|well|oh|ah|also|and|plus|btw|by the way|fyi|quick update|update|actually|"
    r"one more thing|just so you know|for the record|for future reference|heads[- ]up|good news|news|fun fact)\b"
    r"[\s,:!.—–-]*)+",
    re.I,
)
#: A profile is what the user says about themselves or their own: a clause with no first person is no profile
#: ("Deploy the api", "Austin weather is warmer").
#: "Me" counts too ("sesame puts me in hospital"), except after a verb of asking ("Give me some synonyms").
_ABOUT_USER_RE = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|my|me|mine|myself|we|we're|we've|our|ours|us)\b", re.I)
#: Chat drops the "I" before a verb of change ("Moved over to Firefox completely", "Traded the Passat in for a Tesla").
_IMPLICIT_I_RE = re.compile(
    r"^(?:just |finally |recently |also )?(?:moved|switched|traded|sold|swapped|quit|left|stopped|gave up|got rid of|"
    r"ditched|dropped|replaced|migrated|upgraded|downgraded|retired|graduated)\b",
    re.I,
)
#: A clause opening with the user as its subject ("I've gone vegetarian …", "we're on Go now").
_OWN_OPENING_RE = re.compile(r"^(?:i|i'm|im|i've|ive|we|we're|we've|my|our)\b", re.I)


def _first_person(text: str) -> bool:
    """The user speaks of themselves or their own, with an "I" said or dropped."""
    return bool(_ABOUT_USER_RE.search(text) or _IMPLICIT_I_RE.match(_LEAD_IN_RE.sub("", text)))


_ASKING_RE = re.compile(
    r"^(?:please\s+)?(?:give|show|tell|send|make|write|list|help|find|book|get|let|call|check|explain|draft|"
    r"summari[sz]e|translate|fix|create|suggest|recommend|plan|teach|remind|bring|buy|order|email|text|ping|"
    r"walk|take|pick|read|sing|generate|compose|prepare)\b",
    re.I,
)
#: Other imperative openings: no profile either ("Please answer me in French, I'm practising" tells the agent what
#: to do; it says nothing the user is). Unlike an asking verb, such a clause after an agent turn may well be a
#: correction ("use us-west-2").
_TELLING_RE = re.compile(
    r"^(?:please\s+)?(?:answer|reply|respond|speak|talk|use|keep|put|add|include|avoid|stop|switch|format|address)\b",
    re.I,
)
#: A rule for every conversation says so ("always", "never", "from now on", "don't", …); without such a word, and not
#: answering an agent turn, an imperative is a one-off request ("Please deploy the billing service to production")
#: unless the head is all but certain.
_STANDING_RE = re.compile(
    r"\b(?:always|never|from now on|from here on|going forward|in future|in the future|every time|whenever|by default|"
    r"next time|"
    r"each time|any ?time|don't|do not|dont|stop|avoid|only|make sure|remember|instead|rather|no more|prefer|"
    r"anymore|any more)\b",
    re.I,
)
SURE = 0.95
#: The words of standing that say "every time" outright.
_ALWAYS_RE = re.compile(
    r"\b(?:always|never(?!\s+mind)|from now on|from here on|going forward|in future|in the future|every time|"
    r"whenever|by default|each time|any ?time|next time)\b",
    re.I,
)
_EVERY_TIME_RE = re.compile(rf"{_ALWAYS_RE.pattern}|\b(?:anymore|any more|no more)\b", re.I)
#: A clause opening with "always"/"never"/"don't" and a verb is an imperative whatever its words are about; in the
#: training split 35 of 37 such clauses are instructions or revocations.
_STANDING_IMPERATIVE_RE = re.compile(
    r"^(?:please\s+)?(?:always|never|don't|do not|dont)\s+(?!(?:i|we|you|mind|worry|forget)\b)\w+", re.I
)
#: An asking verb without a word of standing is a one-off task ("give me a 5 letter word that starts with l …") unless it
#: points back at the answer it corrects ("make it shorter", "write them in British English", "again", "instead"; not "that", mostly a relative pronoun) or
#: says how to address the user; the head reads "does not contain p, o, t" after an agent turn as a correction (1.0).
_POINTS_BACK_RE = re.compile(
    r"\b(?:it|these|those|them|again|instead|anymore|shorter|longer|simpler)\b|"
    r"^(?:please\s+)?call me\b",
    re.I,
)
#: Clauses that ask without a question mark: inverted questions ("do you like dragons"), wonderings ("I'm wondering
#: when I can see it"); and wishes ("I wish I had a dog"), which say what is not so. None states a lasting fact.
_ASKS_OR_WISHES_RE = re.compile(
    r"^(?:(?:me too|same here|same)\b[\s,.!]*)?(?:"
    r"(?:do|does|did|are|is|was|were|can|could|would|will|have|has|should|shall)\s+(?:you|u|i|we|they|he|she|it|there)\b|"
    r"(?:what|how|why|where|who|which)\b|"
    r"(?:i|we)\s+(?:wonder|wish|was wondering|am wondering|'m wondering|were wondering)\b|i'm\s+wondering\b)",
    re.I,
)
#: A clause that scopes itself to the task at hand ("No, for this one use us-east-1", "skip the intro just this once")
#: overrides a rule for now; it teaches no rule for every conversation unless it also says "every time".
_ONE_OFF_RE = re.compile(
    r"\b(?:for this one|this one time|this time|just this once|just for (?:now|today|this)|for now|"
    r"for this (?:task|request|message|email|reply|answer|launch|release|project|ticket|run))\b",
    re.I,
)
#: How the agent should answer (form, language, units), told plainly ("Please keep your answers in numbered lists",
#: "Reply in English please", "Keep things formal with me"), holds beyond the task at hand without a word of
#: standing; the head reads such clauses as instructions below SURE (0.6-0.9) when they open a conversation.
_STYLE_SUBJECTS = frozenset({"answer_format", "language"})
_UNITS_RE = re.compile(r"\b(?:celsius|fahrenheit|metric|imperial|kilomet(?:er|re)s|miles|24-hour|12-hour)\b", re.I)
#: Least instruction + correction probability for such a clause to be a rule.
STYLE_RULE_FLOOR = 0.5
#: Least rule probability for a first-person-less clause answering the agent to be taken as a correction.
PLAYBOOK_FALLBACK = 0.3
#: A change told as a story of long ago ("when I was a kid we moved to Ohio") no longer holds.
_STORY_RE = re.compile(
    r"\b(?:when i was|as a (?:kid|child|teen)|growing up|back in|years ago|in (?:college|school|high school)|"
    r"used to|once upon|my (?:childhood|youth))\b",
    re.I,
)
#: Least profile probability for a change of the user's own that the head read as a story to be kept as a fact.
CHANGE_PROFILE_FLOOR = 0.2
#: One thing given up for another ("I ditched my iPhone for a Pixel": hypothetical 0.86, profile kinds 0.0): the
#: form of a lasting change whatever mass the head gives the profile kinds.
_REPLACEMENT_RE = re.compile(
    r"\b(?:ditched|swapped|traded|replaced|switched|exchanged|sold|gave up)\b(?:\s+\S+){1,5}?\s+"
    r"(?:for|with|to|and (?:got|bought|went with))\b",
    re.I,
)
#: How the user is right now, as a greeting's answer ("i am fine tanks", "hi, my day isgreat": fact 0.6-0.9 by the
#: head; 9 of the 37 items learned from 300 public chat sessions), and an agreement whose subject is the partner's
#: ("Me too, they make the best companions"): nothing lasting is said of the user.
_PASSING_STATE_RE = re.compile(
    r"^(?:(?:i am|i'm|im|i've been|ive been|feeling|my day(?: is|'s| was| has been)?)\s*(?:doing\s+)?"
    r"(?:very |really |pretty |so |quite |just )?(?:good|well|fine|great|ok|okay|alright|awesome|wonderful|tired|"
    r"bored|busy|not bad|not too bad)(?:[\s,.!]+(?:thanks|thank you|tanks|thx|and you|you|today|now|too))*[\s,.!?]*$"
    r"|(?:me too|same here|me neither|same)\b[\s,.!]*(?:they|it|it's|that|this|those|these|he|she)\b)",
    re.I,
)
#: Profiles about a passing state expire ("I'd like green tea today"): the original's time-to-live values.
_TIME_BOUND: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:today|tonight|this (?:morning|afternoon|evening)|right now|at the moment)\b", re.I), "one_day"),
    (re.compile(r"\b(?:this week|these days off)\b", re.I), "one_week"),
    (re.compile(r"\bthis month\b", re.I), "one_month"),
)
_REVOKE_LEAD_RE = re.compile(
    r"^(?:please\s+|you can\s+|you may\s+|feel free to\s+)?"
    r"(?:forget|ignore|scrap|drop|disregard|never mind|nevermind|cancel|undo|withdraw|delete|remove|"
    r"override|you can stop|stop|relax|loosen|ease up on)"
    r"(?:\s+(?:about|that|what i (?:said|told you) (?:about|regarding)))?\s+",
    re.I,
)

#: The explicit withdrawals, which withdraw what they name whatever the head reads ("stop", "remove", "drop" also
#: start one-off edits of the answer at hand, so they count only when the head says revocation).
_WITHDRAW_RE = re.compile(
    r"^(?:please\s+|you can\s+|you may\s+|feel free to\s+)?(?:forget|disregard|scrap|relax|loosen|ease up on)\s+"
    r"(?:the|that|my|your|about|all|those|these)\b",
    re.I,
)
_TARGET_END_RE = re.compile(r"\s+(?:now|any ?more|please)\b|\s*[,;:—–]\s*|\s+-\s+", re.I)
#: A word pointing back at something named before it.
_PRONOUN_RE = re.compile(r"\b(?:it|them|those|these)\b", re.I)
#: Words that name an instruction rather than the user's life.
_NAMES_A_RULE_RE = re.compile(r"\b(?:rule|rules|instruction|instructions|what i (?:said|told you)|that one)\b", re.I)


class _Located:
    """One clause of one user turn, with the classifier's input and where it came from."""

    __slots__ = ("index", "turn", "text", "agent_index")

    def __init__(self, index: int, turn: Turn, text: str, agent_index: int | None) -> None:
        self.index, self.turn, self.text, self.agent_index = index, turn, text, agent_index


def _clauses(turns: tuple[Turn, ...]) -> tuple[list[_Located], list[ClauseInput], int]:
    located: list[_Located] = []
    inputs: list[ClauseInput] = []
    unsupported = 0
    for index, turn in enumerate(turns):
        if not turn.is_user or not turn.content.strip():
            continue
        agent_index = index - 1 if index > 0 and _answered(turns[index - 1], turn) else None
        context = turns[agent_index].content if agent_index is not None else ""
        opening = " ".join(turn.content.split()[:4])
        for text in split_clauses(turn.content):
            if _asks(text):
                continue  # a question asks; whatever the head would say, it states no lasting preference or rule
            if not is_supported(text):
                unsupported += 1
                continue
            located.append(_Located(index, turn, text, agent_index))
            inputs.append(ClauseInput(_LEAD_IN_RE.sub("", text) or text, context, opening))
    return located, inputs, unsupported


def _asks(text: str) -> bool:
    """A question, with or without its mark, or a wish (see `_ASKS_OR_WISHES_RE`)."""
    return text.rstrip().endswith("?") or bool(_ASKS_OR_WISHES_RE.match(_LEAD_IN_RE.sub("", text.strip())))


def _answered(before: Turn, turn: Turn) -> bool:
    """Whether `before` is an agent turn `turn` answers: one of the same session (a window also holds the last turns
    of the user's previous session, whose agent turns are no context for this one)."""
    return not before.is_user and before.session_id == turn.session_id


def _request_before(turns: tuple[Turn, ...], agent_index: int) -> int | None:
    """The user turn the agent was answering: the last user turn before it, in the same session."""
    session = turns[agent_index].session_id
    return next(
        (i for i in range(agent_index - 1, -1, -1) if turns[i].is_user and turns[i].session_id == session), None
    )


def _playbook(turns: tuple[Turn, ...], clauses: list[tuple[_Located, str]]) -> ExtractedPlaybook | None:
    """One playbook from the rule clauses of one user turn ("No — we never deploy to us-east-1, always use
    us-west-2" is one lesson in two clauses): the first condition found is the trigger; without one, a correction
    takes the situation of the request the agent was answering."""
    trigger: str | None = None
    contents: list[str] = []
    for where, _ in clauses:
        condition, content = playbook_parts(where.text)
        trigger = trigger or condition
        if (len(where.text.split()) >= MIN_RULE_WORDS and len(content_tokens(content)) >= 2) or (contents and content):
            contents.append(content.rstrip(".!"))
    if not contents:
        return None
    first, kinds = clauses[0][0], {kind for _, kind in clauses}
    sources = [first.turn.turn_id]
    if trigger is None and "correction" in kinds and first.agent_index is not None:
        request = _request_before(turns, first.agent_index)
        if request is not None:
            trigger = situation_trigger(turns[request].content)
            sources = [turns[request].turn_id, turns[first.agent_index].turn_id, first.turn.turn_id]
    said = _clip(_normalise("; ".join(where.text for where, _ in clauses)), MAX_CONTENT_CHARS)
    return ExtractedPlaybook(
        content=clean_text(". ".join(contents)),
        trigger=clean_text(_clip(trigger, MAX_TRIGGER_CHARS)) if trigger else None,
        rationale=clean_text(f"{SAID_PREFIX}{said}"),
        kind="correction",
        source_turn_ids=sources,
    )


def _profile(where: _Located, prediction: Prediction) -> ExtractedProfile | None:
    content = profile_text(_LEAD_IN_RE.sub("", where.text) or where.text)
    if len(content.split()) < 2:
        return None
    features = {"kind": prediction.kind, "confidence": round(prediction.probability, 3), "said": where.text}
    ttl = next((ttl for pattern, ttl in _TIME_BOUND if pattern.search(where.text)), "infinity")
    return ExtractedProfile(
        content=clean_text(content),
        time_to_live=ttl,
        source_turn_ids=[where.turn.turn_id],
        custom_features=features,
    )


def _forget_request(where: _Located, prediction: Prediction) -> ForgetDirective | None:
    """A request to forget or withdraw something: the wording of a forget request (rules/forget_requests.py, kept for
    privacy: "delete what you know about my address" must never be learned as a fact, whatever the head says), or a
    clause the head labels a revocation; the target must name something ("forget it" names nothing)."""
    target = forget_target(where.text)
    bare = _LEAD_IN_RE.sub("", where.text)
    withdraws = _WITHDRAW_RE.match(bare) is not None  # "you can relax the formality": social 0.86 by the head
    if target is None and (withdraws or (prediction.kind == "revocation" and not _tells_own_change(where.text))):
        # what it withdraws ends at its clause: "stop doing bullet points now, prose is fine" names bullet points
        # and names a thing, not the doing of it ("stop using tables" withdraws the tables rule)
        target = _TARGET_END_RE.split(_REVOKE_LEAD_RE.sub("", bare))[0].strip(" .!")
        target = re.sub(r"^\w+ing\s+(?=\w)", "", target)
    if not target or not content_tokens(target):
        return None
    return ForgetDirective(target=target, source_turn_ids=[where.turn.turn_id])


def _tells_own_change(text: str) -> bool:
    """A change in the user's own life said without naming a rule to withdraw ("my allergist says I've outgrown the
    peanut allergy, peanuts are fine now": revocation 1.0): a new fact that replaces the old one by subject."""
    bare = _LEAD_IN_RE.sub("", text)
    return (
        states_a_change(text)
        and _first_person(text)
        and not _REVOKE_LEAD_RE.match(bare)
        and not _NAMES_A_RULE_RE.search(text)
        and not _PRONOUN_RE.search(text)  # "I don't need them any more" withdraws what "them" names: no fact
    )


def _outcome(where: _Located, prediction: Prediction) -> str | None:
    """What the clause stores, after the structural checks: "profile", "playbook" or None."""
    outcome = _stored_as(where, prediction)
    if outcome == "profile" and _PASSING_STATE_RE.match(_LEAD_IN_RE.sub("", where.text)):
        return None
    if outcome == "playbook" and _ONE_OFF_RE.search(where.text) and not _EVERY_TIME_RE.search(where.text):
        return None
    return outcome


def _answer_style(bare: str) -> bool:
    """A telling imperative about how to answer in general (not "it"/"them": a fix of the answer at hand)."""
    if not _TELLING_RE.match(bare) or _POINTS_BACK_RE.search(bare):
        return False
    return bool(subjects_of(bare) & _STYLE_SUBJECTS) or bool(_UNITS_RE.search(bare))


def _changes_own_fact(where: _Located, prediction: Prediction, bare: str) -> bool:
    """A "correction" that answers no agent turn and tells of a change in the user's own life ("Max passed away last
    month, we don't have a dog anymore": correction 0.92) corrects what is known about them, not the agent: a fact
    that supersedes the earlier one, never a rule served to every request."""
    return (
        prediction.kind == "correction"
        and where.agent_index is None
        and states_a_change(where.text)
        and _first_person(where.text)
        and not (_TELLING_RE.match(bare) or _ASKING_RE.match(bare) or _ALWAYS_RE.search(where.text))
    )


def _stored_as(where: _Located, prediction: Prediction) -> str | None:
    playbook_mass = sum(prediction.probabilities.get(k, 0.0) for k in PLAYBOOK_KINDS)
    if playbook_mass >= STYLE_RULE_FLOOR and _answer_style(_LEAD_IN_RE.sub("", where.text)):
        return "playbook"
    if prediction.kind in PROFILE_KINDS or prediction.kind in ("request", "hypothetical"):
        if _STANDING_IMPERATIVE_RE.match(_LEAD_IN_RE.sub("", where.text)):
            return "playbook"  # "Never deploy on Fridays" (the head: fact 0.78) is a rule by its form
    if prediction.kind == "request" and _EVERY_TIME_RE.search(where.text):
        # "just give me the code next time" (the head: request 0.87) holds beyond this task; in the training split
        # the 3 requests with such a word were all questions, which never reach here. Said of the user's own life
        # ("I've gone vegetarian since last month, no more meat for me": request) it is a changed fact
        own = _OWN_OPENING_RE.match(_LEAD_IN_RE.sub("", where.text)) and not _ALWAYS_RE.search(where.text)
        return "profile" if own and _tells_own_change(where.text) else "playbook"
    if prediction.kind in PROFILE_KINDS:
        bare = _LEAD_IN_RE.sub("", where.text)
        if _first_person(where.text) and not (_ASKING_RE.match(bare) or _TELLING_RE.match(bare)):
            return "profile"
        # no first person: no profile; a standing imperative answering the agent ("No — never restart it for a
        # rotation") is a correction if the head leans to rules at all
        playbook = sum(prediction.probabilities.get(k, 0.0) for k in PLAYBOOK_KINDS)
        answering = where.agent_index is not None and _STANDING_RE.search(where.text)
        return "playbook" if answering and playbook >= PLAYBOOK_FALLBACK else None
    if prediction.kind in PLAYBOOK_KINDS:
        bare = _LEAD_IN_RE.sub("", where.text)
        if _changes_own_fact(where, prediction, bare):
            return "profile"
        if _ASKING_RE.match(bare) and not _POINTS_BACK_RE.search(bare):
            # a task, unless it says it holds every time ("don't" and "only" are common inside a task's spec)
            return "playbook" if _EVERY_TIME_RE.search(where.text) else None
        if _STANDING_RE.search(where.text):
            return "playbook"
        return "playbook" if where.agent_index is not None or prediction.probability >= SURE else None
    if prediction.kind == "revocation" and _tells_own_change(where.text):
        return "profile"
    if prediction.kind in ("social", "request", "feedback") and _first_person(where.text):
        # "Traded the Passat in for a Tesla Model 3 last week": social 0.50, request 0.47; "finally sold the Honda,
        # it's all bikes now": social 0.91; "Closed everything at Chase, I switched to a credit union": request 0.99
        bare = _LEAD_IN_RE.sub("", where.text)
        ended = ENDED_RE.search(where.text) and not (_ASKING_RE.match(bare) or _TELLING_RE.match(bare))
        passing = _STORY_RE.search(where.text) or any(p.search(where.text) for p, _ in _TIME_BOUND)
        if _REPLACEMENT_RE.search(where.text) or (ended and not passing):  # not "I left my phone at home today"
            return "profile"
    if (
        prediction.kind == "hypothetical"
        and states_a_change(where.text)
        and _first_person(where.text)
        and not _STORY_RE.search(where.text)
    ):
        # the head reads a past-tense change as a story ("we relocated to Bristol over the summer": hypothetical
        # 0.69); a change of the user's own still holds, and is what supersedes the earlier item
        profile = sum(prediction.probabilities.get(k, 0.0) for k in PROFILE_KINDS)
        return "profile" if profile >= CHANGE_PROFILE_FLOOR or _REPLACEMENT_RE.search(where.text) else None
    return None


class BuiltinExtractor:
    """The learned offline extractor (see the module docstring); makes no LLM calls."""

    name = EXTRACTOR_NAME

    def __init__(self, classifier: ClauseClassifier | None = None) -> None:
        self._classifier = classifier

    @property
    def classifier(self) -> ClauseClassifier:
        return self._classifier or shared_classifier()

    def extract(self, window: Window, group: ExtractorGroup | None = None) -> ExtractionResult:
        """Profiles, playbooks and forget directives found in `window`. The group's definitions are not read (the
        classifier knows its kinds); items are tagged with the group's first profile/playbook extractor."""
        group = group or DEFAULT_GROUP
        turns = window.turns
        located, inputs, unsupported = _clauses(turns)
        predictions = self.classifier.classify(inputs)
        profiles: list[ExtractedProfile] = []
        playbooks: list[ExtractedPlaybook] = []
        forget: list[ForgetDirective] = []
        notes: list[str] = []
        rules: dict[int, list[tuple[_Located, str]]] = {}
        withdrawn_by: int | None = None  # the clause behind the last forget directive
        for i, (where, prediction) in enumerate(zip(located, predictions)):
            if directive := _forget_request(where, prediction):
                forget.append(directive)
                withdrawn_by = i
                continue
            outcome = _outcome(where, prediction)
            if outcome == "profile" and (profile := _profile(where, prediction)):
                profiles.append(profile)
            elif outcome == "playbook":
                kind = prediction.kind if prediction.kind in PLAYBOOK_KINDS else "correction"
                turn_rules = rules.setdefault(where.index, [])
                if not turn_rules and _PRONOUN_RE.search(where.text) and i and located[i - 1].index == where.index:
                    # "please drop the emojis, I find them unprofessional and never want them …": the rule's "them"
                    # is named by the clause before it, which is its subject, not a withdrawal of an earlier rule
                    turn_rules.append((located[i - 1], kind))
                    if withdrawn_by == i - 1:
                        forget.pop()
                turn_rules.append((where, kind))
            elif prediction.kind == "feedback" and where.agent_index is not None:
                notes.append(where.text)
        playbooks.extend(p for clauses in rules.values() if (p := _playbook(turns, clauses)))
        playbooks.extend(_structural_playbooks(turns))
        return ExtractionResult(
            profiles=[tagged for p in dedupe_by_content(profiles) if (tagged := group.tag_profile(p))],
            playbooks=[tagged for p in dedupe_by_content(playbooks) if (tagged := group.tag_playbook(p))],
            forget=forget if group.resolve("profile", None)[0] is not None else [],
            extractor=EXTRACTOR_NAME,
            model=MODEL_NAME,
            prompt_version=PROMPT_VERSION,
            llm_calls=0,
            session_context=list(dict.fromkeys(notes)),
            unsupported_clauses=unsupported,
        )


def _structural_playbooks(turns: tuple[Turn, ...]) -> list[ExtractedPlaybook]:
    """Tool failures, expert answers and working tool sequences: structure, found by rules."""
    out = [playbook for _, playbook in _tool_failure_playbooks(turns)]
    for index in range(len(turns)):
        if (expert := _expert_playbook(turns, index)) is not None:
            out.append(expert)
        if (recipe := _success_recipe(turns, index)) is not None:
            out.append(recipe)
    return out
