"""Corrections (HEURISTIC: surface wording only): which agent turn a user turn corrects or gives feedback on,
the rule it states, and the one-off slips that are session context instead.
"""

from __future__ import annotations

import re

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.facts import (
    CLAUSE_SPLIT_RE,
    LEAD_IN_RE,
    profile_from_clause,
    typed_fact_clause,
)
from reflexio_pipelines.learning.rules.feedback import (
    MAX_RULE_WORDS,
    PAST_RE,
    PLEASE_TAIL_RE,
    STANDING_RE,
    STYLE_DIRECTIVE_RE,
    directive_clauses,
    feedback_rule,
    is_directive,
    is_narrative,
    rule_sentence,
    style_rule,
)
from reflexio_pipelines.learning.rules.forget_requests import forget_target
from reflexio_pipelines.learning.rules.text import (
    MAX_CONTENT_CHARS,
    MAX_RATIONALE_QUOTE,
    MAX_TRIGGER_CHARS,
    capitalise,
    clip,
    normalise,
    split_sentences,
)
from reflexio_pipelines.learning.rules.triggers import situation_trigger
from reflexio_pipelines.learning.transcript import is_agent_turn, preceding_index, previous_speaker_index
from reflexio_pipelines.learning.types import ExtractedPlaybook, Turn

# Phrases that contain a marker word but are politeness, not a correction.
NOT_A_CORRECTION_RE = re.compile(
    r"\bno,? (?:problem|worries|thanks|thank you|rush|idea|need|hurry|stress|big deal)\b|\bnever ?mind\b|"
    r"\b(?:don't|do not) worry\b|\bnot sure\b|\bnot bad\b|\bnot a problem\b|"
    r"\b(?:no|nope|nah)[,.!]*\s+(?:all good|i'm good|i'm fine|that's all|that's it|that's fine|not now|not yet|"
    r"maybe later|nothing else|that's everything)\b",
    re.I,
)
_LEADING_NO_RE = re.compile(r"^(?:no|nope|nah)\b", re.I)
MARKER_RE = re.compile(
    r"\b(?:wrong|incorrect|instead|stop|rather than)\b|\bthat(?:'s| is) not\b|"
    # "I never…", "I don't…" are about the user; "never…", "we never…", "don't…" address behaviour
    r"(?<!\bI )\b(?:never|always|don't|dont|do not)\b|"
    r"\bnot\b[^.?!]{1,80}\bbut\b|\buse\b[^.?!]{1,80}?,?\s+not\b",
    re.I,
)
# Leading "No," / "Nope —" / "Wrong." carry no rule; "wrong" needs punctuation after it ("Wrong place" is content).
# "No" followed by a noun is a prohibition ("No emojis"): it is kept.
STRIP_LEAD_RE = re.compile(
    r"^(?:(?:no|nope|nah)\b(?:[\s,.!;:\u2013\u2014-]*$|\s*[,.!;:\u2013\u2014-]+\s*|\s+(?=(?:I|I'm|I've|I'd|we|we're|"
    r"you|it|it's|that|that's|this|not|actually|wait|sorry|please|thanks|use|don't|never|always|stop|just|"
    r"the (?:other|one|right)|wrong)\b))|(?:wrong|incorrect|that's (?:wrong|not right|incorrect|not it)|"
    r"that is (?:wrong|not right|incorrect))\s*[,.!;:\u2013\u2014-]+\s*)+",
    re.I,
)
_FILLER_SENTENCE_RE = re.compile(
    r"^(?:thanks|thank you|ok|okay|hmm+|ugh|sorry|please|good|great|fine|right|yes|yeah|sure|cool|nice|ha+|oops|"
    r"whoops|oh|well|also|hm+)[.!]*$",
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
MAX_RULE_SENTENCES = 3
#: A verdict on the answer with no instruction in it.
_VERDICT_RE = re.compile(
    r"^(?:(?:that|this|it)(?:'s| is| was| looks| seems)\s+)?(?:the\s+|a\s+)?(?:(?:completely|totally|all|just|"
    r"quite|very)\s+)?(?:wrong|incorrect|not right|not correct|not quite|not it|not what I (?:asked for|wanted|meant)|"
    r"a mistake|an error|off)(?:\s+(?:[\w.-]+)){0,2}[.!]*$",
    re.I,
)


def _is_slip(sentence: str) -> bool:
    """A fix of what the user asked for this time ("No, I meant the staging server", "No, 2024."), with nothing
    durable in it."""
    sentence = normalise(sentence)
    text = STRIP_LEAD_RE.sub("", sentence).strip()
    if _DURABLE_RE.search(text) or STANDING_RE.search(text) or style_rule(text):
        return False
    if _SLIP_RE.search(sentence) or _SLIP_RE.search(text):
        return not (STYLE_DIRECTIVE_RE.search(text) and not re.search(r"\bmake it (?:a|an|the)\b", text, re.I))
    return _bare_value_slip(sentence)


_CLOSER_RE = re.compile(
    r"^(?:(?:that's|that is|it's) (?:all|it|fine|ok|okay|enough)|all (?:good|set|done)|i'm (?:good|fine|ok|okay|set|done)|"
    r"not (?:now|yet|today|really)|maybe later|later|nothing(?: else)?|none|nah|nope|never ?mind|not needed|no need)\b",
    re.I,
)


def _bare_value_slip(sentence: str) -> bool:
    """ "No, 2024." / "No, staging.": a bare value after the "No", no instruction in it (not "No, all good")."""
    sentence = normalise(sentence)
    text = STRIP_LEAD_RE.sub("", sentence).strip()
    return (
        text != sentence
        and 0 < len(text.split()) <= 3
        and not is_directive(text)
        and not profile_from_clause(text)
        and not _FILLER_SENTENCE_RE.match(text)
        and not _CLOSER_RE.match(text)
    )


def has_correction_marker(text: str) -> bool:
    # "stop remembering my phone number" holds a marker word but is a forget request, not a rule for the agent
    sentences = [
        NOT_A_CORRECTION_RE.sub(" ", normalise(s)).strip() for s in split_sentences(text) if not forget_target(s)
    ]
    return any(MARKER_RE.search(s) or _LEADING_NO_RE.match(s) for s in sentences)


def _has_feedback(text: str, strong: bool = False) -> bool:
    """Whether a user turn gives the agent feedback beyond the marker words: style, process, conventions, standing
    instructions, or a one-off fix ("I meant …"). `strong`: the agent had asked a question, so a bare "No, X" is an
    answer to it, not a fix."""
    return any(
        feedback_rule(s) or (_is_slip(s) and not (strong and _bare_value_slip(s)))
        for s in map(normalise, split_sentences(text))
    )


def correction_rule(correction: str) -> str:
    """The user's correction or feedback as an imperative rule, keeping their words ("No, we never X, always Y" ->
    "Never X; always Y."; "Way too long." -> "Keep answers shorter (…)"). Sentences that are stories, facts about
    the user or one-off fixes ("I meant the staging server") are left out; "" when no rule is left."""
    rules = []
    for sentence in map(normalise, split_sentences(correction)):
        if forget_target(sentence):  # a forget request in the same turn is handled as one, not as part of the rule
            continue
        if _is_slip(sentence):  # a one-off fix: session context, not a rule
            continue
        marked = has_correction_marker(sentence)
        rule = STRIP_LEAD_RE.sub("", LEAD_IN_RE.sub("", STRIP_LEAD_RE.sub("", sentence)))
        if (
            not rule
            or _FILLER_SENTENCE_RE.match(rule)
            or NOT_A_CORRECTION_RE.fullmatch(rule.rstrip(".!"))
            or _VERDICT_RE.match(rule)
        ):
            continue  # "Wrong address.", "That was the wrong environment.": a verdict, no rule in it
        # a plain fact about the user in the same turn ("I'm a PM") is a profile, not part of the rule; so is a
        # fact in a typed slot after a bare "No," ("No, I live in Munich now")
        is_fact = any(map(profile_from_clause, CLAUSE_SPLIT_RE.split(rule)))
        only_lead = marked and not MARKER_RE.search(rule)
        if is_fact and not feedback_rule(rule) and (not marked or (only_lead and typed_fact_clause(rule))):
            continue
        if rule.endswith("?") and not feedback_rule(rule):
            continue  # a question is not a rule (a polite request about the answer's form is)
        if is_narrative(rule) or (PAST_RE.search(rule) and not feedback_rule(rule) and not is_directive(rule)):
            # what happened is context: only the instructions in it ("…, so never do that again") are rules
            rules += [rule_sentence(c) for c in directive_clauses(rule)]
            continue
        if feedback := feedback_rule(rule):
            rules.append(feedback)
        elif marked and (MARKER_RE.search(rule) or is_directive(rule) or rule != sentence):
            rules.append(rule_sentence(rule))
        elif is_directive(rule):
            rules.append(rule_sentence(PLEASE_TAIL_RE.sub("", rule)))
    rules = [r for r in dict.fromkeys(rules) if len(r.split()) <= MAX_RULE_WORDS + 5]
    return clip(" ".join(rules[:MAX_RULE_SENTENCES]), MAX_CONTENT_CHARS)


def session_notes(text: str) -> list[str]:
    """The one-off fixes of a user turn ("No, I meant the staging server" -> "Meant the staging server"): they hold
    for the conversation they were said in and are never stored as rules."""
    notes = []
    for sentence in map(normalise, split_sentences(text)):
        if _is_slip(sentence):
            core = STRIP_LEAD_RE.sub("", LEAD_IN_RE.sub("", sentence)).rstrip(".!")
            core = re.sub(r"^(?:oops|whoops|sorry|my bad)\b[,!.]?\s*", "", core, flags=re.I)
            notes.append(capitalise(re.sub(r"^I\s+(?=meant|mean|said|was|wanted|asked)", "", core)) + ".")
    return notes


def corrected_agent_index(turns: tuple[Turn, ...], index: int) -> int | None:
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
    if has_correction_marker(text):
        only_no = not any(MARKER_RE.search(NOT_A_CORRECTION_RE.sub(" ", normalise(s))) for s in split_sentences(text))
        if not (asked and only_no) or _has_feedback(text, strong=asked):
            return agent_index
    return agent_index if _has_feedback(text, strong=asked) else None


def task_request_index(turns: tuple[Turn, ...], agent_index: int) -> int | None:
    """The user turn that set the task the agent was answering: the nearest earlier user turn that is not itself a
    correction (after "No, X" -> agent retry -> "No, Y", the situation is still the original request)."""
    index = preceding_index(turns, agent_index, user=True)
    while index is not None and corrected_agent_index(turns, index) is not None:
        index = preceding_index(turns, index, user=True)
    return index


def correction_playbook(turns: tuple[Turn, ...], index: int) -> ExtractedPlaybook | None:
    agent_index = corrected_agent_index(turns, index)
    if agent_index is None:
        return None
    turn, agent = turns[index], turns[agent_index]
    content = correction_rule(turn.content)
    if not content:
        return None  # a one-off fix or a story: session context at most, never a rule
    request_index = task_request_index(turns, agent_index)
    if request_index is not None:
        trigger = situation_trigger(turns[request_index].content)
        sources = [turns[request_index].turn_id, agent.turn_id, turn.turn_id]
    else:  # the request scrolled out of the window: describe the situation by the answer that went wrong
        trigger = clip(f"When giving an answer like: {normalise(agent.content)}", MAX_TRIGGER_CHARS)
        sources = [agent.turn_id, turn.turn_id]
    quote = clip(normalise(agent.content), MAX_RATIONALE_QUOTE)
    return ExtractedPlaybook(
        content=clean_text(content),
        trigger=clean_text(trigger),
        rationale=clean_text(f"The user corrected the agent's answer: '{quote}'"),
        kind="correction",
        source_turn_ids=sources,
    )
