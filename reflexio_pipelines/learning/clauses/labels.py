"""The phrase rules that label public text for the clause corpus (`corpus.py` reads the sources and applies them).

Each labeller takes a text and a hint from the source's structure (an intent, a slot, a position in a prompt) and
returns a kind or None to drop the text; a rule labels only where it is reliable, so most public text is dropped.
"""

from __future__ import annotations

import re

# Preference: a liking, dislike or constraint about oneself. "would like to" is an aim, not a taste, so it is a fact.
_PREF_RE = re.compile(
    r"\b(?:like|likes|liked|love|loves|enjoy|enjoys|prefer|prefers|hate|hates|dislike|favorite|favourite|"
    r"can't stand|cannot stand|avoid|allergic|adore|fan of|passion|passionate|can't live without|into)\b",
    re.I,
)
_NOT_PREF_RE = re.compile(r"\bwould like\b|\bi'd like\b|\blooks? like\b|\blike a\b|\bfeel like\b", re.I)
# First-person statements in chat that state the speaker's persona.
_FIRST_PREF_RE = re.compile(
    r"^(?:i|i'm|i am)\s+(?:really\s+|also\s+|just\s+|absolutely\s+|do\s+)?(?:love|like|enjoy|prefer|hate|adore|"
    r"can't stand|don't like|do not like|dislike|a (?:big |huge )?fan of|passionate about|allergic to)\s+"
    r"(?!(?:that|this|it|them|you|your|those|these|the idea|the sound|to hear|hearing|talking)\b)",
    re.I,
)
_FIRST_FACT_RE = re.compile(
    r"^(?:i'm|i am)\s+(?:an?|\d+|from|married|retired|studying|a student|currently)\b"
    r"(?!\s+(?:little|bit|big|huge|lot|good|great|fan|very|pretty|really)\b)"
    r"|^i\s+(?:work (?:as|at|for|in)|live (?:in|on|with|near)|grew up|was born|have (?:a|an|two|three|four|five|\d+) "
    r"(?!(?:question|feeling|idea|lot|good|great|nice|fun|time|few)\b)|own (?:a|an|two|three)|drive an?|study)\b"
    r"|^my (?:wife|husband|mom|mother|dad|father|son|daughter|brother|sister|dog|cat|job|parents) (?:is|are|was|has)\b",
    re.I,
)
# Past-only narrative, conditionals and other people's habits or views: they teach nothing about the speaker now.
_HYPO_RE = re.compile(
    r"^(?:i used to|when i was (?:a |little|young|younger|in (?:high school|college))|back (?:in|when)|"
    r"if i (?:had|were|was|could|won|ever)|my (?:mom|mother|dad|father|grandma|grandmother|grandpa|grandfather|"
    r"brother|sister|friend|best friend|boss|wife|husband|boyfriend|girlfriend|parents|family|teacher|coach) "
    r"(?:always|never|used to|thinks|says|said|believes|loves|likes|hates|wants|told me))\b",
    re.I,
)
_SOCIAL_RE = re.compile(
    r"^(?:hi|hello|hey|heyo|hiya|howdy|yo|greetings|good (?:morning|afternoon|evening|night)|how are you|how's it going|"
    r"how are things|how are you doing|how is your day|what's up|whats up|nice to meet you|pleased to meet you|"
    r"it was nice|it's been nice|it was great|nice talking|nice chatting|bye|goodbye|good bye|see you|see ya|"
    r"talk to you later|take care|have a (?:nice|great|good|wonderful) (?:day|night|evening|weekend)|you too|"
    r"me too|same here|lol|haha|cool|nice|ok|okay|sure|alright|i'm good|i'm fine|i am fine|i am good|not bad|fine)\b",
    re.I,
)
_PERSONAL_RE = re.compile(
    r"\b(?:i am a|i'm a|i have|i work|i live|i use to|i used to|i study|we are|we're|my name|my (?!pleasure)\w+ (?:is|are)|"
    r"i (?:really |also )?(?:like|love|enjoy|hate|prefer))\b",
    re.I,
)
_NAME_INTRO_RE = re.compile(r"\b(?:I'm|I am|i'm|im) [A-Z(\[]")
PLACEHOLDER_RE = re.compile(r"[(\[]\s*(?:user|name|your|insert)|\buser \d\b", re.I)
_QUESTION_LEAD_RE = re.compile(r"^(?:what|who|where|when|why|how|which|can|could|would|will|is|are|do|does)\b", re.I)


def label_persona_line(text: str, hint: str = "") -> str | None:
    """A persona line ("i love to ski.", "i have two dogs.") is a preference when it names a liking, dislike or
    constraint, otherwise a fact about the speaker."""
    if text.endswith("?"):
        return None
    if _PREF_RE.search(text) and not _NOT_PREF_RE.search(text):
        return "preference"
    return "fact"


def label_chat_utterance(text: str, hint: str = "") -> str | None:
    """A chit-chat clause keeps a label only where it is reliable: a short greeting or acknowledgement that says nothing
    else about the speaker is social ("Hi, I'm from the South" is not: 211 of the 831 public chat rows labelled social
    before said something of the speaker); a first-person "I love/like/am a/work as/live in" statement is a preference
    or fact; "I used to", "if I had" and "my dad always" clauses are hypothetical (past, conditional or someone
    else's); everything else is dropped."""
    words = text.split()
    if _chat_social(text):
        return "social"
    if text.endswith("?") or len(words) < 3 or len(words) > 25:
        return None
    if _HYPO_RE.match(text):
        return "hypothetical"
    if _FIRST_PREF_RE.match(text):
        return "preference"
    if _FIRST_FACT_RE.match(text) and not _PREF_RE.search(text):
        return "fact"
    return None


def label_social_only(text: str, hint: str = "") -> str | None:
    """Human turns to ConvAI2 bots: only short greetings and acknowledgements are labelled (social)."""
    return "social" if text.split() and _chat_social(text) else None


def label_request(text: str, hint: str = "") -> str | None:
    """An instruction-dataset task or an assistant-command intent is a one-off request."""
    return "request"


#: CLINC150 intents that are not one-off requests: small talk about the bot and greetings are social, thanks is
#: feedback (as "perfect, thanks" is), renaming and speech-speed changes are standing instructions; answers
#: (yes/no/maybe), cancel and repeat are dropped because their kind depends on the dialogue.
_CLINC_SOCIAL = {
    "greeting", "goodbye", "are_you_a_bot", "how_old_are_you", "what_is_your_name", "where_are_you_from",
    "do_you_have_pets", "what_are_your_hobbies", "who_made_you", "who_do_you_work_for",
}  # fmt: skip
_CLINC_INSTRUCTION = {"change_user_name", "change_ai_name", "change_speed"}
# A rename or speed change is a standing instruction only when it says how to address or speak ("call me chip",
# "talk slower"); "change my name" or "my name is brad" are dropped (a vague one-off request, a fact).
_STANDING_RE = re.compile(
    r"\b(?:call|calling|refer to|address|speak|talk|slower|faster|slowly|quicker|from now on|going forward)\b", re.I
)
_CLINC_DROP = {"yes", "no", "maybe", "cancel", "repeat"}


def label_clinc(text: str, hint: str) -> str | None:
    """CLINC150 labels by intent (see the intent sets above); out-of-scope queries are still one-off requests."""
    if hint in _CLINC_DROP:
        return None
    if hint in _CLINC_SOCIAL:
        return "social"
    if hint == "thank_you":
        return "feedback"
    if hint in _CLINC_INSTRUCTION:
        return "instruction" if _STANDING_RE.search(text) and not _QUESTION_LEAD_RE.match(text) else None
    return "request"


def label_chatterbot(text: str, hint: str) -> str | None:
    """chatterbot-corpus: user turns of the greetings/conversations/botprofile files are social (those stating a
    personal fact are dropped); opening questions of the topic files are requests."""
    if hint == "social":
        return None if is_personal(text) or len(text.split()) > 12 else "social"
    return "request" if text.endswith("?") or re.match(r"^(?:tell me|explain|define|describe)\b", text, re.I) else None


# Real prompts to chat assistants (OASST, ShareGPT): a clause opening with a task verb or a question is a one-off
# request; "I'm a nurse" / "I love Blame!" clauses are facts / preferences; role-play set-ups, standing rules ("from now
# on", "always"), other first-person clauses ("I want to...", "I think") and fragments are dropped as ambiguous.
_TASK_LEAD_RE = re.compile(
    r"^(?:(?:please|pls|hey|ok|okay|so|now)[,!]?\s+)?(?:write|give|list|explain|describe|tell me|summari[sz]e|"
    r"translate|create|generate|make|suggest|recommend|provide|draft|compose|rewrite|rephrase|paraphrase|convert|"
    r"compare|find|show me|help|name|calculate|solve|design|plan|outline|define|classify|identify|analy[sz]e|edit|"
    r"correct|proofread|improve|brainstorm|come up with|expand|shorten|predict|estimate|what|what's|who|where|when|"
    r"why|how|which|is|are|can|could|would|will|do|does|did|should|was|were)\b(?!\s+(?:you always|from now on)\b)",
    re.I,
)
_ROLE_PLAY_RE = re.compile(
    r"\b(?:act as|acting as|you are (?:a|an|now|going)|pretend|role-?play|imagine (?:you|that you)|from now on|"
    r"i want you to|you will (?:be|act)|jailbreak|dan\b)|^(?:are|do|can) you (?:as|an? (?:ai|bot|human)|sentient|alive)",
    re.I,
)
_NOW_RE = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:week|weekend|morning|evening)|next \w+|right now)\b", re.I
)
CODE_HEAVY_RE = re.compile(r"```|[{};=<>]")
# "I have a table/dataset/question/interview..." in a prompt is the task's material, not a lasting fact.
_MATERIAL_RE = re.compile(
    r"^i have (?:a|an|the|this|these|some)\b(?!\s+(?:\w+\s+)?(?:son|daughter|kid|child|wife|husband|partner|dog|cat|"
    r"job|degree|disability|condition|allergy|car|house|farm|business|shop|store|bakery)\b)",
    re.I,
)


def label_prompt(text: str, hint: str = "") -> str | None:
    """A clause of a real user prompt: see the rule above. Facts of the moment ("my exam is tomorrow") are dropped."""
    words = text.split()
    if len(words) < 3 or len(words) > 40 or _ROLE_PLAY_RE.search(text):
        return None
    if any(_TASK_LEAD_RE.match(part.strip()) for part in text.split(",")[1:]):
        return None  # "I am deaf, describe the main styles of music": a fact and a request in one clause
    if _FIRST_PREF_RE.match(text) and not _NOT_PREF_RE.search(text):
        return "preference"
    if _FIRST_FACT_RE.match(text) and not (_PREF_RE.search(text) or _NOW_RE.search(text) or _MATERIAL_RE.match(text)):
        return "fact"
    return "request" if _TASK_LEAD_RE.match(text) else None


def label_prompt_or_social(text: str, hint: str) -> str | None:
    """A prompt clause (see `label_prompt`), or the short greeting that opened the prompt (social)."""
    return "social" if hint == "social" else label_prompt(text, hint)


def is_personal(text: str) -> bool:
    return bool(_PERSONAL_RE.search(text) or _NAME_INTRO_RE.search(text))


# DNLI evaluation sets (Welleck et al. 2019): PersonaChat utterances written by crowdworkers, each candidate list tied to
# a human-annotated persona triple (relation, object). A clause is a self-disclosure only when it opens with the speaker
# ("i", "my", "yes , i", "lol my"), is not a question, a wish, a conditional, a remark about "you" or a state of the
# moment, and names the triple's object (or, for a contradicting candidate, states a liking or a having itself).
_DNLI_PREF_RELATIONS = re.compile(r"^(?:dislike|like_\w+|favorite\w*)$")
_DNLI_FACT_RELATIONS = re.compile(r"^(?:have\w*|physical_attribute|place_origin|misc_attribute|other)$")
_SELF_LEAD_RE = re.compile(
    r"^(?:(?:yes|yeah|yep|yup|no|nope|nah|well|oh|ok|okay|lol|haha|wow|cool|nice|sure|true|actually|and|but|so|also|"
    r"me too|same|really|honestly|not really|not me)[,!.]*\s+){0,3}(?:i|i'm|im|i've|ive|my|mine|we|we're|our)\b",
    re.I,
)
_NOT_DISCLOSURE_RE = re.compile(
    r"\b(?:you|your|you're|youre|yours|u|ur|y'all|yall|can(?! not\b)|would|could|should|might|wish|hope|want to|wanna|going to|gonna|if|bet|maybe|"
    r"guess|think|sounds|seems|pretend|dream|someday|one day|plan to|planning|soon|about to|will|i'll|used to|was|were|"
    r"had|did|went|lived|yesterday|last (?:night|week|weekend)|when i was)\b|\b(?:am|i'm|im|are|we're) (?!working|living|studying|going to school)\w+ing\b",
    re.I,
)
_STRONG_PREF_RE = re.compile(
    r"\b(?:despise|detest|loathe|can not stand|cannot stand|can't stand|not (?:a |much of a |big )?fan|not big on|"
    r"not (?:really )?into|not crazy about|do not care for|don't care for|obsessed|addicted|crave|hooked on|"
    r"my (?:fav|favorite|favourite)|is my (?:fav|favorite|favourite))\b",
    re.I,
)
_PRONOUN_OBJECT_RE = re.compile(r"\b(?:like|likes|love|loves|enjoy|hate|prefer)\s+(?:that|this|it|them|those)\b", re.I)
_HAVING_RE = re.compile(r"\b(?:have|has|own|owns|got|no|kids?|children|pets?|am|i'm|im|is|are)\b", re.I)
_MOMENT_RE = re.compile(
    r"\b(?:today|tonight|right now|this (?:morning|afternoon|evening|weekend)|just (?:got|finished|came|woke|ate|"
    r"made|had)|doing (?:well|good|great|fine|ok|okay|alright)|about to|currently watching|getting ready)\b",
    re.I,
)
_PARTNER_QUESTION_RE = re.compile(
    r"^(?:(?:and|so|well|oh|cool|nice|wow|lol|haha)[,!.]*\s+)?(?:what|how|where|do|did|are|have|any|whats|what's)\b"
    r"[^?]*\b(?:you|your|u)\b[^?]*\?$",
    re.I,
)
_STOP = frozenset(
    "the and for that this with you your are was have has had not but all any can her his him she they them their "
    "our out who what when where why how too very just like love really also been from into about some one get got "
    "its it's i'm im lot much more most make does did doing being enjoy favorite hate dislike going things thing".split()
)


def _mentions(text: str, obj: str) -> bool:
    words = [w for w in re.findall(r"[a-z]+", obj.lower()) if len(w) >= 3 and w not in _STOP]
    return bool(words) and any(re.search(rf"\b{re.escape(w)}(?:s|es)?\b", text, re.I) for w in words)


def content_words(text: str) -> set[str]:
    """Content words of a clause, cut to 5 letters so "dogs"/"dog" and "reading"/"read" meet."""
    return {w[:5] for w in re.findall(r"[a-z']+", text.lower()) if len(w) >= 3 and w not in _STOP}


def _self_disclosure(text: str) -> bool:
    words = text.split()
    return (
        3 <= len(words) <= 25
        and not text.endswith("?")
        and bool(_SELF_LEAD_RE.match(text))
        and not _NOT_DISCLOSURE_RE.search(text)
        and not _MOMENT_RE.search(text)
        and not _HYPO_RE.match(text)
    )


def label_dnli(text: str, hint: str) -> str | None:
    """A clause of a DNLI candidate utterance; hint is "cand|<relation>|<role>|<object>" (role: label and similar share
    the persona's triple, neg contradicts it) or "turn|<persona lines>" / "partner" for dialogue turns (see
    `label_persona_turn`)."""
    if not hint.startswith("cand|"):
        return label_persona_turn(text, hint)
    _, relation, role, obj = hint.split("|", 3)
    if not _self_disclosure(text):
        return None
    named = role != "neg" and _mentions(text, obj)
    if _DNLI_PREF_RELATIONS.match(relation):
        liking = bool((_PREF_RE.search(text) and not _NOT_PREF_RE.search(text)) or _STRONG_PREF_RE.search(text))
        liking = liking and not _PRONOUN_OBJECT_RE.search(text)
        return "preference" if liking and (named or role == "neg") else None
    if _DNLI_FACT_RELATIONS.match(relation) and not _PREF_RE.search(text) and not _STRONG_PREF_RE.search(text):
        if relation.startswith("have") and role == "neg":
            return "fact" if _HAVING_RE.search(text) else None
        return "fact" if named and _HAVING_RE.search(text) else None
    return None


_FINE_RE = re.compile(
    r"\b(?:i am|i'm|im)\s+(?:doing\s+)?(?:very |really |pretty |so )?(?:good|well|fine|great|ok|okay|alright|awesome)\b",
    re.I,
)
_SELF_WORD_RE = re.compile(r"\b(?:i|my|me|we|our|mine|i'm|im|i've|ive|myself)\b", re.I)


def _chat_social(text: str) -> bool:
    """A greeting, acknowledgement or "i am good, you?" that says nothing else about the speaker ("hi i am maddie, i am
    13" and "lol, i go to concerts" are not social)."""
    return len(text.split()) <= 8 and bool(_SOCIAL_RE.match(text)) and not _SELF_WORD_RE.search(_FINE_RE.sub("", text))


def label_persona_turn(text: str, hint: str) -> str | None:
    """A clause of a PersonaChat turn. The persona owner's clause that restates one of its persona lines (two content
    words shared, or half of the line's) is a preference or fact when its own wording and the line's agree; a question
    about the partner ("what do you do for fun?"), a state of the moment ("i am doing well today") and a greeting are
    social, for either speaker; everything else is dropped (it may be an improvised disclosure no persona line covers)."""
    words = text.split()
    if _chat_social(text):
        return "social"
    asks_task = re.search(r"\b(?:do you know|can you|could you|would you|will you|recommend|suggest)\b", text, re.I)
    if len(words) <= 12 and _PARTNER_QUESTION_RE.match(text) and not (_SELF_WORD_RE.search(text) or asks_task):
        return "social"
    persona = hint.split("|")[1:] if hint.startswith("turn|") else []
    mine = content_words(text)
    restated = [
        line
        for line in persona
        if (shared := len(mine & content_words(line))) >= 2 or (shared and shared * 2 >= len(content_words(line)))
    ]
    if not restated:
        moment = _SELF_LEAD_RE.match(text) and _MOMENT_RE.search(text) and len(words) <= 10 and not text.endswith("?")
        return "social" if moment and not _HYPO_RE.match(text) else None
    if not _self_disclosure(text):
        return None
    own = label_persona_line(text)
    return own if own in {label_persona_line(line) for line in restated} else None
