"""Cutting a user turn into clauses, the unit the clause classifier labels.

A clause is a sentence, or a part of one that says a thing of its own: "I'm vegetarian, so no meat please" is a
fact and a request; "I use VS Code, give me the multi-cursor shortcut" is a fact and a request; "Forget the bullet
points rule, short paragraphs from now on" is a revocation and an instruction. The cuts are structural (sentence
ends, semicolons, dashes, a comma before "so"/"but" or before an imperative), so a condition stays with its rule
("When I send a report, use bullet points" is one clause). Code blocks and quoted material are left out: they are
the task's material, never the user's words about themselves.
"""

from __future__ import annotations

import re

MAX_CLAUSE_CHARS = 300
MIN_CLAUSE_WORDS = 2
MIN_LEAD_WORDS = 3

#: Contractions typed without their apostrophe ("im not a teacher", "dont", "thats"), restored before the cut: the
#: clause forms read "I'm" as the user speaking of themselves, "im" as nothing (on the own-writing training rows: one
#: more correction learned, nothing else moved). Words that are also words of their own ("its", "id", "ill", "wont",
#: "lets", "were", "hell") are left as they are.
_BARE_CONTRACTIONS = {
    "im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "cant": "can't",
    "isnt": "isn't", "arent": "aren't", "wasnt": "wasn't", "werent": "weren't", "havent": "haven't",
    "hasnt": "hasn't", "hadnt": "hadn't", "wouldnt": "wouldn't", "shouldnt": "shouldn't", "couldnt": "couldn't",
    "thats": "that's", "whats": "what's", "theres": "there's", "youre": "you're", "theyre": "they're",
    "weve": "we've", "youve": "you've", "theyve": "they've",
}  # fmt: skip
_BARE_CONTRACTION_RE = re.compile(r"\b(?:" + "|".join(_BARE_CONTRACTIONS) + r")\b", re.I)
_CODE_RE = re.compile(r"```.*?(```|$)|`[^`\n]*`", re.S)
_SENTENCE_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+|(?<=[。！？])\s*|\n+")
_HARD_RE = re.compile(r"\s*;\s+|\s+[—–]\s+|\s+-{1,2}\s+")  # "TL;DR" has no space after its ";"
_SOFT_CONNECTOR_RE = re.compile(r",\s*(?:so|but|and so|which means|because of that)\s+", re.I)
_IMPERATIVE = (
    "give|show|tell|send|make|write|list|help|find|book|use|keep|add|remove|put|let|please|check|explain|draft|"
    "summarize|summarise|translate|fix|rewrite|create|suggest|recommend|plan|stop|avoid|skip|don't|do not|never|always"
)
#: "I live in Lisbon and I prefer metric units" is two facts: forgetting or replacing one must not take the other.
_AND_SUBJECT_RE = re.compile(r",?\s+and\s+(?=(?:I|I'm|I've|I'd|my|we|we're|our)\b)")
#: "My partner and I don't have kids", "Spicy food and I don't get along" are one clause: a short piece before
#: "and I" without a subject or verb of its own is the first half of a compound subject.
_COMPOUND_SUBJECT_RE = re.compile(
    r"^(?!.*\b(?:i|i'm|we|we're|you|is|are|am|was|were|has|have|had|do|does|did|can|will|would)\b)"
    r"[\w'-]+(?:\s+[\w'-]+){0,2}$",
    re.I,
)
_COMMA_IMPERATIVE_RE = re.compile(rf",\s+(?=(?:{_IMPERATIVE}|can you|could you|would you|will you)\b)", re.I)
_REVOKE_LEAD_RE = re.compile(
    r"^(?:(?:actually|ok|okay|so|well|oh|wait|hmm|also)\b[\s,]*)*"
    r"(?:please\s+|you can\s+|you may\s+)?"
    r"(?:forget|ignore|scrap|scratch|drop|disregard|never mind|nevermind|cancel|override|relax)\b",
    re.I,
)
_SUBORDINATE_LEAD_RE = re.compile(
    r"^(?:when|whenever|if|unless|for|since|because|although|though|while|as|once|each time|every time|any time|"
    r"from now on|from here on|going forward|in future|in the future|just this once|this time)\b",
    re.I,
)
_ABBREVIATION_END_RE = re.compile(r"\b(?:dr|mr|mrs|ms|prof|st|vs|etc|e\.g|i\.e|approx|no)\.$", re.I)


def _sentences(text: str) -> list[str]:
    text = _CODE_RE.sub(" ", text.replace("\u2019", "'").replace("\u2018", "'"))
    out: list[str] = []
    for piece in (s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()):
        if out and _ABBREVIATION_END_RE.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"  # "Dr. Kim" is not two sentences
        else:
            out.append(piece)
    return out


def _joined_short(pieces: list[str]) -> list[str]:
    """A piece of fewer than `MIN_LEAD_WORDS` words leads into the next one rather than standing alone: "No, always
    write commit messages in English", "From now on, answer in French", "Just this once, skip the intro"."""
    out: list[str] = []
    carry = ""
    for piece in pieces:
        piece = f"{carry}, {piece}" if carry else piece
        carry = ""
        if len(piece.split()) < MIN_LEAD_WORDS:
            carry = piece
        else:
            out.append(piece)
    if carry:
        out.append(carry)
    return out


def _cut_commas(part: str) -> list[str]:
    if _SUBORDINATE_LEAD_RE.match(part):
        return [part]  # the comma closes the condition: "When I send a report, use bullet points"
    pieces = [p for piece in _SOFT_CONNECTOR_RE.split(part) for p in _and_subjects(piece)]
    out: list[str] = []
    for piece in pieces:
        out.extend(_joined_short(_COMMA_IMPERATIVE_RE.split(piece)))
    lead = _REVOKE_LEAD_RE.match(out[0]) if out else None
    if lead and (cut := re.search(r",|: ", out[0][lead.end() :])):
        # "Forget the bullet rule, short paragraphs from now on"; "Override the old rule: only review source files";
        # also when an imperative was cut off after it: "Forget the yarn thing, we migrated, use pnpm from now on";
        # a lead-in stays with its revocation ("Actually, drop the numbered lists, prose from now on")
        at = lead.end() + cut.start()
        out[:1] = [out[0][:at], out[0][at + len(cut.group()) :]]
    return out


def _and_subjects(piece: str) -> list[str]:
    """`piece` cut before each "and I/my/we …" that opens a clause of its own (not after a compound subject)."""
    out: list[str] = []
    for part in _AND_SUBJECT_RE.split(piece):
        if out and _COMPOUND_SUBJECT_RE.match(out[-1]):
            out[-1] = f"{out[-1]} and {part}"
        else:
            out.append(part)
    return out


#: A parenthesis is one aside: its commas and semicolons cut nothing ("Conventional Commits (feat:, fix:, chore:)" was
#: cut before "fix", an imperative). They are masked by private-use characters while the turn is cut.
_PARENTHESIS_RE = re.compile(r"\([^()]*\)")
_MASKED = str.maketrans({",": "\ue000", ";": "\ue001"})
_UNMASKED = str.maketrans({"\ue000": ",", "\ue001": ";"})


def _masked_asides(text: str) -> str:
    return _PARENTHESIS_RE.sub(lambda m: m.group(0).translate(_MASKED), text)


_IDEOGRAPH_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _word_count(clause: str) -> int:
    """Words, with Chinese, Japanese and Korean (written without spaces) at about two characters a word."""
    return max(len(clause.split()), len(_IDEOGRAPH_RE.findall(clause)) // 2)


def split_clauses(text: str) -> list[str]:
    """The clauses of one user turn, in order, each stripped and cut to `MAX_CLAUSE_CHARS`; clauses of fewer than
    `MIN_CLAUSE_WORDS` words ("Ok.", "Thanks!") are kept only when they are the whole turn."""
    clauses: list[str] = []
    text = _BARE_CONTRACTION_RE.sub(lambda m: _BARE_CONTRACTIONS.get(m.group(0).lower(), m.group(0)), text)
    for sentence in _sentences(text):
        for part in _HARD_RE.split(_masked_asides(sentence)):
            for clause in _cut_commas(part.strip()):
                clause = clause.strip(" ,;:-–—\t").translate(_UNMASKED)
                if clause:
                    clauses.append(clause[:MAX_CLAUSE_CHARS])
    long_enough = [c for c in clauses if _word_count(c) >= MIN_CLAUSE_WORDS]
    return long_enough or clauses[:1]
