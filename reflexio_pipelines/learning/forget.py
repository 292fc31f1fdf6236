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

`forget_requested` applies one user's requests of a learning batch in turn order and writes the tombstone rows
(status `forgotten`) that supersede what they matched (called by learn.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexio_pipelines.learning.batch import LearnStats
from reflexio_pipelines.learning.embedding import Embedder
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.learned_rows import content_key, provenance
from reflexio_pipelines.learning.lifecycle import FORGOTTEN
from reflexio_pipelines.learning.rules.text import content_tokens
from reflexio_pipelines.learning.slots import profile_slot, slot_named
from reflexio_pipelines.learning.types import ExtractionResult, ForgetDirective, Turn, Window, stable_uuid
from reflexio_pipelines.learning.windows import turn_sort_key

#: Content of a tombstone row: the forgotten fact is deliberately not repeated in it.
FORGOTTEN_CONTENT = "(forgotten at the user's request)"
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


def forget_requested(
    requests: list[tuple[ForgetDirective, Turn, Window, ExtractionResult, ExtractorGroup]],
    new_profiles: dict[str, dict[str, Any]],
    existing: list[dict[str, Any]],
    order: dict[str, tuple],
    embedder: Embedder,
    stats: LearnStats,
    window: str,
    run_id: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Apply forget requests in turn order: each removes the matching profiles the user had when asking (current
    ones, and new ones stated before the request). Matched new profiles are dropped from `new_profiles`; every
    match is superseded by one tombstone row per request. Returns (tombstones, the existing profiles left)."""
    tombstones: list[dict[str, Any]] = []
    existing = list(existing)
    for directive, asked, win, result, group in sorted(requests, key=lambda r: turn_sort_key(r[1])):
        stats.forget_requests += 1
        asked_at = turn_sort_key(asked)
        stated_before = [k for k, r in new_profiles.items() if max(order[i] for i in r["source_turn_ids"]) < asked_at]
        candidates = existing + [new_profiles[k] for k in stated_before]
        matches = match_profiles(directive.target, [r["content"] for r in candidates], embedder)
        if not matches:
            continue
        matched = [candidates[m.profile_index] for m in matches]
        ids = sorted({r["profile_id"] for r in matched})
        existing = [r for r in existing if r["profile_id"] not in ids]
        for key in [k for k in stated_before if new_profiles[k]["profile_id"] in ids]:
            del new_profiles[key]
        stats.forgotten += len(ids)
        name = group.resolve("profile", None)[0]
        tombstones.append(
            {
                "profile_id": stable_uuid(asked.user_id, FORGOTTEN, asked.turn_id, content_key(directive.target)),
                "user_id": asked.user_id,
                "content": FORGOTTEN_CONTENT,
                "profile_time_to_live": None,
                "expiration_timestamp": None,
                "last_modified_timestamp": asked.created_at,
                "generated_from_request_id": asked.request_id,
                "source": asked.source,
                "status": FORGOTTEN,
                "supersedes": ids,
                "extractor_names": [name] if name else [],
                "custom_features": json.dumps({"match": [m.reason for m in matches]}, sort_keys=True),
                **provenance(win, [asked], result, window, run_id),
            }
        )
    return tombstones, existing
