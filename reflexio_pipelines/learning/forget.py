"""Which of a user's profiles a forget request removes — a HEURISTIC matcher shared by both extractor paths.

Extractors only say *what* the user asked to forget (a `ForgetDirective` whose target is phrased like a profile,
"Lives in Paris" or "Their phone number"); neither extractor sees the stored profiles, so the match against them is
made here, the same way for the built-in rules and the LLM:

- token coverage: the share of the target's content words (stemmed, stop words dropped) found in the profile, where
  a target word may also be met by a few related words (`address` by `lives`/`based`/`home`, `phone` by
  `mobile`, …, see `_ALIASES`); at least `TOKEN_COVERAGE` matches. "Lives in Paris" covers "Lives in Paris" fully
  but "Lives in Berlin" only half, so a request to forget Paris never removes Berlin;
- or the target names a typed slot without its value and the profile is in that slot ("Their diet" removes "Is
  vegan", "Where they work" removes "Works at Acme"; learning/slots.py);
- or embedding similarity of at least `NEAR_PARAPHRASE` (a reworded fact: "Is vegetarian" / "Prefers vegetarian
  food"). Plain similarity is not enough on its own: "Lives in Paris" and "Lives in Berlin" are 0.5 apart.

A miss keeps the profile (and the request is still never stored as a fact); a false match removes a profile the
user did not mean. Both are possible: this is wording, not understanding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.learning.rules.text import content_tokens
from reflexio_pipelines.learning.slots import profile_slot, slot_named

#: Share of a target's content words a profile must contain (directly or through an alias) to match.
TOKEN_COVERAGE = 0.75
#: Cosine similarity at or above which a profile is a rewording of the target.
NEAR_PARAPHRASE = 0.8

# A word in a request -> words a profile about the same thing tends to use (stemmed like content_tokens).
_ALIAS_GROUPS = (
    ("address", "live", "lives", "living", "based", "resides", "home", "city", "located", "location", "moved"),
    ("phone", "mobile", "cell", "telephone"),
    ("email", "mail", "e-mail"),
    ("employer", "job", "work", "works", "working", "company", "role", "profession"),
    ("name", "called"),
    ("birthday", "born", "birth", "age"),
    ("kids", "kid", "children", "child", "son", "sons", "daughter", "daughters", "baby", "twins"),
)


def _stemmed(word: str) -> str:
    tokens = content_tokens(word)
    return tokens[0] if tokens else word


_ALIASES: dict[str, frozenset[str]] = {}
for _group in _ALIAS_GROUPS:
    _stems = frozenset(_stemmed(w) for w in _group)
    for _stem in _stems:
        _ALIASES[_stem] = _ALIASES.get(_stem, frozenset()) | _stems


def token_coverage(target: str, profile: str) -> float:
    """Share of the target's content words the profile contains, directly or through an alias (0 when the target
    has no content words: "forget me" alone names nothing to match)."""
    wanted = content_tokens(target)
    if not wanted:
        return 0.0
    have = set(content_tokens(profile))
    covered = sum(1 for token in wanted if token in have or _ALIASES.get(token, frozenset()) & have)
    return covered / len(wanted)


@dataclass(frozen=True)
class ForgetMatch:
    """One profile a directive removes, and why (for logs and tests; the reason names the heuristic)."""

    profile_index: int
    coverage: float
    similarity: float

    @property
    def reason(self) -> str:
        return f"heuristic: token coverage {self.coverage:.2f}, cosine {self.similarity:.2f}"


def match_profiles(target: str, profiles: list[str], embedder: Embedder) -> list[ForgetMatch]:
    """The profiles (by index into `profiles`) that `target` asks to forget, by the rules in the module docstring."""
    if not profiles or not content_tokens(target):
        return []
    vectors = embedder.embed([target, *profiles])
    similarities = np.asarray(vectors[1:] @ vectors[0], dtype=float)
    matches = []
    named = slot_named(target) if profile_slot(target) is None else None  # "Their diet", not "Is vegan"
    for i, text in enumerate(profiles):
        coverage, similarity = token_coverage(target, text), float(similarities[i])
        if coverage >= TOKEN_COVERAGE or similarity >= NEAR_PARAPHRASE or (named and profile_slot(text) == named):
            matches.append(ForgetMatch(i, coverage, similarity))
    return matches
