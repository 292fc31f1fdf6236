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
    """A chit-chat clause keeps a label only where it is reliable: a short greeting or acknowledgement is social; a
    first-person "I love/like/am a/work as/live in" statement is a preference or fact; "I used to", "if I had" and
    "my dad always" clauses are hypothetical (past, conditional or someone else's); everything else is dropped."""
    words = text.split()
    if len(words) <= 8 and _SOCIAL_RE.match(text) and not is_personal(text):
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
    words = text.split()
    if 1 <= len(words) <= 8 and _SOCIAL_RE.match(text) and not is_personal(text):
        return "social"
    return None


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
