"""Standing instructions (HEURISTIC: surface wording only): rules for every future conversation, in any user turn."""

from __future__ import annotations

import re
from collections.abc import Iterator

from reflexio_pipelines.learning.jsonparse import clean_text
from reflexio_pipelines.learning.rules.corrections import NOT_A_CORRECTION_RE
from reflexio_pipelines.learning.rules.facts import LEAD_IN_RE, QUESTION_START_RE, typed_fact_clause
from reflexio_pipelines.learning.rules.feedback import (
    CONVENTION_RE,
    FORMAT_REQUEST_RE,
    FORMAT_VALUES,
    MAX_RULE_WORDS,
    PAST_RE,
    PLEASE_TAIL_RE,
    STANDING_LEAD_RE,
    STANDING_RE,
    STYLE_NOUNS,
    SUBJECT_MODAL_RE,
    is_directive,
    is_narrative,
    rule_sentence,
    style_rule,
)
from reflexio_pipelines.learning.rules.forget_requests import forget_target
from reflexio_pipelines.learning.rules.reasoned_requests import reasoned_rule
from reflexio_pipelines.learning.rules.text import (
    MAX_RATIONALE_QUOTE,
    MAX_TRIGGER_CHARS,
    clip,
    first_word,
    lower_first,
    normalise,
    split_sentences,
)
from reflexio_pipelines.learning.rules.triggers import IMPERATIVE_VERBS, situation_trigger, strip_polite
from reflexio_pipelines.learning.types import ExtractedPlaybook, Turn

#: A standing marker that opens a sentence and its subordinate clause ("Whenever you write SQL, …").
_CONDITION_RE = re.compile(
    r"^(?:whenever|every time|each time|next time|any time|anytime|when(?:ever)? you(?:'re| are)?)\s+(?:you\s+)?"
    r"(?:(?P<situation>[^,]+),\s*(?:then\s+)?(?P<rule>.+)|(?P<situation2>[^,]+?)\s+(?:then\s+)?"
    r"(?P<rule2>(?:please|always|never|don't|do not|use|make|put|leave|add|include|check|ask|send|keep|show|write|"
    r"give|try)\b[^,]*))$",
    re.I,
)


def _standing_rule(sentence: str) -> tuple[str, str | None] | None:
    """(rule, situation) for a standing instruction in any user turn ("From now on, write commit messages in the
    imperative mood", "Whenever you write SQL, use CTEs", "Could you keep the numbers in metric units?", "We use
    Poetry for this project"); the situation is the "whenever …" clause when there is one. None otherwise."""
    text = normalise(sentence)
    if forget_target(text) or is_narrative(text) or len(text.split()) > MAX_RULE_WORDS:
        return None
    core = NOT_A_CORRECTION_RE.sub("", LEAD_IN_RE.sub("", text)).strip(" ,.!")  # "never mind" is no rule
    if not core:
        return None
    if match := _CONDITION_RE.match(core):
        rule = (match.group("rule") or match.group("rule2")).strip()
        situation = (match.group("situation") or match.group("situation2")).strip()
        statement = re.match(r"^(?:I|I'm|I've|he|she|they|it|it's|there|this|that)\b", rule, re.I) is not None
        if is_directive(rule) or style_rule(rule) or (not statement and not PAST_RE.search(rule)):
            return style_rule(rule) or rule_sentence(PLEASE_TAIL_RE.sub("", rule)), situation
    stripped, polite = strip_polite(core)
    polite = polite or bool(PLEASE_TAIL_RE.search(core))
    if stripped.endswith("?"):
        if not polite:
            return None  # a question, not an instruction
        stripped = stripped.rstrip("?").strip()
    marked = bool(STANDING_RE.search(core))
    if marked or re.match(r"^(?:please\s+)?(?:always|never|don't ever|do not ever)\s+\w+", stripped, re.I):
        rule = STANDING_LEAD_RE.sub("", stripped).strip()
        rule = re.sub(
            r"[\s,]*\b(?:from now on|going forward|moving forward|in (?:the )?future|from today on|"
            r"any ?more|ever again)\b[\s,]*(?=[.!]?$)",
            "",
            rule,
            flags=re.I,
        ).strip()
        if not rule:
            return None
        if styled := style_rule(rule):
            return styled, None
        # after an explicit marker ("From now on, sign off with …") anything but a statement about someone is an
        # instruction; a statement about the user ("From now on I'll do it myself") is not
        statement = bool(
            re.match(r"^(?:I|I'll|I'm|I've|he|she|they|it|it's|there|this|that)\b", rule, re.I)
        ) and not SUBJECT_MODAL_RE.match(rule)
        if is_directive(rule) or (marked and not statement and not PAST_RE.search(rule)):
            return rule_sentence(PLEASE_TAIL_RE.sub("", rule)), None
        return None
    # a request about every answer's form ("Could you keep the numbers in metric units?", "Please use British
    # spelling", "Metric units only, please"): not about this answer alone
    formatted = FORMAT_REQUEST_RE.search(stripped) or re.search(rf"\b(?:{FORMAT_VALUES})\b", stripped, re.I)
    keeps = re.match(
        r"^(?:please\s+)?(?:keep|stick to|stick with|stay with|use|always use|use only|only use|write|"
        r"format)\b",
        stripped,
        re.I,
    )
    if polite and formatted and keeps and not re.search(r"\btranslat", stripped, re.I):
        return rule_sentence(PLEASE_TAIL_RE.sub("", stripped)), None
    # a prohibition about the answers' form ("Don't use markdown in your replies", "Avoid jargon", "I'd rather you
    # didn't use emojis"): every answer
    if match := re.match(
        r"^(?:please\s+)?(?:(?:don't|do not|never|avoid|stop)(?: ever)?|"
        r"I(?:'d| would) (?:rather|prefer)(?: it if)? you (?:didn't|did not|don't|not))\s+(?P<rest>.+)$",
        stripped,
        re.I,
    ):
        about_form = re.search(rf"\b(?:{STYLE_NOUNS})\b", match.group("rest"), re.I)
        if about_form and not PAST_RE.search(match.group("rest")):
            verb = "Avoid" if stripped.lower().startswith(("avoid", "please avoid")) else "Don't"
            rest = re.sub(r"^(?:use|using)\b", "use", match.group("rest"), flags=re.I)
            return rule_sentence(PLEASE_TAIL_RE.sub("", f"{verb} {rest}")), None
    if polite and re.match(
        r"^(?:please\s+)?keep (?:it|them|things|answers|replies|everything) (?:short|brief|concise|"
        r"simple|formal|casual|light|to the point)\b",
        stripped,
        re.I,
    ):
        return rule_sentence(PLEASE_TAIL_RE.sub("", stripped)), None
    if (
        formatted
        and len(stripped.split()) <= 6
        and (polite or re.search(r"\bonly\b", stripped, re.I))
        and not QUESTION_START_RE.match(stripped)
        and not re.search(r"\btranslat", stripped, re.I)
    ):
        return rule_sentence(PLEASE_TAIL_RE.sub("", stripped)), None  # "Metric units only, please"
    if (
        CONVENTION_RE.search(core)
        and not PAST_RE.search(core)
        and not typed_fact_clause(core)
        and re.match(r"^(?:we|our|the team|this|everything|in this|in our|here)\b", core, re.I)
    ):
        return rule_sentence(PLEASE_TAIL_RE.sub("", core)), None
    return reasoned_rule(core)


def standing_playbooks(turns: tuple[Turn, ...], index: int) -> Iterator[ExtractedPlaybook]:
    """Standing instructions of user turn `index` (one that does not answer an agent turn)."""
    turn = turns[index]
    for sentence in split_sentences(turn.content):
        found = _standing_rule(sentence)
        if found is None:
            continue
        rule, situation = found
        if situation:
            trigger = situation_trigger(situation)
        elif first_word(rule) in IMPERATIVE_VERBS:
            trigger = situation_trigger(rule.rstrip("."))
        elif (match := re.match(r"^(?:always|never|don't|do not)\s+(?=(\w+))", rule, re.I)) and match.group(
            1
        ).lower() in IMPERATIVE_VERBS:
            trigger = situation_trigger(rule[match.end() :].rstrip("."))  # "Never deploy on Fridays": when deploying
        else:  # the rule's own words keep triggers of different instructions apart (a trigger is a dedup slot)
            trigger = clip(f"In any answer: {lower_first(rule.rstrip('.'))}", MAX_TRIGGER_CHARS)
        yield ExtractedPlaybook(
            content=clean_text(rule),
            trigger=clean_text(trigger),
            rationale=clean_text(
                f"The user gave a standing instruction: '{clip(normalise(sentence), MAX_RATIONALE_QUOTE)}'"
            ),
            kind="correction",
            source_turn_ids=[turn.turn_id],
        )
