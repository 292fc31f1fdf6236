"""What the clause classifier sees: the clause's sentence embedding (the bundled all-MiniLM-L6-v2, always the local
model, whatever embedder search is configured with, since the head was trained on it) plus a few cue features
that the embedding of a short clause carries weakly: who speaks of whom (first person singular and plural, second
person, a third party), a question mark, whether the turn opens with "no"/"wrong"/"actually", and the words of
change, revocation, habit, past and hypothesis. The cues are inputs with learned weights, not rules: the head
decides what they mean. Whether an agent turn came before is deliberately NOT a feature: in the corpus nearly every
row with one was a correction, so the head learnt "after an agent turn = correction" and turned ordinary requests
in chat into rules (19 of 160 public requests became corrections once any agent reply preceded them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from reflexio_pipelines.learning.clause_forms import asks, told
from reflexio_pipelines.learning.clauses.split import split_clauses


@dataclass(frozen=True)
class ClauseInput:
    """One clause to classify, with what the agent said just before its turn ("" when nothing did)."""

    text: str
    context: str = ""
    turn_opening: str = ""  # the first words of the whole turn ("No —", "Actually,") when the clause is later in it


def _cue(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("first_singular", _cue(r"\b(?:i|i'm|im|i've|ive|i'd|i'll|my|me|mine|myself)\b")),
    ("first_plural", _cue(r"\b(?:we|we're|we've|our|ours|us)\b")),
    ("second_person", _cue(r"\b(?:you|your|you're|yours)\b")),
    (
        "third_party",
        _cue(
            r"\b(?:he|she|they|his|her|their|my (?:boss|friend|mom|mother|dad|father|wife|husband|"
            r"colleague|sister|brother|manager|partner|son|daughter))\b"
        ),
    ),
    ("question", _cue(r"\?\s*$|^(?:what|how|why|when|where|who|which|can|could|would|should|is|are|do|does)\b")),
    (
        "standing",
        _cue(
            r"\b(?:always|never|from now on|going forward|in future|in the future|every time|whenever|"
            r"by default|each time|any time|anytime)\b"
        ),
    ),
    (
        "change",
        _cue(
            r"\b(?:moved|switched|no longer|not anymore|any ?more|now|actually|instead|these days|changed|"
            r"started|stopped|quit|became|override|new)\b"
        ),
    ),
    ("revoke", _cue(r"\b(?:forget|ignore|scrap|disregard|drop|never mind|nevermind|cancel|undo|withdraw)\b")),
    ("past", _cue(r"\b(?:used to|was|were|had|did|yesterday|last (?:week|year|month|night)|once|back then)\b")),
    ("hypothetical", _cue(r"\b(?:if|would|might|imagine|suppose|what if|hypothetically|said|says|thinks|told)\b")),
    ("polite", _cue(r"\b(?:please|thanks|thank you|cheers|great|perfect|awesome|cool)\b")),
    ("negation", _cue(r"\b(?:no|not|don't|dont|never|nope|wrong|can't|cannot|won't)\b")),
)
CUE_NAMES: tuple[str, ...] = tuple(name for name, _ in _CUES) + ("opens_with_no", "length")
_OPENS_WITH_NO = _cue(r"^\W*(?:no|nope|wrong|not (?:that|quite|what)|that's (?:wrong|not)|actually|stop)\b")


def cue_vector(clause: ClauseInput) -> np.ndarray:
    """The cue features of one clause, in `CUE_NAMES` order, each in [0, 1]."""
    text = clause.text
    values = [1.0 if pattern.search(text) else 0.0 for _, pattern in _CUES]
    values.append(1.0 if _OPENS_WITH_NO.search(clause.turn_opening or text) else 0.0)
    values.append(min(len(text.split()), 40) / 40.0)
    return np.asarray(values, dtype=np.float32)


class TextEmbedder(Protocol):
    """Anything that embeds a batch of texts into unit rows (an `Embedder`, or the classifier's cached one)."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


def featurise(clauses: list[ClauseInput], embedder: TextEmbedder) -> np.ndarray:
    """(n, 384 + len(CUE_NAMES)) features: one batched embedding call for every clause."""
    if not clauses:
        return np.zeros((0, 0), dtype=np.float32)
    vectors = np.asarray(embedder.embed([c.text for c in clauses]), dtype=np.float32)
    cues = np.stack([cue_vector(c) for c in clauses])
    return np.concatenate([vectors, cues], axis=1)


def change_clauses(text: str) -> list[str]:
    """The clauses of a message the change head reads, as the extractor reads them: without questions and wishes
    (clause_forms.asks) and lead-ins (clause_forms.told); the whole message when nothing else is left."""
    clauses = [told(c) for c in split_clauses(text) if not asks(c)]
    return clauses or [told(text)]


def turn_features(turns: list[list[str]], embedder: TextEmbedder) -> np.ndarray:
    """(n, 384 + len(CUE_NAMES)) features of n turns given as their clauses: the normalised mean of the clause vectors
    (the turn's own vector is not computed: the classifier has its clauses' already) and the cues of the clauses
    joined. One batched embedding call."""
    flat = [clause for clauses in turns for clause in clauses]
    vectors = np.asarray(embedder.embed(flat), dtype=np.float32)
    rows, start = [], 0
    for clauses in turns:
        mean = vectors[start : start + len(clauses)].mean(axis=0)
        start += len(clauses)
        cues = cue_vector(ClauseInput(" ".join(clauses)))
        rows.append(np.concatenate([mean / max(float(np.linalg.norm(mean)), 1e-9), cues]))
    return np.stack(rows).astype(np.float32)
