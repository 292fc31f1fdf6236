"""Feedback as rules (HEURISTIC: surface wording only): style, process, conventions and directives in one
sentence, rewritten as an imperative rule; stories about the past, which are never rules as they stand.
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.rules.facts import LEAD_IN_RE, QUESTION_START_RE, typed_fact_clause
from reflexio_pipelines.learning.rules.text import capitalise, first_word, lower_first, word_set
from reflexio_pipelines.learning.rules.triggers import IMPERATIVE_VERBS, strip_polite
from reflexio_pipelines.learning.slots import LANGUAGES

_SUBJECT_ADVERB_RE = re.compile(r"^(?:we|you|I)\s+(always|never|only|usually)\b", re.I)
SUBJECT_MODAL_RE = re.compile(
    r"^(?:(?:we|you)\s+(?:should|must|need to|have to|ought to|will|'ll)|please|pls|kindly|make sure to|"
    r"be sure to|I want you to|I need you to|I'd like you to|I would like you to|"
    r"I(?:'d| would)? (?:want|need|like|prefer)(?= (?:all|every|each|the|my|your|answers|replies|everything)\b))\s+",
    re.I,
)
_SUBJECT_USE_RE = re.compile(r"^(?:we|I)\s+(use|prefer)\b", re.I)
_CLAUSE_RULE_RE = re.compile(r",\s+(?:and\s+|but\s+)?(?:we\s+|you\s+)?(always|never|instead|use|don't|do not)\b", re.I)
PLEASE_TAIL_RE = re.compile(r"[\s,]*\b(?:please|pls|thanks|thank you)\b[\s.!]*$", re.I)

#: The ways of saying "from now on", both where a standing rule is found and where its lead-in is cut off.
_FROM_NOW_ON = (
    r"from now on|from today(?: on(?:wards?)?)?|from here on(?: out)?|from this point(?: on)?|going forward|"
    r"moving forward|in (?:the )?future"
)
#: A rule for every future conversation, whether or not it answers an agent turn ("From now on, …").
STANDING_RE = re.compile(
    rf"\b(?:{_FROM_NOW_ON}|next time|every time|each time|whenever|for all future|in general|"
    r"by default|as a rule|any ?more|ever again|for everything|in anything)\b",
    re.I,
)
STANDING_LEAD_RE = re.compile(
    rf"^(?:(?:{_FROM_NOW_ON}|for all future \w+|in general|by default|as a rule|also|and|ok|okay|good|"
    r"great|thanks|actually|next time|every time|each time|for every \w+)\b[\s,:;-]*)+",
    re.I,
)
# Style feedback: how the answer read (length, tone, format), not what it said.
_STYLE_ADJECTIVES = {
    **dict.fromkeys("long lengthy verbose wordy rambling padded".split(), "Keep answers shorter"),
    **dict.fromkeys("short brief terse thin shallow".split(), "Give fuller, more detailed answers"),
    **dict.fromkeys("casual informal chatty flippant jokey slangy sloppy".split(), "Use a more formal tone"),
    **dict.fromkeys("formal stiff stuffy robotic corporate dry".split(), "Use a more casual, conversational tone"),
    **dict.fromkeys(
        "technical jargony dense complicated complex academic".split(), "Use plainer, less technical language"
    ),
    **dict.fromkeys("vague generic fluffy wishy-washy hand-wavy abstract".split(), "Be more specific and concrete"),
    **dict.fromkeys("salesy cheesy pushy enthusiastic peppy gushing sycophantic".split(), "Tone down the enthusiasm"),
    **dict.fromkeys("repetitive redundant".split(), "Don't repeat yourself"),
    **dict.fromkeys("cluttered busy messy".split(), "Keep the layout clean and simple"),
}
STYLE_NOUNS = (
    r"emojis?|emoticons?|exclamation (?:marks|points)|bullets?|bullet points?|headers?|headings?|titles?|tables?|"
    r"paragraphs?|sentences?|words?|lines?|lists?|numbered lists?|markdown|formatting|format|bold|italics|caps|"
    r"jargon|acronyms|detail|details|text|preamble|intro|introduction|summary|summaries|recap|conclusion|"
    r"disclaimers?|caveats?|pleasantries|fluff|filler|small talk|tone|length|answers?|replies|reply|responses?|"
    r"code blocks?|comments|examples?|links?|sources|citations|steps|tl;?dr|sign-?off|greeting|apologies|hedging|"
    r"spelling|punctuation|capitals|capital letters|question marks|adjectives|buzzwords|quotes"
)
FORMAT_VALUES = (
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
    rf"^(?:(?:much|a bit|a little|way|even)\s+)?(?P<more>less|more|fewer)\s+(?P<what>{STYLE_NOUNS}|[a-z-]+)\b",
    re.I,
)
_BARE_COMPARATIVE_RE = re.compile(
    r"^(?:(?:much|a bit|a little|way|even)\s+)?(?P<adj>shorter|longer|simpler|briefer|clearer|tighter|"
    r"more concise|less formal|more formal|less casual|more casual|crisper)\b",
    re.I,
)
STYLE_DIRECTIVE_RE = re.compile(
    rf"\b(?:{STYLE_NOUNS})\b|\b(?:shorter|longer|concise|brief|briefly|formal|casual|plain|simple|simpler|"
    r"succinct|loosen|tone (?:it )?down|straight to|to the point|get to the point|cut (?:it )?down|trim|"
    r"break it (?:up|into)|max(?:imum)?|at most|or less|or fewer|tops|up front|upfront|at the top|at the end)\b|"
    r"^(?:please )?(?:put|lead with|start with|open with|move) .{1,60}\b(?:first|last|on top)[.!]?$",
    re.I,
)
FORMAT_REQUEST_RE = re.compile(
    rf"\b(?:in|as|into|to|using|with)\s+(?:(?:a|an|the)\s+)?(?:{FORMAT_VALUES})\b|"
    rf"^(?:no|without)\s+(?:{STYLE_NOUNS})\b",
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
CONVENTION_RE = re.compile(
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
PAST_RE = re.compile(
    r"\b(?:was|were|had|did|went|made|ate|kept|took|came|said|told|thought|found|left|gave|saw|knew|became|began|"
    r"brought|bought|felt|lost|met|paid|spent|stood|won|wrote|broke|chose|drove|forgot|grew|heard|hurt|led|rode|"
    r"sang|shook|slept|spoke|stole|taught|threw|understood|woke|wore|crept)\b|"
    r"\b(?:I|we|he|she|they|it|someone|nobody|everyone|my \w+|the \w+)\s+(?:\w+ly\s+)?\w+ed\b|"
    r"\b(?:ago|back then|back in|last (?:year|summer|winter|spring|autumn|fall|month|week|night|time)|yesterday|"
    r"in (?:19|20)\d\d|when I was|years ago)\b",
    re.I,
)
MAX_RULE_WORDS = 30  # a longer sentence is prose, never a rule
#: First words that make a clause an instruction.
_DIRECTIVE_OPENERS = word_set(
    "don't dont never always please stop avoid use make keep put leave add include check ask confirm show give "
    "send write reply answer respond skip drop cut start try remember assume prefer wait double-check tell let "
    "mention note cc copy call format sort list stick stay loosen tone break shorten trim get run go default "
    "follow switch change limit lead open close book schedule save lose ditch remove cut trim"
)


def is_narrative(sentence: str) -> bool:
    """Prose about what happened (several past-tense verbs, or long): context, never a fact or a rule as it stands."""
    words = sentence.split()
    if len(words) > MAX_RULE_WORDS + 15:
        return True
    if _SHOULD_HAVE_RE.match(sentence) or _TOLD_YOU_RE.match(sentence) or _FORGOT_RE.match(sentence):
        return False
    past = len(PAST_RE.findall(sentence))
    return (past >= 2 and len(words) > 12) or (past >= 1 and len(words) > 20)


def is_directive(text: str) -> bool:
    """Whether a sentence (lead-ins stripped) is phrased as an instruction to the agent."""
    stripped, polite = strip_polite(text)
    first = first_word(stripped)
    if polite or SUBJECT_MODAL_RE.match(text) or first in _DIRECTIVE_OPENERS or first in IMPERATIVE_VERBS:
        return not re.match(r"^(?:I|we)\b", stripped) or bool(SUBJECT_MODAL_RE.match(stripped))
    if re.match(r"^(?:no|without|only|just|all|every|everything)\s+\w+", stripped, re.I):
        return True  # "No emojis", "Only metric units", "Everything in UTC"
    if re.match(
        r"^I(?:'d| would)? (?:want|need|like|prefer)\s+(?:all|every|each|the|my|your|answers|replies|it|"
        r"them|things|everything|you)\b",
        stripped,
        re.I,
    ):
        return True  # "I want all times shown in 24-hour format"
    return False


_TONE_WORDS = word_set("formal casual concise detailed specific technical direct friendly polite")


def style_rule(sentence: str) -> str | None:
    """A rule from feedback on how an answer read ("Way too long." -> "Keep answers shorter (…)")."""
    text = PLEASE_TAIL_RE.sub("", sentence).strip().rstrip(".!")
    if match := _STYLE_EVAL_RE.match(text):
        groups = match.groupdict()
        if groups.get("adj"):
            adj = groups["adj"].lower()
            fix = _STYLE_ADJECTIVES.get(adj)
            return f"{fix} (the user found an answer too {adj})." if fix else None
        if groups.get("many"):
            noun = groups["noun"].strip()
            return (
                f"Use {'fewer' if groups['many'].lower() == 'many' else 'less'} {noun}."
                if re.match(rf"(?:{STYLE_NOUNS})\b", noun, re.I) and len(noun.split()) <= 4
                else None
            )
        if groups.get("enough"):
            adj = groups["enough"].lower()
            return f"Be more {adj} (the user found an answer not {adj} enough)."
        return "Avoid walls of text: break answers into short paragraphs."
    if match := _BARE_COMPARATIVE_RE.match(text):
        rest = text[match.end() :].strip(" ,.")
        if not rest or STYLE_DIRECTIVE_RE.search(rest) or len(rest.split()) <= 4:
            return f"Keep answers {match.group('adj').lower()}." + (f" {capitalise(rest)}." if rest else "")
    if match := _COMPARATIVE_RE.match(text):
        if re.fullmatch(STYLE_NOUNS, match.group("what"), re.I) or match.group("what").lower() in _TONE_WORDS:
            verb = "Use" if re.fullmatch(STYLE_NOUNS, match.group("what"), re.I) else "Be"
            return f"{verb} {lower_first(text)}."
    return None


def _process_rule(sentence: str) -> str | None:
    """A rule from feedback on how the agent went about the task ("You should have asked me before booking")."""
    text = PLEASE_TAIL_RE.sub("", sentence).strip().rstrip(".!")
    if match := _SHOULD_HAVE_RE.match(text):
        verb = _base_verb(match.group("verb"))
        negative = "n't" in match.group("neg") or " not" in match.group("neg")
        adverb = match.group("adv") or ("only" if re.search(r"\bonly\b", match.group("neg")) else "")
        verb = f"{adverb} {verb}" if adverb else verb
        rest = match.group("rest").rstrip()
        return f"{'Do not ' + verb if negative else capitalise(verb)}{rest}."
    if match := _FORGOT_RE.match(text):
        return f"Remember to {match.group('rest')}."
    if match := _RATHER_RE.match(text):
        rest = re.sub(
            r"\bthan\s+(?:just\s+)?([a-z]+)\b", lambda m: f"rather than {_base_verb(m.group(1))}", match.group("rest")
        )
        return f"{capitalise(_base_verb(match.group('verb')))}{rest}."
    if match := _WHY_DIDNT_RE.match(text):
        return f"{capitalise(match.group('rest').rstrip('?'))}."
    if match := _TOLD_YOU_RE.match(text):
        negative = re.search(r"\bnot to\b", text[: match.start("rest")]) is not None
        rest = match.group("rest")
        return f"Do not {rest}." if negative else f"{capitalise(rest)}."
    return None


_IRREGULAR_PARTICIPLES = {
    "been": "be",
    "done": "do",
    "gone": "go",
    "made": "make",
    "taken": "take",
    "given": "give",
    "written": "write",
    "sent": "send",
    "told": "tell",
    "run": "run",
    "read": "read",
    "put": "put",
    "set": "set",
    "left": "leave",
    "kept": "keep",
    "brought": "bring",
    "thought": "think",
    "bought": "buy",
    "got": "get",
    "gotten": "get",
    "shown": "show",
    "chosen": "choose",
    "spoken": "speak",
    "broken": "break",
    "paid": "pay",
    "said": "say",
    "built": "build",
    "held": "hold",
    "meant": "mean",
    "found": "find",
    "let": "let",
    "cut": "cut",
    "hit": "hit",
    "begun": "begin",
    "seen": "see",
    "known": "know",
    "drawn": "draw",
    "forgotten": "forget",
    "understood": "understand",
    "stuck": "stick",
    "woken": "wake",
    "ridden": "ride",
    "driven": "drive",
    "eaten": "eat",
    "ran": "run",
    "used": "use",
    "created": "create",
    "deleted": "delete",
    "completed": "complete",
    "quoted": "quote",
    "typed": "type",
    "required": "require",
    "called": "call",
    "pinged": "ping",
    "cced": "cc",
    "invited": "invite",
    "wrote": "write",
    "did": "do",
    "went": "go",
    "came": "come",
    "took": "take",
    "gave": "give",
    "saw": "see",
}


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
    if re.search(silent_e, stem_) and not re.search(
        r"(?:ss|ck|rl|wl|ail|eal|oil|oal|ool|eel|ain|oin|een|oon|ead|oad|"
        r"eed|ood|aid|eak|ook|eem|oom|eer|oor|ear|air|our|focus|bias)$",
        stem_,
    ):
        return stem_ + "e"  # merged -> merge, used -> use, updated -> update, scheduled -> schedule
    return stem_


#: "Good, but …", "Nice, though …": praise before the feedback.
_FEEDBACK_LEAD_RE = re.compile(
    r"^(?:(?:good|great|nice|fine|ok|okay|thanks|cool|hmm+|yes|yeah|looks good|not bad|close)[,!.]*\s+)?"
    r"(?:but|though|however|just|only)\b[,]?\s+(?=\w)",
    re.I,
)


def feedback_rule(sentence: str) -> str | None:
    """The rule in one sentence of feedback after an agent turn: style, process, a convention, a standing
    instruction, or a directive about the answer's form; None when the sentence is none of these (a story, a fact,
    a one-off fix, a new task such as "Now translate it into German")."""
    text = _FEEDBACK_LEAD_RE.sub("", STANDING_LEAD_RE.sub("", LEAD_IN_RE.sub("", sentence))).strip() or sentence
    if rule := style_rule(text) or _process_rule(text):
        return rule
    if text.endswith("?"):  # only a polite request counts ("Can you make it less formal?"), not a question
        stripped, polite = strip_polite(text)
        if not polite:
            return None
        text = stripped.rstrip("?").strip()
        if rule := style_rule(text):
            return rule
    if CONVENTION_RE.search(text) and not PAST_RE.search(text) and not typed_fact_clause(text):
        return rule_sentence(PLEASE_TAIL_RE.sub("", text))
    new_task = bool(
        re.match(
            r"^(?:now|also|then|next|and now|and then)\b|^(?:can|could|would) you (?:also|now)\b|"
            r"^(?:please\s+)?translate\b",
            text,
            re.I,
        )
    )
    if is_directive(text) and (
        _names_style(text)
        or (
            not new_task
            and (FORMAT_REQUEST_RE.search(text) or STANDING_RE.search(sentence) or _CHECK_WITH_ME_RE.search(text))
        )
    ):
        return rule_sentence(PLEASE_TAIL_RE.sub("", text))
    if (
        not new_task
        and FORMAT_REQUEST_RE.search(text)
        and len(text.split()) <= 8
        and not QUESTION_START_RE.match(text)
        and not re.search(r"\btranslat", text, re.I)
    ):
        return rule_sentence(PLEASE_TAIL_RE.sub("", text))  # "Prices in euros, please"
    return None


#: Verbs that shape an answer: with a style noun as their object the directive is feedback ("Drop the emojis",
#: "Use a table"). Any other task verb's object is the task's subject matter ("Book a table for two", "Read the
#: comments on the PR"), not the answer's style (heuristic).
_ANSWER_SHAPING_VERBS = word_set(
    "add answer drop format give list make put remove reply rewrite show start stop use write"
)
_TASK_OBJECT_RE = re.compile(
    r"^[\w-]+\s+(?:(?:a|an|the|my|our|your|this|that|these|those|some|all|\d+|one|two|three)\s+)?"
    rf"(?:[\w-]+\s+)?(?:{STYLE_NOUNS})\b",
    re.I,
)


def _names_style(text: str) -> bool:
    """Whether a directive names the answer's style ("Keep replies short", "Answer in two sentences max"). The verb
    that opens it does not count ("Reply to the customer about the delay" is a new task, not feedback on replies),
    nor does the object of an opening task verb ("Book a table for two")."""
    first = first_word(text)
    opening = len(first) if first in IMPERATIVE_VERBS else 0
    if opening and first not in _ANSWER_SHAPING_VERBS and (task_object := _TASK_OBJECT_RE.match(text)):
        opening = task_object.end()
    return any(m.end() > opening for m in STYLE_DIRECTIVE_RE.finditer(text))


def rule_sentence(sentence: str) -> str:
    sentence = _SUBJECT_ADVERB_RE.sub(lambda m: m.group(1), sentence)
    sentence = SUBJECT_MODAL_RE.sub("", sentence)
    sentence = _SUBJECT_USE_RE.sub(lambda m: m.group(1), sentence)
    sentence = _CLAUSE_RULE_RE.sub(lambda m: "; " + m.group(1), sentence)
    sentence = sentence.strip().rstrip(",;:")
    if sentence and sentence[-1] not in ".!?":
        sentence += "."
    return capitalise(sentence)


def directive_clauses(sentence: str) -> list[str]:
    """The clauses of a long or narrative sentence that are instructions ("…, so never do that again")."""
    clauses = re.split(
        r"[,;]\s+|\s+[-\u2013\u2014]+\s+|\s+(?:and|but|so)\s+(?=(?:never|always|don't|do not|please)\b)", sentence
    )
    return [
        c
        for c in clauses
        if len(c.split()) <= MAX_RULE_WORDS
        and re.match(
            r"^(?:please\s+)?(?:never|always|don't|do not|stop|avoid|make sure|remember to)\b", c.strip(), re.I
        )
    ]
